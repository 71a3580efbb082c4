/*
 * purge.c - housekeeping of delivered records (see purge.h).
 *
 * The statement deletes the oldest delivered rows first, through the
 * partial index on delivered_at, LIMIT batch: a pass never holds long locks
 * or builds one huge transaction.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "outbox/err.h"
#include "outbox/pg.h"
#include "purge.h"

/* = ANY(ARRAY(...)), not IN (...): planned for LIMIT rows, the IN form
 * hash-joined a scan of the whole table for every batch. */
static const char purge_sql[] =
    "DELETE FROM outbox.messages WHERE id = ANY(ARRAY("
    "  SELECT id FROM outbox.messages"
    "   WHERE status = 'delivered'"
    "     AND delivered_at < now() - $1::bigint * interval '1 millisecond'"
    "   ORDER BY delivered_at LIMIT $2))";

static int
lock_op(PGconn *conn, const char *fn, bool *got, char *err, size_t errlen)
{
	char sql[96];
	snprintf(sql, sizeof(sql), "SELECT %s(%lld)", fn, (long long)RELAY_PURGE_LOCK_KEY);
	PGresult *res = PQexec(conn, sql);
	int rc = ob_pg_check(res, PGRES_TUPLES_OK, fn, err, errlen);
	if (rc == OB_OK && got != NULL)
		*got = PQntuples(res) == 1 && PQgetvalue(res, 0, 0)[0] == 't';
	PQclear(res);
	return rc;
}

int
relay_purge_pass(PGconn *conn, int64_t retention_ms, int64_t batch,
    volatile sig_atomic_t *stop, uint64_t *purged, bool *skipped,
    char *err, size_t errlen)
{
	bool got = false;
	uint64_t total = 0;
	int rc = lock_op(conn, "pg_try_advisory_lock", &got, err, errlen);
	if (rc != OB_OK)
		return rc;
	if (!got) {
		*purged = 0;
		*skipped = true;
		return OB_OK;
	}
	char ret[24], lim[24];
	snprintf(ret, sizeof(ret), "%" PRId64, retention_ms);
	snprintf(lim, sizeof(lim), "%" PRId64, batch);
	const char *params[2] = { ret, lim };
	for (int b = 0; b < RELAY_PURGE_MAX_BATCHES && !*stop; b++) {
		PGresult *res = PQexecParams(conn, purge_sql, 2, NULL, params, NULL, NULL, 0);
		rc = ob_pg_check(res, PGRES_COMMAND_OK, "purge", err, errlen);
		uint64_t n = rc == OB_OK ? strtoull(PQcmdTuples(res), NULL, 10) : 0;
		PQclear(res);
		if (rc != OB_OK) {
			/* Give the lock back if the session is still there. */
			char ignored[256];
			if (!ob_pg_broken(conn))
				lock_op(conn, "pg_advisory_unlock", NULL, ignored, sizeof(ignored));
			return rc;
		}
		total += n;
		if (n < (uint64_t)batch)
			break;
	}
	rc = lock_op(conn, "pg_advisory_unlock", NULL, err, errlen);
	if (rc != OB_OK)
		return rc;
	*purged = total;
	*skipped = false;
	return OB_OK;
}
