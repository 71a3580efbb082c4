/*
 * inbox.c - the idempotent consumer's core: dedup record and effect commit
 * together, or not at all (the contract is in inbox.h).
 *
 * Two paths give the same answers. The set path (built-in record handler
 * only) sends BEGIN and one statement that inserts every new dedup record
 * and effect row of the batch and answers the keys seen before from their
 * stored records. When that statement fails or cannot decide a message, the
 * transaction is rolled back and the per-message path runs: per message one pipelined round trip
 * (finish the previous message's savepoint, SAVEPOINT, dedup upsert), then
 * the handler's own statements. The dedup upsert returns the stored row of
 * a key seen before (fingerprint, first outcome, detail, time), so that a
 * duplicate is answered with what happened the first time.
 *
 * Nothing here replies or logs per message: the server does both, after
 * this returns.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inbox.h"
#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/pg.h"
#include "outbox/protocol.h"
#include "outbox/sqlstate.h"

#define OID_BYTEA 17
#define OID_INT8 20
#define OID_BYTEA_ARRAY 1001
#define OID_INT8_ARRAY 1016
#define PIPE_MAX 8 /* statements in one pipelined round trip */
#define STR_(x) #x
#define STR(x) STR_(x)

/* The dedup upsert. The record's identity is (source, topic, key) (inbox.h): a
 * conflicting pair is "updated" to itself, which locks it (waiting for an
 * uncommitted inserter, at most lock_timeout) and returns the committed
 * row: inserted (xmax = 0), fingerprint match, first outcome, detail, time
 * applied. The source '' and a named one are one identity (the legacy
 * identity, inbox.h): when a record of the other kind exists (('', topic,
 * key) for a named source, (S, topic, key) for any S for ''), nothing is
 * inserted and that row answers (l), so that a message an old relay sent
 * is not applied again when a relay of a named source redelivers it, nor
 * the other way round. The source gate (sql_gate) makes the other kind's
 * uncommitted records committed ones before this runs. Both probes use
 * the primary key (the COLLATE: see sql_set_dedup). */
#define DEDUP_KEY "convert_from($1, 'UTF8') COLLATE \"default\""
#define DEDUP_TOPIC "convert_from($2, 'UTF8') COLLATE \"default\""
#define DEDUP_FP "encode(sha256($2 || '\\x00'::bytea || $3), 'hex')"
static const char sql_dedup[] =
    "WITH l AS (SELECT fingerprint, outcome, detail, processed_at FROM inbox.processed"
    "   WHERE idempotency_key = " DEDUP_KEY " AND topic = " DEDUP_TOPIC
    "   AND (source = '') <> ($7 = ''::bytea) LIMIT 1),"
    " i AS (INSERT INTO inbox.processed AS p (idempotency_key, topic, message_id, fence,"
    "   fingerprint, created_at, source)"
    "  SELECT convert_from($1, 'UTF8'), convert_from($2, 'UTF8'), $4, $5, " DEDUP_FP ","
    "   'epoch'::timestamptz + $6 * interval '1 microsecond', convert_from($7, 'UTF8')"
    "  WHERE NOT EXISTS (SELECT 1 FROM l)"
    "  ON CONFLICT (idempotency_key, topic, source) DO UPDATE SET fence = p.fence"
    "  RETURNING p.xmax = 0,"
    "   p.fingerprint IS NULL OR p.fingerprint = " DEDUP_FP ","
    "   p.outcome, coalesce(p.detail, ''),"
    "   to_char(p.processed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'))"
    " SELECT * FROM i UNION ALL"
    " SELECT false, l.fingerprint IS NULL OR l.fingerprint = " DEDUP_FP ","
    "   l.outcome, coalesce(l.detail, ''),"
    "   to_char(l.processed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
    " FROM l";

/* The set path: every dedup record and every effect row in one statement.
 * With dedup, one row per message in order: 'A' applied now, 'D' applied
 * before with the same fingerprint (stored outcome, detail, time follow),
 * 'M' applied before with another fingerprint, 'X' not decidable here (a
 * (topic, key) twice in the batch, or committed by another transaction
 * after this statement's snapshot): the per-message path must run. Rows
 * that already exist are not locked: a committed dedup record never
 * changes. convert_from() returns text with collation "C", which the
 * primary key (collation "default") cannot serve even where the two sort
 * alike: without the COLLATE every lookup by key would scan the whole
 * table (the topic gets it too, so that the probe uses both columns). The
 * source '' and a named one are one identity (sql_dedup): a message with
 * a record of the other kind is not inserted, and that record answers it
 * (x prefers the message's own source's record, then the other kind's).
 * Whether a message was inserted now is asked of d as an IN (a hashed
 * subplan), not by joining d: the generic plan expects 10 rows of the
 * unnest and 1 of d, and joined them by a nested loop that compared every
 * pair (249,500 comparisons for a 500-message frame, 33 ms of its 45).
 * The other kind's record is looked up by a LATERAL probe, which can only
 * run per message (by the primary key, sql_set_no_scans), never as a hash
 * of the whole table as an anti-join may. */
