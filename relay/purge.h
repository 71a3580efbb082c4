/*
 * purge.h - housekeeping: delete delivered records older than the
 * retention, in batches, by one process at a time.
 *
 * Only worker 0 of a relay calls it, and each pass first takes a
 * session-level advisory lock with pg_try_advisory_lock: when several relay
 * processes run against one database, one of them purges and the others
 * skip the pass. Dead and pending records are never purged.
 */
#ifndef OUTBOX_RELAY_PURGE_H
#define OUTBOX_RELAY_PURGE_H

#include <libpq-fe.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The advisory lock key (any relay against the database agrees on it). */
#define RELAY_PURGE_LOCK_KEY 0x6f7574626f78LL /* "outbox" */

/* Most batches one pass deletes before handing the connection back to
 * delivery (the next pass continues). */
#define RELAY_PURGE_MAX_BATCHES 100

/* One pass: while the lock is ours, delete up to batch rows at a time that
 * are delivered and whose delivered_at is older than retention_ms, until
 * fewer than batch are found, RELAY_PURGE_MAX_BATCHES batches ran, or *stop
 * is set. Each batch is its own statement (its own transaction). *purged
 * gets the rows deleted, *skipped whether another process held the lock.
 * OB_OK or OB_EDB (the lock is released with the session). Blocks. */
int relay_purge_pass(PGconn *conn, int64_t retention_ms, int64_t batch,
    volatile sig_atomic_t *stop, uint64_t *purged, bool *skipped,
    char *err, size_t errlen);

#endif
