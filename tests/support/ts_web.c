/*
 * ts_web.c - test fixtures for `outboxctl web` (ts_web.h).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ts_web.h"

#define TS_WEB_READY_MS 30000

void
ts_web_start(const char *db, const char *const *extra, struct ts_web *w)
{
	static int n;
	char ready[256];
	snprintf(ready, sizeof ready, "%s/web-ready-%d-%d", ts_tmpdir(), (int)getpid(), ++n);
	char *argv[64] = { "outboxctl", "web", "--db", (char *)db, "--http",
		"http://127.0.0.1:0", "--ready-file", ready };
	int argc = 8;
	for (int i = 0; extra != NULL && extra[i] != NULL; i++) {
		ck_assert_msg(argc < 62, "too many flags");
		argv[argc++] = (char *)extra[i];
	}
	argv[argc] = NULL;
	memset(w, 0, sizeof *w);
	w->pid = ts_spawn(argv, NULL, w->log);
	char *u = ts_wait_ready_file(ready, w->pid, w->log, TS_WEB_READY_MS);
	snprintf(w->url, sizeof w->url, "%s", u);
	free(u);
	const char *colon = strrchr(w->url, ':');
	ck_assert_ptr_nonnull(colon);
	w->port = atoi(colon + 1);
	ck_assert_int_gt(w->port, 0);
}

void
ts_web_stop(struct ts_web *w)
{
	if (w->pid <= 0)
		return;
	kill(w->pid, SIGTERM);
	int code = ts_wait_exit(w->pid, 10000);
	if (code == -1)
		ts_stop(w->pid, SIGKILL);
	w->pid = 0;
	ck_assert_msg(code == 0, "outboxctl web exited %d (log %s)", code, w->log);
}

int
ts_web_http(const struct ts_web *w, const char *method, const char *path, const char *token,
    const char *body, const char *const *want, struct ts_http_res *res)
{
	char url[512], auth[512];
	const char *headers[5];
	int h = 0;
	snprintf(url, sizeof url, "%s%s", w->url, path);
	if (token != NULL) {
		snprintf(auth, sizeof auth, "Bearer %s", token);
		headers[h++] = "Authorization";
		headers[h++] = auth;
	}
	if (body != NULL && body[0] == '\0')
		body = NULL; /* nng sends no empty body */
	if (body != NULL) {
		headers[h++] = "Content-Type";
		headers[h++] = "application/json";
	}
	headers[h] = NULL;
	struct ts_http_req q = { .method = method, .url = url, .headers = headers,
		.body = body, .body_len = body != NULL ? strlen(body) : 0, .timeout_ms = 20000,
		.want = want };
	return ts_http(&q, res);
}

char *
ts_web_overview(const struct ts_web *w, const char *token, int timeout_ms)
{
	int64_t end = ts_now_ms() + timeout_ms;
	for (;;) {
		struct ts_http_res r;
		int st = ts_web_http(w, "GET", "/api/overview", token, NULL, NULL, &r);
		if (st == 200)
			return r.body;
		free(r.body);
		ck_assert_msg(ts_now_ms() < end, "no snapshot from outboxctl web within %d ms"
		    " (last status %d, log %s)", timeout_ms, st, w->log);
		usleep(50 * 1000);
	}
}
