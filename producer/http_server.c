/*
 * http_server.c - the producer's HTTP server: outbox/httpd.h + serving
 * threads (see http_server.h).
 *
 * The server (one thread, never blocking) reads each request whole within
 * its deadlines and refuses what must not be processed (malformed HTTP,
 * Content-Length with Transfer-Encoding, %00 in the target, oversized
 * headers or body) before anything here runs. handle_cb queues a complete
 * request to the serving threads, or answers 503 when the queue is full or
 * the server is stopping. Routing (404, 405) is api_handle's. "Lose the
 * response" closes the connection without writing a byte.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "enqueue.h"
#include "http_server.h"
#include "metrics.h"
#include "outbox/backoff.h"
#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/httpd.h"
#include "outbox/log.h"
#include "outbox/pg.h"

/* A request waiting for a serving thread. */
struct queued {
	struct ob_httpd_req *req;
	int64_t t0_ns;      /* CLOCK_MONOTONIC: the request's first byte */
	const char *scope;  /* its token's scope ("" default), borrowed from cfg.tokens */
	const char *topics; /* its token's topic list (NULL: any), likewise */
};

struct http_server {
	struct http_server_config cfg;
	struct ob_httpd *httpd;
	pthread_mutex_t mtx;
	pthread_cond_t cv;
	struct queued *queue; /* ring of waiting requests */
	int qhead, qlen;
	bool stopping;
	int nthreads;
	pthread_t *threads;
	PGconn **conns;     /* one per serving thread, never shared */
	bool *up;           /* per thread, its own: conns[i] usable at last use */
	_Atomic int nup;    /* how many are up (for /readyz) */
};

struct worker_arg {
	struct http_server *s;
	int index;
};

/* Count an answered request (metrics off: no-op). */
static void
count(struct http_server *s, const char *method, const char *path, int status, bool replayed,
    int64_t t0_ns)
{
	producer_metrics_request(s->cfg.api.metrics, method, producer_route_of(path), status,
	    replayed, (double)(ob_mono_ns() - t0_ns) / 1e9);
}

/* Serving thread i's connection went up or down (only thread i calls). */
static void
set_up(struct http_server *s, int i, bool up)
{
	if (s->up[i] == up)
		return;
	s->up[i] = up;
	atomic_fetch_add(&s->nup, up ? 1 : -1);
}

/* Answer req with a JSON response (everything copied). */
static void
reply(struct ob_httpd_req *req, int status, const char *body, size_t len, bool replayed,
    int64_t retry_after_s, bool close)
{
	char extra[96];
	int n = 0;
	if (replayed)
		n += snprintf(extra + n, sizeof(extra) - (size_t)n, "Idempotent-Replayed: true\r\n");
	if (retry_after_s > 0)
		n += snprintf(extra + n, sizeof(extra) - (size_t)n, "Retry-After: %" PRId64 "\r\n",
		    retry_after_s);
	struct ob_httpd_res res = { .status = status,
		.content_type = body != NULL ? "application/json" : NULL, .body = body,
		.body_len = len, .headers = n > 0 ? extra : NULL, .close = close };
	ob_httpd_respond(req, &res);
}

static void
reply_error(struct ob_httpd_req *req, int status, const char *code, const char *msg,
    int64_t retry_after_s, bool close)
{
	struct api_response r = { 0 };
	api_error(&r, status, code, msg);
	reply(req, status, r.body, r.body ? strlen(r.body) : 0, false, retry_after_s, close);
	api_response_fini(&r);
}

/* 401 unless the request carries one of the tokens (RFC 6750). GET and
 * HEAD /healthz stay open for liveness probes. true: answered; false: go
 * on, in *scope (the token's scope; "" without tokens or a token). */
