/*
 * inbox.c - the idempotent consumer's core: dedup record and effect commit
 * together, or not at all (the contract is in inbox.h).
 *
 * Two paths give the same answers. The set path (built-in record handler
 * only) sends BEGIN and one call (inbox.apply_notifications) that inserts
 * every new dedup record and effect row of the batch and answers the keys
 * seen before from their stored records. When that call fails or cannot
 * decide a message, the transaction is rolled back and the per-message
 * path runs: per message one pipelined round trip (the previous message's
 * dedup record, inbox.dedup_insert, written once with its handler's
 * detail, and the end of its savepoint; SAVEPOINT; inbox.dedup_lookup),
 * then the handler's own statements. The lookup returns the stored record
 * of a key seen before (first outcome, detail, time, and whether the
 * fingerprint matches), so that a duplicate is answered with what happened
 * the first time. A key another transaction is writing is waited for by
 * the insert, after the handler: when that one commits first, the message
 * is rolled back to its savepoint (its effect undone) and answered from
 * its record (record_failed).
 *
 * No SQL of the inbox is written here: the statements call the functions
 * of sql/inbox/functions/ (docs/inbox-sql.md).
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

#define OID_BOOL 16
#define OID_BYTEA 17
#define OID_INT8 20
#define OID_TEXT 25
#define OID_TIMESTAMPTZ 1184
#define OID_BYTEA_ARRAY 1001
#define OID_TEXT_ARRAY 1009
#define OID_INT8_ARRAY 1016
#define OID_TIMESTAMPTZ_ARRAY 1185
#define PIPE_MAX 8 /* statements in one pipelined round trip */
#define STR_(x) #x
#define STR(x) STR_(x)

/* Every statement below calls a function of the inbox's SQL contract
 * (sql/inbox/functions/, docs/inbox-sql.md), where the dedup logic, the
 * legacy identity rule (inbox.dedup_record) and the reasons for each
 * plan live. Keys, topics and sources go as text in binary form (their
 * bytes as sent: a key that is not UTF-8 is a data error, class 22, as
 * it was when the statements decoded bytea), payloads as bytea (the
 * fingerprint is over their bytes), results in binary form (the time a
 * duplicate quotes is formatted here: time_text). */

/* The source gate (sql/inbox/009_source_gate.sql), the first statement of
 * every dedup transaction: a frame of a named source and one of the source
 * '' wait for each other's open transactions, frames of one kind never. */
static const char sql_gate[] = "SELECT inbox.take_source_gate($1)";
static const Oid gate_types[1] = { OID_TEXT };
#define GATE_BUSY "the source gate (inbox.source_gate) stayed locked past --lock-timeout:" \
	" a frame of the other source kind (the empty source or a named one) is applying"

/* The per-message path: what the inbox knows of a message before its
 * effect (verdict, outcome, detail, processed_at), and its record after. */
static const char sql_lookup[] = "SELECT verdict, outcome, detail, processed_at"
    " FROM inbox.dedup_lookup(source => $1, topic => $2, idempotency_key => $3, payload => $4)";
static const Oid lookup_types[4] = { OID_TEXT, OID_TEXT, OID_TEXT, OID_BYTEA };
static const char sql_insert[] = "SELECT inbox.dedup_insert(source => $1, topic => $2,"
    " idempotency_key => $3, payload => $4, message_id => $5, fence => $6, created_at => $7,"
    " detail => $8)";
static const Oid insert_types[8] = { OID_TEXT, OID_TEXT, OID_TEXT, OID_BYTEA, OID_INT8,
	OID_INT8, OID_TIMESTAMPTZ, OID_TEXT };

/* The set path: one call for the whole frame (the built-in record
 * handler), prepared on each connection (inbox_conn_setup) under this
 * name: planning it took longer than running it (0.4 ms a batch, at 200
 * messages/s in batches of one or two). dedup is a parameter, so a switch
 * at run time (live_dedup) uses the same statement. */
#define SET_STMT_NAME "inbox_set"
static const char sql_set[] = "SELECT verdict, outcome, detail, processed_at"
    " FROM inbox.apply_notifications(source => $1, idempotency_keys => $2, topics => $3,"
    " payloads => $4, message_ids => $5, fences => $6, created_ats => $7,"
    " ordering_keys => $8, ordering_seqs => $9, dedup => $10)";
