/*
 * prove.h - the history checker behind `outboxctl prove`: what happened to
 * every message created at or after a time, judged from the producer
 * database (outbox schema) and the consumer database (inbox schema)
 * together, per dedup identity (source, topic, idempotency key).
 *
 * prove_sql.c reads both databases (set-based statements, a consistent
 * snapshot per database) and fills a struct prove_result; prove_cmd.c
 * parses the command line and prints it. Nothing here writes anything.
 */
#ifndef OUTBOX_CTL_PROVE_H
#define OUTBOX_CTL_PROVE_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The classes, in the order they are printed. Each is defined in
 * prove_sql.c where it is computed (and in docs/operations.md, "Proving a
 * run"). */
enum prove_class {
	PROVE_COMMITTED,             /* in the outbox: events, retries, dead letters */
	PROVE_DELIVERED,             /* the outbox says delivered */
	PROVE_APPLIED,               /* at least one effect row in the inbox */
	PROVE_PENDING,               /* not yet delivered nor dead */
	PROVE_DEAD,                  /* a dead letter (by reason: prove_reason) */
	PROVE_LOST,                  /* delivered, and no effect row */
	PROVE_DUPLICATED,            /* more than one effect row */
	PROVE_OUT_OF_ORDER,          /* applied before a lower ordering_seq of its key */
	PROVE_PHANTOM,               /* applied, never committed (S1) */
	PROVE_DELIVERED_NOT_APPLIED, /* delivered; neither dedup record nor effect (S7) */
	PROVE_TAKEOVERS,             /* batches taken over (count: the takeovers) */
	PROVE_PARKED,                /* parked webhook calls (at-most-once) */
	PROVE_CLASS_COUNT
};

/* Why a dead letter died: outbox.dead.last_error by its leading words
 * (the relay writes them: relay/retry_policy.c, relay/deliver.c,
 * relay/worker.c). */
enum prove_reason {
	PROVE_REASON_REJECTED,       /* "rejected by consumer: ..." */
	PROVE_REASON_MAX_ATTEMPTS,   /* "max attempts (N) reached; ..." */
	PROVE_REASON_MAX_AGE,        /* "max age (N ms) ..." */
	PROVE_REASON_PAYLOAD,        /* "payload larger than --max-payload" */
	PROVE_REASON_NO_ROUTE,       /* "no route for topic '...'" */
	PROVE_REASON_OTHER,
	PROVE_REASON_COUNT
};

/* One listed member of a class. id: the message id (the outbox's; for a
 * phantom the id the inbox recorded; for a takeover the batch id). Every
 * string is owned by the result; topic, key and detail may be NULL. */
struct prove_item {
	int64_t id;
	char *topic;
	char *key;
	char *detail; /* what the class says of it ("2 effect rows", a dead letter's error) */
	int reason;   /* PROVE_DEAD: an enum prove_reason; else -1 */
};

/* A class: how many are in it, and the first ones (by id; at most
 * max_ids of struct prove_query). */
struct prove_list {
	int64_t count;
	struct prove_item *items; /* owned */
	size_t n;
	size_t cap;               /* items allocated */
};

struct prove_query {
	const char *since;  /* the start of the window, a timestamptz text (prove_since_ago) */
	const char *source; /* the relay's source; "" = the empty (legacy) source */
	int64_t max_ids;    /* listed per class (0: counts only) */
};

struct prove_result {
	struct prove_list classes[PROVE_CLASS_COUNT];
	int64_t dead_by_reason[PROVE_REASON_COUNT];
	int64_t takeover_batches;   /* batches with takeovers > 0 (classes[TAKEOVERS] counts takeovers) */
	/* The oldest message outbox.events still holds (id 0: none). The
	 * verdict is partial when the window starts before it and lower ids
	 * were handed out: housekeeping truncated them (or they rolled back). */
	int64_t oldest_event_id;
	char oldest_event_at[40];   /* ISO 8601 UTC; "" when none */
	bool partial;
	/* outbox.events holds no message at all (housekeeping truncated every
	 * slot): no applied identity can be judged a phantom */
	bool emptied;
	int64_t unjudged;           /* inbox identities left out of phantom: below oldest_event_id */
	/* Records of other sources in the window (a hint when nothing of
	 * the source given was applied): how many, and one of them. */
	int64_t other_source_records;
	char other_source[64];
};

/* The time ago_ms milliseconds before the producer database's now(), as
 * timestamptz text into out (outlen >= 40). OB_OK or OB_EDB, a one-line
 * reason in err. */
int prove_since_ago(PGconn *outbox, int64_t ago_ms, char *out, size_t outlen, char *err,
    size_t errlen);

/* Judge the window q describes. outbox: the producer database, inbox: the
 * consumer's (both borrowed, outside any transaction; each is read in one
 * read-only REPEATABLE READ transaction, the outbox first: a delivery
 * recorded in its snapshot was applied before the inbox's). On OB_OK *r is
 * filled (release with prove_result_free); else OB_EDB or OB_ENOMEM with a
 * one-line reason in err, and *r holds nothing. Blocks on both databases. */
int prove_run(PGconn *outbox, PGconn *inbox, const struct prove_query *q,
    struct prove_result *r, char *err, size_t errlen);

void prove_result_free(struct prove_result *r);

/* "lost", "out_of_order", ...: the class's name in the text and JSON. */
const char *prove_class_name(enum prove_class c);

/* "rejected by consumer", "max attempts", ... */
const char *prove_reason_name(enum prove_reason reason);

/* Whether a member of c breaks the run: lost, duplicated, out of order,
 * phantom, delivered not applied; pending too when drained. */
bool prove_class_violates(enum prove_class c, bool drained);

#endif
