/*
 * housekeep.c - the call to outbox.housekeep and its result.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/err.h"
#include "outbox/housekeep.h"
#include "outbox/pg.h"

static const char housekeep_sql[] =
    "SELECT ran, batches_deleted, dead_deleted, truncated_slot, truncated_rows, switched_to,"
    " waiting, oldest_xact_pid, oldest_xact_application, oldest_xact_age_s, read_again"
    " FROM outbox.housekeep($1::bigint, $2::bigint, $3::bigint, $4::int, $5::boolean)";

int
ob_housekeep(PGconn *conn, int64_t retention_ms, int64_t dead_retention_ms,
    bool force_switch, struct ob_housekeep *out, char *err, size_t errlen)
{
	char ret[24], dead[24], done[24], lock[16];
	snprintf(ret, sizeof(ret), "%" PRId64, retention_ms);
	snprintf(dead, sizeof(dead), "%" PRId64, dead_retention_ms);
	snprintf(done, sizeof(done), "%d", OB_HOUSEKEEP_DONE_RETENTION_MS);
	snprintf(lock, sizeof(lock), "%d", OB_HOUSEKEEP_LOCK_MS);
	const char *params[5] = { ret, dead, done, lock, force_switch ? "true" : "false" };
	PGresult *res = PQexecParams(conn, housekeep_sql, 5, NULL, params, NULL, NULL, 0);
	int rc = ob_pg_check(res, PGRES_TUPLES_OK, "housekeeping", err, errlen);
	if (rc == OB_OK && PQntuples(res) != 1) {
		snprintf(err, errlen, "housekeeping: %d rows", PQntuples(res));
		rc = OB_EDB;
	}
	if (rc == OB_OK) {
		memset(out, 0, sizeof(*out));
		out->ran = PQgetvalue(res, 0, 0)[0] == 't';
		out->batches_deleted = ob_pg_int64(res, 0, 1);
		out->dead_deleted = ob_pg_int64(res, 0, 2);
		out->truncated_slot = PQgetisnull(res, 0, 3) ? -1 : (int)ob_pg_int64(res, 0, 3);
		out->truncated_rows = PQgetisnull(res, 0, 4) ? 0 : ob_pg_int64(res, 0, 4);
		out->switched_to = PQgetisnull(res, 0, 5) ? -1 : (int)ob_pg_int64(res, 0, 5);
		snprintf(out->waiting, sizeof(out->waiting), "%s",
		    PQgetisnull(res, 0, 6) ? "" : PQgetvalue(res, 0, 6));
		out->oldest_xact_pid = PQgetisnull(res, 0, 7) ? 0 : (int)ob_pg_int64(res, 0, 7);
		snprintf(out->oldest_xact_application, sizeof(out->oldest_xact_application), "%s",
		    PQgetisnull(res, 0, 8) ? "" : PQgetvalue(res, 0, 8));
		out->oldest_xact_age_s = PQgetisnull(res, 0, 9) ? 0 : strtod(PQgetvalue(res, 0, 9), NULL);
		out->read_again = PQgetisnull(res, 0, 10) ? -1 : ob_pg_int64(res, 0, 10);
	}
	PQclear(res);
	return rc;
}
