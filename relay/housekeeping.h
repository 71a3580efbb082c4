/*
 * housekeeping.h - worker 0's periodic maintenance of the outbox: retention
 * (common/housekeep.c: slots truncated, dead letters and done batches
 * deleted) every --purge-interval, and every --poll-ms a row for each
 * stream that has none yet (outbox.discover_streams).
 *
 * Scheduling and reporting only; what is purged is decided in the
 * database. Failures are logged here and retried at the next interval.
 * Worker 0's loop only: the other workers never call it.
 */
#ifndef OUTBOX_RELAY_HOUSEKEEPING_H
#define OUTBOX_RELAY_HOUSEKEEPING_H

#include <libpq-fe.h>
#include <stdint.h>

#include "relay.h"
#include "tally.h"

struct relay_housekeeping {
	int64_t next_purge_ms;    /* ob_mono_ms() of the next housekeeping */
	int64_t next_discover_ms; /* ... and of the next stream discovery */
};

/* Housekeeping on conn when h says it is due (the first call runs it): the
 * rows purged counted in t, relay.housekeep.* and relay.db.long_transaction
 * logged, the oldest transaction's gauges set. Blocks for the round
 * trips. Borrows everything. */
void relay_housekeeping_purge(struct relay_housekeeping *h, PGconn *conn,
    const struct relay_config *c, struct relay_tally *t);

/* Stream discovery on conn when due (every c->poll_ms): streams that have
 * no row yet (a new topic or lane) get one. Blocks for one round trip. */
void relay_housekeeping_discover(struct relay_housekeeping *h, PGconn *conn,
    const struct relay_config *c);

#endif
