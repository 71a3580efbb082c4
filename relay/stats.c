/*
 * stats.c - the database's side of the relay's gauges: the totals of
 * outbox.topic_stats() (sql/outbox/functions/topic_stats.sql), in one statement.
 * Pending counts the backlog of every stream (messages not yet assigned,
 * and those in open batches) plus the retries; the oldest claimable age is
 * that of the oldest message a relay could claim now; blocked keys are
 * ordering keys waiting behind a dead letter.
 */
#include <stdio.h>
#include <stdlib.h>

#include "outbox/err.h"
#include "outbox/pg.h"
#include "stats.h"

static const char stats_sql[] =
    "SELECT COALESCE(sum(pending), 0), COALESCE(max(oldest_claimable_s), 0),"
    " COALESCE(sum(blocked_keys), 0) FROM outbox.topic_stats()";

int
relay_stats_query(PGconn *conn, struct relay_stats *out, char *err, size_t errlen)
{
	PGresult *res = PQexec(conn, stats_sql);
	int rc = ob_pg_check(res, PGRES_TUPLES_OK, "read outbox gauges", err, errlen);
	if (rc == OB_OK && PQntuples(res) != 1) {
		snprintf(err, errlen, "read outbox gauges: %d rows", PQntuples(res));
		rc = OB_EDB;
	}
	if (rc == OB_OK) {
		out->pending = ob_pg_int64(res, 0, 0);
		out->oldest_claimable_s = strtod(PQgetvalue(res, 0, 1), NULL);
		out->blocked_keys = ob_pg_int64(res, 0, 2);
	}
	PQclear(res);
	return rc;
}
