/*
 * ts_web.h - test fixtures for the web view: `outboxctl web` started on
 * port 0 (its --ready-file says which port it got) and HTTP to it with or
 * without the bearer token (nng's client, ts_http).
 */
#ifndef OUTBOX_TS_WEB_H
#define OUTBOX_TS_WEB_H

#include <stdbool.h>
#include <sys/types.h>

#include "testsupport.h"

struct ts_web {
	pid_t pid;
	char url[64];
	int port;
	char log[256];
};

/* Start `outboxctl web --db db --http http://127.0.0.1:0` with extra flags
 * (NULL-ended, may be NULL); waits until it serves. Stop with ts_web_stop. */
void ts_web_start(const char *db, const char *const *extra, struct ts_web *w);

/* SIGTERM; asserts it exits 0 within 10 s. */
void ts_web_stop(struct ts_web *w);

/* method path with body (NULL or "": none) and `Authorization: Bearer token`
 * (token NULL: none); the response (want: header names to copy, may be
 * NULL) into res (free res->body). Returns the status. */
int ts_web_http(const struct ts_web *w, const char *method, const char *path,
    const char *token, const char *body, const char *const *want, struct ts_http_res *res);

/* GET /api/overview until it answers 200 (the first snapshot), up to
 * timeout_ms; returns its body (malloc'd). */
char *ts_web_overview(const struct ts_web *w, const char *token, int timeout_ms);

#endif