#define SET_NPARAMS 10 /* the frame's source, 8 arrays (inbox_set_args), dedup */
#define SET_NARRAYS 8
static const Oid set_types[SET_NPARAMS] = { OID_TEXT, OID_TEXT_ARRAY, OID_TEXT_ARRAY,
	OID_BYTEA_ARRAY, OID_INT8_ARRAY, OID_INT8_ARRAY, OID_TIMESTAMPTZ_ARRAY, OID_TEXT_ARRAY,
	OID_INT8_ARRAY, OID_BOOL };

/* Whether a dedup transaction takes the source gate (not without dedup,
 * nor in the broken mode). */
static bool
takes_gate(const struct inbox_options *opt)
{
	return opt->dedup && !(opt->faults != NULL && opt->faults->no_source_gate);
}

/* One statement of a pipelined round trip: sql, or the prepared statement
 * named prepared; binary: results in binary form. */
struct stmt {
	const char *sql;
	int nparams;
	const Oid *types;
	const char *const *values;
	const int *lens;
	const int *formats;
	const char *prepared;
	int binary;
};

/* The database's clock, Unix microseconds. */
static const char sql_clock[] = "SELECT inbox.clock_us()";

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
	/* Prepared statements and PL/pgSQL plans generic: a custom plan of
	 * the set path, the arrays' lengths known, is priced below the
	 * generic one, so the plan cache made one on every execution (1,238
	 * plans in 1,643; apply_notifications.sql also says so itself); the
	 * generic plans probe the same primary key. The handlers' one-shot
	 * statements are planned as before. */
	if ((rc = ob_pg_exec(conn, "SET plan_cache_mode = force_generic_plan",
	         "set plan_cache_mode", err, errlen)) != OB_OK)
		return rc;
	PGresult *res = PQprepare(conn, SET_STMT_NAME, sql_set, SET_NPARAMS, set_types);
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
		          s[i].formats, s[i].binary)
		    : PQsendQueryParams(conn, s[i].sql, s[i].nparams, s[i].types, s[i].values,
		          s[i].lens, s[i].formats, s[i].binary);
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

/* A result's timestamptz in binary form (microseconds since 2000-01-01)
 * as "YYYY-MM-DDTHH:MM:SS.mmmZ" (UTC, milliseconds cut, not rounded). */
static void
time_text(const char *v, int len, char *out, size_t outlen)
{
	if (len != 8) {
		snprintf(out, outlen, "?");
		return;
	}
	uint64_t raw = 0;
	for (int k = 0; k < 8; k++)
		raw = raw << 8 | (uint8_t)v[k];
	int64_t us = (int64_t)raw + INBOX_PG_EPOCH_US;
	int64_t s = us / 1000000, frac = us % 1000000;
	if (frac < 0) {
		frac += 1000000;
		s--;
	}
	time_t t = (time_t)s;
	struct tm tm;
	char day[32];
	if (gmtime_r(&t, &tm) == NULL || strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
		snprintf(out, outlen, "?");
		return;
	}
	snprintf(out, outlen, "%s.%03dZ", day, (int)(frac / 1000));
}

/* The answer for a message a record answers (row of res: verdict,
 * outcome, detail, processed_at, binary): DUPLICATE with what happened the
 * first time, or REJECT for a key reused with another payload. */
static void
answer_from_record(struct inbox_batch *b, uint32_t i, const PGresult *res, int row)
{
	if (strcmp(PQgetvalue(res, row, 0), "mismatch") == 0) {
		set_result(b, i, OB_WIRE_REJECT, INBOX_WHY_MISMATCH, INBOX_REASON_MISMATCH);
		return;
	}
	char when[48];
	time_text(PQgetvalue(res, row, 3), PQgetlength(res, row, 3), when, sizeof(when));
	const char *detail = PQgetvalue(res, row, 2);
	snprintf(b->details[i], INBOX_DETAIL_MAX, "already %s at %s%s%s", PQgetvalue(res, row, 1),
	    when, detail[0] ? ": " : "", detail);
	set_result(b, i, OB_WIRE_DUPLICATE, INBOX_WHY_DUPLICATE, b->details[i]);
}

