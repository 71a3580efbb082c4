/*
 * inbox.h - dedup + effect in one transaction, a batch at a time.
 *
 * For a request of N messages: BEGIN; per message a SAVEPOINT, the dedup
 * record (inbox.processed), the handler's effect; one COMMIT. A key already
 * processed gets DUPLICATE and applies nothing. A handler failure rolls back
 * that message only. If COMMIT fails every message gets RETRY. Statuses are
 * final only once COMMIT has returned: the caller replies after this call.
 */
#ifndef OUTBOX_CONSUMER_INBOX_H
#define OUTBOX_CONSUMER_INBOX_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "handler.h"
#include "outbox/fault.h"
#include "outbox/wire.h"

#define INBOX_DETAIL_MAX 256 /* bytes of detail kept per message status */

/* Fault points of the apply path (see docs/faults.md). */
struct inbox_faults {
	struct ob_fault die_before_commit; /* SIGKILL self before COMMIT */
	struct ob_fault die_after_commit;  /* SIGKILL self after COMMIT, before reply */
	struct ob_fault slow;              /* sleep slow_ms before COMMIT */
	int64_t slow_ms;
};

struct inbox_options {
	bool dedup;                        /* false = the broken no-dedup mode */
	const struct inbox_handler *handler;
	struct inbox_faults *faults;       /* may be NULL */
};

/* Per-batch scratch: detail texts live here, results point into it. */
struct inbox_batch {
	struct ob_wire_result *results;    /* one per message, owned */
	char (*details)[INBOX_DETAIL_MAX]; /* one per message, owned */
	uint32_t cap;
};

/* Allocate room for up to cap messages. OB_OK or OB_ENOMEM. */
int inbox_batch_init(struct inbox_batch *b, uint32_t cap);
void inbox_batch_fini(struct inbox_batch *b);

/* Apply req on conn (which must be idle, outside a transaction). Fills
 * b->results[0..req->count). Returns OB_OK when the transaction committed
 * (statuses are final), or OB_EDB when the database failed as a whole (every
 * status is then RETRY and err says why; the caller checks ob_pg_broken).
 * Never replies, never logs per message. */
int inbox_apply_batch(PGconn *conn, const struct inbox_options *opt,
    const struct ob_wire_request *req, struct inbox_batch *b, char *err,
    size_t errlen);

#endif