static bool
refuse_unauthorized(struct http_server *s, struct ob_httpd_req *req, const char **scope,
    const char **topics)
{
	*scope = "";
	*topics = NULL;
	if (s->cfg.tokens == NULL ||
	    (strcmp(req->path, "/healthz") == 0 &&
	        (strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0)))
		return false;
	enum producer_auth a = producer_tokens_check(s->cfg.tokens,
	    ob_httpd_req_header(req, "Authorization"), scope, topics);
	if (a == PRODUCER_AUTH_OK)
		return false;
	struct api_response r = { 0 };
	api_error(&r, 401, "unauthorized", a == PRODUCER_AUTH_MISSING
	    ? "an Authorization: Bearer token is required"
	    : "the bearer token is not valid");
	count(s, req->method, req->path, 401, false, req->t0_ns);
	struct ob_httpd_res res = { .status = 401, .content_type = "application/json",
		.body = r.body, .body_len = r.body ? strlen(r.body) : 0,
		.headers = a == PRODUCER_AUTH_MISSING
		    ? "WWW-Authenticate: Bearer realm=\"outbox-producer\"\r\n"
		    : "WWW-Authenticate: Bearer realm=\"outbox-producer\", error=\"invalid_token\"\r\n" };
	ob_httpd_respond(req, &res);
	api_response_fini(&r);
	return true;
}

/* The server's thread: check the token, queue the request, never block. */
static void
handle_cb(void *arg, struct ob_httpd_req *req)
{
	struct http_server *s = arg;
	const char *scope, *topics;
	if (refuse_unauthorized(s, req, &scope, &topics))
		return;
	pthread_mutex_lock(&s->mtx);
	if (s->stopping || s->qlen >= s->cfg.max_queue) {
		bool stopping = s->stopping;
		pthread_mutex_unlock(&s->mtx);
		count(s, req->method, req->path, 503, false, req->t0_ns);
		reply_error(req, 503, "overloaded",
		    stopping ? "the server is shutting down" : "too many requests waiting; retry later",
		    ob_retry_after_spread_s(1), stopping);
		return;
	}
	s->queue[(s->qhead + s->qlen) % s->cfg.max_queue] = (struct queued){ req, req->t0_ns, scope, topics };
	s->qlen++;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mtx);
}

static bool
queue_pop(struct http_server *s, struct queued *q)
{
	bool got = false;
	pthread_mutex_lock(&s->mtx);
	while (s->qlen == 0 && !s->stopping)
		pthread_cond_wait(&s->cv, &s->mtx);
	if (s->qlen > 0) {
		*q = s->queue[s->qhead];
		got = true;
		s->qhead = (s->qhead + 1) % s->cfg.max_queue;
		s->qlen--;
	}
	pthread_mutex_unlock(&s->mtx);
	return got;
}

static bool
ensure_conn(struct http_server *s, int i)
{
	char err[512], q[600];
	if (s->conns[i] != NULL && !ob_pg_broken(s->conns[i]))
		return true;
	set_up(s, i, false);
	if (s->conns[i] != NULL)
		PQfinish(s->conns[i]);
	s->conns[i] = NULL;
	/* err names the conninfo with its password redacted (ob_pg_connect). */
	if (producer_connect(s->cfg.db, &s->conns[i], err, sizeof(err)) != OB_OK) {
		ob_warn("producer.db.connect_failed", "thread=%d err=%s", i,
		    ob_log_q(err, q, sizeof(q)));
		return false;
	}
	set_up(s, i, true);
	return true;
}

