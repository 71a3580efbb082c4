/*
 * sink_inbox.h - outbox-notify-sink's effects in an inbox database (--db),
 * through the inbox's SQL contract (docs/inbox-sql.md), as a service in any
 * language would: per request one transaction that takes the source gate,
 * asks inbox.dedup_lookup with the call's fence, writes the effect
 * (inbox.add_notification) and the record (inbox.dedup_insert), and
 * commits. A call whose fence is lower than the one its message was applied
 * under is 'stale': a later holder of the consumer's claim applied it, and
 * this one is refused (the fence the effect itself checks, issue 33).
 *
 * Retention (docs/inbox-sql.md, "Retention"): the record's created_at is
 * the message's enqueue time (the call's Outbox-Created-At), and before
 * the lookup the transaction refuses a message older than retention_ms by
 * the inbox database's clock (inbox.clock_us()): its record may have been
 * purged, so applying it could apply it twice. sink_inbox_purge deletes
 * the records past retention_ms + SINK_RETENTION_MARGIN_MS.
 *
 * A struct sink_inbox is one connection, used by one thread; reconnected
 * on the next call after it broke. The sink opens two: one for the
 * requests (the server's thread), one for the purge (the main thread).
 */
#ifndef OUTBOX_SINK_INBOX_H
#define OUTBOX_SINK_INBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Attempts of one request's transaction: a record another transaction
 * committed first (unique_violation) is asked again once. */
#define SINK_INBOX_ATTEMPTS 2
/* The retention's bounds: inbox.purge refuses less than a minute; the
 * consumer's --dedup-retention default and maximum. */
#define SINK_RETENTION_MIN_MS INT64_C(60000)
#define SINK_RETENTION_DEFAULT "7d"
#define SINK_RETENTION_MAX_MS (INT64_C(3650) * 86400000)
/* A record is purged only when its message is older than the retention
 * plus this, by the inbox database's clock: it covers the time between a
 * call's retention check and its record's insert (one transaction here),
 * as the consumer's INBOX_RETENTION_MARGIN_MS (1 h) does. */
#define SINK_RETENTION_MARGIN_MS (INT64_C(60) * 60 * 1000)
/* Records deleted by one inbox.purge call (one short transaction). */
#define SINK_PURGE_MAX_ROWS 1000

enum sink_verdict {
	SINK_APPLIED,   /* new: effect and record committed */
	SINK_DUPLICATE, /* applied before with this payload: nothing done */
	SINK_MISMATCH,  /* the key was applied with another payload */
	SINK_STALE,     /* applied under a higher fence: this caller was fenced out */
	SINK_TOO_OLD,   /* the message is older than the retention: nothing done */
	SINK_BAD_BODY,  /* the body is not UTF-8 JSON: nothing done */
	SINK_BUSY,      /* the key or the source gate is held (lock_timeout): later */
	SINK_FAILED,    /* the database failed: nothing committed */
};

struct sink_inbox;

/* One call's identity and its fence (-1: none: no fence checked, 0
 * recorded). */
struct sink_call {
	const char *topic, *key;
	const char *body;
	size_t body_len;
	int64_t fence;
	bool ignore_fence;  /* BROKEN (--ignore-fence): recorded, not checked */
	int64_t message_id; /* Outbox-Message-Id, 0 when none */
	/* the message's enqueue time (Outbox-Created-At), Unix microseconds,
	 * when has_created_at; without it the record gets the time of receipt
	 * (the database's now()) and no retention check can be made */
	bool has_created_at;
	int64_t created_at_us;
};

/* Connect to conninfo and check the inbox schema serves the consumer's
 * protocol (the sink's role needs outbox_consumer's grants); retention_ms
 * (>= SINK_RETENTION_MIN_MS) is what the apply checks and the purge
 * deletes by. On OB_OK *out is owned (sink_inbox_close); else OB_EDB or
 * OB_ENOMEM with err. */
int sink_inbox_open(const char *conninfo, int64_t retention_ms, struct sink_inbox **out,
    char *err, size_t errlen);

/* Apply call once by its (topic, key), source ''. The verdict, and for
 * SINK_STALE the fence the message was applied under. OB_OK for every
 * verdict but SINK_FAILED (OB_EDB, err says why). Blocks on the database
 * (at most its lock_timeout for a held key). */
int sink_inbox_apply(struct sink_inbox *in, const struct sink_call *call,
    enum sink_verdict *verdict, int64_t *applied_fence, char *err, size_t errlen);

/* One call of inbox.purge(retention_ms, SINK_RETENTION_MARGIN_MS,
 * SINK_PURGE_MAX_ROWS), in its own transaction: *deleted gets the rows it
 * deleted (call again while that is SINK_PURGE_MAX_ROWS). OB_OK, or OB_EDB
 * with err (reconnected on the next call when the connection broke).
 * Skips rows another transaction holds, so it never waits on a request's
 * transaction. */
int sink_inbox_purge(struct sink_inbox *in, int64_t *deleted, char *err, size_t errlen);

/* Close the connection and free in. NULL is ok. */
void sink_inbox_close(struct sink_inbox *in);

#endif