static const char sql_set_dedup[] =
    "WITH m AS MATERIALIZED (SELECT n, convert_from(k, 'UTF8') COLLATE \"default\" AS key,"
    "   convert_from(t, 'UTF8') COLLATE \"default\" AS topic, p, i, f, c, o, s,"
    "   encode(sha256(t || '\\x00'::bytea || p), 'hex') AS fp,"
    "   convert_from($9, 'UTF8') COLLATE \"default\" AS source"
    "  FROM unnest($1::bytea[], $2::bytea[], $3::bytea[], $4::int8[], $5::int8[],"
    "    $6::int8[], $7::bytea[], $8::int8[]) WITH ORDINALITY AS u(k, t, p, i, f, c, o, s, n)),"
    " fst AS (SELECT DISTINCT ON (key, topic) key, topic, n FROM m ORDER BY key, topic, n),"
    " d AS (INSERT INTO inbox.processed (idempotency_key, topic, message_id, fence,"
    "   fingerprint, created_at, source)"
    "  SELECT m.key, m.topic, m.i, m.f, m.fp,"
    "   'epoch'::timestamptz + m.c * interval '1 microsecond', m.source"
    "  FROM m JOIN fst USING (key, topic, n)"
    "  LEFT JOIN LATERAL (SELECT true AS hit FROM inbox.processed l"
    "   WHERE l.idempotency_key = m.key AND l.topic = m.topic"
    "   AND (l.source = '') <> (m.source = '') LIMIT 1) other ON true"
    "  WHERE other.hit IS NULL"
    "  ORDER BY m.key, m.topic"
    "  ON CONFLICT (idempotency_key, topic, source) DO NOTHING"
    "  RETURNING idempotency_key, topic),"
    " e AS (INSERT INTO inbox.notifications (idempotency_key, topic, payload,"
    "   message_id, ordering_key, ordering_seq, source)"
    "  SELECT m.key, m.topic, convert_from(m.p, 'UTF8')::jsonb, m.i,"
    "   convert_from(m.o, 'UTF8'), m.s, m.source"
    "  FROM m JOIN fst USING (key, topic, n)"
    "  JOIN d ON d.idempotency_key = m.key AND d.topic = m.topic RETURNING 1)"
    " SELECT CASE WHEN di.ins AND fst.n = m.n THEN 'A'"
    "   WHEN di.ins OR x.idempotency_key IS NULL THEN 'X'"
    "   WHEN x.fingerprint IS NULL OR x.fingerprint = m.fp THEN 'D' ELSE 'M' END,"
    "  x.outcome, coalesce(x.detail, ''),"
    "  to_char(x.processed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),"
    "  (SELECT count(*) FROM e)"
    " FROM m JOIN fst USING (key, topic)"
    " CROSS JOIN LATERAL (SELECT (m.key, m.topic) IN"
    "   (SELECT idempotency_key, topic FROM d) AS ins) di"
    " LEFT JOIN LATERAL (SELECT * FROM inbox.processed x"
    "   WHERE x.idempotency_key = m.key AND x.topic = m.topic"
    "   AND (x.source = m.source OR (x.source = '') <> (m.source = ''))"
    "   AND NOT di.ins ORDER BY x.source = m.source DESC LIMIT 1) x ON true"
    " ORDER BY m.n";
static const char sql_set_nodedup[] =
    "WITH m AS MATERIALIZED (SELECT convert_from(k, 'UTF8') AS key,"
    "   convert_from(t, 'UTF8') AS topic, p, i, o, s"
    "  FROM unnest($1::bytea[], $2::bytea[], $3::bytea[], $4::int8[], $5::int8[],"
    "    $6::int8[], $7::bytea[], $8::int8[]) AS u(k, t, p, i, f, c, o, s)),"
    " e AS (INSERT INTO inbox.notifications (idempotency_key, topic, payload,"
    "   message_id, ordering_key, ordering_seq, source)"
    "  SELECT key, topic, convert_from(p, 'UTF8')::jsonb, i, convert_from(o, 'UTF8'), s,"
    "   convert_from($9, 'UTF8')"
    "  FROM m RETURNING 1)"
    " SELECT count(*) FROM e";

/* The set statement's plan is made once per connection and kept (it is
 * prepared), often while inbox.processed is empty: a fresh inbox, or one
 * analysed when it was. Priced on an empty table, a sequential scan of it
 * is cheapest for each lookup by key, and the plan kept it while the table
 * grew: every message of a frame read the whole table (4,000,000 rows
 * compared for one 1,000-message frame into 4,000 records, 2.2 s; a
 * 50,000-message drain took 5-9 s instead of 1.2). Planned inside this,
 * the lookups are primary-key probes whatever the statistics say. The set
 * path's transaction runs no statement of a handler. */
