/*
 * dest.c - the destination table (dest.h): sockets and dialers per consumer
 * URL, their TLS configurations, the pick of a destination, the claim
 * filter from the breakers and windows, the probes, the redial watchdog
 * and the refused handshakes. Frames and replies are deliver.c's.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>

#include "dest.h"
#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/log.h"

static void
pipe_event(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	struct relay_dest *d = arg;
	if (ev == NNG_PIPE_EV_ADD_POST)
		atomic_fetch_add(&d->pipes, 1);
	else if (ev == NNG_PIPE_EV_REM_POST)
		atomic_fetch_sub(&d->pipes, 1);
}

int
relay_dest_table_init(struct relay_dest_table *t, const struct relay_routes *rt)
{
	t->rt = rt;
	t->dest = calloc(rt->nurls > 0 ? (size_t)rt->nurls : 1, sizeof(*t->dest));
	t->next = calloc(rt->nroutes > 0 ? (size_t)rt->nroutes : 1, sizeof(*t->next));
	if (t->dest == NULL || t->next == NULL)
		return OB_ENOMEM;
	t->n = rt->nurls;
	for (int i = 0; i < t->n; i++) {
		t->dest[i].url = rt->urls[i];
		t->dest[i].window = t->window_max > 0 ? t->window_max : 1;
		if (ob_token_bucket_init(&t->dest[i].budget, OB_RETRY_BUDGET_CAPACITY, 0) != OB_OK)
			return OB_ENOMEM;
		t->dest[i].budget_ok = true;
	}
	return OB_OK;
}

static int start_dialer(struct relay_dest *ds);

int
relay_dest_table_open(struct relay_dest_table *t, size_t max_reply, char *err, size_t errlen)
{
	int rv;
	for (int i = 0; i < t->n; i++) {
		struct relay_dest *ds = &t->dest[i];
		rv = nng_req0_open(&ds->sock);
		if (rv != 0) {
			snprintf(err, errlen, "open REQ socket: %s", nng_strerror(rv));
			return OB_ENET;
		}
		/* Our own deadline and redelivery govern retries, not REQ's timer. */
		nng_socket_set_ms(ds->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
		nng_socket_set_ms(ds->sock, NNG_OPT_RECONNMINT, 50);
		nng_socket_set_ms(ds->sock, NNG_OPT_RECONNMAXT, 2000);
		/* the largest reply to the largest frame this relay sends */
		nng_socket_set_size(ds->sock, NNG_OPT_RECVMAXSZ, max_reply);
		nng_pipe_notify(ds->sock, NNG_PIPE_EV_ADD_POST, pipe_event, ds);
		nng_pipe_notify(ds->sock, NNG_PIPE_EV_REM_POST, pipe_event, ds);
		ds->watch.every_ms = RELAY_REFUSAL_LOG_EVERY_MS;
		nng_tls_config *tls = NULL;
		if (ob_bus_tls_url(ds->url)) {
			int rc = ob_bus_tls_config_new(false, &t->tls, ds->url, &tls, err, errlen);
			if (rc != OB_OK)
				return rc;
		}
		ds->tls = tls; /* ours, released at close (the dialer takes its own) */
		if ((rv = start_dialer(ds)) != 0) {
			snprintf(err, errlen, "dial %s: %s", ds->url, nng_strerror(rv));
			return OB_ENET;
		}
	}
	return OB_OK;
}

/* A dialer of our own for ds, not nng_dial: its counters say why the
 * handshakes fail (relay_dest_refusals). 0 or the nng error. */
static int
start_dialer(struct relay_dest *ds)
{
	nng_dialer dl;
	int rv;
	if ((rv = nng_dialer_create(&dl, ds->sock, ds->url)) != 0)
		return rv;
	if ((ds->tls != NULL && (rv = nng_dialer_set_ptr(dl, NNG_OPT_TLS_CONFIG, ds->tls)) != 0) ||
	    (rv = nng_dialer_start(dl, NNG_FLAG_NONBLOCK)) != 0) {
		nng_dialer_close(dl);
		return rv;
	}
	ds->dialer = dl;
	ds->alive_ms = (int64_t)nng_clock();
	return 0;
}

bool
relay_dest_version_refused(struct relay_dest *ds, int64_t now_ms, int64_t every_ms)
{
	if (ds->too_old_next_ms != 0 && now_ms < ds->too_old_next_ms)
		return false;
	ds->too_old_next_ms = now_ms + every_ms;
	return true;
}

void
relay_dest_version_read(struct relay_dest *ds)
{
	ds->too_old_next_ms = 0;
}

