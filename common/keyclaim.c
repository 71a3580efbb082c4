/*
 * keyclaim.c - the idempotency-key claim state machine (see keyclaim.h).
 *
 * The claim is one statement: a DONE row is answered as it is (replay or
 * mismatch, no write); otherwise an upsert inserts STARTED, or takes over a
 * STARTED row whose lease expired (same fingerprint only, unless it was
 * released), bumping the fence. When it does neither, the row is read and
 * ob_key_decide says what it means. Every later write is conditioned on
 * the fence.
 *
 * A claim that took the key commits asynchronously by default
 * (synchronous_commit off for its own transaction only, set inside the
 * statement so it costs no round trip): it becomes visible at once, but
 * does not wait for its WAL flush. Losing it in a server crash is harmless
 * when the work it guards is a write in the same database (the producer's
 * create): the holder's connection dies with the server, so its work never
 * commits, and the key is simply absent again. Any work that does commit
 * is synchronous and flushes the WAL up to its own commit record, and so
 * also the claim written before it. This saves one of the two flush waits
 * of every create.
 *
 * A durable claim (ob_keyclaim_opts.durable: the webhook handler) waits
 * for its flush instead, whatever the session's or the server's setting
 * (off is raised to on, for this transaction only, in the same statement;
 * a stronger setting is kept): its work is outside the database (an HTTP
 * call made right after the claim), so a claim lost in a crash would let
 * the next attempt do it again, as if it had never been claimed. A replay
 * (a DONE row answered from a read) still writes nothing and waits for
 * nothing.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/err.h"
#include "outbox/keyclaim.h"
#include "outbox/pg.h"

/* A claim can race with a release that deletes the row between the upsert
 * and the read; trying again a few times settles it. */
#define KEYCLAIM_MAX_TRIES 3
#define STR_(x) #x
#define STR(x) STR_(x)

enum ob_key_verdict
ob_key_decide(const struct ob_key_row *row)
{
	switch (row->state) {
	case OB_KEY_ABSENT:
		return OB_KEY_PROCEED;
	case OB_KEY_DONE:
		return row->fingerprint_matches ? OB_KEY_REPLAY : OB_KEY_MISMATCH;
	case OB_KEY_UNKNOWN:
		return OB_KEY_PARKED;
	case OB_KEY_STARTED:
		if (row->released)
			return OB_KEY_PROCEED;
		if (!row->fingerprint_matches)
			return OB_KEY_MISMATCH;
		return row->lease_live ? OB_KEY_BUSY : OB_KEY_PROCEED;
	}
	return OB_KEY_BUSY;
}

const char *
ob_key_verdict_name(enum ob_key_verdict v)
{
	switch (v) {
	case OB_KEY_PROCEED: return "proceed";
	case OB_KEY_REPLAY: return "replay";
	case OB_KEY_BUSY: return "busy";
	case OB_KEY_MISMATCH: return "mismatch";
	case OB_KEY_PARKED: return "parked";
	}
	return "unknown";
}

const char *
ob_key_state_name(enum ob_key_state s)
{
	switch (s) {
	case OB_KEY_ABSENT: return "absent";
	case OB_KEY_STARTED: return "started";
	case OB_KEY_DONE: return "done";
	case OB_KEY_UNKNOWN: return "unknown";
	}
	return "unknown";
}

/* The stored response at columns col (status) and col + 1 (body) of res. */
static int
stored_response(const PGresult *res, int col, struct ob_key_claim *c, const char *what,
    char *err, size_t errlen)
{
	c->response_status = PQgetisnull(res, 0, col) ? 0 : (int)ob_pg_int64(res, 0, col);
	if (!PQgetisnull(res, 0, col + 1) &&
	    (c->response_body = strdup(PQgetvalue(res, 0, col + 1))) == NULL) {
		snprintf(err, errlen, "%s: out of memory", what);
		return OB_ENOMEM;
	}
	return OB_OK;
}

/* The claim's commit: asynchronous (the default), or at least
 * synchronous_commit on (durable) without lowering a stronger setting. */
#define SYNC_OFF "set_config('synchronous_commit', 'off', true) = 'off'"
#define SYNC_ON "set_config('synchronous_commit', CASE current_setting('synchronous_commit')" \
	" WHEN 'off' THEN 'on' ELSE current_setting('synchronous_commit') END, true) <> 'off'"
/* With a floor, a new row's created_at is the later of now() and the
 * floor, $4 in Unix microseconds (else the column's default, now()). */