/* A statement's result is a success (a command, or rows) or err says why. */
static int
check_ok(const PGresult *res, const char *what, char *err, size_t errlen)
{
	ExecStatusType want = PQresultStatus(res) == PGRES_TUPLES_OK ? PGRES_TUPLES_OK
	                                                             : PGRES_COMMAND_OK;
	return ob_pg_check(res, want, what, err, errlen);
}

/* The set path. OB_OK: committed, every pending message answered.
 * OB_EINVAL: not taken (rolled back; *locked when a key was in flight): the
 * per-message path must run. OB_EDB: the database failed. */
static int
apply_set(PGconn *conn, const struct inbox_options *opt, const struct ob_wire_request *req,
    struct inbox_batch *b, uint32_t pending, bool *locked, char *err, size_t errlen)
{
	if (inbox_set_args(req, b) != OB_OK) {
		snprintf(err, errlen, "out of memory building the batch");
		return OB_ENOMEM;
	}
	const char *values[SET_NPARAMS];
	int lens[SET_NPARAMS], formats[SET_NPARAMS];
	/* the frame's source: one value ("" is a value, never NULL) */
	values[0] = req->source != NULL ? req->source : "";
	lens[0] = req->source_len;
	formats[0] = 1;
	for (int i = 0; i < SET_NARRAYS; i++) {
		values[1 + i] = b->args[i].data;
		lens[1 + i] = (int)b->args[i].len;
		formats[1 + i] = 1;
	}
	const char dedup = opt->dedup ? 1 : 0;
	values[SET_NPARAMS - 1] = &dedup;
	lens[SET_NPARAMS - 1] = 1;
	formats[SET_NPARAMS - 1] = 1;
	/* BEGIN, the source gate (when taken), the set statement */
	struct stmt s[3] = { { "BEGIN", 0, NULL, NULL, NULL, NULL, NULL, 0 } };
	int n = 1;
	int gate_at = -1;
	if (takes_gate(opt)) {
		gate_at = n;
		s[n++] = (struct stmt){ sql_gate, 1, gate_types, values, lens, formats, NULL, 0 };
	}
	int set_at = n;
	s[n++] = (struct stmt){ NULL, SET_NPARAMS, set_types, values, lens, formats, SET_STMT_NAME,
		1 };
	PGresult *res[3];
	int rc = pipe_run(conn, s, n, res, err, errlen);
	if (rc != OB_OK)
		return rc;
	if (ob_pg_check(res[0], PGRES_COMMAND_OK, "begin", err, errlen) != OB_OK) {
		clear_all(res, n);
		ob_pg_rollback(conn);
		return OB_EDB;
	}
	const PGresult *set = res[set_at];
	bool taken = PQresultStatus(set) == PGRES_TUPLES_OK;
	if (!taken) { /* the gate's lock wait ran out, or one of the statement's */
		bool gate_failed = gate_at >= 0 && PQresultStatus(res[gate_at]) != PGRES_TUPLES_OK;
		*locked = is_lock_error(ob_pg_sqlstate(gate_failed ? res[gate_at] : set));
	} else if (PQntuples(set) != (int)pending)
		taken = false;
	else {
		for (int j = 0; j < (int)pending && taken; j++)
			taken = strcmp(PQgetvalue(set, j, 0), "undecided") != 0;
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
		if (strcmp(PQgetvalue(set, j, 0), "applied") == 0)
			set_result(b, i, OB_WIRE_APPLIED, INBOX_WHY_NONE, "");
		else
			answer_from_record(b, i, set, j);
		j++;
	}
	clear_all(res, n);
	if ((rc = commit(conn, opt, err, errlen)) != OB_OK)
		return rc;
	return OB_OK;
}

/* One message's parameters for the per-message statements (its identity
 * and payload; the record's other columns and the handler's detail). */
struct msg_params {
	const char *values[8];
	int lens[8];
	int formats[8];
	char id[24], fence[24];
	char created[8]; /* timestamptz, binary */
};