static const char sql_set_no_scans[] = "SET LOCAL enable_seqscan = off";

/* The source gate (sql/inbox/009_source_gate.sql), the first statement of
 * every dedup transaction: a frame of a named source and one of the source
 * '' wait for each other's open transactions, frames of one kind never. */
static const char sql_gate_named[] = "LOCK TABLE inbox.source_gate IN ROW EXCLUSIVE MODE";
static const char sql_gate_empty[] = "LOCK TABLE inbox.source_gate IN SHARE MODE";
#define GATE_BUSY "the source gate (inbox.source_gate) stayed locked past --lock-timeout:" \
	" a frame of the other source kind (the empty source or a named one) is applying"

/* The gate statement for req, or NULL when none is taken (no dedup, or the
 * broken mode). */
static const char *
gate_sql(const struct inbox_options *opt, const struct ob_wire_request *req)
{
	if (!opt->dedup || (opt->faults != NULL && opt->faults->no_source_gate))
		return NULL;
	return req->source_len > 0 ? sql_gate_named : sql_gate_empty;
}

/* The set statement is prepared on each connection (inbox_conn_setup) under
 * this name: planning it took longer than running it (0.4 ms a batch, at
 * 200 messages/s in batches of one or two). */
#define SET_STMT_NAME "inbox_set"
/* With live_dedup both are prepared: this one holds the other mode's. */
#define SET_STMT_NAME_OTHER "inbox_set_other"
#define SET_NPARAMS 9 /* 8 arrays (inbox_set_args), then the frame's source */
#define SET_NARRAYS 8
static const Oid set_types[SET_NPARAMS] = { OID_BYTEA_ARRAY, OID_BYTEA_ARRAY,
	OID_BYTEA_ARRAY, OID_INT8_ARRAY, OID_INT8_ARRAY, OID_INT8_ARRAY, OID_BYTEA_ARRAY,
	OID_INT8_ARRAY, OID_BYTEA };

/* One statement of a pipelined round trip: sql, or the prepared statement
 * named prepared. */
struct stmt {
	const char *sql;
	int nparams;
	const Oid *types;
	const char *const *values;
	const int *lens;
	const int *formats;
	const char *prepared;
};

/* The database's clock, Unix microseconds. */
static const char sql_clock[] =
    "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::int8";

/* Read the database's clock into c (one round trip). OB_OK or OB_EDB. */
static int
clock_read(PGconn *conn, struct inbox_dbclock *c, char *err, size_t errlen)
{
	int64_t sent = ob_boot_us();
	PGresult *res = PQexec(conn, sql_clock);
	int rc = ob_pg_check(res, PGRES_TUPLES_OK, "read the database's clock", err, errlen);
	if (rc == OB_OK) {
		/* read at or after sent: sent + offset is never behind it */
		c->offset_us = ob_pg_int64(res, 0, 0) - sent;
		c->read_at_us = sent;
	}
	PQclear(res);
	return rc;
}

/* The database's clock now, by c (read again when it is older than
 * INBOX_CLOCK_REFRESH_MS). OB_OK or OB_EDB. */
static int
clock_now(PGconn *conn, struct inbox_dbclock *c, int64_t *now_us, char *err, size_t errlen)
{
	int64_t t = ob_boot_us();
	if (c->read_at_us == 0 || t - c->read_at_us > INBOX_CLOCK_REFRESH_MS * 1000) {
		int rc = clock_read(conn, c, err, errlen);
		if (rc != OB_OK)
			return rc;
		t = ob_boot_us();
	}
	*now_us = t + c->offset_us;
	return OB_OK;
}