#define CREATED_FLOOR ", greatest(now(), 'epoch'::timestamptz + $4::bigint * interval '1 microsecond')"

/* The upsert, after a look for a DONE row: a replay (or a reuse of the key
 * for another body) is answered from that read alone, with no row lock, no
 * transaction id and so no WAL flush; replays are the common retry. Done is
 * final, so reading it without a lock is safe: row->state is then DONE.
 * Otherwise: (fence, takeover, expired_holder) when this caller now holds
 * the key, or neither (row->state stays ABSENT and the row is read next).
 * expired_holder comes from the statement's snapshot (CTE o), which a
 * concurrent change of the row between that snapshot and the upsert's row
 * lock could make stale: only a holder whose lease expired within that
 * instant. */
static int
try_take(PGconn *conn, const char *table, const char *key, const void *fp,
    size_t fplen, int64_t lease_ms, const struct ob_keyclaim_opts *opts, bool *taken,
    struct ob_key_claim *c, struct ob_key_row *row, char *err, size_t errlen)
{
	char sql[2400], lease[24], floor_us[24];
	bool durable = opts != NULL && opts->durable;
	bool floored = opts != NULL && opts->created_floor_us != 0;
	snprintf(sql, sizeof(sql),
	    "WITH d AS (SELECT fingerprint = encode(sha256($2::bytea), 'hex') AS same,"
	    "                  response_status, response_body"
	    "             FROM %s WHERE idempotency_key = $1 AND state = 'done'),"
	    " o AS (SELECT lease_until <> '-infinity' AS expired"
	    "         FROM %s WHERE idempotency_key = $1 AND state = 'started'),"
	    " t AS (INSERT INTO %s AS k (idempotency_key, fingerprint, state, fence, lease_until%s)"
	    "  SELECT $1, encode(sha256($2::bytea), 'hex'), 'started', 1,"
	    "         clock_timestamp() + $3::bigint * interval '1 millisecond'%s"
	    "   WHERE NOT EXISTS (SELECT 1 FROM d)"
	    /* ob_key_decide's PROCEED for a STARTED row: released, or the
	     * same fingerprint with the lease expired */
	    " ON CONFLICT (idempotency_key) DO UPDATE"
	    "   SET fence = k.fence + 1, lease_until = EXCLUDED.lease_until,"
	    "       fingerprint = EXCLUDED.fingerprint"
	    " WHERE k.state = 'started' AND (k.lease_until = '-infinity'"
	    "   OR (k.fingerprint = EXCLUDED.fingerprint AND k.lease_until < clock_timestamp()))"
	    " RETURNING k.fence)"
	    " SELECT true, fence, NULL::boolean, NULL::int, NULL::text,"
	    "        COALESCE((SELECT expired FROM o), false) FROM t"
	    /* Whether the claim's commit waits for the disk (see the top). */
	    "  WHERE %s"
	    " UNION ALL SELECT false, NULL, same, response_status, response_body, NULL FROM d",
	    table, table, table, floored ? ", created_at" : "", floored ? CREATED_FLOOR : "",
	    durable ? SYNC_ON : SYNC_OFF);
	snprintf(lease, sizeof(lease), "%" PRId64, lease_ms);
	snprintf(floor_us, sizeof(floor_us), "%" PRId64, floored ? opts->created_floor_us : 0);
	const char *params[4] = { key, fp, lease, floor_us };
	int lens[4] = { 0, (int)fplen, 0, 0 };
	int formats[4] = { 0, 1, 0, 0 };
	/* Prepared per table and kind: "ob_keyclaim_take:app.idempotency_keys",
	 * "ob_keyclaim_take_durable_floor:inbox.webhook_calls". */
	char name[200];
	snprintf(name, sizeof(name), "ob_keyclaim_take%s%s:%s", durable ? "_durable" : "",
	    floored ? "_floor" : "", table);
	PGresult *res = ob_pg_exec_prepared(conn, name, sql, floored ? 4 : 3, params, lens,
	    formats);
	int rc = ob_pg_check(res, PGRES_TUPLES_OK, "claim key", err, errlen);
	*taken = false;
	row->state = OB_KEY_ABSENT;
	if (rc == OB_OK && PQntuples(res) == 1 && PQgetvalue(res, 0, 0)[0] == 't') {
		*taken = true;
		c->fence = ob_pg_int64(res, 0, 1);
		c->takeover = c->fence > 1;
		c->expired_holder = c->takeover && PQgetvalue(res, 0, 5)[0] == 't';
	} else if (rc == OB_OK && PQntuples(res) == 1) {
		row->state = OB_KEY_DONE;
		row->fingerprint_matches = PQgetvalue(res, 0, 2)[0] == 't';
		row->lease_live = false;
		row->released = false;
		rc = stored_response(res, 3, c, "claim key", err, errlen);
	}
	PQclear(res);
	return rc;
}

