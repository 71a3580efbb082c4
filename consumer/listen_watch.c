/*
 * listen_watch.c - the consumer's refused connections: nng's listener
 * counters read every CONSUMER_REFUSAL_POLL_MS, their growth counted and
 * logged at warn, rate-limited per reason (listen_watch.h).
 *
 * nng gives the class of a refusal (auth, proto, timeout), not mbedTLS's
 * reason: "expired" and "unknown CA" are both "tls_auth" here. The log line
 * says what the class covers (ob_bus_refusal_hint).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>

#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/log.h"
#include "outbox/ticker.h"
#include "listen_watch.h"
#include "metrics.h"
#include "server.h"

struct consumer_listen_watch {
	nng_listener listener;
	bool tls;
	char *url;
	struct consumer_counters *counters;
	struct consumer_metrics *metrics;
	struct ob_bus_watch watch;
	struct ob_ticker ticker; /* look, every CONSUMER_REFUSAL_POLL_MS */
	bool no_stats_logged;
};

void
consumer_refusal_count(struct consumer_counters *c, struct consumer_metrics *m,
    enum ob_bus_refusal r, uint64_t n)
{
	atomic_fetch_add(&c->handshake_refused[r], n);
	if (m != NULL)
		ob_metric_add(m->handshake_refused[r], n);
}

/* One look at the counters of watch arg: the ticker's work, and the last
 * look when it stops. */
static void
look(void *arg)
{
	struct consumer_listen_watch *w = arg;
	struct ob_bus_refusals now;
	struct ob_bus_watch_news news;
	char q[600], h[600];
	if (ob_bus_refusals_listener(w->listener, &now) != OB_OK) {
		if (!w->no_stats_logged)
			ob_warn("consumer.handshake.unobservable", "listen=%s hint=\"nng has no"
			    " statistics for the listener: refused handshakes are not counted\"",
			    ob_log_q(w->url, q, sizeof(q)));
		w->no_stats_logged = true;
		return;
	}
	if (!ob_bus_watch_update(&w->watch, &now, ob_mono_ms(), &news))
		return;
	for (int r = 0; r < OB_BUS_REFUSED_COUNT; r++) {
		if (news.fresh[r] > 0)
			consumer_refusal_count(w->counters, w->metrics, (enum ob_bus_refusal)r,
			    news.fresh[r]);
		/* "closed" is the peer hanging up in negotiation (a TCP health
		 * check, a client stopping): worth a line, not a warning */
		enum ob_log_level level = r == OB_BUS_REFUSED_CLOSED ? OB_LOG_INFO : OB_LOG_WARN;
		if (news.log[r] > 0)
			ob_log(level, "consumer.handshake.refused", "listen=%s reason=%s refused=%llu"
			    " total=%llu tls=%s hint=%s", ob_log_q(w->url, q, sizeof(q)),
			    ob_bus_refusal_name((enum ob_bus_refusal)r),
			    (unsigned long long)news.log[r], (unsigned long long)news.total[r],
			    w->tls ? "mutual" : "off",
			    ob_log_q(ob_bus_refusal_hint((enum ob_bus_refusal)r), h, sizeof(h)));
	}
}

int
consumer_listen_watch_new(bool tls, const char *url, struct consumer_counters *c,
    struct consumer_metrics *m, struct consumer_listen_watch **out)
{
	struct consumer_listen_watch *w = calloc(1, sizeof(*w));
	if (w == NULL || (w->url = strdup(url)) == NULL) {
		free(w);
		return OB_ENOMEM;
	}
	w->tls = tls;
	w->counters = c;
	w->metrics = m;
	w->watch.every_ms = CONSUMER_REFUSAL_LOG_EVERY_MS;
	*out = w;
	return OB_OK;
}

int
consumer_listen_watch_start(struct consumer_listen_watch *w, nng_listener l)
{
	w->listener = l;
	return ob_ticker_start(&w->ticker, CONSUMER_REFUSAL_POLL_MS, look, w);
}

void
consumer_listen_watch_stop(struct consumer_listen_watch *w)
{
	if (w == NULL)
		return;
	if (ob_ticker_stop(&w->ticker))
		look(w); /* what was refused since the last look */
	free(w->url);
	free(w);
}
