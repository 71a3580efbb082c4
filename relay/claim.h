/*
 * claim.h - claim one batch of messages under a lease: outbox.claim
 * (sql/outbox/functions/claim.sql).
 *
 * One call, one round trip, one batch: a batch whose lease ran out (taken
 * over, fence bumped), due retries of one topic, or a cut of a stream in
 * commit order. The batch's lease, fence and attempt are one row in
 * outbox.batches; its messages are not written at all. Several workers and
 * relays claim at once without waiting on each other (SKIP LOCKED) and
 * never claim a message twice.
 */
#ifndef OUTBOX_RELAY_CLAIM_H
#define OUTBOX_RELAY_CLAIM_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "outbox/protocol.h"
#include "outbox/wire.h"

/* The relay protocol this build speaks (outbox.protocols, 'relay'). */
#define RELAY_PROTOCOL OB_PROTOCOL_RELAY

enum relay_batch_kind {
	RELAY_BATCH_STREAM = 's', /* a cut of a (topic, lane) stream */
	RELAY_BATCH_RETRY = 'r',  /* retries of one topic, each with its own state */
};

/* A claimed batch: its messages (the strings borrow res) and the claim. */
struct relay_batch {
	PGresult *res;
	uint64_t id;
	uint64_t fence;          /* the batch's: every message carries it */
	uint32_t attempt;        /* stream batch: the batch's; retries: per message */
	enum relay_batch_kind kind;
	bool takeover;           /* claimed over a holder's expired lease */
	bool more;               /* a claim made now would find more (outbox.more_claimable) */
	uint64_t lsn;            /* want_lsn: WAL insert position after the claim */
	struct ob_wire_msg *msgs;
	uint32_t n;
};

/* Which topics a claim may take: those named in include, and, with others,
 * every topic not named in exclude (both PostgreSQL text[] literals, e.g.
 * "{a,b}"; NULL = empty). Built from the routes and the breakers
 * (dest.h, relay_topics_now). */
struct relay_topics {
	const char *include;
	const char *exclude;
	bool others;
};

/* Claim up to max messages of one batch for owner, leased for lease_ms.
 * max_bytes: the batch's byte budget (--batch-bytes; a new batch ends
 * before the message that would take its payloads past it, a larger
 * message goes alone; 0: none). retries_first: look at due retries before the streams; ordering false:
 * the BROKEN --no-ordering mode (keys not kept in order); skip_dead_heads:
 * --on-dead-head skip, for a message the claim dead-letters itself (a
 * poison message, alone after its batch lost its holder too often, sql/
 * outbox/functions/split_batch.sql); want_lsn: also
 * read the WAL insert position after the claim into out->lsn (the standby
 * gate, standby_gate.h). On success *out
 * holds the batch (n = 0: nothing to do) and is the caller's. OB_EDB with
 * the server's message in err otherwise; OB_EPROTO when the schema does not
 * serve RELAY_PROTOCOL (SQLSTATE OB001: the message says what to upgrade). */
int relay_claim_batch(PGconn *conn, const char *owner, int64_t lease_ms, uint32_t max,
    int64_t max_bytes, const struct relay_topics *topics, bool retries_first, bool ordering,
    bool skip_dead_heads, bool want_lsn, struct relay_batch *out, char *err, size_t errlen);

void relay_batch_fini(struct relay_batch *b);

#endif