static void
msg_params_of(struct msg_params *p, const struct ob_wire_msg *m, const char *detail)
{
	snprintf(p->id, sizeof(p->id), "%" PRIu64, m->id);
	snprintf(p->fence, sizeof(p->fence), "%" PRIu64, m->fence);
	uint64_t t = (uint64_t)(m->created_at_us - INBOX_PG_EPOCH_US);
	for (int k = 0; k < 8; k++)
		p->created[k] = (char)(t >> (56 - 8 * k));
	const char *v[8] = { m->source != NULL ? m->source : "", m->topic, m->key,
		m->payload != NULL ? m->payload : "", /* an empty payload is still a value */
		p->id, p->fence, p->created, detail != NULL && detail[0] ? detail : NULL };
	int l[8] = { m->source_len, m->topic_len, m->key_len, (int)m->payload_len, 0, 0, 8, 0 };
	int f[8] = { 1, 1, 1, 1, 0, 0, 1, 0 };
	memcpy(p->values, v, sizeof(v));
	memcpy(p->lens, l, sizeof(l));
	memcpy(p->formats, f, sizeof(f));
}

/* What the previous message left to do in the next round trip. */
struct carry {
	bool open;        /* a message savepoint is open */
	bool keep;        /* release it (APPLIED/DUPLICATE), else roll it back */
	bool record;      /* write its dedup record first (dedup on, its verdict was new) */
	uint32_t of;      /* that message */
	struct msg_params p; /* its record's parameters */
};

/* Statements that close the previous message's savepoint; appended to s.
 * *insert_at: the index (in s) of its record's insert, or -1. */
static int
carry_stmts(struct carry *c, struct stmt *s, const struct inbox_batch *b,
    const struct ob_wire_request *req, int *insert_at)
{
	int n = 0;
	*insert_at = -1;
	if (!c->open)
		return 0;
	if (c->keep && c->record) {
		msg_params_of(&c->p, &req->msgs[c->of], b->details[c->of]);
		*insert_at = n;
		s[n++] = (struct stmt){ sql_insert, 8, insert_types, c->p.values, c->p.lens,
			c->p.formats, NULL, 0 };
	}
	if (!c->keep)
		s[n++] = (struct stmt){ "ROLLBACK TO SAVEPOINT msg", 0, NULL, NULL, NULL, NULL, NULL, 0 };
	s[n++] = (struct stmt){ "RELEASE SAVEPOINT msg", 0, NULL, NULL, NULL, NULL, NULL, 0 };
	return n;
}

/* Check the results of the carry statements (the first ncarry of res). */
static int
carry_check(PGresult **res, int ncarry, char *err, size_t errlen)
{
	for (int i = 0; i < ncarry; i++)
		if (check_ok(res[i], "end of message", err, errlen) != OB_OK)
			return OB_EDB;
	return OB_OK;
}

/* The answer for message i whose statement failed with sqlstate (d: the
 * failure's text): a lock wait that ran out is RETRY, bad data REJECT,
 * anything else RETRY. */
static void
answer_failure(struct inbox_batch *b, uint32_t i, const char *sqlstate, const char *d)
{
	if (is_lock_error(sqlstate))
		set_result(b, i, OB_WIRE_RETRY, INBOX_WHY_LOCKED,
		    "key is being applied by another transaction");
	else if (inbox_status_for_sqlstate(sqlstate) == OB_WIRE_REJECT)
		set_result(b, i, OB_WIRE_REJECT, INBOX_WHY_BAD_DATA, d);
	else
		set_result(b, i, OB_WIRE_RETRY, INBOX_WHY_DB, d);
}

/* Roll message i back to its savepoint after a statement of it failed
 * with sqlstate (the transaction goes on without it), and answer it: a
 * lock wait that ran out is RETRY, and the first one makes every later
 * wait of the transaction short (INBOX_LOCK_TIMEOUT_AFTER_MS, *locked).
 * d: the failure's text. */
