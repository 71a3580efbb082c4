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
 * One connection, used by the sink's one thread; reconnected on the next
 * request after it broke.
 */
#ifndef OUTBOX_SINK_INBOX_H
#define OUTBOX_SINK_INBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Attempts of one request's transaction: a record another transaction
 * committed first (unique_violation) is asked again once. */
#define SINK_INBOX_ATTEMPTS 2

enum sink_verdict {
	SINK_APPLIED,   /* new: effect and record committed */
	SINK_DUPLICATE, /* applied before with this payload: nothing done */
	SINK_MISMATCH,  /* the key was applied with another payload */
	SINK_STALE,     /* applied under a higher fence: this caller was fenced out */
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
};

/* Connect to conninfo and check the inbox schema serves the consumer's
 * protocol (the sink's role needs outbox_consumer's grants). OB_OK or
 * OB_EDB with err. */
int sink_inbox_open(const char *conninfo, struct sink_inbox **out, char *err, size_t errlen);

/* Apply call once by its (topic, key), source ''. The verdict, and for
 * SINK_STALE the fence the message was applied under. OB_OK for every
 * verdict but SINK_FAILED (OB_EDB, err says why). */
int sink_inbox_apply(struct sink_inbox *in, const struct sink_call *call,
    enum sink_verdict *verdict, int64_t *applied_fence, char *err, size_t errlen);

void sink_inbox_close(struct sink_inbox *in);

#endif
