/*
 * sink_inbox.c - outbox-notify-sink's effects through the inbox's SQL
 * contract (see sink_inbox.h). The sink calls what any service calls
 * (docs/inbox-sql.md, "Deduplicating one message" and "Retention"); it
 * sends no SQL of its own but BEGIN and COMMIT. It owns its connection;
 * it never logs (the caller decides what a failure means).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "outbox/err.h"
#include "outbox/pg.h"
#include "outbox/protocol.h"
#include "outbox/sqlstate.h"
#include "sink_inbox.h"

struct sink_inbox {
	char *conninfo;
	PGconn *conn;
	int64_t retention_ms;
};

/* The sink's identity of a call: source '' (its own namespace), the
 * topic and the key the consumer sent. The first column is the retention
 * check, by the database's clock ($5: the message's created_at in Unix
 * microseconds, NULL when the call carried none; $6 the retention): a
 * message older than the retention is refused whatever the lookup says,
 * as the consumer refuses it. */
static const char lookup_sql[] =
    "SELECT coalesce($5::bigint < inbox.clock_us() - $6::bigint * 1000, false),"
    "       verdict, (SELECT r.fence FROM inbox.dedup_record('', $1, $2) r)"
    "  FROM inbox.dedup_lookup(source => '', topic => $1, idempotency_key => $2,"
    "                          payload => $3::bytea, fence => $4::bigint)";
/* created_at: the message's enqueue time ($6, Unix microseconds: exact
 * integer arithmetic), or the time of receipt when the call had none. */
static const char effect_sql[] =
    "SELECT inbox.add_notification(source => '', topic => $1, idempotency_key => $2,"
    " payload => $3::bytea, message_id => $4::bigint, ordering_key => NULL,"
    " ordering_seq => NULL),"
    " inbox.dedup_insert(source => '', topic => $1, idempotency_key => $2,"
    " payload => $3::bytea, message_id => $4::bigint, fence => coalesce($5::bigint, 0),"
    " created_at => coalesce(timestamptz 'epoch' + $6::bigint * interval '1 microsecond',"
    " now()), detail => 'outbox-notify-sink')";
static const char purge_sql[] =
    "SELECT inbox.purge(retention_ms => $1::bigint, margin_ms => $2::bigint,"
    " max_rows => $3::integer)";

static int
connect_checked(struct sink_inbox *in, char *err, size_t errlen)
{
	if (in->conn != NULL && !ob_pg_broken(in->conn))
		return OB_OK;
	PQfinish(in->conn);
	in->conn = NULL;
	int rc = ob_pg_connect(in->conninfo, "outbox-notify-sink", &in->conn, err, errlen);
	if (rc == OB_OK)
		rc = ob_protocol_check(in->conn, "inbox", "consumer", OB_PROTOCOL_CONSUMER, err, errlen);
	/* an answer follows the commit: it must survive a crash */
	if (rc == OB_OK)
		rc = ob_pg_durable_commits(in->conn, err, errlen);
	if (rc != OB_OK) {
		PQfinish(in->conn);
		in->conn = NULL;
	}
	return rc;
}

int
sink_inbox_open(const char *conninfo, int64_t retention_ms, struct sink_inbox **out,
    char *err, size_t errlen)
{
	struct sink_inbox *in = calloc(1, sizeof(*in));
	if (in == NULL || (in->conninfo = strdup(conninfo)) == NULL) {
		free(in);
		snprintf(err, errlen, "out of memory");
		return OB_ENOMEM;
	}
	in->retention_ms = retention_ms;
	int rc = connect_checked(in, err, errlen);
	if (rc != OB_OK) {
		sink_inbox_close(in);
		return rc;
	}
	*out = in;
	return OB_OK;
}

void
sink_inbox_close(struct sink_inbox *in)
{
	if (in == NULL)
		return;
	PQfinish(in->conn);
	free(in->conninfo);
	free(in);
}

/* One attempt in one transaction. *again: a record committed by another
 * transaction first (unique_violation): ask again. */
