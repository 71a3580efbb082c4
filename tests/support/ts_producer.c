/*
 * ts_producer.c - the producer's test fixtures (ts_producer.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "testsupport.h"
#include "ts_producer.h"

/* Start serve on db with extra flags (NULL-terminated); waits until ready. */
void
ts_producer_serve(const char *db, char *const extra[], struct ts_producer_server *s)
{
	static int n;
	char ready[300];
	snprintf(ready, sizeof(ready), "%s/ready-%d-%d", ts_tmpdir(), (int)getpid(), ++n);
	char *argv[48] = { "outbox-producer", "serve", "--db", (char *)db, "--http",
		"http://127.0.0.1:0", "--ready-file", ready, "--threads", "4" };
	int argc = 10;
	for (int i = 0; extra != NULL && extra[i] != NULL && argc < 46; i++)
		argv[argc++] = extra[i];
	argv[argc] = NULL;
	s->pid = ts_spawn(argv, NULL, s->log);
	char *u = ts_wait_ready_file(ready, s->pid, s->log, 30000);
	snprintf(s->url, sizeof(s->url), "%s", u);
	free(u);
}

/* One raw exchange. key may be NULL (no header); body may be NULL. */
void
ts_producer_http(const char *base, const char *method, const char *path, const char *key,
    const char *body, size_t body_len, struct ts_producer_reply *out)
{
	ts_producer_http_as(base, NULL, method, path, key, body, body_len, out);
}

void
ts_producer_http_as(const char *base, const char *token, const char *method, const char *path,
    const char *key, const char *body, size_t body_len, struct ts_producer_reply *out)
{
	static const char *const want[] = { "Idempotent-Replayed", "Retry-After", NULL };
	char auth[400];
	const char *headers[5];
	int h = 0;
	if (key != NULL) {
		headers[h++] = "Idempotency-Key";
		headers[h++] = key;
	}
	if (token != NULL) {
		ck_assert((size_t)snprintf(auth, sizeof(auth), "Bearer %s", token) < sizeof(auth));
		headers[h++] = "Authorization";
		headers[h++] = auth;
	}
	headers[h] = NULL;
	char u[512];
	struct ts_http_res r;
	memset(out, 0, sizeof(*out));
	snprintf(u, sizeof(u), "%s%s", base, path);
	struct ts_http_req q = { .method = method, .url = u, .headers = h > 0 ? headers : NULL,
		.body = body, .body_len = body_len, .timeout_ms = 20000, .want = want };
	ts_http(&q, &r);
	out->rv = r.rv;
	if (r.rv == 0) {
		out->status = r.status;
		out->replayed = strcmp(r.got[0], "true") == 0;
		snprintf(out->retry_after, sizeof(out->retry_after), "%.*s",
		    (int)sizeof(out->retry_after) - 1, r.got[1]);
		snprintf(out->body, sizeof(out->body), "%s", r.body);
	}
	free(r.body);
}

void
ts_producer_post(const char *base, const char *key, const char *body, struct ts_producer_reply *out)
{
	ts_producer_http(base, "POST", "/v1/reports", key, body, body ? strlen(body) : 0, out);
}

int
ts_producer_port(const struct ts_producer_server *s)
{
	const char *colon = strrchr(s->url, ':');
	ck_assert_msg(colon != NULL, "no port in %s", s->url);
	return atoi(colon + 1);
}

int
ts_producer_metrics_port(const struct ts_producer_server *s)
{
	return ts_log_wait_port(s->log, "producer.metrics.listening", 30000);
}

size_t
ts_producer_raw_post(char *out, size_t outlen, const char *key, const char *extra,
    const char *body)
{
	int n = snprintf(out, outlen, "POST /v1/reports HTTP/1.1\r\nHost: 127.0.0.1\r\n"
	    "Idempotency-Key: %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
	    "%s\r\n%s", key, strlen(body), extra, body);
	ck_assert(n > 0 && (size_t)n < outlen);
	return (size_t)n;
}

int
ts_producer_raw_get(int port, const char *target, char *out, size_t outlen)
{
	char req[1024];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
	    "Connection: close\r\n\r\n", target);
	ck_assert(n > 0 && (size_t)n < sizeof(req));
	return ts_http_raw(port, req, (size_t)n, out, outlen, 10000);
}

/* report_id of a JSON body (0 when none). */
long long
ts_producer_report_id(const char *body)
{
	json_t *o = json_loads(body, 0, NULL);
	long long id = (long long)json_integer_value(json_object_get(o, "report_id"));
	json_decref(o);
	return id;
}

const char *
ts_producer_json_str(const char *body, const char *name, char *out, size_t outlen)
{
	json_t *o = json_loads(body, 0, NULL);
	const char *v = json_string_value(json_object_get(o, name));
	snprintf(out, outlen, "%s", v != NULL ? v : "");
	json_decref(o);
	return out;
}

void *
ts_producer_poster_main(void *arg)
{
	struct ts_producer_poster *p = arg;
	const char *body = p->body != NULL ? p->body : TS_PRODUCER_BODY;
	if (p->path == NULL)
		ts_producer_post(p->url, p->key, body, &p->r);
	else
		ts_producer_http(p->url, "POST", p->path, p->key, body, strlen(body), &p->r);
	__atomic_store_n(&p->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

int
ts_producer_poster_done(struct ts_producer_poster *p)
{
	return __atomic_load_n(&p->done, __ATOMIC_ACQUIRE);
}