/* Read the row the upsert did not take (fp NULL: no body to compare).
 * *found false when it vanished. */
static int
read_row(PGconn *conn, const char *table, const char *key, const void *fp,
    size_t fplen, struct ob_key_row *row, struct ob_key_claim *out, bool *found,
    char *err, size_t errlen)
{
	char sql[768];
	snprintf(sql, sizeof(sql),
	    "SELECT state, COALESCE(fingerprint = encode(sha256($2::bytea), 'hex'), false),"
	    "       lease_until > clock_timestamp(), lease_until = '-infinity',"
	    /* a released (-infinity) or parked (infinity) lease has no time left */
	    "       CASE WHEN isfinite(lease_until) THEN GREATEST(0,"
	    "         ceil(extract(epoch FROM lease_until - clock_timestamp()) * 1000))::bigint"
	    "       ELSE 0 END,"
	    "       response_status, response_body"
	    "  FROM %s WHERE idempotency_key = $1", table);
	const char *params[2] = { key, fp };
	int lens[2] = { 0, (int)fplen };
	int formats[2] = { 0, 1 };
	PGresult *res = PQexecParams(conn, sql, 2, NULL, params, lens, formats, 0);
	int rc = ob_pg_check(res, PGRES_TUPLES_OK, "read key", err, errlen);
	if (rc == OB_OK) {
		*found = PQntuples(res) == 1;
		if (*found) {
			const char *st = PQgetvalue(res, 0, 0);
			row->state = strcmp(st, "done") == 0 ? OB_KEY_DONE
			    : strcmp(st, "unknown") == 0     ? OB_KEY_UNKNOWN
			                                     : OB_KEY_STARTED;
			row->fingerprint_matches = PQgetvalue(res, 0, 1)[0] == 't';
			row->lease_live = PQgetvalue(res, 0, 2)[0] == 't';
			row->released = PQgetvalue(res, 0, 3)[0] == 't';
			out->retry_after_ms = ob_pg_int64(res, 0, 4);
			rc = stored_response(res, 5, out, "read key", err, errlen);
		}
	}
	PQclear(res);
	return rc;
}

int
ob_keyclaim_claim(PGconn *conn, const char *table, const char *key,
    const void *fp, size_t fplen, int64_t lease_ms, struct ob_key_claim *out,
    char *err, size_t errlen)
{
	return ob_keyclaim_claim_with(conn, table, key, fp, fplen, lease_ms, NULL, out, err,
	    errlen);
}

int
ob_keyclaim_claim_with(PGconn *conn, const char *table, const char *key,
    const void *fp, size_t fplen, int64_t lease_ms, const struct ob_keyclaim_opts *opts,
    struct ob_key_claim *out, char *err, size_t errlen)
{
	for (int attempt = 0; attempt < KEYCLAIM_MAX_TRIES; attempt++) {
		struct ob_key_claim c;
		memset(&c, 0, sizeof(c));
		bool taken = false, found = true;
		struct ob_key_row row;
		int rc = try_take(conn, table, key, fp, fplen, lease_ms, opts, &taken, &c, &row,
		    err, errlen);
		if (rc != OB_OK) {
			ob_keyclaim_result_fini(&c);
			return rc;
		}
		if (taken) {
			c.verdict = OB_KEY_PROCEED;
			*out = c;
			return OB_OK;
		}
		if (row.state != OB_KEY_DONE)
			rc = read_row(conn, table, key, fp, fplen, &row, &c, &found, err, errlen);
		if (rc != OB_OK) {
			ob_keyclaim_result_fini(&c);
			return rc;
		}
		if (!found)
			continue; /* released in between: try to take it again */
		c.verdict = ob_key_decide(&row);
		if (c.verdict != OB_KEY_REPLAY) {
			/* Only a replay hands out the stored response. */
			ob_keyclaim_result_fini(&c);
			c.response_status = 0;
		}
		if (c.verdict == OB_KEY_PROCEED) {
			/* The lease expired between the upsert and the read. */
			ob_keyclaim_result_fini(&c);
			continue;
		}
		*out = c;
		return OB_OK;
	}
	snprintf(err, errlen, "claim key: the key changed hands %d times in a row",
	    KEYCLAIM_MAX_TRIES);
	return OB_EDB;
}