int
inbox_conn_setup(PGconn *conn, const struct inbox_options *opt,
    struct inbox_dbclock *clock, char *err, size_t errlen)
{
	char sql[64];
	/* The inbox schema must serve this consumer's protocol (at start and
	 * after every reconnect: a migration may have run meanwhile). */
	int rc = ob_protocol_check(conn, "inbox", "consumer", OB_PROTOCOL_CONSUMER, err, errlen);
	if (rc != OB_OK)
		return rc;
	snprintf(sql, sizeof(sql), "SET lock_timeout = %" PRId64, opt->lock_timeout_ms);
	if ((rc = ob_pg_exec(conn, sql, "set lock_timeout", err, errlen)) != OB_OK)
		return rc;
	/* A reply goes out after COMMIT returned, and the relay records what
	 * it says: the commit must be on disk first, whatever the server's
	 * default (every commit of the session waits then: the batch's, and
	 * the webhook's claim, park, release and expiry). */
	if ((rc = ob_pg_durable_commits(conn, err, errlen)) != OB_OK)
		return rc;
	/* a reconnect may reach another server (a failover): its own clock */
	clock->read_at_us = 0;
	if ((rc = clock_read(conn, clock, err, errlen)) != OB_OK)
		return rc;
	/* A custom plan, the arrays' lengths known, is priced below the
	 * generic one, so the plan cache made one on every execution (1,238
	 * plans in 1,643); the generic plan probes the same primary key. Only
	 * prepared statements and plpgsql heed this: the handlers' one-shot
	 * statements are planned as before. */
	if ((rc = ob_pg_exec(conn, "SET plan_cache_mode = force_generic_plan",
	         "set plan_cache_mode", err, errlen)) != OB_OK)
		return rc;
	PGresult *res = PQprepare(conn, SET_STMT_NAME, opt->dedup ? sql_set_dedup : sql_set_nodedup,
	    SET_NPARAMS, set_types);
	rc = ob_pg_check(res, PGRES_COMMAND_OK, "prepare the set statement", err, errlen);
	PQclear(res);
	if (rc != OB_OK || opt->live_dedup == NULL)
		return rc;
	res = PQprepare(conn, SET_STMT_NAME_OTHER, opt->dedup ? sql_set_nodedup : sql_set_dedup,
	    SET_NPARAMS, set_types);
	rc = ob_pg_check(res, PGRES_COMMAND_OK, "prepare the set statement", err, errlen);
	PQclear(res);
	return rc;
}

static void
set_result(struct inbox_batch *b, uint32_t i, int status, enum inbox_why why,
    const char *detail)
{
	b->results[i].status = (uint8_t)status;
	b->why[i] = (uint8_t)why;
	if (detail != b->details[i])
		snprintf(b->details[i], INBOX_DETAIL_MAX, "%s", detail);
	b->results[i].detail = b->details[i];
	b->results[i].detail_len = (uint16_t)strlen(b->details[i]);
	/* the handler's wish, only where it asked to be called again */
	b->results[i].retry_after_ms = status == OB_WIRE_RETRY ? b->calls[i].retry_after_ms : 0;
}

/* Send n statements in one pipeline and collect one result each (owned by
 * the caller, PQclear; NULL when the pipeline was aborted before it). A
 * statement failing aborts the rest: their results are PIPELINE_ABORTED.
 * OB_OK, or OB_EDB when the connection failed (results all cleared). */
static int
pipe_run(PGconn *conn, const struct stmt *s, int n, PGresult **res, char *err,
    size_t errlen)
{
	for (int i = 0; i < n; i++)
		res[i] = NULL;
	if (PQenterPipelineMode(conn) != 1) {
		snprintf(err, errlen, "pipeline: %s", PQerrorMessage(conn));
		return OB_EDB;
	}
	int rc = OB_OK;
	for (int i = 0; i < n && rc == OB_OK; i++) {
		int sent = s[i].prepared != NULL
		    ? PQsendQueryPrepared(conn, s[i].prepared, s[i].nparams, s[i].values, s[i].lens,
		          s[i].formats, 0)
		    : PQsendQueryParams(conn, s[i].sql, s[i].nparams, s[i].types, s[i].values,
		          s[i].lens, s[i].formats, 0);
		if (sent != 1)
			rc = OB_EDB;
	}
	if (rc == OB_OK && PQpipelineSync(conn) != 1)
		rc = OB_EDB;
	if (rc != OB_OK) {
		snprintf(err, errlen, "pipeline send: %s", PQerrorMessage(conn));
		PQexitPipelineMode(conn);
		return rc;
	}
	for (int i = 0; i < n; i++) {
		res[i] = PQgetResult(conn);
		if (res[i] == NULL) {
			rc = OB_EDB;
			break;
		}
		PGresult *extra;
		while ((extra = PQgetResult(conn)) != NULL) /* end of this query */
			PQclear(extra);
	}
	PGresult *sync = rc == OB_OK ? PQgetResult(conn) : NULL;
	if (sync == NULL || PQresultStatus(sync) != PGRES_PIPELINE_SYNC)
		rc = OB_EDB;
	PQclear(sync);
	if (PQexitPipelineMode(conn) != 1)
		rc = OB_EDB;
	if (rc != OB_OK) {
		snprintf(err, errlen, "pipeline: %s", PQerrorMessage(conn));
		for (int i = 0; i < n; i++) {
			PQclear(res[i]);
			res[i] = NULL;
		}
	}
	return rc;
}

static void
clear_all(PGresult **res, int n)
{
	for (int i = 0; i < n; i++)
		PQclear(res[i]);
}

static bool
is_lock_error(const char *sqlstate)
{
	/* lock_not_available (lock_timeout), deadlock_detected */
	return ob_sqlstate_is(sqlstate, OB_SQLSTATE_LOCK_NOT_AVAILABLE) ||
	    ob_sqlstate_is(sqlstate, OB_SQLSTATE_DEADLOCK_DETECTED);
}

