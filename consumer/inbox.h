/*
 * inbox.h - dedup + effect in one transaction, a batch at a time.
 *
 * The identity of a message is (source, topic, idempotency key): the
 * producer database its relay names in the frame (wire version 3; "" for
 * older relays) and the pair outbox.enqueue's uniqueness has. The same key
 * on two topics, or from two databases, is two messages, each applied once
 * (sql/inbox/008_dedup_source.sql, consumer protocol 3; 005 made it
 * (topic, key)). The source "" is the legacy identity: a named source
 * inherits its records, so (S, topic, key) is also a duplicate (or a
 * reused key) when ("", topic, key) exists, and nothing is recorded under
 * S (a message an old relay sent is not applied again by an upgraded one;
 * docs/consumer.md, "The legacy identity"). The other way round too: a
 * message of source "" is a duplicate when (S, topic, key) exists for any
 * S (a late frame of an old relay whose lease a new one took over). The
 * two identities are two primary keys, so two transactions inserting them
 * would not wait for each other: every dedup transaction first locks
 * inbox.source_gate (a named source ROW EXCLUSIVE, the source "" SHARE:
 * modes that conflict with each other, not with themselves;
 * sql/inbox/009_source_gate.sql), so a frame of one kind waits for the
 * other kind's open transactions before it looks for their records.
 *
 * For a request of N messages: BEGIN; per message a savepoint, the dedup
 * lookup, the handler's effect, the dedup record (inbox.processed: topic,
 * key, fingerprint, outcome, detail: written once, after the effect);
 * one COMMIT. A (topic, key) already processed with the
 * same fingerprint gets DUPLICATE with the stored outcome and applies
 * nothing; with another fingerprint (another payload) it gets REJECT
 * ("idempotency key reused with a different payload") and applies nothing.
 * A handler failure rolls back that
 * message only. If COMMIT fails every message gets RETRY. Statuses are final
 * only once COMMIT has returned: the caller replies after this call.
 *
 * The built-in record handler is applied set-based: BEGIN and one statement
 * for the whole batch (new keys applied, keys seen before answered from
 * their stored record), then COMMIT. When that statement fails (bad data, a
 * key in flight) or cannot decide a message (a (topic, key) twice in the
 * batch, one committed concurrently), the transaction is rolled back and every
 * message goes through the per-message path, whose statements are sent in
 * libpq pipeline mode (one round trip per message plus the handler's own).
 * Both paths give the same statuses.
 *
 * Concurrency: a key being applied by another, uncommitted transaction
 * (another consumer, or a relay takeover) makes the dedup insert wait, at
 * most --lock-timeout; then that message is rolled back and answered RETRY
 * (and when the other one committed, DUPLICATE or REJECT as above). After one such
 * wait, the rest of the batch waits at most INBOX_LOCK_TIMEOUT_AFTER_MS per
 * key, so a batch of contested keys cannot outlast the relay's timeout.
 * The source gate waits at most --lock-timeout too; then every message of
 * the batch is answered RETRY (key_in_flight) and nothing is applied.
 */
#ifndef OUTBOX_CONSUMER_INBOX_H
#define OUTBOX_CONSUMER_INBOX_H

#include <libpq-fe.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "handler.h"
#include "outbox/buf.h"
#include "outbox/fault.h"
#include "outbox/wire.h"

#define INBOX_DETAIL_MAX 256              /* bytes of detail kept per message status */
#define INBOX_LOCK_TIMEOUT_AFTER_MS 10    /* per-key lock wait once a batch waited */
/* Retention is decided by ONE clock, the inbox database's (docs/consumer.md,
 * "Retention"): a message is too old when its created_at is older than the
 * retention by that clock; a dedup record (or webhook claim) is purged only
 * when its message is older than the retention plus this margin by the same
 * clock. The margin covers the time between a message's check and its
 * dedup insert or key claim (its batch's work before it: lock waits, the
 * webhook calls of the messages before it), which must stay below it. */
#define INBOX_RETENTION_MARGIN_MS (INT64_C(60) * 60 * 1000)
/* PostgreSQL's epoch (2000-01-01) in Unix microseconds: a timestamptz in
 * binary form counts from it. */
#define INBOX_PG_EPOCH_US INT64_C(946684800000000)
/* How often a serving thread reads the database's clock again. */
#define INBOX_CLOCK_REFRESH_MS 60000
#define INBOX_REASON_MISMATCH "idempotency key reused with a different payload"
#define INBOX_REASON_TOO_OLD \
	"message is older than the dedup retention: it could be a duplicate of a purged record"

/* Why a message got its status (counters by reason). */
enum inbox_why {
	INBOX_WHY_NONE = 0,     /* applied */
	INBOX_WHY_DUPLICATE,    /* key applied before, same fingerprint */
	INBOX_WHY_MISMATCH,     /* reject: key reused with another payload */
	INBOX_WHY_TOO_OLD,      /* reject: older than the dedup retention */
	INBOX_WHY_BAD_DATA,     /* reject: key/topic/payload the database refuses */
	INBOX_WHY_HANDLER,      /* handler said retry / reject */
	INBOX_WHY_LOCKED,       /* retry: the key is in flight elsewhere */
	INBOX_WHY_DB,           /* retry: the batch's transaction failed */
	INBOX_WHY_COUNT
};

