/*
 * record.h - write delivery outcomes back, fenced, in one statement.
 *
 * Every write is "... WHERE id = $id AND fence = $fence": a row whose fence
 * moved on was taken over by another worker, and this worker's outcome for
 * it is dropped (counted as fenced out), never written.
 */
#ifndef OUTBOX_RELAY_RECORD_H
#define OUTBOX_RELAY_RECORD_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "claim.h"

enum relay_outcome_kind {
	RELAY_OUT_DELIVERED, /* applied or duplicate at the consumer */
	RELAY_OUT_RETRY,     /* back to pending, due after delay_ms */
	RELAY_OUT_DEAD,      /* dead-lettered, error kept */
	RELAY_OUT_RELEASE,   /* never sent: give the claim back, due after delay_ms */
};

#define RELAY_ERROR_MAX 256

struct relay_outcome {
	uint64_t id;
	uint64_t fence;
	enum relay_outcome_kind kind;
	int64_t delay_ms;      /* RETRY: backoff before the next attempt */
	bool refund_attempt;   /* the attempt never reached a consumer */
	char error[RELAY_ERROR_MAX]; /* RETRY / DEAD: last error ("" = none) */
};

/* How outcomes are written. */
struct relay_record_mode {
	bool fencing;          /* false = the BROKEN --no-fencing mode */
	bool skip_dead_heads;  /* --on-dead-head skip: a dead head stops blocking its key */
};

/* Chaining (sql/outbox/011_chain_heads.sql): the next message of each
 * key whose head was just delivered is claimed for owner, with a lease of
 * lease_ms, in the same statement, for at most max keys. */
struct relay_chain {
	const char *owner;
	int64_t lease_ms;
	uint32_t max;
};

/* What an outcome write did. */
struct relay_record_result {
	uint32_t written;      /* rows updated */
	uint32_t fenced_out;   /* rows skipped because their fence moved */
	uint32_t fenced_ids_n; /* of those, ids listed in the caller's fenced_ids */
	struct relay_claim chained; /* claimed for the chain's owner (n may be 0) */
};

/* Write n outcomes in one statement (n = written + fenced_out). A
 * delivered head of an ordering key (or a dead one, with skip_dead_heads)
 * hands the key on to its next pending message in the same transaction;
 * with chain (may be NULL) that message comes back claimed in r->chained,
 * which the caller then owns. Up to fenced_ids_max fenced-out ids go to
 * fenced_ids (may be NULL). OB_OK or OB_EDB / OB_ENOMEM (nothing owned). */
int relay_record_outcomes(PGconn *conn, const struct relay_outcome *o,
    uint32_t n, const struct relay_record_mode *mode, const struct relay_chain *chain,
    uint64_t *fenced_ids, uint32_t fenced_ids_max, struct relay_record_result *r,
    char *err, size_t errlen);

/* The stable name of an outcome kind ("delivered", ...). */
const char *relay_outcome_name(enum relay_outcome_kind k);

#endif
