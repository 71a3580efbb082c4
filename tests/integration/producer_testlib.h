/*
 * producer_testlib.h - shared by the producer's integration tests: start
 * `outbox-producer serve` on a free port and talk raw HTTP to it (nng's
 * client), so that a test can send exactly the headers it wants.
 */
#ifndef OUTBOX_PRODUCER_TESTLIB_H
#define OUTBOX_PRODUCER_TESTLIB_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <jansson.h>
#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#include "testsupport.h"

struct pt_server {
	pid_t pid;
	char url[64];
	char log[256];
};

struct pt_reply {
	int rv;           /* nng error, 0 when an answer came */
	int status;
	bool replayed;
	char retry_after[16];
	char body[4096];
};

/* Start serve on db with extra flags (NULL-terminated); waits until ready. */
static inline void
pt_serve(const char *db, char *const extra[], struct pt_server *s)
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
	int64_t deadline = ts_now_ms() + 30000;
	char *u = NULL;
	while ((u = ts_read_file(ready)) == NULL && ts_now_ms() < deadline) {
		ck_assert_msg(ts_wait_exit(s->pid, 0) < 0, "serve exited early; log %s", s->log);
		usleep(10000);
	}
	ck_assert_msg(u != NULL, "serve did not become ready; log %s", s->log);
	u[strcspn(u, "\n")] = '\0';
	snprintf(s->url, sizeof(s->url), "%s", u);
	free(u);
}

/* One raw exchange. key may be NULL (no header); body may be NULL. */
static inline void
pt_http(const char *base, const char *method, const char *path, const char *key,
    const char *body, size_t body_len, struct pt_reply *out)
{
	char u[512];
	nng_url *url;
	nng_http_client *cli;
	nng_http_req *req;
	nng_http_res *res;
	nng_aio *aio;
	memset(out, 0, sizeof(*out));
	snprintf(u, sizeof(u), "%s%s", base, path);
	ck_assert_int_eq(nng_url_parse(&url, u), 0);
	ck_assert_int_eq(nng_http_client_alloc(&cli, url), 0);
	ck_assert_int_eq(nng_http_req_alloc(&req, url), 0);
	ck_assert_int_eq(nng_http_res_alloc(&res), 0);
	ck_assert_int_eq(nng_aio_alloc(&aio, NULL, NULL), 0);
	nng_http_req_set_method(req, method);
	if (key != NULL)
		nng_http_req_set_header(req, "Idempotency-Key", key);
	if (body != NULL)
		nng_http_req_copy_data(req, body, body_len);
	nng_aio_set_timeout(aio, 20000);
	nng_http_client_transact(cli, req, res, aio);
	nng_aio_wait(aio);
	out->rv = nng_aio_result(aio);
	if (out->rv == 0) {
		void *data;
		size_t len;
		out->status = nng_http_res_get_status(res);
		const char *h = nng_http_res_get_header(res, "Idempotent-Replayed");
		out->replayed = h != NULL && strcmp(h, "true") == 0;
		if ((h = nng_http_res_get_header(res, "Retry-After")) != NULL)
			snprintf(out->retry_after, sizeof(out->retry_after), "%s", h);
		nng_http_res_get_data(res, &data, &len);
		if (len >= sizeof(out->body))
			len = sizeof(out->body) - 1;
		memcpy(out->body, data, len);
		out->body[len] = '\0';
	}
	nng_aio_free(aio);
	nng_http_res_free(res);
	nng_http_req_free(req);
	nng_http_client_free(cli);
	nng_url_free(url);
}

static inline void
pt_post(const char *base, const char *key, const char *body, struct pt_reply *out)
{
	pt_http(base, "POST", "/v1/reports", key, body, body ? strlen(body) : 0, out);
}

/* report_id of a JSON body (0 when none). */
static inline long long
pt_report_id(const char *body)
{
	json_t *o = json_loads(body, 0, NULL);
	long long id = (long long)json_integer_value(json_object_get(o, "report_id"));
	json_decref(o);
	return id;
}

#define PT_BODY "{\"title\":\"Crash on save\",\"module\":\"editor\",\"severity\":\"high\"}"

#endif
