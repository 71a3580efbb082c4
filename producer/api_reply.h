/*
 * api_reply.h - how the API's endpoints answer: the answer itself (struct
 * api_response, which the transport writes), a JSON error body, the 503
 * of a database failure, the 409 of a key in progress, the 201 of a
 * create. Shared by api.c and api_messages.c; calls neither.
 */
#ifndef OUTBOX_PRODUCER_API_REPLY_H
#define OUTBOX_PRODUCER_API_REPLY_H

#include <stdbool.h>
#include <stdint.h>

struct api_config; /* api.h */

/* The answer. body is owned (free()); NULL = no body. */
struct api_response {
	int status;
	char *body;
	bool replayed;          /* Idempotent-Replayed: true */
	int64_t retry_after_s;  /* > 0: Retry-After */
	bool drop;              /* close the connection without a byte */
};

/* Free res's body (res may be reused). */
void api_response_fini(struct api_response *res);

/* Answer with a JSON error body {"error": code, "message": message}. */
void api_error(struct api_response *res, int status, const char *code,
    const char *message);

/* A create's body as its parser (report_parse_body, message_parse_body)
 * returned rc: true when it parsed (OB_OK); else false with res answered
 * "invalid_body", 400 for a bad body (OB_EINVAL), 500 otherwise (out of
 * memory), err the parser's reason. */
bool api_body_parsed(int rc, const char *err, struct api_response *res);

/* 503 + Retry-After: 1, the database error logged (what names the step). */
void api_unavailable(struct api_response *res, const char *what, const char *err);

/* 409 + Retry-After for a key in progress (lease_left_ms of its lease). */
void api_busy(struct api_response *res, int64_t lease_left_ms);

/* 201 with a copy of body (the lose-response fault may drop it); 500 when
 * it cannot be copied (committed: a retry is replayed). */
void api_created(const struct api_config *cfg, const char *body, struct api_response *res);

#endif
