/*
 * deliver.c - request frames out, statuses back, over nng REQ contexts.
 *
 * One claimed batch is one frame: pick its destination, ask that
 * destination's breaker, encode, send on a context of its own with an aio
 * whose callback moves it SEND -> RECV -> DONE and then writes a byte to
 * the worker's wakeup pipe. The worker collects finished frames one by one
 * (relay_frame_finish), so one destination's timeout never delays the
 * outcome of another's frame. Nothing here touches the database.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>

#include "deliver.h"
#include "outbox/buf.h"
#include "outbox/bus_tls.h"
#include "outbox/err.h"
#include "outbox/log.h"
#include "route_tls.h"

static double
seconds_since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

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
relay_deliverer_init(struct relay_deliverer *d, const struct relay_routes *rt)
{
	d->rt = rt;
	d->wake[0] = d->wake[1] = -1;
	d->dests = calloc(rt->nurls > 0 ? (size_t)rt->nurls : 1, sizeof(*d->dests));
	d->next = calloc(rt->nroutes > 0 ? (size_t)rt->nroutes : 1, sizeof(*d->next));
	if (d->dests == NULL || d->next == NULL)
		return OB_ENOMEM;
	d->ndests = rt->nurls;
	for (int i = 0; i < d->ndests; i++) {
		d->dests[i].url = rt->urls[i];
		d->dests[i].window = d->window_max > 0 ? d->window_max : 1;
	}
	return OB_OK;
}

static int start_dialer(struct relay_dest *ds);

int
relay_deliverer_open(struct relay_deliverer *d, char *err, size_t errlen)
{
	int rv;
	ob_buf_init(&d->encode);
	if ((rv = nng_mtx_alloc(&d->mtx)) != 0) {
		snprintf(err, errlen, "deliverer mutex: %s", nng_strerror(rv));
		return OB_ENOMEM;
	}
	if (pipe2(d->wake, O_NONBLOCK | O_CLOEXEC) != 0) {
		snprintf(err, errlen, "deliverer wakeup pipe: %s", strerror(errno));
		d->wake[0] = d->wake[1] = -1;
		return OB_ENOMEM;
	}
	for (int i = 0; i < d->ndests; i++) {
		struct relay_dest *ds = &d->dests[i];
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
		nng_socket_set_size(ds->sock, NNG_OPT_RECVMAXSZ,
		    OB_WIRE_REPLY_MAX_BYTES(d->limits.max_batch));
		nng_pipe_notify(ds->sock, NNG_PIPE_EV_ADD_POST, pipe_event, ds);
		nng_pipe_notify(ds->sock, NNG_PIPE_EV_REM_POST, pipe_event, ds);
		ds->watch.every_ms = RELAY_REFUSAL_LOG_EVERY_MS;
		nng_tls_config *tls = NULL;
		if (ob_bus_tls_url(ds->url)) {
			int rc = ob_bus_tls_config_new(false, &d->tls, ds->url, &tls, err, errlen);
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

/* After a frame to ds failed: a new dialer when ds has replied to nothing
 * for RELAY_REDIAL_STUCK_MS or twice the delivery timeout (deliver.h). */