/* Stable name of a reason ("fingerprint_mismatch", ...). */
const char *inbox_why_name(enum inbox_why why);

/* Fault points of the apply path (see docs/consumer.md). */
struct inbox_faults {
	struct ob_fault die_before_commit; /* SIGKILL self before COMMIT */
	struct ob_fault die_after_commit;  /* SIGKILL self after COMMIT, before reply */
	struct ob_fault slow;              /* sleep slow_ms before COMMIT */
	int64_t slow_ms;
	bool no_source_gate;               /* broken mode: take no source gate, so a
	                                    * '' and a named frame of one key can both
	                                    * apply (test_source_race) */
};

struct inbox_options {
	bool dedup;                        /* false = the broken no-dedup mode */
	const struct inbox_handler *handler;
	struct inbox_faults *faults;       /* may be NULL */
	int64_t retention_ms;              /* reject messages older than this; 0 = never */
	int64_t lock_timeout_ms;           /* longest wait for a key in flight; 0 = forever */
	_Atomic int *live_dedup;           /* non-NULL (--demo-admin): dedup switched at
	                                    * run time, 1 on, 0 off, read once per batch;
	                                    * dedup is then ignored */
};

/* The inbox database's clock as one serving thread knows it: read with a
 * query (inbox_conn_setup, then every INBOX_CLOCK_REFRESH_MS), and carried
 * forward between readings by this host's boot clock (CLOCK_BOOTTIME:
 * never stepped, counts a suspend), so that the retention check costs no
 * round trip. The offset is taken from the time the query was SENT, so the
 * estimate is never behind the database's clock (ahead by at most one
 * round trip: a message is rejected that much early, never late). */
struct inbox_dbclock {
	int64_t offset_us;   /* database time - boot time, at the last reading */
	int64_t read_at_us;  /* boot time of that reading; 0 = none */
};

/* Per-batch scratch, reused from batch to batch by one serving thread. */
struct inbox_batch {
	struct ob_wire_result *results;    /* one per message, owned */
	char (*details)[INBOX_DETAIL_MAX]; /* one per message, owned */
	uint8_t *why;                      /* enum inbox_why per message */
	bool *done;                        /* status final before the transaction */
	struct inbox_handler_call *calls;  /* handler state per message */
	uint32_t cap;
	struct ob_buf args[8];             /* set-based statement parameters */
	struct ob_buf fp;                  /* fingerprint input scratch */
	struct inbox_dbclock clock;        /* the database's clock (retention) */
};

/* Allocate room for up to cap messages. OB_OK or OB_ENOMEM. */
int inbox_batch_init(struct inbox_batch *b, uint32_t cap);
void inbox_batch_fini(struct inbox_batch *b);

/* Session settings the apply path relies on (lock_timeout, and
 * synchronous_commit at least on: every commit a reply depends on waits
 * for its WAL flush, whatever the server's default), and a first reading
 * of the database's clock into clock (the batch scratch's, b->clock, of
 * the thread that will use conn). Call once per new connection. OB_OK or
 * OB_EDB. */
int inbox_conn_setup(PGconn *conn, const struct inbox_options *opt,
    struct inbox_dbclock *clock, char *err, size_t errlen);

/* Decide, without the database, what needs no transaction: messages older
 * than the retention get REJECT. Marks them done in b and returns the number
 * of messages left to apply. now_us: the inbox database's clock, Unix
 * microseconds (inbox_apply_batch passes b->clock's estimate). Pure; fuzzed. */
uint32_t inbox_plan(const struct inbox_options *opt,
    const struct ob_wire_request *req, int64_t now_us, struct inbox_batch *b);

/* Build the set-based statement's parameters for the messages not done
 * (binary PostgreSQL arrays in b->args). Pure; fuzzed. OB_OK or OB_ENOMEM. */
int inbox_set_args(const struct ob_wire_request *req, struct inbox_batch *b);

/* Apply req on conn (which must be idle, outside a transaction). Fills
 * b->results[0..req->count). Returns OB_OK when the transaction committed
 * (statuses are final), or OB_EDB when the database failed as a whole (every
 * status not final before the transaction is then RETRY and err says why;
 * the caller checks ob_pg_broken). Never replies, never logs per message. */
int inbox_apply_batch(PGconn *conn, const struct inbox_options *opt,
    const struct ob_wire_request *req, struct inbox_batch *b, char *err,
    size_t errlen);

/* Retention: delete dedup records (and finished webhook claims) whose
 * message is older than retention_ms + INBOX_RETENTION_MARGIN_MS by the
 * database's clock (and which were applied more than retention_ms ago), at
 * most batch rows per statement, until none is left or max_rounds
 * statements ran. *deleted gets the count. OB_OK or OB_EDB. */
int inbox_purge(PGconn *conn, int64_t retention_ms, int batch, int max_rounds,
    int64_t *deleted, char *err, size_t errlen);

#endif
