/*
 * stats.c - the database's side of the relay's gauges, in one statement.
 *
 * Each part is shaped to use a partial index of sql/outbox/005_ordering.sql:
 * pending is counted as claimable-shaped rows (messages_claimable) plus
 * followers waiting behind their key's head (messages_key_order); the
 * oldest claimable message is the first of messages_claimable that is due
 * and not under a live lease (the claim's own predicate, so the gauge
 * grows only when relays do not keep up). Dead heads have no index: that
 * part scans the dead and delivered rows not yet purged (see
 * docs/metrics.md).
 */
#include <stdio.h>
#include <stdlib.h>

#include "outbox/err.h"
#include "outbox/pg.h"
#include "stats.h"

static const char stats_sql[] =
    "SELECT"
    " (SELECT count(*) FROM outbox.messages"
    "   WHERE status = 'pending' AND (ordering_key IS NULL OR is_head))"
    " + (SELECT count(*) FROM outbox.messages"
    "   WHERE status = 'pending' AND ordering_key IS NOT NULL AND NOT is_head),"
    " COALESCE((SELECT extract(epoch FROM now() - available_at)::float8"
    "   FROM outbox.messages"
    "   WHERE status = 'pending' AND (ordering_key IS NULL OR is_head)"
    "     AND available_at <= now() AND (lease_until IS NULL OR lease_until < now())"
    "   ORDER BY available_at, id LIMIT 1), 0),"
    " (SELECT count(*) FROM outbox.messages WHERE status = 'dead' AND is_head)";

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
