/*
 * listen_watch.c - the consumer's refused connections: nng's listener
 * counters read every CONSUMER_REFUSAL_POLL_MS, their growth counted and
 * logged at warn, rate-limited per reason (listen_watch.h).
 *
 * nng gives the class of a refusal (auth, proto, timeout), not mbedTLS's
 * reason: "expired" and "unknown CA" are both "tls_auth" here. The log line
 * says what the class covers (ob_bus_refusal_hint).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>

#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/log.h"
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
	pthread_t thread;
	bool running;
	pthread_mutex_t mtx;
	pthread_cond_t cv;
	bool stopping;
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

/* One look at the counters. */
static void
look(struct consumer_listen_watch *w)
{
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

static void *
watch_loop(void *arg)
{
	struct consumer_listen_watch *w = arg;
	pthread_mutex_lock(&w->mtx);
	while (!w->stopping) {
		pthread_mutex_unlock(&w->mtx);
		look(w);
		struct timespec until = ob_wall_deadline(CONSUMER_REFUSAL_POLL_MS);
		pthread_mutex_lock(&w->mtx);
		while (!w->stopping &&
		    pthread_cond_timedwait(&w->cv, &w->mtx, &until) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&w->mtx);
	return NULL;
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
	pthread_mutex_init(&w->mtx, NULL);
	pthread_cond_init(&w->cv, NULL);
	*out = w;
	return OB_OK;
}

int
consumer_listen_watch_start(struct consumer_listen_watch *w, nng_listener l)
{
	w->listener = l;
	if (pthread_create(&w->thread, NULL, watch_loop, w) != 0)
		return OB_ENOMEM;
	w->running = true;
	return OB_OK;
}

void
consumer_listen_watch_stop(struct consumer_listen_watch *w)
{
	if (w == NULL)
		return;
	if (w->running) {
		pthread_mutex_lock(&w->mtx);
		w->stopping = true;
		pthread_cond_broadcast(&w->cv);
		pthread_mutex_unlock(&w->mtx);
		pthread_join(w->thread, NULL);
		look(w);
	}
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mtx);
	free(w->url);
	free(w);
}