void
ob_keyclaim_result_fini(struct ob_key_claim *c)
{
	free(c->response_body);
	c->response_body = NULL;
}

int
ob_keyclaim_lookup(PGconn *conn, const char *table, const char *key,
    struct ob_key_row *row, struct ob_key_claim *out, bool *found, char *err,
    size_t errlen)
{
	memset(row, 0, sizeof(*row));
	memset(out, 0, sizeof(*out));
	int rc = read_row(conn, table, key, NULL, 0, row, out, found, err, errlen);
	if (rc == OB_OK && !*found)
		row->state = OB_KEY_ABSENT;
	if (rc == OB_OK && *found && row->state == OB_KEY_DONE)
		out->verdict = OB_KEY_REPLAY;
	return rc;
}

int
ob_keyclaim_has(PGconn *conn, const char *table, const char *key, const void *fp,
    size_t fplen, bool *has, char *err, size_t errlen)
{
	struct ob_key_row row;
	struct ob_key_claim c;
	bool found = false;
	memset(&row, 0, sizeof(row));
	memset(&c, 0, sizeof(c));
	int rc = read_row(conn, table, key, fp, fplen, &row, &c, &found, err, errlen);
	ob_keyclaim_result_fini(&c);
	*has = rc == OB_OK && found && row.fingerprint_matches;
	return rc;
}

/* A write conditioned on fence that must hit exactly one row: none means
 * the key was taken over meanwhile (OB_EFENCED, what names the step). */
static int
fenced_write(PGconn *conn, const char *sql, int nparams, const char *const *params,
    const char *what, int64_t fence, char *err, size_t errlen)
{
	int64_t rows = 0;
	int rc = ob_pg_command(conn, sql, nparams, params, what, &rows, err, errlen);
	if (rc == OB_OK && rows != 1) {
		snprintf(err, errlen, "%s: fenced out (token %" PRId64 " no longer holds the key)",
		    what, fence);
		rc = OB_EFENCED;
	}
	return rc;
}

int
ob_keyclaim_complete(PGconn *conn, const char *table, const char *key,
    int64_t fence, int status, const char *body, char *err, size_t errlen)
{
	char sql[512], f[24], s[16];
	snprintf(sql, sizeof(sql),
	    OB_KEYCLAIM_DONE_SQL("%s", "$1", "$3::int", "$4")
	    " AND ($2::bigint = " STR(OB_KEYCLAIM_ANY_FENCE) " OR fence = $2::bigint)"
	    " AND state = 'started'", table);
	snprintf(f, sizeof(f), "%" PRId64, fence);
	snprintf(s, sizeof(s), "%d", status);
	const char *params[4] = { key, f, s, body };
	return fenced_write(conn, sql, 4, params, "complete key", fence, err, errlen);
}

int
ob_keyclaim_record_done(PGconn *conn, const char *table, const char *key,
    const void *fp, size_t fplen, int status, const char *body, char *err, size_t errlen)
{
	char sql[512], s[16];
	snprintf(sql, sizeof(sql),
	    "INSERT INTO %s (idempotency_key, fingerprint, state, fence, lease_until,"
	    "   response_status, response_body, completed_at)"
	    " VALUES ($1, encode(sha256($2::bytea), 'hex'), 'done', 1, clock_timestamp(), $3::int,"
	    "         $4, clock_timestamp())"
	    " ON CONFLICT (idempotency_key) DO NOTHING", table);
	snprintf(s, sizeof(s), "%d", status);
	const char *params[4] = { key, fp, s, body };
	int lens[4] = { 0, (int)fplen, 0, 0 };
	int formats[4] = { 0, 1, 0, 0 };
	PGresult *res = PQexecParams(conn, sql, 4, NULL, params, lens, formats, 0);
	int rc = ob_pg_check(res, PGRES_COMMAND_OK, "record key", err, errlen);
	if (rc == OB_OK && strcmp(PQcmdTuples(res), "1") != 0) {
		snprintf(err, errlen, "record key: already recorded");
		rc = OB_EEXIST;
	}
	PQclear(res);
	return rc;
}