void
relay_dest_alive(struct relay_dest *ds)
{
	ds->alive_ms = (int64_t)nng_clock();
	ds->redials = 0;
}

void
relay_dest_redial_if_stuck(struct relay_dest *ds, int64_t timeout_ms)
{
	/* By replies, not by the pipe count: a connection that answers
	 * nothing for that long is as good as none, and after many re-opens
	 * of the consumer's listener the count was seen at 1 with no TCP
	 * connection at all (cause in nng not found). Twice the delivery
	 * timeout: a slow consumer's frames time out one by one, but one of
	 * them is answered within that. */
	int64_t now = (int64_t)nng_clock();
	int64_t stuck = 2 * timeout_ms > RELAY_REDIAL_STUCK_MS ? 2 * timeout_ms
	                                                          : RELAY_REDIAL_STUCK_MS;
	if (now - ds->alive_ms < stuck)
		return;
	int64_t idle = now - ds->alive_ms;
	if (nng_dialer_id(ds->dialer) > 0)
		nng_dialer_close(ds->dialer);
	memset(&ds->dialer, 0, sizeof(ds->dialer));
	/* the new dialer's counters start at zero */
	memset(&ds->watch.seen, 0, sizeof(ds->watch.seen));
	int rv = start_dialer(ds);
	ds->alive_ms = now; /* and try again after as long, when it failed */
	/* one line per outage at info (a consumer long down is re-dialed
	 * every RELAY_REDIAL_STUCK_MS), the rest at debug; a failure at warn */
	enum ob_log_level level = rv != 0 ? OB_LOG_WARN : ds->redials == 0 ? OB_LOG_INFO
	                                                                   : OB_LOG_DEBUG;
	ds->redials++;
	char q[200];
	ob_log(level, "relay.dial.restarted", "dest=%s no_connection_ms=%lld redials=%u err=%s",
	    ds->url, (long long)idle, ds->redials,
	    ob_log_q(rv != 0 ? nng_strerror(rv) : "-", q, sizeof(q)));
}

int
relay_dest_table_reload_tls(struct relay_dest_table *t, int *ndests, char *err, size_t errlen)
{
	nng_tls_config **fresh = calloc(t->n > 0 ? (size_t)t->n : 1, sizeof(*fresh));
	int rc = OB_OK, n = 0;
	if (fresh == NULL) {
		snprintf(err, errlen, "out of memory");
		return OB_ENOMEM;
	}
	/* every one first: a bad file changes nothing anywhere */
	for (int i = 0; i < t->n && rc == OB_OK; i++)
		if (t->dest[i].tls != NULL)
			rc = ob_bus_tls_config_new(false, &t->tls, t->dest[i].url, &fresh[i], err,
			    errlen);
	for (int i = 0; i < t->n && rc == OB_OK; i++) {
		struct relay_dest *ds = &t->dest[i];
		if (fresh[i] == NULL)
			continue;
		int rv = nng_dialer_set_ptr(ds->dialer, NNG_OPT_TLS_CONFIG, fresh[i]);
		if (rv != 0) {
			snprintf(err, errlen, "dial %s: new TLS configuration: %s", ds->url,
			    nng_strerror(rv));
			rc = OB_ENET;
			break;
		}
		if (ds->tls_prev != NULL)
			nng_tls_config_free(ds->tls_prev);
		ds->tls_prev = ds->tls;
		ds->tls = fresh[i];
		fresh[i] = NULL;
		n++;
	}
	for (int i = 0; i < t->n; i++)
		if (fresh[i] != NULL)
			nng_tls_config_free(fresh[i]);
	free(fresh);
	*ndests = n;
	return rc;
}

void
relay_dest_table_close(struct relay_dest_table *t)
{
	for (int i = 0; i < t->n; i++) {
		struct relay_dest *ds = &t->dest[i];
		if (nng_socket_id(ds->sock) > 0)
			nng_close(ds->sock);
		if (ds->tls != NULL)
			nng_tls_config_free(ds->tls);
		if (ds->tls_prev != NULL)
			nng_tls_config_free(ds->tls_prev);
		ds->tls = ds->tls_prev = NULL;
		if (ds->budget_ok)
			ob_token_bucket_fini(&ds->budget);
		ds->budget_ok = false;
	}
	free(t->dest);
	free(t->next);
	t->dest = NULL;
	t->next = NULL;
	t->n = 0;
}

/* Closed breaker and room in the window: a frame may go now. */
static bool
dest_sendable(const struct relay_dest *ds)
{
	return ds->breaker.state == RELAY_BREAKER_CLOSED && ds->inflight < ds->window;
}