/* Fault points and COMMIT: the last step of both paths. */
static int
commit(PGconn *conn, const struct inbox_options *opt, char *err, size_t errlen)
{
	struct inbox_faults *f = opt->faults;
	if (f != NULL && ob_fault_fire(&f->slow))
		ob_sleep_ms(f->slow_ms);
	if (f != NULL && ob_fault_fire(&f->die_before_commit))
		ob_fault_die("consumer.before_commit");
	int rc = ob_pg_commit(conn, err, errlen);
	if (rc == OB_OK && f != NULL && ob_fault_fire(&f->die_after_commit))
		ob_fault_die("consumer.after_commit");
	return rc;
}

/* A duplicate's answer: what happened the first time. */
static void
duplicate_of(struct inbox_batch *b, uint32_t i, const char *outcome, const char *when,
    const char *detail)
{
	snprintf(b->details[i], INBOX_DETAIL_MAX, "already %s at %s%s%s", outcome, when,
	    detail[0] ? ": " : "", detail);
	set_result(b, i, OB_WIRE_DUPLICATE, INBOX_WHY_DUPLICATE, b->details[i]);
}

/* The set path. OB_OK: committed, every pending message answered.
 * OB_EINVAL: not taken (rolled back; *locked when a key was in flight): the
 * per-message path must run. OB_EDB: the database failed. base_dedup: the
 * mode SET_STMT_NAME was prepared for (inbox_conn_setup). */
static int
apply_set(PGconn *conn, const struct inbox_options *opt, bool base_dedup,
    const struct ob_wire_request *req, struct inbox_batch *b, uint32_t pending,
    bool *locked, char *err, size_t errlen)
{
	if (inbox_set_args(req, b) != OB_OK) {
		snprintf(err, errlen, "out of memory building the batch");
		return OB_ENOMEM;
	}
	const char *values[SET_NPARAMS];
	int lens[SET_NPARAMS], formats[SET_NPARAMS];
	for (int i = 0; i < SET_NARRAYS; i++) {
		values[i] = b->args[i].data;
		lens[i] = (int)b->args[i].len;
		formats[i] = 1;
	}
	/* the frame's source: one value (a bytea, never NULL: "" is a value) */
	values[SET_NARRAYS] = req->source != NULL ? req->source : "";
	lens[SET_NARRAYS] = req->source_len;
	formats[SET_NARRAYS] = 1;
	/* BEGIN, the planner setting, the source gate (when taken), the set
	 * statement */
	struct stmt s[4] = { { "BEGIN", 0, NULL, NULL, NULL, NULL, NULL },
		{ sql_set_no_scans, 0, NULL, NULL, NULL, NULL, NULL } };
	int n = 2;
	const char *gate = gate_sql(opt, req);
	int gate_at = n;
	if (gate != NULL)
		s[n++] = (struct stmt){ gate, 0, NULL, NULL, NULL, NULL, NULL };
	int set_at = n;
	s[n++] = (struct stmt){ NULL, SET_NPARAMS, set_types, values, lens, formats,
		opt->dedup == base_dedup ? SET_STMT_NAME : SET_STMT_NAME_OTHER };
	PGresult *res[4];
	int rc = pipe_run(conn, s, n, res, err, errlen);
	if (rc != OB_OK)
		return rc;
	if (ob_pg_check(res[0], PGRES_COMMAND_OK, "begin", err, errlen) != OB_OK ||
	    ob_pg_check(res[1], PGRES_COMMAND_OK, "set enable_seqscan", err, errlen) != OB_OK) {
		clear_all(res, n);
		ob_pg_rollback(conn);
		return OB_EDB;
	}
	const PGresult *set = res[set_at];
	bool taken = PQresultStatus(set) == PGRES_TUPLES_OK;
	if (!taken) { /* the gate's lock wait ran out, or one of the statement's */
		bool gate_failed = gate != NULL && PQresultStatus(res[gate_at]) != PGRES_COMMAND_OK;
		*locked = is_lock_error(ob_pg_sqlstate(gate_failed ? res[gate_at] : set));
	} else if (!opt->dedup)
		taken = ob_pg_int64(set, 0, 0) == (int64_t)pending;
	else if (PQntuples(set) != (int)pending)
		taken = false;
	else {
		for (int j = 0; j < (int)pending && taken; j++)
			taken = PQgetvalue(set, j, 0)[0] != 'X';
	}
	if (!taken) {
		clear_all(res, n);
		ob_pg_rollback(conn);
		return ob_pg_broken(conn) ? OB_EDB : OB_EINVAL;
	}
	int j = 0;
	for (uint32_t i = 0; i < req->count; i++) {
		if (b->done[i])
			continue;
		char code = opt->dedup ? PQgetvalue(set, j, 0)[0] : 'A';
		if (code == 'A')
			set_result(b, i, OB_WIRE_APPLIED, INBOX_WHY_NONE, "");
		else if (code == 'M')
			set_result(b, i, OB_WIRE_REJECT, INBOX_WHY_MISMATCH, INBOX_REASON_MISMATCH);
		else
			duplicate_of(b, i, PQgetvalue(set, j, 1), PQgetvalue(set, j, 3),
			    PQgetvalue(set, j, 2));
		j++;
	}
	clear_all(res, n);
	if ((rc = commit(conn, opt, err, errlen)) != OB_OK)
		return rc;
	return OB_OK;
}

