/*
 * keyclaim.h - the idempotency-key claim state machine, shared by the
 * producer's HTTP API and the consumer's webhook handler.
 *
 * A key row moves ABSENT -> STARTED -> DONE (a released STARTED row is free
 * to be claimed again, by any body, with the next token). A holder that
 * cannot tell whether its work happened may PARK its key instead
 * (STARTED -> UNKNOWN, the webhook's at-most-once mode): nobody claims it
 * again until an operator resolves it, to DONE (it happened) or back to a
 * released STARTED (it did not). STARTED carries a lease and a fencing token: a request
 * that finds a live lease is told BUSY (HTTP 409); one that finds an expired
 * lease takes the key over with the token bumped, and the stale holder's
 * late completion is refused because its token no longer matches.
 *
 * The claim commits on its own (autocommit; without waiting for the WAL
 * flush unless it is durable: see keyclaim.c), so concurrent requests see
 * it.
 * The completion runs inside the caller's transaction, next to the business
 * write (or after the non-transactional call), conditioned on the token:
 * either the key is marked DONE by THIS holder together with its effect, or
 * nothing commits.
 *
 * The table (its name is the caller's, e.g. app.idempotency_keys) must have:
 *   idempotency_key text PRIMARY KEY, fingerprint text NOT NULL,
 *   state text NOT NULL ('started' | 'done'), fence bigint NOT NULL,
 *   lease_until timestamptz NOT NULL, response_status integer,
 *   response_body text, created_at timestamptz NOT NULL DEFAULT now(),
 *   completed_at timestamptz
 * and, for ob_keyclaim_park and ob_keyclaim_resolve only, state 'unknown'
 * allowed and topic text, parked_at timestamptz, parked_error text
 * (inbox.webhook_calls since sql/inbox/006_webhook_parked.sql).
 */
#ifndef OUTBOX_KEYCLAIM_H
#define OUTBOX_KEYCLAIM_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ob_key_state {
	OB_KEY_ABSENT = 0,  /* no row */
	OB_KEY_STARTED,     /* claimed, work in progress under a lease */
	OB_KEY_DONE,        /* completed; the stored response is final */
	OB_KEY_UNKNOWN,     /* parked: whether the work happened is unknown; only
	                     * an operator moves it on (ob_keyclaim_resolve) */
};

/* What a claim attempt tells the caller to do. */
enum ob_key_verdict {
	OB_KEY_PROCEED = 1, /* this caller holds the key now: do the work */
	OB_KEY_REPLAY,      /* done before with the same fingerprint: replay */
	OB_KEY_BUSY,        /* started by another holder, lease live: 409 */
	OB_KEY_MISMATCH,    /* the key was used with a different fingerprint: 422 */
	OB_KEY_PARKED,      /* parked (UNKNOWN): do nothing until it is resolved */
};

/* The observed row, as the decision needs it. */
struct ob_key_row {
	enum ob_key_state state;
	bool fingerprint_matches;
	bool lease_live;
	bool released;      /* STARTED, given up by its holder (ob_keyclaim_release) */
};

/* THE transition function: given the row a claim found (state ABSENT when
 * none), the verdict. The whole rule:
 *   ABSENT                          -> PROCEED (token 1)
 *   DONE, same fingerprint          -> REPLAY
 *   DONE, other fingerprint         -> MISMATCH
 *   STARTED, released               -> PROCEED (any fingerprint, token + 1)
 *   STARTED, other fingerprint      -> MISMATCH
 *   STARTED, same, lease live       -> BUSY
 *   STARTED, same, lease expired    -> PROCEED (a takeover, token + 1)
 *   UNKNOWN (parked), any           -> PARKED
 * The claim's upsert (keyclaim.c) takes the key exactly when this says
 * PROCEED; its test (test_keyclaim_decide) is this table. */
enum ob_key_verdict ob_key_decide(const struct ob_key_row *row);

const char *ob_key_verdict_name(enum ob_key_verdict v);
const char *ob_key_state_name(enum ob_key_state s);

/* Outcome of ob_keyclaim_claim. Owned strings: release with
 * ob_keyclaim_result_fini. */
