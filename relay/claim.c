/*
 * claim.c - the claim call and its result mapping.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "claim.h"
#include "outbox/err.h"
#include "outbox/pg.h"
#include "outbox/sqlstate.h"
#include "standby_gate.h"

/* outbox.claim(protocol, owner, lease_ms, max_n, include, exclude, others,
 * retries_first, ordering, skip_dead_heads, max_bytes): one batch's rows of type
 * outbox.claimed (sql/outbox/012_streams.sql). The gated form also returns
 * the WAL insert position after the claim (standby_gate.h): every row it
 * returned was committed below it.
 *
 * A claim that returns messages commits synchronously, whatever
 * --synchronous-commit says for the relay's other writes: its commit
 * record lies after the commit of every message it returned, so waiting
 * for its flush puts those on disk too before anything is sent. A producer
 * that commits with synchronous_commit = off can lose its commit (and its
 * business row) in a crash; without this its message could be delivered
 * first, and the effect would outlive the row (issue 30, test_crash). The
 * setting is made per row, so a claim that finds nothing stays asynchronous. */
/* The columns read, one list for the SELECT and the indexes (an X-macro:
 * the SELECT names each column, so the order of outbox.claimed's
 * attributes does not matter; the enum follows the SELECT by construction). */
#define CLAIM_COLS(X)                                                       \
	X(BATCH, "batch_id") X(KIND, "kind") X(FENCE, "fence") X(ATTEMPT, "attempt") \
	X(TAKEOVER, "takeover") X(ID, "id") X(CREATED, "created_us") X(TOPIC, "topic") \
	X(KEY, "idempotency_key") X(PAYLOAD, "payload") X(ORDKEY, "ordering_key")   \
	X(ORDSEQ, "ordering_seq") X(MORE, "more")
#define CLAIM_COL_NAME(id, name) name ", "
#define CLAIM_COL_ENUM(id, name) COL_##id,
enum { CLAIM_COLS(CLAIM_COL_ENUM) COL_LSN };
/* Arguments by name (outbox.claim's parameters, sql/outbox/functions/
 * claim.sql), not by position. */
#define CLAIM_FROM                                                           \
    " FROM outbox.claim(protocol => $1::int, owner => $2, lease_ms => $3::bigint,"  \
    " max_n => $4::int, include => $5::text[], exclude => $6::text[],"            \
    " others => $7::boolean, retries_first => $8::boolean, ordering => $9::boolean,"  \
    " skip_dead_heads => $10::boolean, max_bytes => $11::bigint)"                 \
    " WHERE pg_catalog.set_config('synchronous_commit', 'on', true) = 'on'"
/* The gated form also returns the WAL insert position (COL_LSN), the
 * plain one NULL there. */
static const char claim_sql[] =
    "SELECT " CLAIM_COLS(CLAIM_COL_NAME) "NULL::text" CLAIM_FROM;
static const char claim_sql_lsn[] =
    "SELECT " CLAIM_COLS(CLAIM_COL_NAME) "pg_catalog.pg_current_wal_insert_lsn()::text"
    CLAIM_FROM;