/* What the previous message left to do in the next round trip. */
struct carry {
	bool open;        /* a message savepoint is open */
	bool keep;        /* release it (APPLIED/DUPLICATE), else roll it back */
	uint32_t detail_of; /* message whose handler detail goes into its record */
	bool store_detail;
};

/* Statements that close the previous message's savepoint; appended to s. */
static int
carry_stmts(const struct carry *c, struct stmt *s, const char **dparams,
    const struct inbox_batch *b, const struct ob_wire_request *req, int *dlens,
    int *dformats)
{
	int n = 0;
	if (!c->open)
		return 0;
	if (c->keep && c->store_detail) {
		const struct ob_wire_msg *m = &req->msgs[c->detail_of];
		dparams[0] = m->key;
		dlens[0] = m->key_len;
		dformats[0] = 1;
		dparams[1] = b->details[c->detail_of];
		dlens[1] = 0;
		dformats[1] = 0;
		dparams[2] = m->topic;
		dlens[2] = m->topic_len;
		dformats[2] = 1;
		dparams[3] = m->source != NULL ? m->source : "";
		dlens[3] = m->source_len;
		dformats[3] = 1;
		static const Oid t[4] = { OID_BYTEA, 0, OID_BYTEA, OID_BYTEA };
		s[n++] = (struct stmt){ "UPDATE inbox.processed SET detail = $2"
			" WHERE idempotency_key = convert_from($1, 'UTF8') COLLATE \"default\""
			" AND topic = convert_from($3, 'UTF8') COLLATE \"default\""
			" AND source = convert_from($4, 'UTF8') COLLATE \"default\"", 4, t, dparams,
			dlens, dformats, NULL };
	}
	if (!c->keep)
		s[n++] = (struct stmt){ "ROLLBACK TO SAVEPOINT msg", 0, NULL, NULL, NULL, NULL, NULL };
	s[n++] = (struct stmt){ "RELEASE SAVEPOINT msg", 0, NULL, NULL, NULL, NULL, NULL };
	return n;
}

/* Check the results of the carry statements (the first ncarry of res). */
static int
carry_check(PGresult **res, int ncarry, char *err, size_t errlen)
{
	for (int i = 0; i < ncarry; i++)
		if (ob_pg_check(res[i], PGRES_COMMAND_OK, "end of message", err, errlen) != OB_OK)
			return OB_EDB;
	return OB_OK;
}

/* The answer for a (topic, key) found in inbox.processed. */
static void
existing_key(struct inbox_batch *b, uint32_t i, const PGresult *res)
{
	bool same = PQgetvalue(res, 0, 1)[0] == 't';
	if (!same) {
		set_result(b, i, OB_WIRE_REJECT, INBOX_WHY_MISMATCH, INBOX_REASON_MISMATCH);
		return;
	}
	duplicate_of(b, i, PQgetvalue(res, 0, 2), PQgetvalue(res, 0, 4), PQgetvalue(res, 0, 3));
}

/* The per-message path, inside a transaction that is open on return (or
 * OB_EDB: the transaction is lost; OB_ETIMEDOUT: the source gate was not
 * taken, rolled back, every pending message answered RETRY). */