static void
redial_if_stuck(struct relay_deliverer *d, struct relay_dest *ds)
{
	/* By replies, not by the pipe count: a connection that answers
	 * nothing for that long is as good as none, and after many re-opens
	 * of the consumer's listener the count was seen at 1 with no TCP
	 * connection at all (cause in nng not found). Twice the delivery
	 * timeout: a slow consumer's frames time out one by one, but one of
	 * them is answered within that. */
	int64_t now = (int64_t)nng_clock();
	int64_t stuck = 2 * d->timeout_ms > RELAY_REDIAL_STUCK_MS ? 2 * d->timeout_ms
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
relay_deliverer_reload_tls(struct relay_deliverer *d, int *ndests, char *err, size_t errlen)
{
	nng_tls_config **fresh = calloc(d->ndests > 0 ? (size_t)d->ndests : 1, sizeof(*fresh));
	int rc = OB_OK, n = 0;
	if (fresh == NULL) {
		snprintf(err, errlen, "out of memory");
		return OB_ENOMEM;
	}
	/* every one first: a bad file changes nothing anywhere */
	for (int i = 0; i < d->ndests && rc == OB_OK; i++)
		if (d->dests[i].tls != NULL)
			rc = ob_bus_tls_config_new(false, &d->tls, d->dests[i].url, &fresh[i], err,
			    errlen);
	for (int i = 0; i < d->ndests && rc == OB_OK; i++) {
		struct relay_dest *ds = &d->dests[i];
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
	for (int i = 0; i < d->ndests; i++)
		if (fresh[i] != NULL)
			nng_tls_config_free(fresh[i]);
	free(fresh);
	*ndests = n;
	return rc;
}

void
relay_deliverer_close(struct relay_deliverer *d)
{
	for (int i = 0; i < d->ndests; i++) {
		struct relay_dest *ds = &d->dests[i];
		if (nng_socket_id(ds->sock) > 0)
			nng_close(ds->sock);
		if (ds->tls != NULL)
			nng_tls_config_free(ds->tls);
		if (ds->tls_prev != NULL)
			nng_tls_config_free(ds->tls_prev);
		ds->tls = ds->tls_prev = NULL;
	}
	free(d->dests);
	free(d->next);
	d->dests = NULL;
	d->next = NULL;
	d->ndests = 0;
	if (d->mtx != NULL)
		nng_mtx_free(d->mtx);
	d->mtx = NULL;
	for (int k = 0; k < 2; k++) {
		if (d->wake[k] > 0)
			close(d->wake[k]);
		d->wake[k] = -1;
	}
	ob_buf_fini(&d->encode);
}

/* Closed breaker and room in the window: a frame may go now. */
static bool
dest_sendable(const struct relay_dest *ds)
{
	return ds->breaker.state == RELAY_BREAKER_CLOSED && ds->inflight < ds->window;
}

int
relay_route_pick(struct relay_deliverer *d, const char *topic, size_t len)
{
	int ri = relay_routes_find(d->rt, topic, len);
	if (ri < 0)
		return -1;
	const struct relay_route *r = &d->rt->routes[ri];
	unsigned *next = &d->next[ri];
	/* Round-robin, best class first: live, closed, with room in its
	 * window; closed with room (maybe still connecting); closed; open
	 * with its probe due; anything. A destination that is down or full
	 * never holds messages back while another can take them. */
	nng_time now = nng_clock();
	for (int cls = 0; cls < 5; cls++) {
		for (int k = 0; k < r->ndests; k++) {
			int di = r->dests[(*next + (unsigned)k) % (unsigned)r->ndests];
			const struct relay_dest *ds = &d->dests[di];
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
route_sendable(const struct relay_deliverer *d, const struct relay_route *r)
{
	for (int k = 0; k < r->ndests; k++)
		if (dest_sendable(&d->dests[r->dests[k]]))
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
relay_topics_now(struct relay_deliverer *d, struct ob_buf *inc, struct ob_buf *exc,
    struct relay_topics *out)
{
	int rc = OB_OK;
	bool has_default = false, default_up = false;
	ob_buf_reset(inc);
	ob_buf_reset(exc);
	rc |= ob_buf_puts(inc, "{");
	rc |= ob_buf_puts(exc, "{");
	for (int i = 0; i < d->rt->nroutes; i++) {
		const struct relay_route *r = &d->rt->routes[i];
		bool up = route_sendable(d, r);
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
	out->others = has_default ? default_up : d->unrouted_dead;
	return OB_OK;
}

bool
relay_probe_due(struct relay_deliverer *d, struct ob_buf *inc, struct ob_buf *exc,
    struct relay_topics *out, int *dest)
{
	int64_t now = (int64_t)nng_clock();
	for (int i = 0; i < d->rt->nroutes; i++) {
		const struct relay_route *r = &d->rt->routes[i];
		if (route_sendable(d, r))
			continue;
		for (int k = 0; k < r->ndests; k++) {
			int di = r->dests[k];
			if (relay_breaker_ask(&d->dests[di].breaker, now) != RELAY_BREAKER_PROBE)
				continue;
			ob_buf_reset(inc);
			ob_buf_reset(exc);
			int rc = ob_buf_puts(inc, "{") | ob_buf_puts(exc, "{");
			bool def = strcmp(r->topic, "*") == 0;
			if (!def)
				rc |= array_add(inc, r->topic);
			for (int j = 0; def && j < d->rt->nroutes; j++)
				if (strcmp(d->rt->routes[j].topic, "*") != 0)
					rc |= array_add(exc, d->rt->routes[j].topic);
			rc |= ob_buf_puts(inc, "}") | ob_buf_puts(exc, "}");
			if (rc != OB_OK) {
				relay_probe_unused(d, di);
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
relay_probe_unused(struct relay_deliverer *d, int dest)
{
	/* Nothing to probe with: look again after an interval. */
	relay_breaker_probe_unused(&d->dests[dest].breaker, (int64_t)nng_clock(),
	    d->breaker_probe_ms);
}

/* ---- frames ----------------------------------------------------------------- */

static void
set_outcome(struct relay_outcome *o, const struct ob_wire_msg *m,
    enum relay_outcome_kind kind, const char *fmt, const char *a, size_t alen)
{
	o->id = m->id;
	o->kind = kind;
	o->delay_ms = 0;
	o->refund_attempt = false;
	o->retry_after_ms = 0;
	snprintf(o->error, sizeof(o->error), fmt, (int)alen, a ? a : "");
}

static void
wake(struct relay_deliverer *d)
{
	/* The pipe is non-blocking: when it is full the worker has wakeups
	 * pending anyway. */
	(void)!write(d->wake[1], "x", 1);
}

static const char *const frame_state_names[] = {
	[RELAY_FRAME_IDLE] = "idle", [RELAY_FRAME_SEND] = "send", [RELAY_FRAME_RECV] = "recv",
	[RELAY_FRAME_DONE] = "done",
};

/* The one place a frame's state changes, nng's demo/async shape: IDLE ->
 * SEND (handed to nng) or DONE (could not be prepared); SEND -> RECV (the
 * request went out) or DONE (it did not); RECV -> DONE; DONE -> IDLE (the
 * slot's next batch; IDLE -> IDLE for its first). While a frame is sent,
 * the caller holds d->mtx (the aio callback runs on nng's threads). Any
 * other move is a bug in this file: the worker aborts (the supervisor
 * restarts it; its batches come back when their leases end). */
static void
frame_enter(struct relay_frame *f, enum relay_frame_state to)
{
	static const bool allowed[4][4] = {
		[RELAY_FRAME_IDLE] = { [RELAY_FRAME_IDLE] = true, [RELAY_FRAME_SEND] = true,
		    [RELAY_FRAME_DONE] = true },
		[RELAY_FRAME_SEND] = { [RELAY_FRAME_RECV] = true, [RELAY_FRAME_DONE] = true },
		[RELAY_FRAME_RECV] = { [RELAY_FRAME_DONE] = true },
		[RELAY_FRAME_DONE] = { [RELAY_FRAME_IDLE] = true },
	};
	if (!allowed[f->state][to]) {
		ob_error("relay.frame.bad_transition", "from=%s to=%s",
		    frame_state_names[f->state], frame_state_names[to]);
		abort();
	}
	f->state = to;
}

static void
frame_done(struct relay_frame *f, int rv, const char *where)
{
	struct relay_deliverer *d = f->d;
	nng_mtx_lock(d->mtx);
	f->rv = rv;
	f->failed_in = where;
	frame_enter(f, RELAY_FRAME_DONE);
	nng_mtx_unlock(d->mtx);
	wake(d);
}

/* The aio callback: SEND done -> start RECV; RECV done -> DONE. Only the
 * callback changes a sent frame's state until it is DONE. */
static void
frame_cb(void *arg)
{
	struct relay_frame *f = arg;
	int rv = nng_aio_result(f->aio);
	switch (f->state) {
	case RELAY_FRAME_SEND:
		if (rv != 0) {
			nng_msg_free(nng_aio_get_msg(f->aio));
			nng_aio_set_msg(f->aio, NULL);
			frame_done(f, rv, "send to");
			return;
		}
		nng_mtx_lock(f->d->mtx);
		f->reached = true; /* on a connection now: it may be applied */
		frame_enter(f, RELAY_FRAME_RECV);
		nng_mtx_unlock(f->d->mtx);
		/* what is left of the delivery timeout */
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		int64_t spent = (t.tv_sec - f->t_sent.tv_sec) * 1000 +
		    (t.tv_nsec - f->t_sent.tv_nsec) / 1000000;
		int64_t left = f->d->timeout_ms - spent;
		nng_aio_set_timeout(f->aio, left > 0 ? (nng_duration)left : 1);
		nng_ctx_recv(f->ctx, f->aio);
		return;
	case RELAY_FRAME_RECV:
		if (rv == 0) {
			f->reply = nng_aio_get_msg(f->aio);
			nng_aio_set_msg(f->aio, NULL);
			f->rtt_s = seconds_since(&f->t_sent);
		}
		frame_done(f, rv, "no reply from");
		return;
	default:
		return;
	}
}

int
relay_frame_init(struct relay_deliverer *d, struct relay_frame *f)
{
	memset(f, 0, sizeof(*f));
	f->d = d;
	f->dest = -1;
	return nng_aio_alloc(&f->aio, frame_cb, f) == 0 ? OB_OK : OB_ENOMEM;
}

void
relay_frame_fini(struct relay_frame *f)
{
	if (f->aio != NULL) {
		nng_aio_stop(f->aio);
		nng_aio_free(f->aio);
	}
	if (nng_ctx_id(f->ctx) > 0)
		nng_ctx_close(f->ctx);
	free(f->skip);
	relay_batch_fini(&f->batch);
	memset(f, 0, sizeof(*f));
}

/* Hold the frame: its destination's breaker is open (why ""), it has no
 * route under --unrouted wait, or it could not be built. Not sent,
 * attempt refunded, due again after about one probe interval (jittered so
 * the workers do not all come back at once). Never a dead letter: nothing
 * reached a consumer. */
static void
hold_all(struct relay_deliverer *d, struct relay_frame *f, struct relay_outcome *out,
    const char *why)
{
	int64_t half = d->breaker_probe_ms / 2;
	int64_t delay = d->breaker_probe_ms + (half > 0 ? (int64_t)(nng_random() % (uint32_t)half) : 0);
	for (uint32_t i = 0; i < f->batch.n; i++) {
		set_outcome(&out[i], &f->batch.msgs[i], RELAY_OUT_RELEASE, "%.*s", why, strlen(why));
		out[i].refund_attempt = true;
		out[i].delay_ms = delay;
	}
}

bool
relay_frame_send(struct relay_deliverer *d, struct relay_frame *f, int force_dest,
    struct relay_outcome *out)
{
	const struct relay_batch *b = &f->batch;
	f->sent = false;
	f->reached = false;
	f->nsent = 0;
	f->rv = 0;
	f->reply = NULL;
	frame_enter(f, RELAY_FRAME_IDLE);
	free(f->skip);
	f->skip = calloc(b->n ? b->n : 1, sizeof(*f->skip));
	if (b->n == 0)
		return false;
	f->dest = force_dest >= 0 ? force_dest
	    : relay_route_pick(d, b->msgs[0].topic, b->msgs[0].topic_len);
	struct ob_wire_msg *chunk = calloc(b->n, sizeof(*chunk));
	if (f->skip == NULL || chunk == NULL) {
		hold_all(d, f, out, "out of memory");
		free(chunk);
		f->dest = -1;
		return false;
	}
	if (f->dest < 0 && !d->unrouted_dead) {
		/* --unrouted wait: claimed all the same (a relay's routes are
		 * never in its claim filter otherwise; a claim of another
		 * relay's routes cannot happen): back, for a relay that routes
		 * it */
		char why[RELAY_ERROR_MAX];
		snprintf(why, sizeof(why), "no route for topic '%.*s' (--unrouted wait)",
		    (int)b->msgs[0].topic_len, b->msgs[0].topic);
		hold_all(d, f, out, why);
		free(chunk);
		return false;
	}
	for (uint32_t i = 0; i < b->n; i++) {
		const struct ob_wire_msg *m = &b->msgs[i];
		if (f->dest < 0) {
			set_outcome(&out[i], m, RELAY_OUT_DEAD, "no route for topic '%.*s'",
			    m->topic, m->topic_len);
			f->skip[i] = true;
		} else if (m->payload_len > d->limits.max_payload) {
			set_outcome(&out[i], m, RELAY_OUT_DEAD, "payload larger than --max-payload%.*s",
			    "", 0);
			f->skip[i] = true;
		} else {
			chunk[f->nsent] = *m;
			chunk[f->nsent].source = d->source;
			chunk[f->nsent++].source_len = d->source != NULL ?
			    (uint8_t)strnlen(d->source, OB_WIRE_MAX_SOURCE) : 0;
		}
	}
	if (f->nsent == 0) {
		free(chunk);
		return false;
	}
	struct relay_dest *ds = &d->dests[f->dest];
	/* force_dest is the probe relay_probe_due reserved */
	enum relay_breaker_verdict v = force_dest >= 0 ? RELAY_BREAKER_PROBE
	    : relay_breaker_ask(&ds->breaker, (int64_t)nng_clock());
	if (v == RELAY_BREAKER_HOLD) {
		hold_all(d, f, out, "");
		f->nsent = 0;
		free(chunk);
		return false;
	}
	f->probe = v == RELAY_BREAKER_PROBE;
	if (f->probe)
		ob_info("relay.breaker.probe", "dest=%s", ds->url);
	nng_msg *msg = NULL;
	int rv = NNG_ENOMEM;
	ob_buf_reset(&d->encode);
	if (ob_wire_encode_request(&d->encode, chunk, f->nsent, &d->limits) != OB_OK ||
	    (rv = nng_ctx_open(&f->ctx, ds->sock)) != 0 ||
	    (rv = nng_msg_alloc(&msg, 0)) != 0 ||
	    (rv = nng_msg_append(msg, d->encode.data, d->encode.len)) != 0) {
		free(chunk);
		if (msg != NULL)
			nng_msg_free(msg);
		frame_enter(f, RELAY_FRAME_DONE);
		f->rv = rv ? rv : NNG_ENOMEM;
		f->failed_in = "prepare frame for";
		return false;
	}
	free(chunk);
	f->reached = false;
	f->sent = true;
	frame_enter(f, RELAY_FRAME_SEND);
	ds->inflight++;
	nng_aio_set_msg(f->aio, msg);
	/* REQ holds a request until a connection comes up: a destination
	 * with none gets RELAY_CONNECT_WAIT_MS of the delivery timeout */
	nng_aio_set_timeout(f->aio, atomic_load(&ds->pipes) > 0 || d->timeout_ms < RELAY_CONNECT_WAIT_MS
	    ? d->timeout_ms : RELAY_CONNECT_WAIT_MS);
	d->frames_sent++;
	clock_gettime(CLOCK_MONOTONIC, &f->t_sent);
	nng_ctx_send(f->ctx, f->aio);
	return true;
}

bool
relay_frame_done(struct relay_deliverer *d, struct relay_frame *f)
{
	nng_mtx_lock(d->mtx);
	bool done = f->state == RELAY_FRAME_DONE;
	nng_mtx_unlock(d->mtx);
	return done;
}

void
relay_frame_cancel(struct relay_frame *f)
{
	if (f->aio != NULL)
		nng_aio_cancel(f->aio);
}

/* The consumer refused our request's version: it is older than this
 * relay (wire version 1 only). One clear warn line, then at most one per
 * RELAY_TOO_OLD_LOG_EVERY_MS while it lasts (every batch to it is
 * refused, and retried as a transient failure, until it is upgraded). */
static void
consumer_too_old(struct relay_dest *ds, const struct ob_wire_reply *rep)
{
	int64_t now = (int64_t)nng_clock();
	if (ds->too_old_next_ms != 0 && now < ds->too_old_next_ms)
		return;
	ds->too_old_next_ms = now + RELAY_TOO_OLD_LOG_EVERY_MS;
	char d[OB_WIRE_MAX_DETAIL + 1], q[2 * OB_WIRE_MAX_DETAIL + 8];
	snprintf(d, sizeof(d), "%.*s", (int)rep->detail_len, rep->detail ? rep->detail : "");
	ob_warn("relay.deliver.consumer_too_old", "dest=%s relay_wire_version=%d"
	    " consumer_wire_version=%u detail=%s hint=\"the consumer at %s does not speak this"
	    " relay's wire version: upgrade consumers before relays; its messages wait until"
	    " then (attempts refunded, never dead-lettered)\"", ds->url, OB_WIRE_VERSION, rep->version, ob_log_q(d, q, sizeof(q)),
	    ds->url);
}

/* Apply a decoded reply to the frame's outcomes; a reply that does not
 * decode or does not match the frame is a failure of the whole frame,
 * never a success. Returns true when it decoded and matched. */
static bool
apply_reply(struct relay_deliverer *d, struct relay_frame *f, const void *body, size_t len,
    struct relay_outcome *out)
{
	const struct relay_batch *b = &f->batch;
	struct ob_wire_reply rep;
	const char *url = d->dests[f->dest].url;
	int rc = ob_wire_decode_reply(body, len, &d->limits, &rep);
	if (rc == OB_OK && rep.frame_err == OB_EWIRE_VERSION)
		consumer_too_old(&d->dests[f->dest], &rep);
	else if (rc == OB_OK && rep.frame_err != 0)
		ob_warn("relay.deliver.refused", "dest=%s err=%s", url, ob_err_name(rep.frame_err));
	else if (rc == OB_OK)
		d->dests[f->dest].too_old_next_ms = 0; /* it reads our version (again) */
	if (rc == OB_OK && rep.frame_err != 0) {
		/* A consumer too old to read the frame applied nothing and can
		 * apply nothing until it is upgraded: like an outage, the frame
		 * reached no consumer, its batch goes back whole with the
		 * attempt refunded and never dead-letters (DESIGN S4). */
		if (rep.frame_err == OB_EWIRE_VERSION)
			f->reached = false;
		for (uint32_t i = 0; i < b->n; i++)
			if (!f->skip[i])
				set_outcome(&out[i], &b->msgs[i], RELAY_OUT_RETRY,
				    "consumer refused the frame: %.*s", rep.detail, rep.detail_len);
		ob_wire_reply_fini(&rep);
		return false;
	}
	bool match = rc == OB_OK && rep.count == f->nsent;
	for (uint32_t i = 0, k = 0; match && i < b->n; i++)
		if (!f->skip[i])
			match = rep.results[k++].id == b->msgs[i].id;
	if (!match) {
		ob_warn("relay.deliver.bad_reply", "dest=%s messages=%u err=%s", url, f->nsent,
		    rc == OB_OK ? "reply does not match request" : ob_err_name(rc));
		char why[200];
		snprintf(why, sizeof(why), "bad reply from consumer %s: %s", url,
		    rc == OB_OK ? "reply does not match request" : ob_err_name(rc));
		for (uint32_t i = 0; i < b->n; i++)
			if (!f->skip[i])
				set_outcome(&out[i], &b->msgs[i], RELAY_OUT_RETRY, "%.*s", why,
				    strlen(why));
		if (rc == OB_OK)
			ob_wire_reply_fini(&rep);
		return false;
	}
	for (uint32_t i = 0, k = 0; i < b->n; i++) {
		if (f->skip[i])
			continue;
		const struct ob_wire_result *r = &rep.results[k++];
		const struct ob_wire_msg *m = &b->msgs[i];
		struct relay_outcome *o = &out[i];
		switch (r->status) {
		case OB_WIRE_APPLIED:
		case OB_WIRE_DUPLICATE:
			set_outcome(o, m, RELAY_OUT_DELIVERED, "%.*s", "", 0);
			break;
		case OB_WIRE_REJECT:
			set_outcome(o, m, RELAY_OUT_DEAD, "rejected by consumer: %.*s", r->detail,
			    r->detail_len);
			break;
		default:
			set_outcome(o, m, RELAY_OUT_RETRY, "consumer asked to retry: %.*s", r->detail,
			    r->detail_len);
			o->retry_after_ms = r->retry_after_ms;
			break;
		}
	}
	ob_wire_reply_fini(&rep);
	return true;
}

/* The breaker's verdict on one sent frame, logged when it changes state,
 * and published for the metrics. */
static void
breaker_result(struct relay_deliverer *d, int dest, bool ok)
{
	struct relay_dest *ds = &d->dests[dest];
	enum relay_breaker_state before = ds->breaker.state;
	if (relay_breaker_result(&ds->breaker, ok, (int64_t)nng_clock(), d->breaker_threshold,
	        d->breaker_probe_ms))
		ob_warn(ds->breaker.state == RELAY_BREAKER_OPEN ? "relay.breaker.open"
		                                                 : "relay.breaker.closed",
		    "dest=%s from=%s failures=%u probe_interval_ms=%lld", ds->url,
		    relay_breaker_state_name(before), ds->breaker.failures,
		    (long long)d->breaker_probe_ms);
	if (d->breakers != NULL && dest < d->breakers_n) {
		struct relay_breaker_live *bl = &d->breakers[dest];
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		int64_t ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
		atomic_store(ok ? &bl->ok_ms : &bl->fail_ms, ms);
		atomic_store(&bl->open, ds->breaker.state == RELAY_BREAKER_OPEN ? 1 : 0);
	}
}

/* A destination's window after one of its frames: halved (at least one)
 * when the frame failed, one more (up to window_max) when it was answered.
 * Frames queued at a consumer slower than the pipeline would otherwise
 * time out while it still applies them, be sent again, and load it
 * further; and a destination that is gone would keep every slot of the
 * worker, one delivery timeout each, from the others. */
static void
window_result(struct relay_deliverer *d, int dest, enum relay_frame_result res)
{
	struct relay_dest *ds = &d->dests[dest];
	uint32_t before = ds->window;
	if (ds->inflight > 0)
		ds->inflight--;
	if (res == RELAY_FRAME_FAILED)
		ds->window = ds->window > 1 ? ds->window / 2 : 1;
	else if (res == RELAY_FRAME_REPLIED && ds->window < d->window_max)
		ds->window++;
	if (ds->window != before)
		ob_debug("relay.window", "dest=%s frames_out=%u (was %u)", ds->url, ds->window,
		    before);
}

enum relay_frame_result
relay_frame_finish(struct relay_deliverer *d, struct relay_frame *f, struct relay_outcome *out)
{
	const struct relay_batch *b = &f->batch;
	enum relay_frame_result result = RELAY_FRAME_NOT_SENT;
	if (f->sent || (f->state == RELAY_FRAME_DONE && f->rv != 0)) {
		bool ok = false;
		if (f->rv != 0) {
			char why[160];
			snprintf(why, sizeof(why), "%s %s: %s", f->failed_in,
			    f->dest >= 0 ? d->dests[f->dest].url : "?", nng_strerror(f->rv));
			for (uint32_t i = 0; i < b->n; i++) {
				if (f->skip != NULL && f->skip[i])
					continue;
				set_outcome(&out[i], &b->msgs[i], RELAY_OUT_RETRY, "%.*s", why,
				    strlen(why));
				/* never on a connection: the attempt reached no consumer */
				out[i].refund_attempt = !f->reached;
			}
			if (f->sent)
				d->frames_failed++;
			/* never on a connection: was a handshake refused? */
			if (f->sent && !f->reached && f->dest >= 0)
				relay_dest_refusals(d, &d->dests[f->dest]);
			if (f->sent && f->dest >= 0)
				redial_if_stuck(d, &d->dests[f->dest]);
			result = RELAY_FRAME_FAILED;
		} else {
			ob_metric_observe(d->frame_seconds, f->rtt_s);
			d->dests[f->dest].alive_ms = (int64_t)nng_clock();
			d->dests[f->dest].redials = 0;
			ok = apply_reply(d, f, nng_msg_body(f->reply), nng_msg_len(f->reply), out);
			nng_msg_free(f->reply);
			f->reply = NULL;
			result = ok ? RELAY_FRAME_REPLIED : RELAY_FRAME_FAILED;
		}
		/* A reply that does not decode reached a consumer: it is not a
		 * transport failure, and it does not close an open breaker. */
		if (f->sent && (f->rv != 0 || ok))
			breaker_result(d, f->dest, ok);
		else if (f->sent && f->probe)
			relay_breaker_probe_inconclusive(&d->dests[f->dest].breaker);
		if (f->sent)
			window_result(d, f->dest, result);
	}
	if (nng_ctx_id(f->ctx) > 0)
		nng_ctx_close(f->ctx);
	memset(&f->ctx, 0, sizeof(f->ctx));
	frame_enter(f, RELAY_FRAME_IDLE);
	f->sent = false;
	return result;
}

int
relay_deliverer_wake_fd(const struct relay_deliverer *d)
{
	return d->wake[0];
}

void
relay_deliverer_drain_wake(struct relay_deliverer *d)
{
	char buf[256];
	while (read(d->wake[0], buf, sizeof(buf)) > 0)
		;
}
