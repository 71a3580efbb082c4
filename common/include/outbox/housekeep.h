/*
 * housekeep.h - one pass of the outbox's retention work, outbox.housekeep
 * (sql/outbox/functions/housekeep.sql): an outbox restored from another
 * cluster adopted first, done batches and expired dead letters deleted, the
 * oldest slot of messages truncated once all done and older than the
 * retention, the current slot switched. Shared by the relay's
 * worker 0 and `outboxctl purge`; safe from any number of processes at
 * once (an advisory lock lets one through).
 */
#ifndef OUTBOX_HOUSEKEEP_H
#define OUTBOX_HOUSEKEEP_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Done batch rows are kept this long after their outcome, for inspection
 * (outboxctl inspect shows a delivered message's attempts, fence and
 * batch while its batch row is kept). A late write by a stalled worker is
 * refused with or without the row. Short, so that the table stays small:
 * at 2,000 msgs/s in batches of 100, 1,200 rows. */
#define OB_HOUSEKEEP_DONE_RETENTION_MS (60 * 1000)
/* Longest wait for a table lock; a pass that cannot get one skips that
 * step and says why. */
#define OB_HOUSEKEEP_LOCK_MS 200

struct ob_housekeep {
	bool ran;                  /* false: another process holds the pass */
	int64_t batches_deleted;
	int64_t dead_deleted;
	int truncated_slot;        /* -1: none */
	int64_t truncated_rows;
	int switched_to;           /* -1: no switch */
	char waiting[512];         /* why a slot could not go ("" = nothing) */
	/* the session whose open transaction holds vacuum back the longest
	 * (pid 0: none; its application name and how long it has been open) */
	int oldest_xact_pid;
	char oldest_xact_application[64];
	double oldest_xact_age_s;
	/* a restore from another cluster was adopted (outbox.adopt_restore):
	 * the messages it reads again; -1: none was */
	int64_t read_again;
};

/* One pass. retention_ms: delivered messages are kept at least this long
 * (0 = forever); dead_retention_ms: dead letters (0 = forever);
 * force_switch: close the current slot now (outboxctl purge). OB_OK or
 * OB_EDB with the server's message in err. */
int ob_housekeep(PGconn *conn, int64_t retention_ms, int64_t dead_retention_ms,
    bool force_switch, struct ob_housekeep *out, char *err, size_t errlen);

#endif
