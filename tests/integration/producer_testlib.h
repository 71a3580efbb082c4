/*
 * producer_testlib.h - shared by the producer's integration tests: start
 * `outbox-producer serve` on port 0 (its --ready-file says which port it
 * got) and talk raw HTTP to it (ts_http: nng's client), so that a test can
 * send exactly the headers it wants.
 */
#ifndef OUTBOX_PRODUCER_TESTLIB_H
#define OUTBOX_PRODUCER_TESTLIB_H

#include <pthread.h>
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
	char *u = ts_wait_ready_file(ready, s->pid, s->log, 30000);
	snprintf(s->url, sizeof(s->url), "%s", u);
	free(u);
}

/* One raw exchange. key may be NULL (no header); body may be NULL. */
static inline void
pt_http(const char *base, const char *method, const char *path, const char *key,
    const char *body, size_t body_len, struct pt_reply *out)
{
	static const char *const want[] = { "Idempotent-Replayed", "Retry-After", NULL };
	const char *const headers[] = { "Idempotency-Key", key, NULL };
	char u[512];
	struct ts_http_res r;
	memset(out, 0, sizeof(*out));
	snprintf(u, sizeof(u), "%s%s", base, path);
	struct ts_http_req q = { .method = method, .url = u, .headers = key ? headers : NULL,
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

/* A POST of PT_BODY in its own thread (pt_post_start / pthread_join). */
struct pt_poster {
	const char *url, *key;
	struct pt_reply r;
	pthread_t t;
};

static inline void *
pt_poster_main(void *arg)
{
	struct pt_poster *p = arg;
	pt_post(p->url, p->key, PT_BODY, &p->r);
	return NULL;
}

/* Wait (30 s at most) until the log at path holds needle; assert it does. */
static inline void
pt_wait_log(const char *path, const char *needle)
{
	ck_assert_msg(ts_log_wait(path, needle, 1, 30000) >= 1, "%s never logged %s", path,
	    needle);
}

#endif
