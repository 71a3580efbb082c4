/*
 * matrix.h - the fault matrix: modes (rows) x faults (columns), and the run
 * of one cell against a fresh database with the real programs.
 *
 * A cell enqueues ONE message, runs a consumer and a relay with the row's
 * broken mode (if any) and the column's fault armed, drives the one
 * interleaving the fault needs (restart a consumer that died, start a second
 * relay that takes over an expired lease), waits until the message is
 * settled, and counts what happened in the database: effect rows in
 * inbox.notifications, the record's status and attempts, and the fenced-out
 * outcome writes the relays logged.
 */
#ifndef OUTBOX_FM_MATRIX_H
#define OUTBOX_FM_MATRIX_H

#include <stdbool.h>
#include <stdint.h>

enum fm_side { FM_SIDE_NONE, FM_SIDE_CONSUMER, FM_SIDE_RELAY };

/* What a fault does to the process that has it. */
enum fm_kind {
	FM_KIND_NONE,
	FM_KIND_DIES,     /* the process kills itself: restart / take over */
	FM_KIND_SLOW,     /* the consumer sleeps before COMMIT */
	FM_KIND_STALL,    /* the relay worker sleeps after claim, past its lease */
	FM_KIND_DROP,     /* the consumer drops its reply */
	FM_KIND_STALL_STOP, /* a stalled relay is stopped after the takeover:
	                     * its late write is the release of its stale claim */
};

struct fm_fault {
	const char *id;     /* column id: "none", "drop-reply", ... */
	const char *head;   /* short column header */
	const char *title;  /* one line for the legend */
	enum fm_side side;
	enum fm_kind kind;
	const char *flag;   /* the program's fault flag (NULL for none) */
};

struct fm_mode {
	const char *id;     /* row id: "no-dedup", "no-fencing", "full" */
	const char *title;  /* row header */
	bool no_dedup;      /* consumer --no-dedup */
	bool no_fencing;    /* relay --no-fencing */
};

extern const struct fm_fault fm_faults[];
extern const int fm_nfaults;
extern const struct fm_mode fm_modes[];
extern const int fm_nmodes;

/* Everything a cell run needs; borrowed by fm_run_cell. */
struct fm_env {
	const char *server;      /* conninfo of the PostgreSQL server (no dbname) */
	const char *bindir;      /* where outbox-relay, outbox-consumer live */
	const char *workdir;     /* logs and ipc sockets */
	int64_t lease_ms;
	int64_t delivery_timeout_ms;
	int64_t stall_ms;        /* relay stall after claim: well past the lease */
	int64_t slow_ms;         /* consumer sleep before COMMIT: past the timeout */
	int64_t restart_ms;      /* a dead consumer is restarted after this */
	int64_t settle_ms;       /* the record must stay settled this long */
	int64_t cell_timeout_ms;
	bool keep;               /* keep the cell's database */
};

struct fm_result {
	bool ran;                /* false: the column's flag does not exist */
	bool completed;          /* settled before the cell timeout */
	int64_t effects;         /* rows in inbox.notifications for the key */
	char status[16];         /* outbox.messages.status at the end */
	int64_t attempts;
	int64_t fence;
	int64_t fenced_out;      /* sum of fenced_out= in relay.record.fenced_out */
	int fired;               /* fault.fired lines in all logs */
	int consumer_restarts;
	int relay_takeovers;     /* second relays started */
	int64_t dup_replies;     /* 'duplicate' answers (consumer.stopped lines) */
	int64_t ms;              /* wall time of the cell */
};

/* Run the cell (mode, fault). OB_OK with *res filled (also when the cell
 * timed out: res->completed tells), or an error code with err when the
 * cell could not be set up (database, spawn). Blocks for seconds. */
int fm_run_cell(const struct fm_env *env, const struct fm_mode *mode,
    const struct fm_fault *fault, struct fm_result *res, char *err,
    size_t errlen);

#endif
