/*
 * target.h - outbox-herd --target: the strategies against the real system.
 * N client threads each make ONE logical call to a running producer API
 * (POST /v1/messages with an Idempotency-Key of its own) and retry it with
 * one backoff strategy (jitter.h) until a 2xx or a deadline; the run counts
 * every request sent and when the clients got their 2xx.
 *
 * What is retried: no connection, a connection without an answer (the
 * request may have been applied: the key makes sending it again safe), 409
 * (the key in progress), 429 and 5xx. Any other answer ends the call
 * (refused). A Retry-After is ignored on purpose: the point is to compare
 * the client-side strategies on the same footing.
 */
#ifndef OUTBOX_HERD_TARGET_H
#define OUTBOX_HERD_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jitter.h"

#define HERD_TARGET_PATH "/v1/messages"
#define HERD_TARGET_TOPIC "herd.test"

/* What one attempt came to. */
enum herd_try {
	HERD_TRY_OK,            /* a 2xx: the call is done */
	HERD_TRY_RETRY,         /* 409, 429, 5xx: try again after the backoff */
	HERD_TRY_REFUSED,       /* any other answer: the call ends, not done */
	HERD_TRY_NOT_CONNECTED, /* no connection: nothing reached the server */
	HERD_TRY_LOST,          /* connected, no answer: it may have been applied */
};

/* The verdict on an HTTP status (100..599): OK, RETRY or REFUSED. Pure. */
enum herd_try herd_try_of_status(int status);

/* Whether the call goes on after an attempt that came to t. Pure. */
bool herd_try_retries(enum herd_try t);

struct herd_target_params {
	const char *url;        /* the API's base: "http://127.0.0.1:8080" (borrowed) */
	const char *key_prefix; /* client i sends Idempotency-Key "<prefix>-<i>" (borrowed) */
	enum ob_jitter_kind strategy;
	struct ob_jitter_range range;
	uint32_t clients;           /* >= 1 */
	uint64_t seed;              /* client i's generator: a function of seed and i */
	int64_t deadline_ms;        /* from the start: no attempt begins after it */
	int64_t request_timeout_ms; /* one attempt, connect and answer */
};

/* One run. A time is ms from the start (every client released at once);
 * -1 when it never happened. */
struct herd_target_result {
	uint64_t requests;      /* attempts made: every one below */
	uint64_t status_2xx, status_409, status_429, status_5xx, status_other;
	uint64_t not_connected; /* no connection made */
	uint64_t lost;          /* connected, no answer within the attempt's timeout */
	uint32_t completed;     /* clients that got a 2xx */
	uint32_t refused;       /* clients whose call ended with a status not retried */
	uint32_t gave_up;       /* clients still failing at the deadline */
	double first_failure_ms; /* the first attempt that was not a 2xx */
	double first_ok_ms;      /* the first client's 2xx */
	double done_ms;          /* the last client's 2xx (when every client completed) */
	double recover_ms;       /* done_ms - first_ok_ms: from the first 2xx until every
	                          * client has had its own */
	int64_t started_unix_ms; /* the start, wall clock (to line up with other logs) */
};

/* Check p before anything runs: the URL (http:// with a host), the key
 * of the last client (printable ASCII, at most OB_IDEM_KEY_MAX bytes).
 * OB_OK, or OB_EINVAL with one line in err. */
int herd_target_check(const struct herd_target_params *p, char *err, size_t errlen);

/* Run the herd: one thread per client, released together; returns when
 * every client has completed, been refused or given up (at most the
 * deadline plus one attempt's timeout). OB_OK with *out written, or an
 * error (a thread or nng object not made: OB_ENOMEM, OB_EINVAL) with one
 * line in err and *out untouched. Logs the first failure, the first 2xx and
 * the end (herd.target.*). Blocks; call from one thread. */
int herd_target_run(const struct herd_target_params *p, struct herd_target_result *out,
    char *err, size_t errlen);

#endif