static int
drop_message(PGconn *conn, struct inbox_batch *b, uint32_t i, const char *sqlstate,
    const char *d, bool *locked, char *err, size_t errlen)
{
	bool lock = is_lock_error(sqlstate);
	bool first_wait = lock && !*locked;
	/* at the top level, so that no savepoint undoes the SET */
	int rc = ob_pg_exec(conn, first_wait ? "ROLLBACK TO SAVEPOINT msg; RELEASE SAVEPOINT msg;"
	    " SET LOCAL lock_timeout = " STR(INBOX_LOCK_TIMEOUT_AFTER_MS)
	    : "ROLLBACK TO SAVEPOINT msg; RELEASE SAVEPOINT msg", "roll back a message", err, errlen);
	if (rc != OB_OK)
		return rc;
	if (first_wait)
		*locked = true;
	answer_failure(b, i, sqlstate, d);
	return OB_OK;
}

/* The previous message's record insert failed (res): roll it back and
 * answer it. Another transaction's record of its identity committed since
 * its lookup (unique_violation): its answer is asked again, a duplicate or
 * a reused key; a unique violation without such a record is bad data, as
 * any other (an index an operator added). */
static int
record_failed(PGconn *conn, const struct ob_wire_request *req, struct inbox_batch *b,
    struct carry *c, const PGresult *res, bool *locked, char *err, size_t errlen)
{
	const char *st = ob_pg_sqlstate(res);
	char d[INBOX_DETAIL_MAX];
	ob_pg_check(res, PGRES_TUPLES_OK, "dedup record", d, sizeof(d));
	if (!ob_sqlstate_is(st, OB_SQLSTATE_UNIQUE_VIOLATION))
		return drop_message(conn, b, c->of, st, d, locked, err, errlen);
	int rc = ob_pg_exec(conn, "ROLLBACK TO SAVEPOINT msg; RELEASE SAVEPOINT msg",
	    "roll back a message", err, errlen);
	if (rc != OB_OK)
		return rc;
	struct msg_params p;
	msg_params_of(&p, &req->msgs[c->of], NULL);
	PGresult *again = PQexecParams(conn, sql_lookup, 4, lookup_types, p.values, p.lens,
	    p.formats, 1);
	if (ob_pg_check(again, PGRES_TUPLES_OK, "dedup lookup", err, errlen) != OB_OK) {
		PQclear(again);
		return OB_EDB;
	}
	if (PQntuples(again) == 1 && strcmp(PQgetvalue(again, 0, 0), "new") != 0)
		answer_from_record(b, c->of, again, 0);
	else /* another unique index of the table refused it (bad data) */
		answer_failure(b, c->of, st, d);
	PQclear(again);
	return OB_OK;
}

/* The per-message path, inside a transaction that is open on return (or
 * OB_EDB: the transaction is lost; OB_ETIMEDOUT: the source gate was not
 * taken, rolled back, every pending message answered RETRY). Per message
 * one round trip: the previous message's record (written once, with its
 * handler's detail, in its savepoint) and the end of its savepoint, this
 * one's savepoint and lookup; then the handler. */