static int
apply_each(PGconn *conn, const struct inbox_options *opt,
    const struct ob_wire_request *req, struct inbox_batch *b, bool locked,
    char *err, size_t errlen)
{
	const struct inbox_handler *h = opt->handler;
	struct carry carry = { false, false, 0, false };
	bool began = false;
	char id[24], fence[24], created[24];
	const char *dparams[4];
	int dlens[4], dformats[4];
	static const Oid dtypes[7] = { OID_BYTEA, OID_BYTEA, OID_BYTEA, OID_INT8, OID_INT8,
		OID_INT8, OID_BYTEA };

	for (uint32_t i = 0; i < req->count; i++) {
		if (b->done[i])
			continue;
		const struct ob_wire_msg *m = &req->msgs[i];
		struct stmt s[PIPE_MAX];
		PGresult *res[PIPE_MAX];
		int n = 0;
		if (!began)
			s[n++] = (struct stmt){ "BEGIN", 0, NULL, NULL, NULL, NULL, NULL };
		if (!began && locked)
			s[n++] = (struct stmt){ "SET LOCAL lock_timeout = "
				STR(INBOX_LOCK_TIMEOUT_AFTER_MS), 0, NULL, NULL, NULL, NULL, NULL };
		int gate_at = -1;
		const char *gate = began ? NULL : gate_sql(opt, req);
		if (gate != NULL) {
			gate_at = n;
			s[n++] = (struct stmt){ gate, 0, NULL, NULL, NULL, NULL, NULL };
		}
		int first_carry = n;
		int ncarry = carry_stmts(&carry, s + n, dparams, b, req, dlens, dformats);
		n += ncarry;
		s[n++] = (struct stmt){ "SAVEPOINT msg", 0, NULL, NULL, NULL, NULL, NULL };
		int dedup_at = -1;
		snprintf(id, sizeof(id), "%" PRIu64, m->id);
		snprintf(fence, sizeof(fence), "%" PRIu64, m->fence);
		snprintf(created, sizeof(created), "%" PRId64, m->created_at_us);
		const char *values[7] = { m->key, m->topic, m->payload, id, fence, created,
			m->source != NULL ? m->source : "" };
		int lens[7] = { m->key_len, m->topic_len, (int)m->payload_len, 0, 0, 0,
			m->source_len };
		int formats[7] = { 1, 1, 1, 0, 0, 0, 1 };
		if (values[2] == NULL)
			values[2] = ""; /* an empty payload is still a value */
		if (opt->dedup) {
			dedup_at = n;
			s[n++] = (struct stmt){ sql_dedup, 7, dtypes, values, lens, formats, NULL };
		}
		int rc = pipe_run(conn, s, n, res, err, errlen);
		if (rc != OB_OK)
			return rc;
		began = true;
		if (gate_at >= 0 && PQresultStatus(res[gate_at]) != PGRES_COMMAND_OK &&
		    is_lock_error(ob_pg_sqlstate(res[gate_at]))) {
			clear_all(res, n);
			ob_pg_rollback(conn);
			for (uint32_t k = 0; k < req->count; k++)
				if (!b->done[k])
					set_result(b, k, OB_WIRE_RETRY, INBOX_WHY_LOCKED, GATE_BUSY);
			return OB_ETIMEDOUT;
		}
		for (int k = 0; k < first_carry; k++) {
			if (ob_pg_check(res[k], PGRES_COMMAND_OK, "begin", err, errlen) != OB_OK) {
				clear_all(res, n);
				return OB_EDB;
			}
		}
		if (carry_check(res + first_carry, ncarry, err, errlen) != OB_OK ||
		    ob_pg_check(res[first_carry + ncarry], PGRES_COMMAND_OK, "savepoint", err,
		        errlen) != OB_OK) {
			clear_all(res, n);
			return OB_EDB;
		}
		carry = (struct carry){ true, false, i, false };
		int status;
		if (dedup_at >= 0 && PQresultStatus(res[dedup_at]) != PGRES_TUPLES_OK) {
			const char *st = ob_pg_sqlstate(res[dedup_at]);
			char *d = b->details[i];
			ob_pg_check(res[dedup_at], PGRES_TUPLES_OK, "dedup record", d, INBOX_DETAIL_MAX);
			if (is_lock_error(st)) {
				set_result(b, i, OB_WIRE_RETRY, INBOX_WHY_LOCKED,
				    "key is being applied by another transaction");
				if (!locked) {
					/* After one full wait, wait briefly for the rest. */
					locked = true;
					clear_all(res, n);
					/* at the top level, so that no savepoint undoes it */
					rc = ob_pg_exec(conn, "ROLLBACK TO SAVEPOINT msg;"
					    " RELEASE SAVEPOINT msg; SET LOCAL lock_timeout = "
					    STR(INBOX_LOCK_TIMEOUT_AFTER_MS), "lock timeout", err, errlen);
					if (rc != OB_OK)
						return rc;
					carry.open = false;
					continue;
				}
			} else if (inbox_status_for_sqlstate(st) == OB_WIRE_REJECT)
				set_result(b, i, OB_WIRE_REJECT, INBOX_WHY_BAD_DATA, d);
			else
				set_result(b, i, OB_WIRE_RETRY, INBOX_WHY_DB, d);
			clear_all(res, n);
			continue;
		}
		bool fresh = dedup_at < 0 || PQgetvalue(res[dedup_at], 0, 0)[0] == 't';
		if (!fresh) {
			existing_key(b, i, res[dedup_at]);
			clear_all(res, n);
			continue;
		}
		clear_all(res, n);
		b->details[i][0] = '\0';
		status = h->apply(conn, m, h->arg, &b->calls[i], b->details[i], INBOX_DETAIL_MAX);
		if (status != OB_WIRE_APPLIED && status != OB_WIRE_DUPLICATE &&
		    status != OB_WIRE_RETRY && status != OB_WIRE_REJECT) {
			snprintf(b->details[i], INBOX_DETAIL_MAX, "handler %s returned status %d",
			    h->name, status);
			status = OB_WIRE_RETRY;
		}
		set_result(b, i, status, status == OB_WIRE_APPLIED ? INBOX_WHY_NONE
		    : status == OB_WIRE_DUPLICATE ? INBOX_WHY_DUPLICATE : INBOX_WHY_HANDLER,
		    b->details[i]);
		carry.keep = status == OB_WIRE_APPLIED || status == OB_WIRE_DUPLICATE;
		carry.store_detail = opt->dedup && b->details[i][0] != '\0';
		if (ob_pg_broken(conn)) {
			snprintf(err, errlen, "connection lost in handler %s", h->name);
			return OB_EDB;
		}
	}
	/* Close the last message's savepoint; the COMMIT follows. */
	struct stmt s[PIPE_MAX];
	PGresult *res[PIPE_MAX];
	int n = carry_stmts(&carry, s, dparams, b, req, dlens, dformats);
	if (!began)
		s[n++] = (struct stmt){ "BEGIN", 0, NULL, NULL, NULL, NULL, NULL };
	int rc = pipe_run(conn, s, n, res, err, errlen);
	if (rc != OB_OK)
		return rc;
	rc = carry_check(res, n, err, errlen);
	clear_all(res, n);
	return rc;
}

