/*
 * web_server.c - the routes of `outboxctl web` on common/httpd.c (web.h,
 * docs/web.md): the page, GET /api/overview (a copy of the poller's latest
 * snapshot: no query per request), POST /api/dead/requeue (on the requeue
 * thread, never on the server's), and the demonstration's /api/demo*.
 *
 * Every answer carries Cache-Control: no-store and the page's strict
 * Content-Security-Policy; errors are JSON {"error": "..."}: unknown paths
 * 404, a known path with another method 405 (with Allow), a body over
 * --max-body 413 (answered by httpd before it is read). A GET changes
 * nothing anywhere; only a requeue writes, with the token.
 *
 * Never: block the server's thread (no database, no file, no waiting); put
 * a stored text anywhere but inside a JSON string.
 */
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_util.h"
#include "outbox/err.h"
#include "outbox/httpd.h"
#include "outbox/log.h"
#include "outbox/pg.h"
#include "outbox/protocol.h"
#include "requeue.h"
#include "web.h"
#include "web_assets.h"
#include "web_demo.h"
#include "web_json.h"

/* Connection limits of the view (the operator's endpoint's, as in
 * outbox/http_endpoint.h: a page polls, it does not stream uploads). */
#define WEB_IDLE_MS 10000
#define WEB_HEADER_MS 5000
#define WEB_REQUEST_MS 10000
#define WEB_WRITE_MS 10000
#define WEB_MAX_HEADER 8192

#define CSP "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self';" \
	" img-src 'self'; base-uri 'none'; frame-ancestors 'none'"
#define COMMON_HEADERS "Cache-Control: no-store\r\nContent-Security-Policy: " CSP "\r\n" \
	"X-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n"
#define JSON_TYPE "application/json"

/* One requeue waiting for (or on) the requeue thread. */
struct requeue_job {
	struct ob_httpd_req *req;
	char **ids;
	int nids;
};

struct web_server {
	struct web_server_config cfg;
	struct ob_httpd *httpd;
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct requeue_job *job; /* under mu: the one requeue at a time */
	bool busy;               /* under mu: a job taken and not yet answered */
	bool stop;               /* under mu */
};

static void
respond(struct ob_httpd_req *req, int status, const char *type, const char *body, size_t len,
    const char *extra)
{
	char headers[1024];
	snprintf(headers, sizeof headers, COMMON_HEADERS "%s", extra != NULL ? extra : "");
	struct ob_httpd_res res = { .status = status, .content_type = type, .body = body,
		.body_len = len, .headers = headers };
	ob_httpd_respond(req, &res);
}

/* {"error": why} with status. */
static void
respond_error(struct ob_httpd_req *req, int status, const char *why, const char *extra)
{
	json_t *j = json_pack("{ss}", "error", why);
	size_t len = 0;
	char *s = j != NULL ? web_json_text(j, &len) : NULL;
	json_decref(j);
	respond(req, status, JSON_TYPE, s != NULL ? s : "{}", s != NULL ? len : 2, extra);
	free(s);
}

static void
respond_json(struct ob_httpd_req *req, int status, json_t *j)
{
	size_t len = 0;
	char *s = web_json_text(j, &len);
	if (s == NULL) {
		respond_error(req, 500, "out of memory", NULL);
		return;
	}
	respond(req, status, JSON_TYPE, s, len, NULL);
	free(s);
}

static bool
authorized(const struct web_server *s, const struct ob_httpd_req *req)
{
	return s->cfg.token != NULL &&
	    web_token_check(s->cfg.token, ob_httpd_req_header(req, "Authorization"));
}

/* The token check of a writing request: false after answering 403 (no
 * --token-file: disabled) or 401 (none, or a wrong one). */
static bool
require_token(struct web_server *s, struct ob_httpd_req *req, const char *what)
{
	char why[160];
	if (s->cfg.token == NULL) {
		snprintf(why, sizeof why, "%s is disabled: outboxctl web was started without"
		    " --token-file", what);
		respond_error(req, 403, why, NULL);
		return false;
	}
	if (!authorized(s, req)) {
		snprintf(why, sizeof why, "%s needs the token: Authorization: Bearer TOKEN"
		    " (--token-file)", what);
		ob_info("web.auth.refused", "path=%s", req->path);
		respond_error(req, 401, why, "WWW-Authenticate: Bearer\r\n");
		return false;
	}
	return true;
}

