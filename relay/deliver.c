/*
 * deliver.c - request frames out, statuses back, over nng REQ contexts.
 *
 * One claimed batch is one frame: pick its destination, ask that
 * destination's breaker, encode, send on a context of its own with an aio
 * whose callback moves it SEND -> RECV -> DONE and then writes a byte to
 * the worker's wakeup pipe. The worker collects finished frames one by one
 * (relay_frame_finish), so one destination's timeout never delays the
 * outcome of another's frame. The destinations themselves (sockets,
 * breakers, windows, the pick) are dest.c's. Nothing here touches the
 * database.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/supplemental/util/platform.h>

#include "deliver.h"
#include "outbox/buf.h"
#include "outbox/bus_tls.h"
#include "outbox/err.h"
#include "outbox/log.h"

static double
seconds_since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

int
relay_deliverer_init(struct relay_deliverer *d, const struct relay_routes *rt)
{
	d->wake[0] = d->wake[1] = -1;
	return relay_dest_table_init(&d->table, rt);
}

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
	/* the largest reply to the largest frame this relay sends */
	return relay_dest_table_open(&d->table, OB_WIRE_REPLY_MAX_BYTES(d->limits.max_batch), err,
	    errlen);
}

void
relay_deliverer_close(struct relay_deliverer *d)
{
	relay_dest_table_close(&d->table);
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
	o->min_delay_ms = 0;
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
 * pipeline slot's next batch; IDLE -> IDLE for its first). While a frame is sent,
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
	int64_t half = d->table.breaker_probe_ms / 2;
	int64_t delay = d->table.breaker_probe_ms + (half > 0 ? (int64_t)(nng_random() % (uint32_t)half) : 0);
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
	    : relay_route_pick(&d->table, b->msgs[0].topic, b->msgs[0].topic_len);
	struct ob_wire_msg *chunk = calloc(b->n, sizeof(*chunk));
	if (f->skip == NULL || chunk == NULL) {
		hold_all(d, f, out, "out of memory");
		free(chunk);
		f->dest = -1;
		return false;
	}
	if (f->dest < 0 && !d->table.unrouted_dead) {
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
	struct relay_dest *ds = &d->table.dest[f->dest];
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
	relay_dest_frame_out(&d->table, f->dest);
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
	if (!relay_dest_version_refused(ds, (int64_t)nng_clock(), RELAY_TOO_OLD_LOG_EVERY_MS))
		return;
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
	const char *url = d->table.dest[f->dest].url;
	int rc = ob_wire_decode_reply(body, len, &d->limits, &rep);
	if (rc == OB_OK && rep.frame_err == OB_EWIRE_VERSION)
		consumer_too_old(&d->table.dest[f->dest], &rep);
	else if (rc == OB_OK && rep.frame_err != 0)
		ob_warn("relay.deliver.refused", "dest=%s err=%s", url, ob_err_name(rep.frame_err));
	else if (rc == OB_OK)
		relay_dest_version_read(&d->table.dest[f->dest]); /* it reads our version (again) */
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

/* The retry budget of f's destination (dest.h, outbox/token_bucket.h):
 * a frame whose messages are to be retried pays for that retry (more
 * after a timeout); when the budget cannot, the retry waits at least
 * table.budget_slow_ms (the slow rate) and is counted. A frame all of
 * whose messages were delivered puts back 1, or a retry's cost when one
 * of them was a redelivery. */
static void
budget_settle(struct relay_deliverer *d, const struct relay_frame *f, struct relay_outcome *out)
{
	const struct relay_batch *b = &f->batch;
	struct relay_dest *ds = &d->table.dest[f->dest];
	bool retry = false, redelivery = false;
	for (uint32_t i = 0; i < b->n; i++) {
		if (f->skip != NULL && f->skip[i])
			continue;
		retry = retry || out[i].kind == RELAY_OUT_RETRY;
		redelivery = redelivery || b->msgs[i].attempt > 1;
	}
	if (!retry) {
		ob_retry_budget_success(&ds->budget, redelivery ? OB_RETRY_BUDGET_COST : 0);
		return;
	}
	double cost;
	if (ob_retry_budget_take(&ds->budget, f->rv == NNG_ETIMEDOUT, &cost))
		return;
	for (uint32_t i = 0; i < b->n; i++)
		if ((f->skip == NULL || !f->skip[i]) && out[i].kind == RELAY_OUT_RETRY)
			out[i].min_delay_ms = d->table.budget_slow_ms;
	d->budget_spent++;
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
			    f->dest >= 0 ? d->table.dest[f->dest].url : "?", nng_strerror(f->rv));
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
				relay_dest_refusals(&d->table, &d->table.dest[f->dest]);
			if (f->sent && f->dest >= 0)
				relay_dest_redial_if_stuck(&d->table.dest[f->dest], d->timeout_ms);
			result = RELAY_FRAME_FAILED;
		} else {
			ob_metric_observe(d->frame_seconds, f->rtt_s);
			relay_dest_alive(&d->table.dest[f->dest]);
			ok = apply_reply(d, f, nng_msg_body(f->reply), nng_msg_len(f->reply), out);
			nng_msg_free(f->reply);
			f->reply = NULL;
			result = ok ? RELAY_FRAME_REPLIED : RELAY_FRAME_FAILED;
		}
		/* A reply that does not decode reached a consumer: it is not a
		 * transport failure, and it does not close an open breaker. */
		if (f->sent && (f->rv != 0 || ok))
			relay_dest_breaker_result(&d->table, f->dest, ok);
		else if (f->sent && f->probe)
			relay_breaker_probe_inconclusive(&d->table.dest[f->dest].breaker);
		if (f->sent)
			relay_dest_window_result(&d->table, f->dest, result == RELAY_FRAME_FAILED,
			    result == RELAY_FRAME_REPLIED);
		if (f->sent && f->dest >= 0 && d->table.retry_budget)
			budget_settle(d, f, out);
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
