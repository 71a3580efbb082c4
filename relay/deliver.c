/*
 * deliver.c - request frames out, statuses back, over nng REQ contexts.
 *
 * A round of delivery: pick a destination per message, cut the messages of
 * each destination into frames, ask each destination's breaker, send up to
 * max_inflight frames at once on their own contexts, then collect the
 * replies. Each frame is one work item whose aio callback moves it
 * SEND -> RECV -> DONE (nng demo/async style); the caller waits on a
 * condition variable for all of them. One deadline bounds the whole round,
 * so the relay's lease only has to outlast the delivery timeout plus the
 * time to record. Nothing here touches the database.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>

#include "deliver.h"
#include "outbox/buf.h"
#include "outbox/err.h"
#include "outbox/log.h"

/* The shared state of one wave of frames. */
struct wave {
	nng_mtx *mtx;
	nng_cv *cv;
	uint32_t pending;     /* frames not DONE yet */
	nng_time deadline;
};

enum frame_state { FRAME_IDLE, FRAME_SEND, FRAME_RECV, FRAME_DONE };

/* One request frame in flight. */
struct frame {
	int dest;
	uint32_t *idx;        /* indices into the round's messages */
	uint32_t n;
	bool probe;           /* the breaker's probe for its destination */
	nng_ctx ctx;
	nng_aio *aio;
	struct wave *wave;
	enum frame_state state;
	int rv;               /* DONE: 0 = reply in `reply`, else nng error */
	const char *failed_in; /* DONE with rv: "send to" / "no reply from" */
	nng_msg *reply;
	bool had_pipe;        /* a consumer was connected when we sent */
	bool sent;            /* handed to nng (not failed in preparation) */
	struct timespec t_sent;
	double rtt_s;         /* DONE with a reply: seconds since t_sent */
};

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

static int
find_or_add_dest(struct relay_deliverer *d, const char *url)
{
	for (int i = 0; i < d->ndests; i++)
		if (strcmp(d->dests[i].url, url) == 0)
			return i;
	struct relay_dest *nd = realloc(d->dests, (size_t)(d->ndests + 1) * sizeof(*nd));
	if (nd == NULL)
		return -1;
	d->dests = nd;
	memset(&nd[d->ndests], 0, sizeof(*nd));
	if ((nd[d->ndests].url = strdup(url)) == NULL)
		return -1;
	return d->ndests++;
}

static struct relay_route *
find_or_add_route(struct relay_deliverer *d, const char *topic)
{
	for (int i = 0; i < d->nroutes; i++)
		if (strcmp(d->routes[i].topic, topic) == 0)
			return &d->routes[i];
	struct relay_route *nr = realloc(d->routes, (size_t)(d->nroutes + 1) * sizeof(*nr));
	if (nr == NULL)
		return NULL;
	d->routes = nr;
	memset(&nr[d->nroutes], 0, sizeof(*nr));
	if ((nr[d->nroutes].topic = strdup(topic)) == NULL)
		return NULL;
	return &nr[d->nroutes++];
}

/* Transports nng 1.5 can dial, checked without creating any nng state (the
 * supervisor parses routes before it forks). */
static const char *const dial_schemes[] = {
	"tcp", "tcp4", "tcp6", "tls+tcp", "tls+tcp4", "tls+tcp6", "ipc", "abstract",
	"ws", "ws4", "ws6", "wss", "wss4", "wss6", NULL,
};

static bool
url_dialable(const nng_url *u, const char **why)
{
	bool known = false;
	for (int i = 0; dial_schemes[i] != NULL && !known; i++)
		known = strcmp(u->u_scheme, dial_schemes[i]) == 0;
	if (!known) {
		*why = "unsupported transport (use tcp://, tls+tcp://, ipc://, ws://, wss://)";
		return false;
	}
	bool needs_host = strncmp(u->u_scheme, "ipc", 3) != 0 &&
	    strcmp(u->u_scheme, "abstract") != 0;
	if (needs_host && (u->u_hostname[0] == '\0' || u->u_port[0] == '\0')) {
		*why = "host and port are required";
		return false;
	}
	if (!needs_host && u->u_path[0] == '\0') {
		*why = "a path is required";
		return false;
	}
	return true;
}