static int
apply_once(struct sink_inbox *in, const struct sink_call *c, enum sink_verdict *v,
    int64_t *applied_fence, bool *again, char *err, size_t errlen)
{
	char fence[24], message_id[24], created[24], retention[24];
	snprintf(fence, sizeof(fence), "%" PRId64, c->fence);
	snprintf(message_id, sizeof(message_id), "%" PRId64, c->message_id);
	snprintf(created, sizeof(created), "%" PRId64, c->created_at_us);
	snprintf(retention, sizeof(retention), "%" PRId64, in->retention_ms);
	const char *call_fence = c->fence >= 0 ? fence : NULL;
	const char *call_created = c->has_created_at ? created : NULL;
	const int lengths[6] = { 0, 0, (int)c->body_len, 0, 0, 0 };
	const int formats[6] = { 0, 0, 1, 0, 0, 0 };
	/* the lookup checks the fence (not in the broken mode); the record keeps it */
	const char *lookup[6] = { c->topic, c->key, c->body, c->ignore_fence ? NULL : call_fence,
		call_created, retention };
	const char *effect[6] = { c->topic, c->key, c->body, message_id, call_fence,
		call_created };

	*again = false;
	int rc = ob_pg_exec(in->conn, "BEGIN; SELECT inbox.take_source_gate(source => '')",
	    "begin", err, errlen);
	if (rc != OB_OK)
		goto fail;
	PGresult *r = PQexecParams(in->conn, lookup_sql, 6, NULL, lookup, lengths, formats, 0);
	if ((rc = ob_pg_check(r, PGRES_TUPLES_OK, "inbox.dedup_lookup", err, errlen)) != OB_OK) {
		PQclear(r);
		goto fail;
	}
	bool too_old = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
	const char *verdict = PQgetvalue(r, 0, 1);
	*applied_fence = PQgetisnull(r, 0, 2) ? 0 : strtoll(PQgetvalue(r, 0, 2), NULL, 10);
	if (too_old || strcmp(verdict, "new") != 0) {
		*v = too_old ? SINK_TOO_OLD : strcmp(verdict, "duplicate") == 0 ? SINK_DUPLICATE
		    : strcmp(verdict, "stale") == 0 ? SINK_STALE : SINK_MISMATCH;
		PQclear(r);
		ob_pg_rollback(in->conn);
		return OB_OK;
	}
	PQclear(r);
	r = PQexecParams(in->conn, effect_sql, 6, NULL, effect, lengths, formats, 0);
	rc = ob_pg_check(r, PGRES_TUPLES_OK, "the effect and its record", err, errlen);
	PQclear(r);
	if (rc == OB_OK && (rc = ob_pg_commit(in->conn, err, errlen)) == OB_OK) {
		*v = SINK_APPLIED;
		return OB_OK;
	}
fail:
	ob_pg_rollback(in->conn);
	const char *state = ob_pg_failed_sqlstate();
	if (ob_sqlstate_is(state, OB_SQLSTATE_UNIQUE_VIOLATION)) {
		*again = true;
		return OB_OK;
	}
	if (ob_sqlstate_is(state, OB_SQLSTATE_LOCK_NOT_AVAILABLE)) {
		*v = SINK_BUSY;
		return OB_OK;
	}
	if (ob_sqlstate_class(state, OB_SQLSTATE_CLASS_DATA_EXCEPTION)) {
		*v = SINK_BAD_BODY;
		return OB_OK;
	}
	*v = SINK_FAILED;
	return rc != OB_OK ? rc : OB_EDB;
}

int
sink_inbox_apply(struct sink_inbox *in, const struct sink_call *call,
    enum sink_verdict *verdict, int64_t *applied_fence, char *err, size_t errlen)
{
	*verdict = SINK_FAILED;
	*applied_fence = 0;
	int rc = connect_checked(in, err, errlen);
	for (int attempt = 0; rc == OB_OK && attempt < SINK_INBOX_ATTEMPTS; attempt++) {
		bool again = false;
		rc = apply_once(in, call, verdict, applied_fence, &again, err, errlen);
		if (rc != OB_OK || !again)
			return rc;
	}
	if (rc == OB_OK) {
		snprintf(err, errlen, "the key's record changed under each of %d attempts",
		    SINK_INBOX_ATTEMPTS);
		*verdict = SINK_BUSY;
	}
	return rc;
}

int
sink_inbox_purge(struct sink_inbox *in, int64_t *deleted, char *err, size_t errlen)
{
	int rc = connect_checked(in, err, errlen);
	if (rc != OB_OK)
		return rc;
	char retention[24], margin[24], rows[16];
	snprintf(retention, sizeof(retention), "%" PRId64, in->retention_ms);
	snprintf(margin, sizeof(margin), "%" PRId64, (int64_t)SINK_RETENTION_MARGIN_MS);
	snprintf(rows, sizeof(rows), "%d", SINK_PURGE_MAX_ROWS);
	const char *params[3] = { retention, margin, rows };
	/* autocommit: the statement is its own short transaction */
	PGresult *r = PQexecParams(in->conn, purge_sql, 3, NULL, params, NULL, NULL, 0);
	rc = ob_pg_check(r, PGRES_TUPLES_OK, "inbox.purge", err, errlen);
	if (rc == OB_OK)
		*deleted = ob_pg_int64(r, 0, 0);
	PQclear(r);
	return rc;
}