static int
map_rows(PGresult *res, struct relay_batch *out, char *err, size_t errlen)
{
	int rows = PQntuples(res);
	if (rows == 0)
		return OB_OK;
	if ((out->msgs = calloc((size_t)rows, sizeof(*out->msgs))) == NULL) {
		snprintf(err, errlen, "claim: out of memory");
		return OB_ENOMEM;
	}
	out->id = (uint64_t)ob_pg_int64(res, 0, COL_BATCH);
	out->kind = PQgetvalue(res, 0, COL_KIND)[0] == 'r' ? RELAY_BATCH_RETRY
	                                                 : RELAY_BATCH_STREAM;
	out->fence = (uint64_t)ob_pg_int64(res, 0, COL_FENCE);
	out->attempt = (uint32_t)ob_pg_int64(res, 0, COL_ATTEMPT);
	out->takeover = PQgetvalue(res, 0, COL_TAKEOVER)[0] == 't';
	out->more = PQgetvalue(res, 0, COL_MORE)[0] == 't';
	/* the position is read after the claim's rows were made: the last
	 * row's is the highest */
	if (!PQgetisnull(res, rows - 1, COL_LSN) &&
	    relay_gate_parse_lsn(PQgetvalue(res, rows - 1, COL_LSN), &out->lsn) != OB_OK) {
		snprintf(err, errlen, "claim: cannot read the WAL position '%s'",
		    PQgetvalue(res, rows - 1, COL_LSN));
		return OB_EDB;
	}
	for (int r = 0; r < rows; r++) {
		struct ob_wire_msg *m = &out->msgs[out->n++];
		m->id = (uint64_t)ob_pg_int64(res, r, COL_ID);
		m->fence = out->fence;
		m->attempt = (uint32_t)ob_pg_int64(res, r, COL_ATTEMPT);
		m->created_at_us = ob_pg_int64(res, r, COL_CREATED);
		m->topic = PQgetvalue(res, r, COL_TOPIC);
		m->topic_len = (uint16_t)PQgetlength(res, r, COL_TOPIC);
		m->key = PQgetvalue(res, r, COL_KEY);
		m->key_len = (uint16_t)PQgetlength(res, r, COL_KEY);
		m->payload = PQgetvalue(res, r, COL_PAYLOAD);
		m->payload_len = (uint32_t)PQgetlength(res, r, COL_PAYLOAD);
		if (!PQgetisnull(res, r, COL_ORDKEY)) {
			m->ordering_key = PQgetvalue(res, r, COL_ORDKEY);
			m->ordering_key_len = (uint16_t)PQgetlength(res, r, COL_ORDKEY);
			m->ordering_seq = (uint64_t)ob_pg_int64(res, r, COL_ORDSEQ);
		}
	}
	return OB_OK;
}

int
relay_claim_batch(PGconn *conn, const char *owner, int64_t lease_ms, uint32_t max,
    int64_t max_bytes, const struct relay_topics *topics, bool retries_first, bool ordering,
    bool skip_dead_heads, bool want_lsn, struct relay_batch *out, char *err, size_t errlen)
{
	char proto[16], lease[24], limit[16], bytes[24];
	snprintf(proto, sizeof(proto), "%d", RELAY_PROTOCOL);
	snprintf(lease, sizeof(lease), "%" PRId64, lease_ms);
	snprintf(limit, sizeof(limit), "%" PRIu32, max);
	snprintf(bytes, sizeof(bytes), "%" PRId64, max_bytes);
	const char *params[11] = { proto, owner, lease, limit,
		topics->include != NULL ? topics->include : "{}",
		topics->exclude != NULL ? topics->exclude : "{}",
		topics->others ? "true" : "false", retries_first ? "true" : "false",
		ordering ? "true" : "false", skip_dead_heads ? "true" : "false",
		max_bytes > 0 ? bytes : NULL };
	memset(out, 0, sizeof(*out));
	/* prepared once per connection: parsed and planned once, not per claim */
	PGresult *res = want_lsn
	    ? ob_pg_exec_prepared(conn, "relay_claim_lsn", claim_sql_lsn, 11, params, NULL, NULL)
	    : ob_pg_exec_prepared(conn, "relay_claim", claim_sql, 11, params, NULL, NULL);
	int rc = ob_pg_check(res, PGRES_TUPLES_OK, "claim", err, errlen);
	if (rc != OB_OK) {
		if (ob_sqlstate_is(ob_pg_sqlstate(res), OB_SQLSTATE_PROTOCOL))
			rc = OB_EPROTO;
		PQclear(res);
		return rc;
	}
	out->res = res;
	if ((rc = map_rows(res, out, err, errlen)) != OB_OK)
		relay_batch_fini(out);
	return rc;
}

void
relay_batch_fini(struct relay_batch *b)
{
	PQclear(b->res);
	free(b->msgs);
	memset(b, 0, sizeof(*b));
}