int
relay_routes_parse(struct relay_deliverer *d, char **specs, size_t n,
    char *err, size_t errlen)
{
	if (n == 0) {
		snprintf(err, errlen, "--route: at least one TOPIC=URL is required (or set OUTBOX_ROUTE)");
		return OB_EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(specs[i], '=');
		if (eq == NULL || eq == specs[i] || eq[1] == '\0') {
			snprintf(err, errlen, "--route '%s': expected TOPIC=URL (TOPIC may be *)", specs[i]);
			return OB_EINVAL;
		}
		char topic[OB_WIRE_MAX_TOPIC + 1];
		size_t tlen = (size_t)(eq - specs[i]);
		if (tlen > OB_WIRE_MAX_TOPIC) {
			snprintf(err, errlen, "--route '%s': topic longer than %d bytes", specs[i],
			    OB_WIRE_MAX_TOPIC);
			return OB_EINVAL;
		}
		memcpy(topic, specs[i], tlen);
		topic[tlen] = '\0';
		const char *url = eq + 1;
		nng_url *u = NULL;
		int rv = nng_url_parse(&u, url);
		if (rv != 0) {
			snprintf(err, errlen, "--route '%s': nng cannot parse URL '%s': %s",
			    specs[i], url, nng_strerror(rv));
			return OB_EINVAL;
		}
		const char *why = NULL;
		bool ok = url_dialable(u, &why);
		nng_url_free(u);
		if (!ok) {
			snprintf(err, errlen, "--route '%s': nng cannot parse URL '%s': %s",
			    specs[i], url, why);
			return OB_EINVAL;
		}
		int di = find_or_add_dest(d, url);
		struct relay_route *r = find_or_add_route(d, topic);
		int *nds = r != NULL ? realloc(r->dests, (size_t)(r->ndests + 1) * sizeof(int)) : NULL;
		if (di < 0 || nds == NULL) {
			snprintf(err, errlen, "out of memory parsing routes");
			return OB_ENOMEM;
		}
		r->dests = nds;
		r->dests[r->ndests++] = di;
	}
	return OB_OK;
}

