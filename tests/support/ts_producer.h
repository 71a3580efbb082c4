/*
 * ts_producer.h - test fixtures for the producer: `outbox-producer serve`
 * started on port 0 (its --ready-file says which port it got), raw HTTP to
 * it (ts_http: nng's client), so that a test can send exactly the headers
 * it wants, and a POST in a thread of its own.
 */
#ifndef OUTBOX_TS_PRODUCER_H
#define OUTBOX_TS_PRODUCER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct ts_producer_server {
	pid_t pid;
	char url[64];
	char log[256];
};

struct ts_producer_reply {
	int rv;           /* nng error, 0 when an answer came */
	int status;
	bool replayed;
	char retry_after[16];
	char body[4096];
};

/* A valid report body. */
#define TS_PRODUCER_BODY "{\"title\":\"Crash on save\",\"module\":\"editor\",\"severity\":\"high\"}"

/* Start serve on db with extra flags (NULL-terminated); waits until ready. */
void ts_producer_serve(const char *db, char *const extra[], struct ts_producer_server *s);

/* One raw exchange. key may be NULL (no header); body may be NULL. */
void ts_producer_http(const char *base, const char *method, const char *path, const char *key,
    const char *body, size_t body_len, struct ts_producer_reply *out);

/* ts_producer_http with `Authorization: Bearer token` (token NULL: none). */
void ts_producer_http_as(const char *base, const char *token, const char *method,
    const char *path, const char *key, const char *body, size_t body_len,
    struct ts_producer_reply *out);

/* POST /v1/reports. */
void ts_producer_post(const char *base, const char *key, const char *body,
    struct ts_producer_reply *out);

/* The TCP port of s->url. */
int ts_producer_port(const struct ts_producer_server *s);

/* The port of the --metrics endpoint of s (started with "--metrics",
 * "127.0.0.1:0"), read back from its log. */
int ts_producer_metrics_port(const struct ts_producer_server *s);

/* A raw HTTP/1.1 POST /v1/reports of body with Idempotency-Key key and the
 * extra header lines extra ("Name: v\r\n"..., or ""), Content-Length set,
 * into out. Returns its length (asserts it fits). */
size_t ts_producer_raw_post(char *out, size_t outlen, const char *key, const char *extra,
    const char *body);

/* A raw GET of target (exactly as given, "Connection: close") on port;
 * the answer into out. Returns its status (0: none). */
int ts_producer_raw_get(int port, const char *target, char *out, size_t outlen);

/* report_id of a JSON body (0 when none). */
long long ts_producer_report_id(const char *body);

/* The string member name of a JSON body into out ("" when none); returns out. */
const char *ts_producer_json_str(const char *body, const char *name, char *out, size_t outlen);

/* A POST in its own thread: pthread_create with ts_producer_poster_main,
 * then pthread_join. path NULL = /v1/reports, body NULL = TS_PRODUCER_BODY. */
struct ts_producer_poster {
	const char *url, *key;
	struct ts_producer_reply r;
	pthread_t t;
	const char *path, *body;
	int done; /* set (atomically) once r is filled: ts_producer_poster_done */
};
int ts_producer_poster_done(struct ts_producer_poster *p);
void *ts_producer_poster_main(void *arg);

#endif