struct ob_key_claim {
	enum ob_key_verdict verdict;
	int64_t fence;          /* PROCEED: the token this caller holds */
	bool takeover;          /* PROCEED: an expired holder was fenced out */
	int response_status;    /* REPLAY: the stored status */
	char *response_body;    /* REPLAY: the stored body (may be NULL) */
	int64_t retry_after_ms; /* BUSY: time left on the holder's lease */
	bool expired_holder;    /* PROCEED, takeover: the previous holder's lease
	                         * ran out (it may have done the work), rather than
	                         * it released the key (it did not) */
};

/* Claim key in table (a trusted identifier, never user input) for a request
 * whose fingerprint input is fp[0..fplen) (digested with sha256 by the
 * server). Runs in autocommit: conn must not be inside a transaction.
 * OB_OK with *out filled, or OB_EDB with the reason in err. */
int ob_keyclaim_claim(PGconn *conn, const char *table, const char *key,
    const void *fp, size_t fplen, int64_t lease_ms, struct ob_key_claim *out,
    char *err, size_t errlen);

/* How ob_keyclaim_claim_with claims (all zero: as ob_keyclaim_claim). */
struct ob_keyclaim_opts {
	/* The claim's commit waits for its WAL flush, whatever the session's
	 * or the server's synchronous_commit (off is raised to on for that
	 * transaction; a stronger setting is kept): for work outside the
	 * database made right after the claim (the webhook's HTTP call),
	 * which a claim lost in a crash would let the next attempt do again.
	 * false: the claim commits asynchronously, enough when the work is a
	 * write in the same database (keyclaim.c says why). */
	bool durable;
	/* 0, or Unix microseconds: a new row's created_at is the later of
	 * now() and this (the webhook: its message's created_at), so that
	 * ob_keyclaim_gc, which counts from created_at, keeps the claim until
	 * the work it guards is older than the retention by the database's
	 * clock, whatever clock stamped the work. */
	int64_t created_floor_us;
};

/* ob_keyclaim_claim made as opts says (NULL: as ob_keyclaim_claim).
 * Borrows opts. Same results. */
int ob_keyclaim_claim_with(PGconn *conn, const char *table, const char *key,
    const void *fp, size_t fplen, int64_t lease_ms, const struct ob_keyclaim_opts *opts,
    struct ob_key_claim *out, char *err, size_t errlen);

void ob_keyclaim_result_fini(struct ob_key_claim *c);

/* Read key's row without claiming it (after being fenced out: what did the
 * winner do?). *found false when there is none; else row (fingerprint_matches
 * is false: no body to compare) and, when DONE, the stored response in out,
 * when STARTED the time left on its lease. OB_OK or OB_EDB. */
int ob_keyclaim_lookup(PGconn *conn, const char *table, const char *key,
    struct ob_key_row *row, struct ob_key_claim *out, bool *found, char *err,
    size_t errlen);

/* Whether key has a row, in any state, whose fingerprint is fp's (the same
 * request claimed it before: the webhook handler keeps a message on the key
 * its earlier attempts used). Reads only. *has false when there is none or
 * it is another request's. OB_OK or OB_EDB. */
int ob_keyclaim_has(PGconn *conn, const char *table, const char *key, const void *fp,
    size_t fplen, bool *has, char *err, size_t errlen);

/* SQL fragments for a caller that fuses the completion with its own work in
 * one statement (the producer's atomic creates). TABLE is the key table, the
 * other arguments SQL text ("$5::text"). The statement starts with HELD_CTE,
 * "WITH k AS (...),": one row, locked, while KEY still carries FENCE (NOFENCE
 * true: whoever holds it, the test-only broken switch); the caller's own
 * CTEs follow, built on k, the last named b with the response in b.body
 * (no row: fenced out); DONE_CTE, " d AS (...)", marks the key done with a
 * 201 and that body when b has a row. The caller's final SELECT reads b and
 * (SELECT count(*) FROM d). */
#define OB_KEYCLAIM_HELD_CTE(TABLE, KEY, FENCE, NOFENCE)                        \
	"WITH k AS (SELECT 1 FROM " TABLE " WHERE idempotency_key = " KEY         \
	" AND (" NOFENCE " OR (fence = " FENCE " AND state = 'started')) FOR UPDATE),"