int
relay_deliverer_open(struct relay_deliverer *d, char *err, size_t errlen)
{
	for (int i = 0; i < d->ndests; i++) {
		struct relay_dest *ds = &d->dests[i];
		int rv = nng_req0_open(&ds->sock);
		if (rv != 0) {
			snprintf(err, errlen, "open REQ socket: %s", nng_strerror(rv));
			return OB_ENET;
		}
		/* Our own deadline and redelivery govern retries, not REQ's timer. */
		nng_socket_set_ms(ds->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
		nng_socket_set_ms(ds->sock, NNG_OPT_RECONNMINT, 50);
		nng_socket_set_ms(ds->sock, NNG_OPT_RECONNMAXT, 2000);
		nng_socket_set_size(ds->sock, NNG_OPT_RECVMAXSZ, 1024 * 1024);
		nng_pipe_notify(ds->sock, NNG_PIPE_EV_ADD_POST, pipe_event, ds);
		nng_pipe_notify(ds->sock, NNG_PIPE_EV_REM_POST, pipe_event, ds);
		if ((rv = nng_dial(ds->sock, ds->url, NULL, NNG_FLAG_NONBLOCK)) != 0) {
			snprintf(err, errlen, "dial %s: %s", ds->url, nng_strerror(rv));
			return OB_ENET;
		}
	}
	return OB_OK;
}

void
relay_deliverer_close(struct relay_deliverer *d)
{
	for (int i = 0; i < d->ndests; i++) {
		if (nng_socket_id(d->dests[i].sock) > 0)
			nng_close(d->dests[i].sock);
		free(d->dests[i].url);
	}
	for (int i = 0; i < d->nroutes; i++) {
		free(d->routes[i].topic);
		free(d->routes[i].dests);
	}
	free(d->dests);
	free(d->routes);
	d->dests = NULL;
	d->routes = NULL;
	d->ndests = d->nroutes = 0;
}

int
relay_route_pick(struct relay_deliverer *d, const char *topic, size_t len)
{
	struct relay_route *r = NULL, *def = NULL;
	for (int i = 0; i < d->nroutes; i++) {
		if (strlen(d->routes[i].topic) == len &&
		    memcmp(d->routes[i].topic, topic, len) == 0) {
			r = &d->routes[i];
			break;
		}
		if (strcmp(d->routes[i].topic, "*") == 0)
			def = &d->routes[i];
	}
	if (r == NULL)
		r = def;
	if (r == NULL)
		return -1;
	/* Round-robin, best class first: live and closed; closed (maybe
	 * still connecting); open with its probe due; anything. A destination
	 * that is down never holds messages back while another is up. */
	nng_time now = nng_clock();
	for (int cls = 0; cls < 4; cls++) {
		for (int k = 0; k < r->ndests; k++) {
			int di = r->dests[(r->next + (unsigned)k) % (unsigned)r->ndests];
			const struct relay_dest *ds = &d->dests[di];
			bool closed = ds->breaker.state == RELAY_BREAKER_CLOSED;
			bool ok;
			switch (cls) {
			case 0: ok = closed && atomic_load(&ds->pipes) > 0; break;
			case 1: ok = closed; break;
			case 2: ok = !ds->breaker.probing &&
			            (int64_t)now >= ds->breaker.next_probe_ms; break;
			default: ok = true; break;
			}
			if (ok) {
				r->next += (unsigned)k + 1;
				return di;
			}
		}
	}
	return -1; /* not reached: class 3 takes any */
}

static void
set_outcome(struct relay_outcome *o, const struct ob_wire_msg *m,
    enum relay_outcome_kind kind, const char *fmt, const char *a, size_t alen)
{
	o->id = m->id;
	o->fence = m->fence;
	o->kind = kind;
	o->delay_ms = 0;
	o->refund_attempt = false;
	snprintf(o->error, sizeof(o->error), fmt, (int)alen, a ? a : "");
}

/* Apply a decoded reply to the frame's outcomes; a reply that does not
 * decode or does not match the frame is a transient failure of the whole
 * frame, never a success. Returns true when the reply decoded. */
static bool
apply_reply(struct relay_deliverer *d, struct frame *f,
    const struct ob_wire_msg *msgs, const void *body, size_t len,
    struct relay_outcome *out)
{
	struct ob_wire_reply rep;
	const char *url = d->dests[f->dest].url;
	int rc = ob_wire_decode_reply(body, len, &d->limits, &rep);
	if (rc == OB_OK && rep.frame_err != 0) {
		ob_warn("relay.deliver.refused", "dest=%s err=%s", url,
		    ob_err_name(rep.frame_err));
		for (uint32_t k = 0; k < f->n; k++)
			set_outcome(&out[f->idx[k]], &msgs[f->idx[k]], RELAY_OUT_RETRY,
			    "consumer refused the frame: %.*s", rep.detail, rep.detail_len);
		ob_wire_reply_fini(&rep);
		return true;
	}
	bool match = rc == OB_OK && rep.count == f->n;
	for (uint32_t k = 0; match && k < f->n; k++)
		match = rep.results[k].id == msgs[f->idx[k]].id;
	if (!match) {
		ob_warn("relay.deliver.bad_reply", "dest=%s messages=%u err=%s", url, f->n,
		    rc == OB_OK ? "reply does not match request" : ob_err_name(rc));
		char why[200];
		snprintf(why, sizeof(why), "bad reply from consumer %s: %s", url,
		    rc == OB_OK ? "reply does not match request" : ob_err_name(rc));
		for (uint32_t k = 0; k < f->n; k++)
			set_outcome(&out[f->idx[k]], &msgs[f->idx[k]], RELAY_OUT_RETRY,
			    "%.*s", why, strlen(why));
		if (rc == OB_OK)
			ob_wire_reply_fini(&rep);
		return false;
	}
	for (uint32_t k = 0; k < f->n; k++) {
		const struct ob_wire_result *r = &rep.results[k];
		const struct ob_wire_msg *m = &msgs[f->idx[k]];
		struct relay_outcome *o = &out[f->idx[k]];
		switch (r->status) {
		case OB_WIRE_APPLIED:
		case OB_WIRE_DUPLICATE:
			set_outcome(o, m, RELAY_OUT_DELIVERED, "%.*s", "", 0);
			break;
		case OB_WIRE_REJECT:
			set_outcome(o, m, RELAY_OUT_DEAD, "rejected by consumer: %.*s",
			    r->detail, r->detail_len);
			break;
		default:
			set_outcome(o, m, RELAY_OUT_RETRY, "consumer asked to retry: %.*s",
			    r->detail, r->detail_len);
			break;
		}
	}
	ob_wire_reply_fini(&rep);
	return true;
}

static void
frame_failed(struct relay_deliverer *d, struct frame *f,
    const struct ob_wire_msg *msgs, const char *what, int rv,
    struct relay_outcome *out)
{
	char why[160];
	snprintf(why, sizeof(why), "%s %s: %s", what, d->dests[f->dest].url,
	    nng_strerror(rv));
	for (uint32_t k = 0; k < f->n; k++) {
		struct relay_outcome *o = &out[f->idx[k]];
		set_outcome(o, &msgs[f->idx[k]], RELAY_OUT_RETRY, "%.*s", why, strlen(why));
		/* No consumer was connected: the attempt never reached one. */
		o->refund_attempt = !f->had_pipe;
	}
}

static void
frame_done(struct frame *f, int rv, const char *where)
{
	struct wave *w = f->wave;
	nng_mtx_lock(w->mtx);
	f->rv = rv;
	f->failed_in = where;
	f->state = FRAME_DONE;
	if (--w->pending == 0)
		nng_cv_wake(w->cv);
	nng_mtx_unlock(w->mtx);
}

/* The aio callback: SEND done -> start RECV; RECV done -> DONE. */
static void
frame_cb(void *arg)
{
	struct frame *f = arg;
	int rv = nng_aio_result(f->aio);
	switch (f->state) {
	case FRAME_SEND:
		if (rv != 0) {
			nng_msg_free(nng_aio_get_msg(f->aio));
			nng_aio_set_msg(f->aio, NULL);
			frame_done(f, rv, "send to");
			return;
		}
		f->state = FRAME_RECV;
		nng_time now = nng_clock();
		nng_aio_set_timeout(f->aio, now < f->wave->deadline
		        ? (nng_duration)(f->wave->deadline - now) : 1);
		nng_ctx_recv(f->ctx, f->aio);
		return;
	case FRAME_RECV:
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

/* Wait for every frame of the wave; once *stop is set, give the frames
 * stop_cut_ms more and then cancel what is still out. */
static void
wait_wave(struct relay_deliverer *d, struct wave *w, struct frame *fr, uint32_t nf)
{
	nng_time cut = 0;
	nng_mtx_lock(w->mtx);
	while (w->pending > 0) {
		nng_time now = nng_clock();
		if (cut == 0 && d->stop != NULL && *d->stop)
			cut = now + (nng_time)d->stop_cut_ms;
		if (cut != 0 && now >= cut) {
			nng_mtx_unlock(w->mtx);
			for (uint32_t i = 0; i < nf; i++)
				if (fr[i].aio != NULL)
					nng_aio_cancel(fr[i].aio);
			nng_mtx_lock(w->mtx);
			if (w->pending == 0)
				break;
		}
		/* Wake every 50 ms to notice a stop request. */
		nng_cv_until(w->cv, now + 50);
	}
	nng_mtx_unlock(w->mtx);
}

/* Send and collect one wave of frames under one deadline. */
static void
run_wave(struct relay_deliverer *d, struct frame *fr, uint32_t nf,
    const struct ob_wire_msg *msgs, struct relay_outcome *out)
{
	struct wave w;
	memset(&w, 0, sizeof(w));
	w.deadline = nng_clock() + (nng_time)d->timeout_ms;
	struct ob_buf frame_buf = OB_BUF_INIT;
	struct ob_wire_msg *chunk = calloc(d->limits.max_batch, sizeof(*chunk));
	bool sync_ok = nng_mtx_alloc(&w.mtx) == 0 && nng_cv_alloc(&w.cv, w.mtx) == 0;

	for (uint32_t i = 0; i < nf; i++) {
		struct frame *f = &fr[i];
		nng_msg *m = NULL;
		int rv = NNG_ENOMEM;
		for (uint32_t k = 0; chunk != NULL && k < f->n; k++)
			chunk[k] = msgs[f->idx[k]];
		ob_buf_reset(&frame_buf);
		f->wave = &w;
		if (!sync_ok || chunk == NULL || nng_aio_alloc(&f->aio, frame_cb, f) != 0 ||
		    ob_wire_encode_request(&frame_buf, chunk, f->n, &d->limits) != OB_OK ||
		    (rv = nng_ctx_open(&f->ctx, d->dests[f->dest].sock)) != 0 ||
		    (rv = nng_msg_alloc(&m, 0)) != 0 ||
		    (rv = nng_msg_append(m, frame_buf.data, frame_buf.len)) != 0) {
			if (m != NULL)
				nng_msg_free(m);
			f->state = FRAME_DONE;
			f->rv = rv ? rv : NNG_ENOMEM;
			f->failed_in = "prepare frame for";
			continue;
		}
		f->had_pipe = atomic_load(&d->dests[f->dest].pipes) > 0;
		f->state = FRAME_SEND;
		f->sent = true;
		nng_mtx_lock(w.mtx);
		w.pending++;
		nng_mtx_unlock(w.mtx);
		nng_aio_set_msg(f->aio, m);
		nng_aio_set_timeout(f->aio, d->timeout_ms);
		d->frames_sent++;
		clock_gettime(CLOCK_MONOTONIC, &f->t_sent);
		nng_ctx_send(f->ctx, f->aio);
	}
	if (sync_ok)
		wait_wave(d, &w, fr, nf);
	nng_time now = nng_clock();
	for (uint32_t i = 0; i < nf; i++) {
		struct frame *f = &fr[i];
		struct relay_dest *ds = &d->dests[f->dest];
		bool ok;
		if (f->rv != 0) {
			frame_failed(d, f, msgs, f->failed_in, f->rv, out);
			ok = false;
			if (f->sent)
				d->frames_failed++;
		} else {
			ob_metric_observe(d->frame_seconds, f->rtt_s);
			ok = apply_reply(d, f, msgs, nng_msg_body(f->reply),
			    nng_msg_len(f->reply), out);
			nng_msg_free(f->reply);
			f->reply = NULL;
		}
		/* A reply that does not decode reached a consumer: it is not a
		 * transport failure, and it does not close an open breaker. */
		if (!f->sent || (f->rv == 0 && !ok))
			continue;
		enum relay_breaker_state before = ds->breaker.state;
		if (relay_breaker_result(&ds->breaker, ok, (int64_t)now,
		        d->breaker_threshold, d->breaker_probe_ms))
			ob_warn(ds->breaker.state == RELAY_BREAKER_OPEN ? "relay.breaker.open"
			                                                 : "relay.breaker.closed",
			    "dest=%s from=%s failures=%u probe_interval_ms=%lld", ds->url,
			    relay_breaker_state_name(before), ds->breaker.failures,
			    (long long)d->breaker_probe_ms);
		if (d->breakers != NULL && f->dest < d->breakers_n) {
			struct relay_breaker_live *bl = &d->breakers[f->dest];
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			int64_t ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
			atomic_store(ok ? &bl->ok_ms : &bl->fail_ms, ms);
			atomic_store(&bl->open, ds->breaker.state == RELAY_BREAKER_OPEN ? 1 : 0);
		}
	}
	for (uint32_t i = 0; i < nf; i++) {
		if (fr[i].aio != NULL)
			nng_aio_free(fr[i].aio);
		if (nng_ctx_id(fr[i].ctx) > 0)
			nng_ctx_close(fr[i].ctx);
	}
	if (w.cv != NULL)
		nng_cv_free(w.cv);
	if (w.mtx != NULL)
		nng_mtx_free(w.mtx);
	ob_buf_fini(&frame_buf);
	free(chunk);
}

/* Hold a message whose destination's breaker is open: not sent, attempt
 * refunded, due again after about one probe interval (jittered so the
 * workers do not all come back at once). */
static void
hold_message(struct relay_deliverer *d, const struct ob_wire_msg *m,
    struct relay_outcome *o)
{
	set_outcome(o, m, RELAY_OUT_RELEASE, "%.*s", "", 0);
	o->refund_attempt = true;
	int64_t half = d->breaker_probe_ms / 2;
	o->delay_ms = d->breaker_probe_ms + (half > 0 ? (int64_t)(nng_random() % (uint32_t)half) : 0);
}

void
relay_deliver(struct relay_deliverer *d, const struct ob_wire_msg *msgs,
    uint32_t n, struct relay_outcome *out)
{
	int *dest = calloc(n ? n : 1, sizeof(int));
	uint32_t *order = calloc(n ? n : 1, sizeof(uint32_t));
	struct frame *fr = calloc(n ? n : 1, sizeof(*fr));
	if (dest == NULL || order == NULL || fr == NULL) {
		for (uint32_t i = 0; i < n; i++)
			set_outcome(&out[i], &msgs[i], RELAY_OUT_RETRY, "%.*s", "out of memory", 13);
		goto out;
	}
	for (uint32_t i = 0; i < n; i++) {
		dest[i] = relay_route_pick(d, msgs[i].topic, msgs[i].topic_len);
		if (dest[i] < 0)
			set_outcome(&out[i], &msgs[i], RELAY_OUT_DEAD, "no route for topic '%.*s'",
			    msgs[i].topic, msgs[i].topic_len);
		else if (msgs[i].payload_len > d->limits.max_payload) {
			set_outcome(&out[i], &msgs[i], RELAY_OUT_DEAD,
			    "payload larger than --max-payload%.*s", "", 0);
			dest[i] = -1;
		}
	}
	/* Frames: messages of one destination, in claim order, max_batch each.
	 * A destination whose breaker is open gets at most its probe: one
	 * frame of one message; the rest of its messages are held. */
	uint32_t nf = 0, placed = 0;
	int64_t now = (int64_t)nng_clock();
	for (int di = 0; di < d->ndests; di++) {
		struct frame *f = NULL;
		enum relay_breaker_verdict v = RELAY_BREAKER_SEND;
		bool asked = false;
		for (uint32_t i = 0; i < n; i++) {
			if (dest[i] != di)
				continue;
			if (!asked) {
				v = relay_breaker_ask(&d->dests[di].breaker, now);
				asked = true;
			}
			if (v == RELAY_BREAKER_HOLD || (v == RELAY_BREAKER_PROBE && f != NULL)) {
				hold_message(d, &msgs[i], &out[i]);
				continue;
			}
			if (f == NULL || f->n == d->limits.max_batch) {
				f = &fr[nf++];
				f->dest = di;
				f->idx = &order[placed];
				f->probe = v == RELAY_BREAKER_PROBE;
			}
			f->idx[f->n++] = i;
			placed++;
		}
		if (v == RELAY_BREAKER_PROBE && f != NULL)
			ob_info("relay.breaker.probe", "dest=%s", d->dests[di].url);
	}
	/* One wave under one deadline: the worker claims at most max_inflight
	 * frames' worth, so this is max_inflight frames (plus one partial frame
	 * per extra destination). */
	run_wave(d, fr, nf, msgs, out);
out:
	free(dest);
	free(order);
	free(fr);
}
