/*
 * api_claim.h - the steps of an idempotent create around its key claim,
 * shared by POST /v1/reports (atomic mode, api.c) and POST /v1/messages
 * (api_messages.c): the claim's verdict, a takeover noted, being fenced
 * out of the final write, the final write failing. The claim itself and
 * every write of a key table are common/keyclaim.c's.
 */
#ifndef OUTBOX_PRODUCER_API_CLAIM_H
#define OUTBOX_PRODUCER_API_CLAIM_H

#include <libpq-fe.h>
#include <stdbool.h>
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

/* The answer for a claim's verdict (replay, 422, 409); true when the
 * request proceeds (the caller's write). A replay's stored body is moved
 * from c into res. */
bool api_claim_verdict(struct ob_key_claim *c, struct api_response *res);

/* A claim that took the key over from a dead or slow holder: counted and
 * logged (producer.key.takeover). Nothing when c is not a takeover. */
void api_note_takeover(const struct api_config *cfg, const struct api_key *key,
    const struct ob_key_claim *c);

/* The final write matched nothing (taken over meanwhile): counted, logged
 * (producer.key.fenced_out), answered with the winner's stored answer
 * (replayed), or 409 while it is not done. Reads table on conn. */
void api_fenced_out(PGconn *conn, const struct api_config *cfg, const char *table,
    const struct api_key *key, int64_t fence, struct api_response *res);

/* The fused final write failed (r, its error in err): answered by its
 * SQLSTATE (413 payload too large, 422 key reused in the outbox, 400 for
 * values the database refused, else 503 naming what), r cleared, and the
 * request's key released (logged when it cannot be: the lease then runs
 * out). */
void api_write_failed(PGconn *conn, const char *table, const struct api_key *key, int64_t fence,
    PGresult *r, const char *err, const char *what, struct api_response *res);

#endif
