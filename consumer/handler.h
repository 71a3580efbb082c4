/*
 * handler.h - the consumer's effect handlers (the C API for custom ones).
 *
 * A handler applies one message's effect inside the consumer's open
 * transaction, once the dedup lookup found no record for its (source,
 * topic, key) (apply); its record is inserted after apply, with apply's
 * detail, in the same savepoint. When another transaction records the
 * same message first (two deliveries at once), the message is rolled
 * back to its savepoint, apply's effect with it. The identity of a message
 * is (m->source, m->topic, m->key): the producer database its relay names
 * (wire version 3; "" for older relays), and the pair outbox.enqueue's
 * uniqueness has: the same key on two topics, or from two databases, is
 * two messages, and apply is called for each. A handler that keeps its own
 * record of what it did (a key passed on downstream, a claim table) must
 * key it by all three too (the webhook: common/include/outbox/webhook_key.h). It returns
 * OB_WIRE_APPLIED, OB_WIRE_RETRY (transient: deliver again later) or
 * OB_WIRE_REJECT (permanent: dead-letter), with a detail text;
 * OB_WIRE_DUPLICATE is also accepted when the handler finds its effect
 * already done. On anything but APPLIED and
 * DUPLICATE the consumer rolls the message back to its savepoint: the
 * handler must not COMMIT or ROLLBACK itself.
 *
 * An effect outside the database (a webhook) cannot commit with the dedup
 * record. Such a handler also sets prepare, which runs BEFORE the batch
 * transaction, in autocommit, on the same connection: it may commit a claim
 * and make the call there, and leave what apply must record in *state.
 * finish runs after the batch ended (committed or not), in autocommit, with
 * the message's final status, and frees *state.
 *
 * Threads: the serving threads call one handler concurrently, each with its
 * own connection; arg is shared and must be thread-safe.
 */
#ifndef OUTBOX_CONSUMER_HANDLER_H
#define OUTBOX_CONSUMER_HANDLER_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "outbox/wire.h"

/* What a handler reports, beside the status, so that counters can say why. */
struct inbox_handler_call {
	void *state;          /* prepare -> apply -> finish, owned by the handler */
	const char *reason;   /* static text naming a non-APPLIED outcome ("http_5xx"), or NULL */
	uint32_t retry_after_ms; /* with RETRY: not before this many ms (a downstream's
	                          * Retry-After), sent on to the relay; 0 = no wish */
};

struct inbox_handler {
	const char *name;
	/* Required. Borrows tx and m; writes a NUL-terminated detail (may be
	 * empty). */
	int (*apply)(PGconn *tx, const struct ob_wire_msg *m, void *arg,
	    struct inbox_handler_call *call, char *detail, size_t detaillen);
	/* Optional. Outside any transaction. Returns 0 to go on to apply, or
	 * a final status (RETRY / REJECT / DUPLICATE) with detail; apply is
	 * then not called for this message. */
	int (*prepare)(PGconn *conn, const struct ob_wire_msg *m, void *arg,
	    struct inbox_handler_call *call, char *detail, size_t detaillen);
	/* Optional. After COMMIT or ROLLBACK, outside any transaction; status
	 * is what the message was answered. conn may be broken. */
	void (*finish)(PGconn *conn, const struct ob_wire_msg *m, void *arg,
	    struct inbox_handler_call *call, int status);
	void *arg;
};

/* Built in: insert the message into inbox.notifications (the demo effect).
 * The inbox applies it set-based (one statement per batch) when it can. */
extern const struct inbox_handler inbox_handler_record;

/* Map a failed statement's SQLSTATE to a status: data and integrity errors
 * (classes 22, 23) are permanent (REJECT), everything else RETRY. */
int inbox_status_for_sqlstate(const char *sqlstate);

#endif
