/*
 * record.h - write a batch's outcome back, fenced, in one call:
 * outbox.record (sql/outbox/functions/record.sql).
 *
 * The write names the batch and the fence it was claimed with: a batch
 * taken over by another worker has a new fence, and this worker's outcome
 * for it is refused (counted as fenced out), never written. A delivered
 * stream batch is one UPDATE of its row; only the exceptions (a retry, a
 * dead letter) write a row per message.
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
	RELAY_OUT_RETRY,     /* a retry of its own, due after delay_ms */
	RELAY_OUT_DEAD,      /* dead-lettered, error kept */
	RELAY_OUT_RELEASE,   /* not sent, or lost in transport: the batch is due
	                      * again after delay_ms (all of a batch or none) */
};

#define RELAY_ERROR_MAX 256

struct relay_outcome {
	uint64_t id;
	enum relay_outcome_kind kind;
	int64_t delay_ms;      /* RETRY / RELEASE: when it is due again */
	bool refund_attempt;   /* RELEASE: the attempt never reached a consumer */
	int64_t retry_after_ms; /* RETRY: the consumer's "not before" (a downstream's
	                         * Retry-After, wire version 2); 0 = none. delay_ms
	                         * is then at least this (retry_policy.h) */
	int64_t min_delay_ms;  /* RETRY / RELEASE: the retry budget refused this retry
	                        * (deliver.c): delay_ms is at least this, the slow rate;
	                        * 0 = none. Not a "not before" the max age weighs */
	char error[RELAY_ERROR_MAX]; /* RETRY / DEAD: last error ("" = none) */
};

/* How outcomes are written. */
struct relay_record_mode {
	bool fencing;          /* false = the BROKEN --no-fencing mode */
	bool skip_dead_heads;  /* --on-dead-head skip: a dead head stops blocking its key */
};

/* Write the outcomes o[0..b->n) of batch b in one call. Either every
 * outcome is RELEASE (the batch goes back, due after o[0].delay_ms) or
 * none is. *written is false when the batch was taken over (fenced out:
 * nothing written). OB_OK, OB_EDB, OB_ENOMEM, OB_EINVAL (a RELEASE mixed
 * with others), or OB_EPROTO (the schema no longer serves this relay). */
int relay_record_batch(PGconn *conn, const struct relay_batch *b,
    const struct relay_outcome *o, const struct relay_record_mode *mode, bool *written,
    char *err, size_t errlen);

/* The stable name of an outcome kind ("delivered", ...). */
const char *relay_outcome_name(enum relay_outcome_kind k);

#endif