#define OB_KEYCLAIM_DONE_CTE(TABLE, KEY)                                        \
	" d AS (" OB_KEYCLAIM_DONE_SQL(TABLE, KEY, "201", "(SELECT b.body FROM b)")  \
	" AND EXISTS (SELECT 1 FROM b) RETURNING 1)"

/* The completion's UPDATE (ob_keyclaim_complete's, and DONE_CTE's). */
#define OB_KEYCLAIM_DONE_SQL(TABLE, KEY, STATUS, BODY)                          \
	"UPDATE " TABLE " SET state = 'done', response_status = " STATUS ","       \
	" response_body = " BODY ", completed_at = clock_timestamp()"             \
	" WHERE idempotency_key = " KEY

/* Mark the key DONE with the response, only if it still carries fence
 * (OB_KEYCLAIM_ANY_FENCE: whoever holds it, the BROKEN no-fencing modes).
 * Call inside the transaction that commits the work. OB_OK, OB_EFENCED (the
 * key was taken over: roll back), or OB_EDB. body may be NULL. */
#define OB_KEYCLAIM_ANY_FENCE (-1)
int ob_keyclaim_complete(PGconn *conn, const char *table, const char *key,
    int64_t fence, int status, const char *body, char *err, size_t errlen);

/* Store key as DONE with its response without having claimed it: one INSERT,
 * in the caller's transaction. For the producer's split mode (a broken mode
 * kept for demos: the key is recorded only after the work committed). A row
 * already there (a concurrent request recorded the key first): OB_EEXIST,
 * nothing written. Else OB_OK or OB_EDB. */
int ob_keyclaim_record_done(PGconn *conn, const char *table, const char *key,
    const void *fp, size_t fplen, int status, const char *body, char *err, size_t errlen);

/* Give up a STARTED key this caller holds (work failed transiently, or the
 * request turned out invalid and must not be stored), if it still carries
 * fence: the key is free again, for any body, and the next claim gets a
 * bumped token (the row is kept so tokens never repeat). OB_OK (also when
 * it no longer carried fence) or OB_EDB. */
int ob_keyclaim_release(PGconn *conn, const char *table, const char *key,
    int64_t fence, char *err, size_t errlen);

/* End the lease of a STARTED key this caller holds now, if it still carries
 * fence: the next claim with the same fingerprint takes it over at once,
 * with a bumped token (the webhook handler after a failed call; unlike a
 * release, another body may not take it). OB_OK (also when it no longer
 * carried fence) or OB_EDB. */
int ob_keyclaim_expire(PGconn *conn, const char *table, const char *key,
    int64_t fence, char *err, size_t errlen);

/* Park a STARTED key this caller holds, if it still carries fence: its
 * work may or may not have happened and must not be tried again by anyone
 * (state UNKNOWN, lease_until infinity: no claim takes it, the GC keeps
 * it). topic and error (may be NULL) are stored for the operator. OB_OK,
 * OB_EFENCED (it no longer carried fence: nothing written), or OB_EDB. */
int ob_keyclaim_park(PGconn *conn, const char *table, const char *key, int64_t fence,
    const char *topic, const char *error, char *err, size_t errlen);

/* An operator's verdict on a parked (UNKNOWN) key of topic: sent true ->
 * DONE with no status and note as the stored body (a later claim is a
 * REPLAY); sent false -> released (the next claim takes it, token + 1, and
 * does the work once more). OB_OK, OB_EFENCED (no parked row of that key
 * and topic: nothing written), or OB_EDB. */
int ob_keyclaim_resolve(PGconn *conn, const char *table, const char *key, const char *topic,
    bool sent, const char *note, char *err, size_t errlen);

/* Delete up to batch rows created more than retention_ms ago (DONE rows,
 * and STARTED rows whose lease has expired). *deleted gets the count. */
int ob_keyclaim_gc(PGconn *conn, const char *table, int64_t retention_ms,
    int batch, int64_t *deleted, char *err, size_t errlen);

#endif
