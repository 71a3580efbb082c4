/*
 * http_server.c - nng HTTP server + serving threads (see http_server.h).
 *
 * Routing (and 405 for a wrong method, 404 for an unknown path) is nng's;
 * requests that reach us go through one queue to the serving threads. A
 * POST body is read by the serving thread itself, after the Content-Length
 * has been checked against --max-body, so that an oversized body is
 * answered 413 without being read. "Lose the response" finishes the
 * request with an error, which makes nng close the connection without
 * writing a byte.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#include "http_server.h"
#include "metrics.h"
#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/log.h"
#include "outbox/pg.h"
#include "outbox/protocol.h"

/* Largest body nng collects for a GET (ignored, but read so that the
 * connection stays in sync). */
#define HTTP_GET_MAX_BODY 4096

/* A request waiting for a serving thread. */
struct queued {
	nng_aio *aio;
	int64_t t0_ns;      /* CLOCK_MONOTONIC when nng handed it over */
};

struct http_server {
	struct http_server_config cfg;
	nng_http_server *http;
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

/* Finish aio with a JSON response; takes nothing, allocates the response. */
static void
reply(nng_aio *aio, int status, const char *body, size_t len, bool replayed,
    int64_t retry_after_s, bool close)
{
	nng_http_res *res;
	char ra[24];
	if (nng_http_res_alloc(&res) != 0) {
		nng_aio_finish(aio, NNG_ENOMEM);
		return;
	}
	nng_http_res_set_status(res, (uint16_t)status);
	/* Reason phrases nng 1.5 does not know. */
	if (status == 413)
		nng_http_res_set_reason(res, "Content Too Large");
	else if (status == 422)
		nng_http_res_set_reason(res, "Unprocessable Content");
	if (body != NULL) {
		nng_http_res_set_header(res, "Content-Type", "application/json");
		nng_http_res_copy_data(res, body, len);
	}
	if (replayed)
		nng_http_res_set_header(res, "Idempotent-Replayed", "true");
	if (retry_after_s > 0) {
		snprintf(ra, sizeof(ra), "%" PRId64, retry_after_s);
		nng_http_res_set_header(res, "Retry-After", ra);
	}
	if (close)
		nng_http_res_set_header(res, "Connection", "close");
	nng_aio_set_output(aio, 0, res);
	nng_aio_finish(aio, 0);
}

static void
reply_error(nng_aio *aio, int status, const char *code, const char *msg, int64_t retry_after_s,
    bool close)
{
	struct api_response r = { 0 };
	api_error(&r, status, code, msg);
	reply(aio, status, r.body, r.body ? strlen(r.body) : 0, false, retry_after_s, close);
	api_response_fini(&r);
}

/* nng's callback: queue the request, never block. */
static void
handle_cb(nng_aio *aio)
{
	nng_http_handler *h = nng_aio_get_input(aio, 1);
	struct http_server *s = nng_http_handler_get_data(h);
	int64_t t0 = ob_mono_ns();
	pthread_mutex_lock(&s->mtx);
	if (s->stopping || s->qlen >= s->cfg.max_queue) {
		bool stopping = s->stopping;
		pthread_mutex_unlock(&s->mtx);
		nng_http_req *req = nng_aio_get_input(aio, 0);
		/* The route comes from the path without its query string. */
		char path[64];
		snprintf(path, sizeof(path), "%s", nng_http_req_get_uri(req));
		path[strcspn(path, "?")] = '\0';
		count(s, nng_http_req_get_method(req), path, 503, false, t0);
		reply_error(aio, 503, "overloaded",
		    stopping ? "the server is shutting down" : "too many requests waiting; retry later",
		    1, stopping);
		return;
	}
	s->queue[(s->qhead + s->qlen) % s->cfg.max_queue] = (struct queued){ aio, t0 };
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

/* Read a POST body of the announced length. 0 on success (*body owned),
 * else the HTTP status to answer. */
static int
read_body(struct http_server *s, nng_http_req *req, nng_http_conn *hc, char **body,
    size_t *len, const char **why)
{
	const char *cl = nng_http_req_get_header(req, "Content-Length");
	*body = NULL;
	*len = 0;
	if (cl == NULL) {
		const char *te = nng_http_req_get_header(req, "Transfer-Encoding");
		if (te != NULL) {
			*why = "Content-Length is required (chunked bodies are not accepted)";
			return 411;
		}
		return 0; /* empty body: the JSON check says what is missing */
	}
	char *end;
	errno = 0;
	unsigned long long n = strtoull(cl, &end, 10);
	if (end == cl || *end != '\0' || errno != 0 || cl[0] == '-') {
		*why = "Content-Length is not a number";
		return 400;
	}
	if (n > (unsigned long long)s->cfg.max_body) {
		*why = "the body is larger than --max-body";
		return 413;
	}
	if (n == 0)
		return 0;
	char *buf = malloc(n + 1);
	nng_aio *aio = NULL;
	if (buf == NULL || nng_aio_alloc(&aio, NULL, NULL) != 0) {
		free(buf);
		*why = "out of memory";
		return 500;
	}
	nng_iov iov = { buf, n };
	nng_aio_set_iov(aio, 1, &iov);
	nng_aio_set_timeout(aio, (nng_duration)s->cfg.read_timeout_ms);
	nng_http_conn_read_all(hc, aio);
	nng_aio_wait(aio);
	int rv = nng_aio_result(aio);
	nng_aio_free(aio);
	if (rv != 0) {
		free(buf);
		*why = "could not read the body";
		return 408;
	}
	buf[n] = '\0';
	*body = buf;
	*len = n;
	return 0;
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
	if (ob_pg_connect(s->cfg.db, "outbox-producer", &s->conns[i], err, sizeof(err)) != OB_OK ||
	    ob_protocol_check(s->conns[i], "outbox", "producer", OB_PROTOCOL_PRODUCER, err,
	        sizeof(err)) != OB_OK) {
		ob_warn("producer.db.connect_failed", "thread=%d err=%s", i,
		    ob_log_q(err, q, sizeof(q)));
		if (s->conns[i] != NULL)
			PQfinish(s->conns[i]);
		s->conns[i] = NULL;
		return false;
	}
	set_up(s, i, true);
	return true;
}

static void
serve_one(struct http_server *s, int index, nng_aio *aio, int64_t t0)
{
	nng_http_req *req = nng_aio_get_input(aio, 0);
	nng_http_conn *hc = nng_aio_get_input(aio, 2);
	const char *method = nng_http_req_get_method(req);
	char *body = NULL;
	size_t len = 0;
	const char *why = NULL;
	char *uri = strdup(nng_http_req_get_uri(req));
	if (uri == NULL) {
		nng_aio_finish(aio, NNG_ENOMEM);
		return;
	}
	char *query = strchr(uri, '?');
	if (query != NULL)
		*query++ = '\0';

	if (strcmp(method, "POST") == 0) {
		int st = read_body(s, req, hc, &body, &len, &why);
		if (st != 0) {
			/* The body was not read: the connection cannot be reused. */
			count(s, method, uri, st, false, t0);
			reply_error(aio, st, st == 413 ? "body_too_large" : "bad_request", why, 0, true);
			free(uri);
			return;
		}
	} else {
		void *data;
		nng_http_req_get_data(req, &data, &len);
		len = 0; /* ignored */
	}
	if (!ensure_conn(s, index)) {
		count(s, method, uri, 503, false, t0);
		reply_error(aio, 503, "unavailable", "the database is unavailable; retry later", 1,
		    false);
		free(body);
		free(uri);
		return;
	}
	struct api_request ar = { method, uri, query,
		nng_http_req_get_header(req, "Idempotency-Key"), body, len };
	struct api_response res;
	api_handle(s->conns[index], &s->cfg.api, &ar, &res);
	if (ob_pg_broken(s->conns[index]))
		set_up(s, index, false);
	/* A response lost by the fault counts with the status it would have had. */
	count(s, method, uri, res.status, res.replayed, t0);
	if (res.drop) {
		/* Fault: the work is committed, the answer is lost. */
		nng_aio_finish(aio, NNG_ECONNRESET);
	} else {
		reply(aio, res.status, res.body, res.body ? strlen(res.body) : 0, res.replayed,
		    res.retry_after_s, false);
	}
	api_response_fini(&res);
	free(body);
	free(uri);
}

static void *
worker_main(void *arg)
{
	struct worker_arg *w = arg;
	struct queued q;
	while (queue_pop(w->s, &q))
		serve_one(w->s, w->index, q.aio, q.t0_ns);
	free(w);
	return NULL;
}

static int
add_handler(struct http_server *s, const char *uri, const char *method, bool tree,
    bool read_body_ourselves, char *err, size_t errlen)
{
	nng_http_handler *h = NULL;
	int rv = nng_http_handler_alloc(&h, uri, handle_cb);
	if (rv == 0 && (rv = nng_http_handler_set_method(h, method)) == 0 &&
	    (rv = nng_http_handler_collect_body(h, !read_body_ourselves,
	         read_body_ourselves ? 0 : HTTP_GET_MAX_BODY)) == 0 &&
	    (!tree || (rv = nng_http_handler_set_tree(h)) == 0) &&
	    (rv = nng_http_handler_set_data(h, s, NULL)) == 0 &&
	    (rv = nng_http_server_add_handler(s->http, h)) == 0)
		return OB_OK;
	if (h != NULL)
		nng_http_handler_free(h);
	snprintf(err, errlen, "http handler %s %s: %s", method, uri, nng_strerror(rv));
	return OB_ENET;
}

int
http_server_start(const struct http_server_config *cfg, struct http_server **out, char *err,
    size_t errlen)
{
	struct http_server *s = calloc(1, sizeof(*s));
	nng_url *url = NULL;
	int rv;
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
		/* the outbox schema must serve this producer (protocol.h) */
		if (ob_pg_connect(cfg->db, "outbox-producer", &s->conns[i], err, errlen) != OB_OK ||
		    ob_protocol_check(s->conns[i], "outbox", "producer", OB_PROTOCOL_PRODUCER, err,
		        errlen) != OB_OK)
			goto fail;
		set_up(s, i, true);
	}
	if ((rv = nng_url_parse(&url, cfg->url)) != 0 || strcmp(url->u_scheme, "http") != 0) {
		snprintf(err, errlen, "--http %s: not an http://HOST:PORT URL", cfg->url);
		goto fail;
	}
	if ((rv = nng_http_server_hold(&s->http, url)) != 0) {
		snprintf(err, errlen, "--http %s: %s", cfg->url, nng_strerror(rv));
		goto fail;
	}
	if (add_handler(s, "/v1/reports", "POST", false, true, err, errlen) != OB_OK ||
	    add_handler(s, "/v1/reports", "GET", true, false, err, errlen) != OB_OK ||
	    add_handler(s, "/healthz", "GET", false, false, err, errlen) != OB_OK)
		goto fail;
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
	if ((rv = nng_http_server_start(s->http)) != 0) {
		snprintf(err, errlen, "--http %s: %s", cfg->url, nng_strerror(rv));
		goto fail;
	}
	nng_url_free(url);
	*out = s;
	return OB_OK;
fail:
	if (url != NULL)
		nng_url_free(url);
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
	nng_sockaddr sa;
	if (nng_http_server_get_addr(s->http, &sa) != 0)
		return -1;
	if (sa.s_family == NNG_AF_INET)
		return ntohs(sa.s_in.sa_port);
	if (sa.s_family == NNG_AF_INET6)
		return ntohs(sa.s_in6.sa_port);
	return -1;
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
	if (s->http != NULL) {
		nng_http_server_stop(s->http);
		nng_http_server_release(s->http);
	}
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
