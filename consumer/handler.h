/*
 * handler.h - the consumer's effect handlers (the C API for custom ones).
 *
 * A handler applies one message's effect inside the consumer's open
 * transaction, after the dedup record for its key has been inserted in the
 * same transaction. It returns OB_WIRE_APPLIED, OB_WIRE_RETRY (transient:
 * deliver again later) or OB_WIRE_REJECT (permanent: dead-letter), with a
 * detail text. On anything but APPLIED the consumer rolls the message back
 * to its savepoint: the handler must not COMMIT or ROLLBACK itself.
 */
#ifndef OUTBOX_CONSUMER_HANDLER_H
#define OUTBOX_CONSUMER_HANDLER_H

#include <libpq-fe.h>
#include <stddef.h>

#include "outbox/wire.h"

struct inbox_handler {
	const char *name;
	/* Borrows tx and m; writes a NUL-terminated detail (may be empty). */
	int (*apply)(PGconn *tx, const struct ob_wire_msg *m, void *arg,
	    char *detail, size_t detaillen);
	void *arg;
};

/* Built in: insert the message into inbox.notifications (the demo effect). */
extern const struct inbox_handler inbox_handler_record;

/* Map a failed statement's SQLSTATE to a status: data and integrity errors
 * (classes 22, 23) are permanent (REJECT), everything else RETRY. */
int inbox_status_for_sqlstate(const char *sqlstate);

#endif
