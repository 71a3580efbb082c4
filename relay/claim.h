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

/* A claimed batch. msgs[i] strings borrow res: release with relay_claim_fini. */
struct relay_claim {
	PGresult *res;
	struct ob_wire_msg *msgs; /* fence and attempt are the claim's */
	uint32_t n;
	uint32_t takeovers;       /* of those: claimed over an expired lease */
};

/* Claim up to max records for owner with a lease of lease_ms. With
 * ordering (always, but for the BROKEN --no-ordering mode) only the head of
 * each ordering key is claimable. On success
 * *out is filled (n may be 0) and owned by the caller. OB_EDB with the
 * server's message in err otherwise. Blocks for one round trip. */
int relay_claim_batch(PGconn *conn, const char *owner, int64_t lease_ms,
    uint32_t max, bool ordering, struct relay_claim *out, char *err,
    size_t errlen);

void relay_claim_fini(struct relay_claim *c);

#endif
