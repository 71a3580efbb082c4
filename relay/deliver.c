/*
 * deliver.c - request frames out, statuses back, over nng REQ contexts.
 *
 * A round of delivery: pick a destination per message, cut the messages of
 * each destination into frames, send up to max_inflight frames at once on
 * their own contexts, then collect the replies. One deadline bounds the
 * whole round, so the relay's lease only has to outlast the delivery
 * timeout plus the time to record.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>

#include "deliver.h"
#include "outbox/buf.h"
#include "outbox/err.h"
#include "outbox/log.h"

/* One request frame in flight. */
struct frame {
	int dest;
	uint32_t *idx;        /* indices into the round's messages */
	uint32_t n;
	nng_ctx ctx;
	nng_aio *aio;
	bool sent;
	bool had_pipe;        /* a consumer was connected when we sent */
};

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
		nng_url_free(u);
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
	/* Round-robin over the destinations that have a live connection; if
	 * none has, keep rotating so a restarted one is found. */
	for (int k = 0; k < r->ndests; k++) {
		int di = r->dests[(r->next + (unsigned)k) % (unsigned)r->ndests];
		if (atomic_load(&d->dests[di].pipes) > 0) {
			r->next += (unsigned)k + 1;
			return di;
		}
	}
	return r->dests[r->next++ % (unsigned)r->ndests];
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

/* Apply a decoded reply to the frame's outcomes; a reply that does not match
 * the frame is a transient failure of the whole frame. */
static void
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
		return;
	}
	bool match = rc == OB_OK && rep.count == f->n;
	for (uint32_t k = 0; match && k < f->n; k++)
		match = rep.results[k].id == msgs[f->idx[k]].id;
	if (!match) {
		ob_warn("relay.deliver.bad_reply", "dest=%s err=%s", url,
		    rc == OB_OK ? "reply does not match request" : ob_err_name(rc));
		for (uint32_t k = 0; k < f->n; k++)
			set_outcome(&out[f->idx[k]], &msgs[f->idx[k]], RELAY_OUT_RETRY,
			    "bad reply from consumer%.*s", "", 0);
		if (rc == OB_OK)
			ob_wire_reply_fini(&rep);
		return;
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

/* Send and collect one wave of frames under one deadline. */
static void
run_wave(struct relay_deliverer *d, struct frame *fr, uint32_t nf,
    const struct ob_wire_msg *msgs, struct relay_outcome *out)
{
	nng_time deadline = nng_clock() + (nng_time)d->timeout_ms;
	struct ob_buf frame_buf = OB_BUF_INIT;
	struct ob_wire_msg *chunk = calloc(d->limits.max_batch, sizeof(*chunk));

	for (uint32_t i = 0; i < nf; i++) {
		struct frame *f = &fr[i];
		nng_msg *m = NULL;
		int rv = NNG_ENOMEM;
		for (uint32_t k = 0; chunk != NULL && k < f->n; k++)
			chunk[k] = msgs[f->idx[k]];
		ob_buf_reset(&frame_buf);
		if (chunk == NULL || nng_aio_alloc(&f->aio, NULL, NULL) != 0 ||
		    ob_wire_encode_request(&frame_buf, chunk, f->n, &d->limits) != OB_OK ||
		    (rv = nng_ctx_open(&f->ctx, d->dests[f->dest].sock)) != 0 ||
		    (rv = nng_msg_alloc(&m, 0)) != 0 ||
		    (rv = nng_msg_append(m, frame_buf.data, frame_buf.len)) != 0) {
			if (m != NULL)
				nng_msg_free(m);
			frame_failed(d, f, msgs, "prepare frame for", rv ? rv : NNG_ENOMEM, out);
			continue;
		}
		f->had_pipe = atomic_load(&d->dests[f->dest].pipes) > 0;
		nng_aio_set_msg(f->aio, m);
		nng_aio_set_timeout(f->aio, d->timeout_ms);
		nng_ctx_send(f->ctx, f->aio);
		f->sent = true;
	}
	for (uint32_t i = 0; i < nf; i++) {
		struct frame *f = &fr[i];
		if (!f->sent)
			continue;
		nng_aio_wait(f->aio);
		int rv = nng_aio_result(f->aio);
		if (rv != 0) {
			nng_msg_free(nng_aio_get_msg(f->aio));
			frame_failed(d, f, msgs, "send to", rv, out);
			f->sent = false;
			continue;
		}
		nng_time now = nng_clock();
		nng_aio_set_timeout(f->aio, now < deadline ? (nng_duration)(deadline - now) : 1);
		nng_ctx_recv(f->ctx, f->aio);
	}
	for (uint32_t i = 0; i < nf; i++) {
		struct frame *f = &fr[i];
		if (!f->sent)
			continue;
		nng_aio_wait(f->aio);
		int rv = nng_aio_result(f->aio);
		if (rv != 0) {
			frame_failed(d, f, msgs, "no reply from", rv, out);
			continue;
		}
		nng_msg *reply = nng_aio_get_msg(f->aio);
		apply_reply(d, f, msgs, nng_msg_body(reply), nng_msg_len(reply), out);
		nng_msg_free(reply);
	}
	for (uint32_t i = 0; i < nf; i++) {
		if (fr[i].aio != NULL)
			nng_aio_free(fr[i].aio);
		if (nng_ctx_id(fr[i].ctx) > 0)
			nng_ctx_close(fr[i].ctx);
	}
	ob_buf_fini(&frame_buf);
	free(chunk);
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
	/* Frames: messages of one destination, in claim order, max_batch each. */
	uint32_t nf = 0, placed = 0;
	for (int di = 0; di < d->ndests; di++) {
		struct frame *f = NULL;
		for (uint32_t i = 0; i < n; i++) {
			if (dest[i] != di)
				continue;
			if (f == NULL || f->n == d->limits.max_batch) {
				f = &fr[nf++];
				f->dest = di;
				f->idx = &order[placed];
			}
			f->idx[f->n++] = i;
			placed++;
		}
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
