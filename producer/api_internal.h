/*
 * api_internal.h - what the API's endpoints share (api.c: the reports and
 * the dispatch; api_messages.c: the generic messages): the error answers,
 * the fault points, the key-claim steps around a fused final write, the
 * query string. Not for the transport (api.h is).
 */
#ifndef OUTBOX_PRODUCER_API_INTERNAL_H
#define OUTBOX_PRODUCER_API_INTERNAL_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "outbox/keyclaim.h"

/* A request's Idempotency-Key: as the client sent it (what it reads back
 * and what is logged), and as stored under its token's scope. */
struct api_key {
	const char *sent;
	const char *stored;
	const char *scope; /* "" = the default scope */
};

/* 503 + Retry-After: 1, the database error logged (what names the step). */
void api_unavailable(struct api_response *res, const char *what, const char *err);

/* 409 + Retry-After for a key in progress (lease_left_ms of its lease). */
void api_busy(struct api_response *res, int64_t lease_left_ms);

/* After being fenced out of key stored_key in table: the winner's stored
 * answer (replayed), or 409 while it is not done. */
void api_answer_winner(PGconn *conn, const char *table, const char *stored_key,
    struct api_response *res);

/* The answer for a claim's verdict (replay, 422, 409); true when the
 * request proceeds (the caller's write). A replay's stored body is moved
 * from c into res. */
bool api_claim_verdict(struct ob_key_claim *c, struct api_response *res);

/* A claim that took the key over from a dead or slow holder: counted and
 * logged (producer.key.takeover). Nothing when c is not a takeover. */
void api_note_takeover(const struct api_config *cfg, const struct api_key *key,
    const struct ob_key_claim *c);

/* The final write matched nothing (taken over meanwhile): counted, logged
 * (producer.key.fenced_out), answered with the winner's result. */
void api_fenced_out(PGconn *conn, const struct api_config *cfg, const char *table,
    const struct api_key *key, int64_t fence, struct api_response *res);

/* 201 with a copy of body (the lose-response fault may drop it); 500 when
 * it cannot be copied (committed: a retry is replayed). */
void api_created(const struct api_config *cfg, const char *body, struct api_response *res);

/* The fused final write failed (r, its error in err): answered by its
 * SQLSTATE (413 payload too large, 422 key reused in the outbox, 400 for
 * values the database refused, else 503 naming what), r cleared, and the
 * request's key released. */
void api_write_failed(PGconn *conn, const char *table, const struct api_key *key, int64_t fence,
    PGresult *r, const char *err, const char *what, struct api_response *res);

/* Give up a STARTED key this request holds (its write failed). Logged
 * when it cannot be released (the lease then runs out). */
void api_release_key(PGconn *conn, const char *table, const char *key, int64_t fence);

/* The fault points (api.h, struct producer_faults). */
void api_fault_slow(const struct api_config *cfg);
void api_fault_crash(const struct api_config *cfg, const char *where);
bool api_fault_lose(const struct api_config *cfg);

/* The value of name in a query string, percent-decoded into out. OB_OK,
 * or OB_EINVAL when absent, malformed, decoding to a NUL, or too long. */
int api_query_param(const char *query, const char *name, char *out, size_t outlen);

/* POST /v1/messages and GET /v1/messages?idempotency_key=K
 * (api_messages.c). */
void api_messages_create(PGconn *conn, const struct api_config *cfg,
    const struct api_request *req, struct api_response *res);
void api_messages_lookup(PGconn *conn, const struct api_request *req,
    struct api_response *res);

#endif