/* ---- requeue --------------------------------------------------------- */

static void
job_free(struct requeue_job *job)
{
	if (job == NULL)
		return;
	for (int i = 0; i < job->nids; i++)
		free(job->ids[i]);
	free(job->ids);
	free(job);
}

/* The requeue thread takes the next job from now on: called just before
 * a job's answer goes out, so that a client that sends the next requeue
 * as soon as it has the answer never finds the thread still busy (it got
 * 503 "a requeue is running" in test_web's run of a clean clone). */
static void
requeue_idle(struct web_server *s)
{
	pthread_mutex_lock(&s->mu);
	s->busy = false;
	pthread_mutex_unlock(&s->mu);
}

/* Run job and answer its request (once, whatever happens). */
static void
run_requeue(struct web_server *s, struct requeue_job *job)
{
	char err[1024], sql[96];
	PGconn *conn = NULL;
	struct ctl_requeue_req rq = { job->ids, job->nids, false, NULL, s->cfg.retention_ms,
		false };
	struct ctl_requeue_result r;

	snprintf(sql, sizeof sql, "SET statement_timeout = %" PRId64, s->cfg.statement_timeout_ms);
	if (ob_pg_connect(s->cfg.requeue_db, "outboxctl web requeue", &conn, err, sizeof err)
	        != OB_OK ||
	    ctl_need_session(conn, err, sizeof err) != OB_OK ||
	    ob_pg_exec(conn, sql, "set session", err, sizeof err) != OB_OK ||
	    ob_pg_durable_commits(conn, err, sizeof err) != OB_OK ||
	    /* outboxctl's rights (outbox_admin), or a line saying which grant */
	    ob_protocol_check(conn, "outbox", "admin", OB_PROTOCOL_ADMIN, err, sizeof err)
	        != OB_OK ||
	    ctl_requeue(conn, &rq, &r, err, sizeof err) != OB_OK) {
		ob_warn("web.requeue.failed", "ids=%d err=%s", job->nids,
		    ob_log_q(err, (char[600]){ 0 }, 600));
		requeue_idle(s);
		respond_error(job->req, 503, err, NULL);
		if (conn != NULL)
			PQfinish(conn);
		return;
	}
	PQfinish(conn);
	json_t *done = json_array(), *refused = json_array();
	for (int i = 0; i < r.nrequeued; i++)
		json_array_append_new(done, json_integer(r.requeued[i]));
	for (int i = 0; i < r.nrefused; i++)
		json_array_append_new(refused, json_pack("{sIss}", "id",
		    (json_int_t)r.refused[i].id, "reason", r.refused[i].reason));
	ob_info("web.requeue", "ids=%d requeued=%d refused=%d", job->nids, r.nrequeued,
	    r.nrefused);
	json_t *body = json_pack("{soso}", "requeued", done, "refused", refused);
	/* all or nothing: a refusal means nothing changed */
	requeue_idle(s);
	respond_json(job->req, r.nrefused > 0 ? 409 : 200, body);
	json_decref(body);
	ctl_requeue_result_free(&r);
}

