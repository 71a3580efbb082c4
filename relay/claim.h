/*
 * claim.h - claim a batch of due outbox records under a lease.
 *
 * One statement: pending, due, not under a live lease, FOR UPDATE SKIP
 * LOCKED; sets lease owner and expiry, bumps fence and attempts, returns the
 * rows. Several workers and relay processes claim concurrently without
 * waiting on each other and without claiming the same row twice.
 */
#ifndef OUTBOX_RELAY_CLAIM_H
#define OUTBOX_RELAY_CLAIM_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "outbox/wire.h"

/* A claimed batch. msgs[i] strings borrow the results: release with
 * relay_claim_fini. Two results when a worker's chained messages (see
 * record.h) and a fresh claim make one round. */
struct relay_claim {
	PGresult *res[2];
	struct ob_wire_msg *msgs; /* fence and attempt are the claim's */
	uint32_t n;
	uint32_t takeovers;       /* of those: claimed over an expired lease */
};

/* The columns of a claimed message in a result, in this order from col0:
 * id, fence, attempts, created_at (us), topic, idempotency_key, payload,
 * ordering_key, ordering_seq. */
#define RELAY_CLAIM_COLUMNS 9

/* Claim up to max records for owner with a lease of lease_ms. With
 * ordering (always, but for the BROKEN --no-ordering mode) only the head of
 * each ordering key is claimable. On success
 * *out is filled (n may be 0) and owned by the caller. OB_EDB with the
 * server's message in err otherwise. Blocks for one round trip. */
int relay_claim_batch(PGconn *conn, const char *owner, int64_t lease_ms,
    uint32_t max, bool ordering, struct relay_claim *out, char *err,
    size_t errlen);

/* Take the rows of res whose boolean column flag_col is true (every row
 * when flag_col < 0) as claimed messages, columns from col0 (see
 * RELAY_CLAIM_COLUMNS); takeover_col (< 0: none) says which were taken
 * over. *out owns res afterwards, even on failure (OB_ENOMEM). */
int relay_claim_from_result(PGresult *res, int col0, int flag_col, int takeover_col,
    struct relay_claim *out, char *err, size_t errlen);

/* Move src's messages to the end of dst (which holds at most one result);
 * src is left empty. OB_ENOMEM leaves both as they were. */
int relay_claim_append(struct relay_claim *dst, struct relay_claim *src);

void relay_claim_fini(struct relay_claim *c);

#endif