static void
serve_one(struct http_server *s, int index, struct ob_httpd_req *req, int64_t t0,
    const char *scope, const char *topics)
{
	const char *method = req->method;
	/* The path and method are borrowed from req: count before answering. */
	if (!ensure_conn(s, index)) {
		count(s, method, req->path, 503, false, t0);
		reply_error(req, 503, "unavailable", "the database is unavailable; retry later",
		    ob_retry_after_spread_s(1), false);
		return;
	}
	struct api_request ar = { method, req->path, req->query,
		ob_httpd_req_header(req, "Idempotency-Key"),
		strcmp(method, "POST") == 0 ? req->body : NULL,
		strcmp(method, "POST") == 0 ? req->body_len : 0, scope, topics };
	struct api_response res;
	api_handle(s->conns[index], &s->cfg.api, &ar, &res);
	if (ob_pg_broken(s->conns[index]))
		set_up(s, index, false);
	/* A response lost by the fault counts with the status it would have had. */
	count(s, method, req->path, res.status, res.replayed, t0);
	if (res.drop) {
		/* Fault: the work is committed, the answer is lost. */
		struct ob_httpd_res lost = { .status = res.status, .drop = true };
		ob_httpd_respond(req, &lost);
	} else {
		reply(req, res.status, res.body, res.body ? strlen(res.body) : 0, res.replayed,
		    res.retry_after_s, false);
	}
	api_response_fini(&res);
}

static void *
worker_main(void *arg)
{
	struct worker_arg *w = arg;
	struct queued q;
	while (queue_pop(w->s, &q))
		serve_one(w->s, w->index, q.req, q.t0_ns, q.scope, q.topics);
	free(w);
	return NULL;
}

int
http_server_start(const struct http_server_config *cfg, struct http_server **out, char *err,
    size_t errlen)
{
	struct http_server *s = calloc(1, sizeof(*s));
	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		return OB_ENOMEM;
	}
	s->cfg = *cfg;
	pthread_mutex_init(&s->mtx, NULL);
	pthread_cond_init(&s->cv, NULL);
	s->queue = calloc((size_t)cfg->max_queue, sizeof(*s->queue));
	s->threads = calloc((size_t)cfg->threads, sizeof(*s->threads));
	s->conns = calloc((size_t)cfg->threads, sizeof(*s->conns));
	s->up = calloc((size_t)cfg->threads, sizeof(*s->up));
	if (s->queue == NULL || s->threads == NULL || s->conns == NULL || s->up == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (int i = 0; i < cfg->threads; i++) {
		/* the outbox schema must serve this producer; a 201 answers a
		 * commit that is on disk */
		if (producer_connect(cfg->db, &s->conns[i], err, errlen) != OB_OK)
			goto fail;
		set_up(s, i, true);
	}
	for (int i = 0; i < cfg->threads; i++) {
		struct worker_arg *w = malloc(sizeof(*w));
		if (w == NULL) {
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
		*w = (struct worker_arg){ s, i };
		if (pthread_create(&s->threads[i], NULL, worker_main, w) != 0) {
			free(w);
			snprintf(err, errlen, "cannot start a serving thread");
			goto fail;
		}
		s->nthreads++;
	}
	struct ob_httpd_config hc = {
		.url = cfg->url,
		.tls = cfg->tls,
		.name = "api",
		.limits = cfg->limits,
		.handler = handle_cb,
		.arg = s,
		.metrics = cfg->conn_metrics,
	};
	char why[400];
	if (ob_httpd_start(&hc, &s->httpd, why, sizeof(why)) != OB_OK) {
		snprintf(err, errlen, "--http %s", why);
		goto fail;
	}
	*out = s;
	return OB_OK;
fail:
	http_server_stop(s);
	return OB_ENET;
}

bool
http_server_ready(struct http_server *s)
{
	return atomic_load(&s->nup) > 0;
}

int
http_server_port(struct http_server *s)
{
	return ob_httpd_port(s->httpd);
}

void
http_server_stop(struct http_server *s)
{
	pthread_mutex_lock(&s->mtx);
	s->stopping = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mtx);
	for (int i = 0; i < s->nthreads; i++)
		pthread_join(s->threads[i], NULL);
	/* Every queued request was answered by the threads just joined;
	 * requests that arrived since got 503 (stopping). */
	ob_httpd_stop(s->httpd);
	for (int i = 0; s->conns != NULL && i < s->cfg.threads; i++)
		if (s->conns[i] != NULL)
			PQfinish(s->conns[i]);
	free(s->conns);
	free(s->up);
	free(s->threads);
	free(s->queue);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mtx);
	free(s);
}