static void *
requeue_main(void *arg)
{
	struct web_server *s = arg;
	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (s->job == NULL && !s->stop)
			pthread_cond_wait(&s->cv, &s->mu);
		if (s->job == NULL)
			break; /* stopping, nothing left */
		struct requeue_job *job = s->job;
		s->job = NULL;
		pthread_mutex_unlock(&s->mu);
		run_requeue(s, job); /* busy ends before its answer goes out */
		job_free(job);
		pthread_mutex_lock(&s->mu);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* POST /api/dead/requeue {"ids": [ID, ...]}: checked here (cheap), run on
 * the requeue thread. */
static void
post_requeue(struct web_server *s, struct ob_httpd_req *req)
{
	char why[160];
	if (!require_token(s, req, "requeue"))
		return;
	json_error_t e;
	json_t *j = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &e);
	json_t *ids = json_object_get(j, "ids");
	if (!json_is_object(j) || !json_is_array(ids) || json_object_size(j) != 1) {
		respond_error(req, 400, "want a JSON body {\"ids\": [ID, ...]}", NULL);
		json_decref(j);
		return;
	}
	size_t n = json_array_size(ids);
	if (n == 0 || (int64_t)n > s->cfg.requeue_ids_max) {
		snprintf(why, sizeof why, "want 1 to %" PRId64 " ids, got %zu",
		    s->cfg.requeue_ids_max, n);
		respond_error(req, 400, why, NULL);
		json_decref(j);
		return;
	}
	struct requeue_job *job = calloc(1, sizeof *job);
	if (job == NULL || (job->ids = calloc(n, sizeof *job->ids)) == NULL) {
		free(job);
		json_decref(j);
		respond_error(req, 500, "out of memory", NULL);
		return;
	}
	job->req = req;
	for (size_t i = 0; i < n; i++) {
		json_t *v = json_array_get(ids, i);
		char text[24];
		if (!json_is_integer(v) || json_integer_value(v) < 1) {
			respond_error(req, 400, "every id is a positive integer", NULL);
			json_decref(j);
			job_free(job);
			return;
		}
		snprintf(text, sizeof text, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		if ((job->ids[i] = strdup(text)) == NULL) {
			respond_error(req, 500, "out of memory", NULL);
			json_decref(j);
			job_free(job);
			return;
		}
		job->nids++;
	}
	json_decref(j);
	pthread_mutex_lock(&s->mu);
	bool taken = !s->busy && !s->stop;
	if (taken) {
		s->busy = true;
		s->job = job;
		pthread_cond_signal(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	if (!taken) {
		job_free(job);
		respond_error(req, 503, "a requeue is running: try again", "Retry-After: 1\r\n");
	}
}

/* ---- the demonstration ----------------------------------------------- */

static void
get_demo(struct web_server *s, struct ob_httpd_req *req)
{
#ifdef OUTBOX_WEB_DEMO
	size_t len = 0;
	char *state = web_json_escape_markup(web_demo_state_json(s->cfg.demo), &len);
	if (state == NULL) {
		respond_error(req, 500, "out of memory", NULL);
		return;
	}
	respond(req, 200, JSON_TYPE, state, len, NULL);
	free(state);
#else
	(void)s;
	respond_error(req, 404, "no demonstration in this build", NULL);
#endif
}

/* POST /api/demo/step/N */
static void
post_demo_step(struct web_server *s, struct ob_httpd_req *req, const char *ntext)
{
	int64_t n;
	if (!ctl_parse_id(ntext, &n) || n > 1000) {
		respond_error(req, 404, "no such step", NULL);
		return;
	}
	if (!require_token(s, req, "running a demonstration step"))
		return;
#ifdef OUTBOX_WEB_DEMO
	int rc = web_demo_start(s->cfg.demo, (int)n);
	if (rc == OB_OK) {
		json_t *j = json_pack("{sI}", "started", (json_int_t)n);
		respond_json(req, 202, j);
		json_decref(j);
	} else if (rc == OB_EEXIST) {
		respond_error(req, 409, "a step or tool is running", NULL);
	} else {
		respond_error(req, 404, "no such step", NULL);
	}
#else
	respond_error(req, 404, "no demonstration in this build", NULL);
#endif
}

/* POST /api/demo/tool/NAME with the tool's parameters (a JSON object) */
static void
post_demo_tool(struct web_server *s, struct ob_httpd_req *req, const char *name)
{
#ifdef OUTBOX_WEB_DEMO
	if (!web_demo_has_tool(name)) {
		respond_error(req, 404, "no such tool", NULL);
		return;
	}
	if (!require_token(s, req, "running a demonstration tool"))
		return;
	char why[300];
	int rc = web_demo_start_tool(s->cfg.demo, name, req->body, req->body_len, why,
	    sizeof why);
	if (rc == OB_OK) {
		json_t *j = json_pack("{ss}", "started", name);
		respond_json(req, 202, j);
		json_decref(j);
	} else if (rc == OB_EEXIST) {
		respond_error(req, 409, "a step or tool is running", NULL);
	} else if (rc == OB_EINVAL) {
		respond_error(req, 400, why, NULL);
	} else {
		respond_error(req, 500, "out of memory", NULL);
	}
#else
	(void)s;
	(void)name;
	respond_error(req, 404, "no demonstration in this build", NULL);
#endif
}

/* ---- routing ---------------------------------------------------------- */

static void
method_not_allowed(struct ob_httpd_req *req, const char *allow)
{
	char extra[64], why[96];
	snprintf(extra, sizeof extra, "Allow: %s\r\n", allow);
	snprintf(why, sizeof why, "method not allowed: use %s", allow);
	respond_error(req, 405, why, extra);
}

static bool
is_get(const struct ob_httpd_req *req)
{
	return strcmp(req->method, "GET") == 0;
}

static void
handle(void *arg, struct ob_httpd_req *req)
{
	struct web_server *s = arg;
	const char *path = req->path;
	static const char step_prefix[] = "/api/demo/step/";
	static const char tool_prefix[] = "/api/demo/tool/";

	/* the page */
	const char *asset = strcmp(path, "/") == 0 ? "/index.html" : path;
	for (const struct web_asset *a = web_assets; a->path != NULL; a++) {
		if (strcmp(a->path, asset) != 0)
			continue;
		if (!is_get(req))
			method_not_allowed(req, "GET");
		else
			respond(req, 200, a->content_type, a->bytes, a->len, NULL);
		return;
	}
	if (strcmp(path, "/api/overview") == 0) {
		if (!is_get(req)) {
			method_not_allowed(req, "GET");
			return;
		}
		/* payloads: on loopback, or to the token's holder */
		bool payloads = s->cfg.loopback || authorized(s, req);
		size_t len = 0;
		char *snap = web_poll_snapshot(s->cfg.poll, payloads, &len);
		if (snap == NULL) {
			respond_error(req, 503, "no snapshot yet: the poller has not read the database"
			    " (see the log)", "Retry-After: 1\r\n");
			return;
		}
		respond(req, 200, JSON_TYPE, snap, len, NULL);
		free(snap);
		return;
	}
	if (strcmp(path, "/api/dead/requeue") == 0) {
		if (strcmp(req->method, "POST") != 0)
			method_not_allowed(req, "POST");
		else
			post_requeue(s, req);
		return;
	}
	if (s->cfg.demo != NULL && strcmp(path, "/api/demo") == 0) {
		if (!is_get(req))
			method_not_allowed(req, "GET");
		else
			get_demo(s, req);
		return;
	}
	if (s->cfg.demo != NULL && strncmp(path, step_prefix, sizeof step_prefix - 1) == 0) {
		if (strcmp(req->method, "POST") != 0)
			method_not_allowed(req, "POST");
		else
			post_demo_step(s, req, path + sizeof step_prefix - 1);
		return;
	}
	if (s->cfg.demo != NULL && strncmp(path, tool_prefix, sizeof tool_prefix - 1) == 0) {
		if (strcmp(req->method, "POST") != 0)
			method_not_allowed(req, "POST");
		else
			post_demo_tool(s, req, path + sizeof tool_prefix - 1);
		return;
	}
	respond_error(req, 404, "not found", NULL);
}

int
web_server_start(const struct web_server_config *cfg, struct web_server **out, char *err,
    size_t errlen)
{
	struct web_server *s = calloc(1, sizeof *s);
	char why[400];

	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		return OB_ENOMEM;
	}
	s->cfg = *cfg;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	if (pthread_create(&s->thread, NULL, requeue_main, s) != 0) {
		snprintf(err, errlen, "cannot start the requeue thread");
		web_server_stop(s);
		return OB_ENOMEM;
	}
	s->thread_started = true;
	struct ob_httpd_config hc = {
		.url = cfg->url,
		.name = "web",
		.limits = {
			.max_conns = (int)cfg->max_conns,
			.idle_timeout_ms = WEB_IDLE_MS,
			.header_timeout_ms = WEB_HEADER_MS,
			.request_timeout_ms = WEB_REQUEST_MS,
			.write_timeout_ms = WEB_WRITE_MS,
			.max_header = WEB_MAX_HEADER,
			.max_body = (size_t)cfg->max_body,
		},
		.handler = handle,
		.arg = s,
	};
	int rc = ob_httpd_start(&hc, &s->httpd, why, sizeof why);
	if (rc != OB_OK) {
		snprintf(err, errlen, "--http %s", why);
		web_server_stop(s);
		return rc;
	}
	*out = s;
	return OB_OK;
}

int
web_server_port(const struct web_server *s)
{
	return ob_httpd_port(s->httpd);
}

void
web_server_stop(struct web_server *s)
{
	if (s == NULL)
		return;
	/* the requeue in progress answers first: httpd wants every request
	 * answered before it stops */
	if (s->thread_started) {
		pthread_mutex_lock(&s->mu);
		s->stop = true;
		pthread_cond_signal(&s->cv);
		pthread_mutex_unlock(&s->mu);
		pthread_join(s->thread, NULL);
	}
	ob_httpd_stop(s->httpd);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
}