/* End the lease of key while it carries fence: until is the SQL of the new
 * lease_until. */
static int
end_lease(PGconn *conn, const char *table, const char *key, int64_t fence,
    const char *until, const char *what, char *err, size_t errlen)
{
	char sql[256], f[24];
	snprintf(sql, sizeof(sql),
	    "UPDATE %s SET lease_until = %s"
	    " WHERE idempotency_key = $1 AND fence = $2::bigint AND state = 'started'",
	    table, until);
	snprintf(f, sizeof(f), "%" PRId64, fence);
	const char *params[2] = { key, f };
	return ob_pg_command(conn, sql, 2, params, what, NULL, err, errlen);
}

int
ob_keyclaim_release(PGconn *conn, const char *table, const char *key,
    int64_t fence, char *err, size_t errlen)
{
	/* The row stays, so the fence only ever grows: a key released and
	 * claimed again must not hand out a token a stale holder still has.
	 * lease_until -infinity marks it free for any body. */
	return end_lease(conn, table, key, fence, "'-infinity'", "release key", err, errlen);
}

int
ob_keyclaim_expire(PGconn *conn, const char *table, const char *key,
    int64_t fence, char *err, size_t errlen)
{
	return end_lease(conn, table, key, fence, "clock_timestamp()", "expire key", err, errlen);
}

int
ob_keyclaim_park(PGconn *conn, const char *table, const char *key, int64_t fence,
    const char *topic, const char *error, char *err, size_t errlen)
{
	char sql[512], f[24];
	snprintf(sql, sizeof(sql),
	    "UPDATE %s SET state = 'unknown', lease_until = 'infinity', topic = $3,"
	    "       parked_at = clock_timestamp(), parked_error = $4"
	    " WHERE idempotency_key = $1 AND fence = $2::bigint AND state = 'started'", table);
	snprintf(f, sizeof(f), "%" PRId64, fence);
	const char *params[4] = { key, f, topic, error };
	return fenced_write(conn, sql, 4, params, "park key", fence, err, errlen);
}

int
ob_keyclaim_resolve(PGconn *conn, const char *table, const char *key, const char *topic,
    bool sent, const char *note, char *err, size_t errlen)
{
	char sql[512];
	/* sent: final, like a completion (a redelivery is a replay); not
	 * sent: released, so the next claim (token + 1) does it once more. */
	snprintf(sql, sizeof(sql), sent
	    ? "UPDATE %s SET state = 'done', response_status = NULL, response_body = $3,"
	      "       completed_at = clock_timestamp(), lease_until = clock_timestamp()"
	      " WHERE idempotency_key = $1 AND topic = $2 AND state = 'unknown'"
	    : "UPDATE %s SET state = 'started', lease_until = '-infinity'"
	      " WHERE idempotency_key = $1 AND topic = $2 AND state = 'unknown'", table);
	const char *params[3] = { key, topic, note };
	int64_t rows = 0;
	int rc = ob_pg_command(conn, sql, sent ? 3 : 2, params, "resolve key", &rows, err,
	    errlen);
	if (rc == OB_OK && rows != 1) {
		snprintf(err, errlen, "resolve key: no parked call of that key and topic");
		rc = OB_EFENCED;
	}
	return rc;
}

int
ob_keyclaim_gc(PGconn *conn, const char *table, int64_t retention_ms,
    int batch, int64_t *deleted, char *err, size_t errlen)
{
	char sql[512], r[24], b[16];
	/* now(), not clock_timestamp(): a volatile cutoff cannot use the
	 * created_at index. = ANY(ARRAY(...)) keeps the delete a primary-key
	 * lookup per row: as IN (...) it was planned as a hash join over a
	 * scan of the whole table, twice per batch (test_scans). */
	snprintf(sql, sizeof(sql),
	    "DELETE FROM %s WHERE idempotency_key = ANY(ARRAY("
	    "  SELECT idempotency_key FROM %s"
	    "   WHERE created_at < now() - $1::bigint * interval '1 millisecond'"
	    "     AND (state = 'done' OR lease_until < clock_timestamp())"
	    "   LIMIT $2::int FOR UPDATE SKIP LOCKED))", table, table);
	snprintf(r, sizeof(r), "%" PRId64, retention_ms);
	snprintf(b, sizeof(b), "%d", batch);
	const char *params[2] = { r, b };
	return ob_pg_command(conn, sql, 2, params, "key gc", deleted, err, errlen);
}