int
relay_route_pick(struct relay_dest_table *t, const char *topic, size_t len)
{
	int ri = relay_routes_find(t->rt, topic, len);
	if (ri < 0)
		return -1;
	const struct relay_route *r = &t->rt->routes[ri];
	unsigned *next = &t->next[ri];
	/* Round-robin, best class first: live, closed, with room in its
	 * window; closed with room (maybe still connecting); closed; open
	 * with its probe due; anything. A destination that is down or full
	 * never holds messages back while another can take them. */
	nng_time now = nng_clock();
	for (int cls = 0; cls < 5; cls++) {
		for (int k = 0; k < r->ndests; k++) {
			int di = r->dests[(*next + (unsigned)k) % (unsigned)r->ndests];
			const struct relay_dest *ds = &t->dest[di];
			bool closed = ds->breaker.state == RELAY_BREAKER_CLOSED;
			bool ok;
			switch (cls) {
			case 0: ok = dest_sendable(ds) && atomic_load(&ds->pipes) > 0; break;
			case 1: ok = dest_sendable(ds); break;
			case 2: ok = closed; break;
			case 3: ok = !ds->breaker.probing &&
			            (int64_t)now >= ds->breaker.next_probe_ms; break;
			default: ok = true; break;
			}
			if (ok) {
				*next += (unsigned)k + 1;
				return di;
			}
		}
	}
	return -1; /* not reached: class 4 takes any */
}

/* ---- which topics to claim ------------------------------------------------ */

static bool
route_sendable(const struct relay_dest_table *t, const struct relay_route *r)
{
	for (int k = 0; k < r->ndests; k++)
		if (dest_sendable(&t->dest[r->dests[k]]))
			return true;
	return false;
}

static int
array_add(struct ob_buf *b, const char *topic)
{
	int rc = ob_buf_puts(b, b->len > 1 ? "," : "");
	return rc | ob_buf_put_pg_array_text(b, topic, strlen(topic));
}

int
relay_topics_now(struct relay_dest_table *t, struct ob_buf *inc, struct ob_buf *exc,
    struct relay_topics *out)
{
	int rc = OB_OK;
	bool has_default = false, default_up = false;
	ob_buf_reset(inc);
	ob_buf_reset(exc);
	rc |= ob_buf_puts(inc, "{");
	rc |= ob_buf_puts(exc, "{");
	for (int i = 0; i < t->rt->nroutes; i++) {
		const struct relay_route *r = &t->rt->routes[i];
		bool up = route_sendable(t, r);
		if (strcmp(r->topic, "*") == 0) {
			has_default = true;
			default_up = up;
			continue;
		}
		rc |= array_add(exc, r->topic);
		if (up)
			rc |= array_add(inc, r->topic);
	}
	rc |= ob_buf_puts(inc, "}");
	rc |= ob_buf_puts(exc, "}");
	if (rc != OB_OK)
		return OB_ENOMEM;
	out->include = inc->data;
	out->exclude = exc->data;
	/* No default route: a topic no route matches is not claimed at all
	 * (--unrouted wait, the default): it waits, pending, for a relay that
	 * routes it (worker 0 reports it: relay.topic.unrouted, the gauge
	 * outbox_relay_unrouted_pending). Only --unrouted dead-letter claims
	 * such topics, to dead-letter them ("no route"). */
	out->others = has_default ? default_up : t->unrouted_dead;
	return OB_OK;
}

bool
relay_probe_due(struct relay_dest_table *t, struct ob_buf *inc, struct ob_buf *exc,
    struct relay_topics *out, int *dest)
{
	int64_t now = (int64_t)nng_clock();
	for (int i = 0; i < t->rt->nroutes; i++) {
		const struct relay_route *r = &t->rt->routes[i];
		if (route_sendable(t, r))
			continue;
		for (int k = 0; k < r->ndests; k++) {
			int di = r->dests[k];
			if (relay_breaker_ask(&t->dest[di].breaker, now) != RELAY_BREAKER_PROBE)
				continue;
			ob_buf_reset(inc);
			ob_buf_reset(exc);
			int rc = ob_buf_puts(inc, "{") | ob_buf_puts(exc, "{");
			bool def = strcmp(r->topic, "*") == 0;
			if (!def)
				rc |= array_add(inc, r->topic);
			for (int j = 0; def && j < t->rt->nroutes; j++)
				if (strcmp(t->rt->routes[j].topic, "*") != 0)
					rc |= array_add(exc, t->rt->routes[j].topic);
			rc |= ob_buf_puts(inc, "}") | ob_buf_puts(exc, "}");
			if (rc != OB_OK) {
				relay_probe_unused(t, di);
				return false;
			}
			out->include = inc->data;
			out->exclude = exc->data;
			out->others = def;
			*dest = di;
			return true;
		}
	}
	return false;
}