static void
finish_all(PGconn *conn, const struct inbox_options *opt,
    const struct ob_wire_request *req, struct inbox_batch *b)
{
	const struct inbox_handler *h = opt->handler;
	if (h->finish == NULL)
		return;
	for (uint32_t i = 0; i < req->count; i++)
		if (b->why[i] != INBOX_WHY_TOO_OLD)
			h->finish(conn, &req->msgs[i], h->arg, &b->calls[i], b->results[i].status);
}

int
inbox_apply_batch(PGconn *conn, const struct inbox_options *opt,
    const struct ob_wire_request *req, struct inbox_batch *b, char *err,
    size_t errlen)
{
	bool base_dedup = opt->dedup;
	struct inbox_options live;
	if (opt->live_dedup != NULL) {
		/* One read per batch: a switch at run time never splits one. */
		live = *opt;
		live.dedup = atomic_load(opt->live_dedup) != 0;
		opt = &live;
	}
	/* Retention by the database's clock, the one the purge deletes by
	 * (inbox_purge.c); a failed reading fails the batch (every message
	 * retried), as any database error does. */
	int64_t now_us = 0;
	int rc = OB_OK;
	struct inbox_options unplanned;
	if (opt->dedup && opt->retention_ms > 0 &&
	    (rc = clock_now(conn, &b->clock, &now_us, err, errlen)) != OB_OK) {
		unplanned = *opt; /* no decision: every message to the fail path */
		unplanned.retention_ms = 0;
		opt = &unplanned;
	}
	uint32_t pending = inbox_plan(opt, req, now_us, b);
	if (rc != OB_OK)
		goto fail;
	const struct inbox_handler *h = opt->handler;
	bool locked = false;

	if (h->prepare != NULL) {
		for (uint32_t i = 0; i < req->count; i++) {
			if (b->done[i])
				continue;
			int st = h->prepare(conn, &req->msgs[i], h->arg, &b->calls[i],
			    b->details[i], INBOX_DETAIL_MAX);
			if (st != 0) {
				b->done[i] = true;
				pending--;
				const char *r = b->calls[i].reason;
				set_result(b, i, st, st == OB_WIRE_DUPLICATE ? INBOX_WHY_DUPLICATE
				    : r != NULL && strcmp(r, "fingerprint_mismatch") == 0 ? INBOX_WHY_MISMATCH
				    : r != NULL && strcmp(r, "bad_data") == 0 ? INBOX_WHY_BAD_DATA
				    : INBOX_WHY_HANDLER, b->details[i]);
			}
		}
	}
	if (pending == 0)
		goto out;
	if (h == &inbox_handler_record) {
		rc = apply_set(conn, opt, base_dedup, req, b, pending, &locked, err, errlen);
		if (rc == OB_OK)
			goto out;
		if (rc != OB_EINVAL)
			goto fail;
	}
	rc = apply_each(conn, opt, req, b, locked, err, errlen);
	if (rc == OB_ETIMEDOUT)
		goto out; /* nothing applied, every message answered */
	if (rc != OB_OK)
		goto fail;
	if ((rc = commit(conn, opt, err, errlen)) != OB_OK)
		goto fail;
out:
	finish_all(conn, opt, req, b);
	return OB_OK;

fail:
	ob_pg_rollback(conn);
	for (uint32_t i = 0; i < req->count; i++)
		if (!b->done[i])
			set_result(b, i, OB_WIRE_RETRY, INBOX_WHY_DB, err);
	finish_all(conn, opt, req, b);
	return OB_EDB;
}
