/*
 * migrate.c - apply the embedded sql/ migrations, once, under a lock.
 *
 * Everything happens in one transaction that first takes an advisory lock:
 * a second concurrent run waits, then sees the versions the first recorded
 * and applies nothing. A failing migration rolls the whole run back.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "outbox/err.h"
#include "outbox/migrate.h"
#include "outbox/pg.h"

/* Arbitrary constant naming "outbox relay migrations" for pg_advisory_xact_lock. */
#define MIGRATE_LOCK_ID 0x6f62786d /* 'obxm' */

static const char create_table_sql[] =
    "CREATE TABLE IF NOT EXISTS public.outbox_schema_migrations ("
    " schema_set text NOT NULL, version integer NOT NULL, name text NOT NULL,"
    " applied_at timestamptz NOT NULL DEFAULT now(),"
    " PRIMARY KEY (schema_set, version))";

static bool
set_selected(const char *want, const char *set)
{
	return strcmp(want, "all") == 0 || strcmp(want, set) == 0;
}

static int
is_applied(PGconn *conn, const struct ob_migration *m, bool *applied,
    char *err, size_t errlen)
{
	char version[16];
	snprintf(version, sizeof(version), "%d", m->version);
	const char *params[2] = { m->set, version };
	PGresult *res = PQexecParams(conn,
	    "SELECT 1 FROM public.outbox_schema_migrations"
	    " WHERE schema_set = $1 AND version = $2::int",
	    2, NULL, params, NULL, NULL, 0);
	int rc = ob_pg_check(res, PGRES_TUPLES_OK, "migrations lookup", err, errlen);
	if (rc == OB_OK)
		*applied = PQntuples(res) > 0;
	PQclear(res);
	return rc;
}

static int
apply_one(PGconn *conn, const struct ob_migration *m, char *err, size_t errlen)
{
	char what[96];
	snprintf(what, sizeof(what), "migration %s/%s", m->set, m->name);
	int rc = ob_pg_exec(conn, m->sql, what, err, errlen);
	if (rc != OB_OK)
		return rc;
	char version[16];
	snprintf(version, sizeof(version), "%d", m->version);
	const char *params[3] = { m->set, version, m->name };
	PGresult *res = PQexecParams(conn,
	    "INSERT INTO public.outbox_schema_migrations (schema_set, version, name)"
	    " VALUES ($1, $2::int, $3)",
	    3, NULL, params, NULL, NULL, 0);
	rc = ob_pg_check(res, PGRES_COMMAND_OK, "record migration", err, errlen);
	PQclear(res);
	return rc;
}

int
ob_migrate(PGconn *conn, const char *set, int *applied, char *err,
    size_t errlen)
{
	if (strcmp(set, "all") != 0 && strcmp(set, "outbox") != 0 &&
	    strcmp(set, "inbox") != 0) {
		snprintf(err, errlen, "unknown schema set '%s' (outbox, inbox or all)", set);
		return OB_EINVAL;
	}
	char lock_sql[80];
	snprintf(lock_sql, sizeof(lock_sql), "SELECT pg_advisory_xact_lock(%d)",
	    MIGRATE_LOCK_ID);

	int rc = ob_pg_exec(conn, "BEGIN", "begin", err, errlen);
	if (rc != OB_OK)
		return rc;
	/* The lock comes before CREATE TABLE IF NOT EXISTS, which itself races. */
	if ((rc = ob_pg_exec(conn, lock_sql, "advisory lock", err, errlen)) != OB_OK ||
	    (rc = ob_pg_exec(conn, create_table_sql, "create migrations table", err,
	         errlen)) != OB_OK)
		goto fail;

	int n = 0;
	for (const struct ob_migration *m = ob_migrations; m->set != NULL; m++) {
		if (!set_selected(set, m->set))
			continue;
		bool done = false;
		if ((rc = is_applied(conn, m, &done, err, errlen)) != OB_OK)
			goto fail;
		if (done)
			continue;
		if ((rc = apply_one(conn, m, err, errlen)) != OB_OK)
			goto fail;
		n++;
	}
	if ((rc = ob_pg_commit(conn, err, errlen)) != OB_OK)
		goto fail;
	*applied = n;
	return OB_OK;

fail:
	ob_pg_rollback(conn);
	return rc;
}