static int
apply_each(PGconn *conn, const struct inbox_options *opt,
    const struct ob_wire_request *req, struct inbox_batch *b, bool locked,
    char *err, size_t errlen)
{
	const struct inbox_handler *h = opt->handler;
	static struct carry none; /* all false */
	struct carry carry = none;
	bool began = false;
	const char *source = req->source != NULL ? req->source : "";
	int source_len = req->source_len, one_binary = 1;

	for (uint32_t i = 0; i < req->count; i++) {
		if (b->done[i])
			continue;
		const struct ob_wire_msg *m = &req->msgs[i];
		struct stmt s[PIPE_MAX];
		PGresult *res[PIPE_MAX];
		int n = 0;
		if (!began)
			s[n++] = (struct stmt){ "BEGIN", 0, NULL, NULL, NULL, NULL, NULL, 0 };
		if (!began && locked)
			s[n++] = (struct stmt){ "SET LOCAL lock_timeout = "
				STR(INBOX_LOCK_TIMEOUT_AFTER_MS), 0, NULL, NULL, NULL, NULL, NULL, 0 };
		int gate_at = -1;
		if (!began && takes_gate(opt)) {
			gate_at = n;
			s[n++] = (struct stmt){ sql_gate, 1, gate_types, &source, &source_len,
				&one_binary, NULL, 0 };
		}
		int first_carry = n, insert_at;
		int ncarry = carry_stmts(&carry, s + n, b, req, &insert_at);
		if (insert_at >= 0)
			insert_at += first_carry;
		n += ncarry;
		s[n++] = (struct stmt){ "SAVEPOINT msg", 0, NULL, NULL, NULL, NULL, NULL, 0 };
		int lookup_at = -1;
		struct msg_params p;
		if (opt->dedup) {
			msg_params_of(&p, m, NULL);
			lookup_at = n;
			s[n++] = (struct stmt){ sql_lookup, 4, lookup_types, p.values, p.lens, p.formats,
				NULL, 1 };
		}
		int rc = pipe_run(conn, s, n, res, err, errlen);
		if (rc != OB_OK)
			return rc;
		began = true;
		if (gate_at >= 0 && PQresultStatus(res[gate_at]) != PGRES_TUPLES_OK &&
		    is_lock_error(ob_pg_sqlstate(res[gate_at]))) {
			clear_all(res, n);
			ob_pg_rollback(conn);
			for (uint32_t k = 0; k < req->count; k++)
				if (!b->done[k])
					set_result(b, k, OB_WIRE_RETRY, INBOX_WHY_LOCKED, GATE_BUSY);
			return OB_ETIMEDOUT;
		}
		for (int k = 0; k < first_carry; k++) {
			if (check_ok(res[k], "begin", err, errlen) != OB_OK) {
				clear_all(res, n);
				return OB_EDB;
			}
		}
		if (insert_at >= 0 && PQresultStatus(res[insert_at]) != PGRES_TUPLES_OK) {
			/* The previous message is not recorded: rolled back and
			 * answered; this one's statements did not run: again. */
			rc = record_failed(conn, req, b, &carry, res[insert_at], &locked, err, errlen);
			clear_all(res, n);
			if (rc != OB_OK)
				return rc;
			carry = none;
			i--;
			continue;
		}
		if (carry_check(res + first_carry, ncarry, err, errlen) != OB_OK ||
		    ob_pg_check(res[first_carry + ncarry], PGRES_COMMAND_OK, "savepoint", err,
		        errlen) != OB_OK) {
			clear_all(res, n);
			return OB_EDB;
		}
		carry = none;
		carry.open = true;
		carry.of = i;
		if (lookup_at >= 0 && PQresultStatus(res[lookup_at]) != PGRES_TUPLES_OK) {
			char d[INBOX_DETAIL_MAX];
			ob_pg_check(res[lookup_at], PGRES_TUPLES_OK, "dedup record", d, sizeof(d));
			rc = drop_message(conn, b, i, ob_pg_sqlstate(res[lookup_at]), d, &locked, err,
			    errlen);
			clear_all(res, n);
			if (rc != OB_OK)
				return rc;
			carry.open = false;
			continue;
		}
		if (lookup_at >= 0 && strcmp(PQgetvalue(res[lookup_at], 0, 0), "new") != 0) {
			answer_from_record(b, i, res[lookup_at], 0);
			clear_all(res, n);
			continue;
		}
		clear_all(res, n);
		b->details[i][0] = '\0';
		int status = h->apply(conn, m, h->arg, &b->calls[i], b->details[i], INBOX_DETAIL_MAX);
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
		carry.record = opt->dedup;
		if (ob_pg_broken(conn)) {
			snprintf(err, errlen, "connection lost in handler %s", h->name);
			return OB_EDB;
		}
	}
	/* Record the last message and close its savepoint; the COMMIT follows. */
	struct stmt s[PIPE_MAX];
	PGresult *res[PIPE_MAX];
	int insert_at;
	int n = carry_stmts(&carry, s, b, req, &insert_at);
	if (!began)
		s[n++] = (struct stmt){ "BEGIN", 0, NULL, NULL, NULL, NULL, NULL, 0 };
	int rc = pipe_run(conn, s, n, res, err, errlen);
	if (rc != OB_OK)
		return rc;
	if (insert_at >= 0 && PQresultStatus(res[insert_at]) != PGRES_TUPLES_OK)
		rc = record_failed(conn, req, b, &carry, res[insert_at], &locked, err, errlen);
	else
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
		rc = apply_set(conn, opt, req, b, pending, &locked, err, errlen);
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
