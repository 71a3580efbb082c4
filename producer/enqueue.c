/*
 * enqueue.c - the producer's side of the transactional outbox.
 *
 * The report row and outbox.enqueue() run in one statement inside one
 * transaction; nothing is sent from here. The relay picks the record up
 * after COMMIT (woken by the enqueue notification).
 */
#include <stdio.h>
#include <string.h>
#include <uuid/uuid.h>

#include "enqueue.h"
#include "outbox/err.h"
#include "outbox/pg.h"
#include "outbox/protocol.h"
#include "outbox/sqlstate.h"

static const char insert_sql[] =
    "WITH r AS ("
    "  INSERT INTO app.bug_reports (title, module, steps, severity, idempotency_key)"
    "  VALUES ($1, $2, $3, $4, $5) RETURNING *)"
    " SELECT r.id, outbox.enqueue('" PRODUCER_TOPIC_REPORT_CREATED "', "
    PRODUCER_REPORT_KEY_SQL ", " PRODUCER_REPORT_PAYLOAD_SQL ")"
    " FROM r";

int
producer_connect(const char *conninfo, PGconn **out, char *err, size_t errlen)
{
	PGconn *conn = NULL;
	int rc = ob_pg_connect(conninfo, "outbox-producer", &conn, err, errlen);

	if (rc == OB_OK)
		rc = ob_protocol_check(conn, "outbox", "producer", OB_PROTOCOL_PRODUCER, err, errlen);
	if (rc == OB_OK)
		rc = ob_pg_durable_commits(conn, err, errlen);
	if (rc != OB_OK && conn != NULL) {
		PQfinish(conn);
		conn = NULL;
	}
	*out = conn;
	return rc;
}

int
producer_insert_report(PGconn *conn, const struct bug_report *r,
    const char *key, int64_t *report_id, int64_t *message_id, char *err,
    size_t errlen)
{
	const char *params[5] = { r->title, r->module, r->steps ? r->steps : "",
		r->severity, key };
	PGresult *res = PQexecParams(conn, insert_sql, 5, NULL, params, NULL, NULL, 0);
	int rc = ob_pg_check(res, PGRES_TUPLES_OK, "insert report", err, errlen);
	if (rc == OB_OK && PQntuples(res) == 1) {
		*report_id = ob_pg_int64(res, 0, 0);
		*message_id = ob_pg_int64(res, 0, 1);
	} else if (rc == OB_OK) {
		snprintf(err, errlen, "insert report: no row returned");
		rc = OB_EDB;
	} else {
		const char *state = ob_pg_sqlstate(res);
		if (ob_sqlstate_bad_input(state))
			rc = OB_EINVAL;
	}
	PQclear(res);
	return rc;
}

int
producer_enqueue_report(PGconn *conn, const struct bug_report *r,
    const char *key, int64_t *report_id, int64_t *message_id, char *err,
    size_t errlen)
{
	int64_t rid, mid;
	int rc = ob_pg_exec(conn, "BEGIN", "begin", err, errlen);
	if (rc != OB_OK)
		return rc;
	if ((rc = producer_insert_report(conn, r, key, &rid, &mid, err, errlen)) != OB_OK ||
	    (rc = ob_pg_commit(conn, err, errlen)) != OB_OK) {
		ob_pg_rollback(conn);
		return rc;
	}
	*report_id = rid;
	*message_id = mid;
	return OB_OK;
}

void
producer_new_key(char out[37])
{
	uuid_t u;
	uuid_generate_random(u);
	uuid_unparse_lower(u, out);
}