void
relay_probe_unused(struct relay_dest_table *t, int dest)
{
	/* Nothing to probe with: look again after an interval. */
	relay_breaker_probe_unused(&t->dest[dest].breaker, (int64_t)nng_clock(),
	    t->breaker_probe_ms);
}

/* ---- what frames did ------------------------------------------------------ */

void
relay_dest_breaker_result(struct relay_dest_table *t, int dest, bool ok)
{
	struct relay_dest *ds = &t->dest[dest];
	enum relay_breaker_state before = ds->breaker.state;
	if (relay_breaker_result(&ds->breaker, ok, (int64_t)nng_clock(), t->breaker_threshold,
	        t->breaker_probe_ms))
		ob_warn(ds->breaker.state == RELAY_BREAKER_OPEN ? "relay.breaker.open"
		                                                 : "relay.breaker.closed",
		    "dest=%s from=%s failures=%u probe_interval_ms=%lld", ds->url,
		    relay_breaker_state_name(before), ds->breaker.failures,
		    (long long)t->breaker_probe_ms);
	if (t->breakers != NULL && dest < t->breakers_n) {
		struct relay_breaker_live *bl = &t->breakers[dest];
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		int64_t ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
		atomic_store(ok ? &bl->ok_ms : &bl->fail_ms, ms);
		atomic_store(&bl->open, ds->breaker.state == RELAY_BREAKER_OPEN ? 1 : 0);
	}
}

void
relay_dest_frame_out(struct relay_dest_table *t, int dest)
{
	t->dest[dest].inflight++;
}

/* Frames queued at a consumer slower than the pipeline would otherwise
 * time out while it still applies them, be sent again, and load it
 * further; and a destination that is gone would keep every pipeline slot of the
 * worker, one delivery timeout each, from the others. */
void
relay_dest_window_result(struct relay_dest_table *t, int dest, bool failed, bool replied)
{
	struct relay_dest *ds = &t->dest[dest];
	uint32_t before = ds->window;
	if (ds->inflight > 0)
		ds->inflight--;
	if (failed)
		ds->window = ds->window > 1 ? ds->window / 2 : 1;
	else if (replied && ds->window < t->window_max)
		ds->window++;
	if (ds->window != before)
		ob_debug("relay.window", "dest=%s frames_out=%u (was %u)", ds->url, ds->window,
		    before);
}

void
relay_dest_refusals(struct relay_dest_table *t, struct relay_dest *ds)
{
	struct ob_bus_refusals now;
	struct ob_bus_watch_news news;
	char h[600];
	if (nng_dialer_id(ds->dialer) <= 0 || ob_bus_refusals_dialer(ds->dialer, &now) != OB_OK) {
		ob_debug("relay.handshake.counters", "dest=%s err=%s", ds->url,
		    "no statistics for the dialer");
		return;
	}
	ob_debug("relay.handshake.counters", "dest=%s tls_auth=%" PRIu64 " protocol=%" PRIu64
	    " timeout=%" PRIu64 " closed=%" PRIu64, ds->url, now.n[OB_BUS_REFUSED_AUTH],
	    now.n[OB_BUS_REFUSED_PROTO], now.n[OB_BUS_REFUSED_TIMEOUT], now.n[OB_BUS_REFUSED_CLOSED]);
	if (!ob_bus_watch_update(&ds->watch, &now, ob_mono_ms(), &news))
		return;
	for (int r = 0; r < OB_BUS_REFUSED_COUNT; r++) {
		if (news.fresh[r] > 0)
			ob_metric_add(t->handshake_refused[r], news.fresh[r]);
		if (news.log[r] > 0)
			ob_warn("relay.handshake.refused", "dest=%s reason=%s refused=%" PRIu64
			    " total=%" PRIu64 " tls=%s breaker=%s hint=%s", ds->url,
			    ob_bus_refusal_name((enum ob_bus_refusal)r), news.log[r], news.total[r],
			    ob_bus_tls_url(ds->url) ? "mutual" : "off",
			    relay_breaker_state_name(ds->breaker.state),
			    ob_log_q(ob_bus_refusal_hint((enum ob_bus_refusal)r), h, sizeof(h)));
	}
}
