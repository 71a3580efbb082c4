/*
 * migrate.c - apply the embedded sql/ migrations, once, under a lock, then
 * the schema files (one per function, view and trigger) when they changed.
 *
 * Everything happens in one transaction that first takes an advisory lock:
 * a second concurrent run waits, then sees the versions the first recorded
 * and applies nothing. A failing migration or file rolls the whole run back;
 * a run that PostgreSQL aborted for a deadlock is run again.
 *
 * Which objects the files define is read from the catalog, not parsed from
 * the files: CREATE OR REPLACE writes a new catalog row even when nothing
 * changed, so after the files ran, an object of the set's schema whose row
 * this transaction did not write (xmin) is one no file defines any more,
 * such as the old overload left by a changed argument list.
 *
 * The sets, in the order they are applied: outbox, inbox, and the demo
 * business (schema app) only when asked for. Each records what it applied
 * in tables of its own schema (outbox.schema_migrations,
 * outbox.schema_files; inbox.*; the demo's in outbox's): migrating into a
 * user's database writes nothing outside the outbox's schemas (issue 33;
 * public.outbox_schema_migrations and public.outbox_schema_files of
 * earlier runs are moved there). Revoking CREATE on schema public from
 * PUBLIC is the user's choice (harden_public).
 *
 * A set's functions/grants.sql (its roles' privileges, docs/security.md) is
 * not an object and is applied last, after that drop: a GRANT or REVOKE
 * rewrites the catalog row of every function it names, which would make a
 * stale function look written by this run, and a function named without
 * its arguments is ambiguous while a stale overload is still beside it.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "outbox/backoff.h"
#include "outbox/buf.h"
#include "outbox/err.h"
#include "outbox/migrate.h"
#include "outbox/pg.h"
#include "outbox/sqlstate.h"

/* The schema file holding a set's privileges, applied after the drop. */
#define GRANTS_FILE "functions/grants.sql"

/* Arbitrary constant naming "outbox relay migrations" for pg_advisory_xact_lock. */
#define MIGRATE_LOCK_ID 0x6f62786d /* 'obxm' */

/* The advisory lock is one database's: runs against two databases of one
 * server can deadlock on what is shared, the roles (both create the
 * same ones, each holding what the other's next CREATE ROLE waits for).
 * PostgreSQL aborts one; it runs again after a jittered pause, finds the
 * roles made, and applies. Attempts in all, and the pause's bounds. */
#define MIGRATE_ATTEMPTS 5
#define MIGRATE_RETRY_BASE_MS 20
#define MIGRATE_RETRY_CAP_MS 1000

/* A set: its directory under sql/, the schema its functions, views and
 * triggers are in (what no file defines any more is dropped there, unless
 * the schema may hold the user's own), and the schema of its bookkeeping. */
struct migrate_set {
	const char *name;
	const char *schema;
	const char *books;
	bool drops_stale;
};

static const struct migrate_set sets[] = {
	{ "outbox", "outbox", "outbox", true },
	{ "inbox", "inbox", "inbox", true },
	/* a user's own schema app may hold functions of theirs */
	{ "demo", "app", "outbox", false },
};
#define N_SETS (sizeof(sets) / sizeof(sets[0]))

/* The bookkeeping of the sets of schema %1$I (format()). */
static const char create_books_sql[] =
    "SELECT format('CREATE SCHEMA IF NOT EXISTS %1$I;"
    " CREATE TABLE IF NOT EXISTS %1$I.schema_migrations ("
    "  schema_set text NOT NULL, version integer NOT NULL, name text NOT NULL,"
    "  applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (schema_set, version));"
    " CREATE TABLE IF NOT EXISTS %1$I.schema_files ("
    "  schema_set text PRIMARY KEY, digest text NOT NULL,"
    "  applied_at timestamptz NOT NULL DEFAULT now())', $1::text)";

/* The objects of schema $1 that this transaction did not write, views and
 * triggers before the functions they may use; each row: its DROP statement's
 * object kind and name. Extension members and internal triggers are not ours. */
static const char stale_objects_sql[] =
    "SELECT 'TRIGGER', format('%I ON %s', t.tgname, t.tgrelid::regclass), 1"
    "  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
    " WHERE c.relnamespace = $1::regnamespace AND NOT t.tgisinternal"
    "   AND t.xmin <> pg_current_xact_id()::xid"
    " UNION ALL "
    "SELECT 'VIEW', c.oid::regclass::text, 2"
    "  FROM pg_class c JOIN pg_rewrite r ON r.ev_class = c.oid AND r.rulename = '_RETURN'"
    " WHERE c.relnamespace = $1::regnamespace AND c.relkind = 'v'"
    "   AND r.xmin <> pg_current_xact_id()::xid"
    " UNION ALL "
    "SELECT 'ROUTINE', p.oid::regprocedure::text, 3"
    "  FROM pg_proc p"
    " WHERE p.pronamespace = $1::regnamespace AND p.prokind IN ('f', 'p')"
    "   AND p.xmin <> pg_current_xact_id()::xid"
    "   AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass"
    "                     AND d.objid = p.oid AND d.deptype = 'e')"
    " ORDER BY 3, 2";

/* The sets a run applies: the selected ones, the demo only when asked. */
static bool
set_selected(const struct ob_migrate_opts *o, const struct migrate_set *set)
{
	if (strcmp(set->name, "demo") == 0)
		return o->demo;
	return strcmp(o->set, "all") == 0 || strcmp(o->set, set->name) == 0;
}

/* Make set's bookkeeping tables (and their schema) if missing. */
static int
books_ready(PGconn *conn, const char *books, char *err, size_t errlen)
{
	const char *params[1] = { books };
	PGresult *res = ob_pg_rows(conn, create_books_sql, 1, params, "bookkeeping tables",
	    err, errlen);
	if (res == NULL)
		return OB_EDB;
	int rc = ob_pg_exec(conn, PQgetvalue(res, 0, 0), "bookkeeping tables", err, errlen);
	PQclear(res);
	return rc;
}

/* The runner's tables of before issue 33 were public.outbox_schema_migrations
 * and public.outbox_schema_files (sets outbox and inbox, each now kept in
 * its own schema): their rows are moved, and the tables dropped. */
static int
adopt_old_books(PGconn *conn, char *err, size_t errlen)
{
	PGresult *res = ob_pg_rows(conn, "SELECT to_regclass('public.outbox_schema_migrations')"
	    " IS NOT NULL, to_regclass('public.outbox_schema_files') IS NOT NULL", 0, NULL,
	    "old bookkeeping", err, errlen);
	if (res == NULL)
		return OB_EDB;
	bool migrations = PQgetvalue(res, 0, 0)[0] == 't', files = PQgetvalue(res, 0, 1)[0] == 't';
	PQclear(res);
	if (!migrations && !files)
		return OB_OK;
	/* A files table alone never existed: it came with the migrations'. */
	if (!migrations) {
		snprintf(err, errlen, "public.outbox_schema_files without"
		    " public.outbox_schema_migrations: not a database this program migrated");
		return OB_EDB;
	}
	/* A set's files row is written in the run that applied its migrations:
	 * the migrations' sets are every set of both tables. */
	res = ob_pg_rows(conn, "SELECT DISTINCT schema_set FROM public.outbox_schema_migrations",
	    0, NULL, "old bookkeeping sets", err, errlen);
	if (res == NULL)
		return OB_EDB;
	int rc = OB_OK;
	for (int i = 0; rc == OB_OK && i < PQntuples(res); i++) {
		const char *name = PQgetvalue(res, i, 0);
		const struct migrate_set *set = NULL;
		for (size_t k = 0; k < N_SETS; k++)
			if (strcmp(sets[k].name, name) == 0)
				set = &sets[k];
		if (set == NULL) {
			snprintf(err, errlen, "public.outbox_schema_migrations names schema set '%s',"
			    " which this program does not know", name);
			rc = OB_EDB;
			break;
		}
		char sql[512];
		const char *params[1] = { name };
		if ((rc = books_ready(conn, set->books, err, errlen)) != OB_OK)
			break;
		snprintf(sql, sizeof(sql), "INSERT INTO %s.schema_migrations SELECT * FROM"
		    " public.outbox_schema_migrations WHERE schema_set = $1"
		    " ON CONFLICT DO NOTHING", set->books);
		if ((rc = ob_pg_command(conn, sql, 1, params, "move bookkeeping", NULL, err,
		         errlen)) != OB_OK || !files)
			continue;
		snprintf(sql, sizeof(sql), "INSERT INTO %s.schema_files SELECT * FROM"
		    " public.outbox_schema_files WHERE schema_set = $1"
		    " ON CONFLICT DO NOTHING", set->books);
		rc = ob_pg_command(conn, sql, 1, params, "move bookkeeping", NULL, err, errlen);
	}
	PQclear(res);
	if (rc == OB_OK)
		rc = ob_pg_exec(conn, "DROP TABLE public.outbox_schema_migrations;"
		    " DROP TABLE IF EXISTS public.outbox_schema_files", "drop old bookkeeping",
		    err, errlen);
	return rc;
}

static int
is_applied(PGconn *conn, const struct migrate_set *set, const struct ob_migration *m,
    bool *applied, char *err, size_t errlen)
{
	char version[16], sql[160];
	snprintf(version, sizeof(version), "%d", m->version);
	snprintf(sql, sizeof(sql), "SELECT 1 FROM %s.schema_migrations"
	    " WHERE schema_set = $1 AND version = $2::int", set->books);
	const char *params[2] = { m->set, version };
	PGresult *res = ob_pg_rows(conn, sql, 2, params, "migrations lookup", err, errlen);
	if (res == NULL)
		return OB_EDB;
	*applied = PQntuples(res) > 0;
	PQclear(res);
	return OB_OK;
}

static int
apply_one(PGconn *conn, const struct migrate_set *set, const struct ob_migration *m,
    char *err, size_t errlen)
{
	char what[96];
	snprintf(what, sizeof(what), "migration %s/%s", m->set, m->name);
	int rc = ob_pg_exec(conn, m->sql, what, err, errlen);
	if (rc != OB_OK)
		return rc;
	char version[16], sql[160];
	snprintf(version, sizeof(version), "%d", m->version);
	snprintf(sql, sizeof(sql), "INSERT INTO %s.schema_migrations (schema_set, version, name)"
	    " VALUES ($1, $2::int, $3)", set->books);
	const char *params[3] = { m->set, version, m->name };
	return ob_pg_command(conn, sql, 3, params, "record migration", NULL, err, errlen);
}

/* The md5 (server side) of set's files, names and texts, and the one stored
 * by the last run that applied them ("" when none did). */
static int
files_digest(PGconn *conn, const struct migrate_set *set, char *digest, size_t dlen,
    char *stored, size_t slen, char *err, size_t errlen)
{
	struct ob_buf all;
	ob_buf_init(&all);
	int rc = OB_OK;
	for (const struct ob_schema_file *f = ob_schema_files; f->set != NULL; f++) {
		if (strcmp(f->set, set->name) != 0)
			continue;
		if (ob_buf_append(&all, f->name, strlen(f->name) + 1) != OB_OK ||
		    ob_buf_append(&all, f->sql, strlen(f->sql) + 1) != OB_OK) {
			snprintf(err, errlen, "schema files of %s: out of memory", set->name);
			rc = OB_ENOMEM;
			goto out;
		}
	}
	/* A NUL separates the parts; md5 gets the bytes as bytea. */
	char sql[192];
	snprintf(sql, sizeof(sql), "SELECT md5($2::bytea), coalesce((SELECT digest FROM"
	    " %s.schema_files WHERE schema_set = $1), '')", set->books);
	const char *params[2] = { set->name, all.data };
	const int lengths[2] = { 0, (int)all.len };
	const int formats[2] = { 0, 1 };
	PGresult *res = PQexecParams(conn, sql, 2, NULL, params, lengths, formats, 0);
	if ((rc = ob_pg_check(res, PGRES_TUPLES_OK, "schema files digest", err, errlen)) == OB_OK) {
		snprintf(digest, dlen, "%s", PQgetvalue(res, 0, 0));
		snprintf(stored, slen, "%s", PQgetvalue(res, 0, 1));
	}
	PQclear(res);
out:
	ob_buf_fini(&all);
	return rc;
}

static int
apply_file(PGconn *conn, const struct ob_schema_file *f, char *err, size_t errlen)
{
	PGresult *res = PQexec(conn, f->sql);
	char what[128];
	snprintf(what, sizeof(what), "schema file %s/%s", f->set, f->name);
	int rc = OB_OK;
	if (res == NULL || PQresultStatus(res) != PGRES_COMMAND_OK) {
		rc = ob_pg_check(res, PGRES_COMMAND_OK, what, err, errlen);
		/* invalid_function_definition: a new return type or argument names */
		if (res != NULL && ob_sqlstate_is(ob_pg_sqlstate(res),
	        OB_SQLSTATE_INVALID_FUNCTION_DEFINITION)) {
			size_t n = strlen(err);
			snprintf(err + n, errlen - n, " (CREATE OR REPLACE cannot change that:"
			    " a numbered migration must drop the old definition first, sql/README.md)");
		}
	}
	PQclear(res);
	return rc;
}

static void
note_dropped(struct ob_migrate_report *report, const char *name)
{
	size_t n = strlen(report->dropped_names);
	snprintf(report->dropped_names + n, sizeof(report->dropped_names) - n, "%s%s",
	    n ? ", " : "", name);
	report->dropped++;
}

/* Drop what the files of set no longer define (see the top of this file). */
static int
drop_stale(PGconn *conn, const struct migrate_set *set, struct ob_migrate_report *report,
    char *err, size_t errlen)
{
	const char *params[1] = { set->schema };
	PGresult *res = PQexecParams(conn, stale_objects_sql, 1, NULL, params, NULL, NULL, 0);
	int rc = ob_pg_check(res, PGRES_TUPLES_OK, "stale schema objects", err, errlen);
	for (int i = 0; rc == OB_OK && i < PQntuples(res); i++) {
		const char *kind = PQgetvalue(res, i, 0), *name = PQgetvalue(res, i, 1);
		struct ob_buf sql;
		ob_buf_init(&sql);
		char what[160];
		snprintf(what, sizeof(what), "drop %s %s, which no file in sql/%s/functions defines",
		    kind, name, set->name);
		if (ob_buf_printf(&sql, "DROP %s %s", kind, name) != OB_OK) {
			snprintf(err, errlen, "%s: out of memory", what);
			rc = OB_ENOMEM;
		} else if ((rc = ob_pg_exec(conn, sql.data, what, err, errlen)) == OB_OK) {
			note_dropped(report, name);
		}
		ob_buf_fini(&sql);
	}
	PQclear(res);
	return rc;
}

/* The schema files of set, when a migration ran in this transaction or they
 * changed since the last run; then the drop of what they no longer define. */
static int
apply_files(PGconn *conn, const struct migrate_set *set, bool migrated,
    struct ob_migrate_report *report, char *err, size_t errlen)
{
	char digest[64], stored[64];
	int rc = files_digest(conn, set, digest, sizeof(digest), stored, sizeof(stored),
	    err, errlen);
	if (rc != OB_OK || (!migrated && strcmp(digest, stored) == 0))
		return rc;
	for (const struct ob_schema_file *f = ob_schema_files; f->set != NULL; f++) {
		if (strcmp(f->set, set->name) != 0 || strcmp(f->name, GRANTS_FILE) == 0)
			continue;
		if ((rc = apply_file(conn, f, err, errlen)) != OB_OK)
			return rc;
		report->files++;
	}
	if (set->drops_stale && (rc = drop_stale(conn, set, report, err, errlen)) != OB_OK)
		return rc;
	/* the privileges last (see the top of this file) */
	for (const struct ob_schema_file *f = ob_schema_files; f->set != NULL; f++) {
		if (strcmp(f->set, set->name) != 0 || strcmp(f->name, GRANTS_FILE) != 0)
			continue;
		if ((rc = apply_file(conn, f, err, errlen)) != OB_OK)
			return rc;
		report->files++;
	}
	char sql[192];
	snprintf(sql, sizeof(sql), "INSERT INTO %s.schema_files (schema_set, digest)"
	    " VALUES ($1, $2) ON CONFLICT (schema_set) DO UPDATE SET digest = EXCLUDED.digest,"
	    " applied_at = now()", set->books);
	const char *params[2] = { set->name, digest };
	return ob_pg_command(conn, sql, 2, params, "record schema files", NULL, err, errlen);
}

/* One set's pending migrations, then its files. */
static int
migrate_set(PGconn *conn, const struct migrate_set *set, struct ob_migrate_report *report,
    char *err, size_t errlen)
{
	int rc = books_ready(conn, set->books, err, errlen), applied = 0;
	for (const struct ob_migration *m = ob_migrations; rc == OB_OK && m->set != NULL; m++) {
		if (strcmp(m->set, set->name) != 0)
			continue;
		bool done = false;
		if ((rc = is_applied(conn, set, m, &done, err, errlen)) != OB_OK || done)
			continue;
		if ((rc = apply_one(conn, set, m, err, errlen)) == OB_OK)
			applied++;
	}
	report->migrations += applied;
	return rc != OB_OK ? rc : apply_files(conn, set, applied > 0, report, err, errlen);
}

/* One run in one transaction; rolled back on any error. */
static int
migrate_once(PGconn *conn, const struct ob_migrate_opts *o, struct ob_migrate_report *report,
    char *err, size_t errlen)
{
	memset(report, 0, sizeof(*report));
	char lock_sql[80];
	snprintf(lock_sql, sizeof(lock_sql), "SELECT pg_advisory_xact_lock(%d)",
	    MIGRATE_LOCK_ID);

	int rc = ob_pg_exec(conn, "BEGIN", "begin", err, errlen);
	if (rc != OB_OK)
		return rc;
	/* The lock comes before CREATE TABLE IF NOT EXISTS, which itself races. */
	if ((rc = ob_pg_exec(conn, lock_sql, "advisory lock", err, errlen)) != OB_OK ||
	    (rc = adopt_old_books(conn, err, errlen)) != OB_OK)
		goto fail;
	for (size_t i = 0; i < N_SETS; i++)
		if (set_selected(o, &sets[i]) &&
		    (rc = migrate_set(conn, &sets[i], report, err, errlen)) != OB_OK)
			goto fail;
	if (o->harden_public &&
	    (rc = ob_pg_exec(conn, "REVOKE CREATE ON SCHEMA public FROM PUBLIC",
	         "revoke create on schema public", err, errlen)) != OB_OK)
		goto fail;
	if ((rc = ob_pg_commit(conn, err, errlen)) != OB_OK)
		goto fail;
	return OB_OK;

fail:
	ob_pg_rollback(conn);
	memset(report, 0, sizeof(*report));
	return rc;
}

int
ob_migrate(PGconn *conn, const struct ob_migrate_opts *opts, struct ob_migrate_report *report,
    char *err, size_t errlen)
{
	memset(report, 0, sizeof(*report));
	if (strcmp(opts->set, "all") != 0 && strcmp(opts->set, "outbox") != 0 &&
	    strcmp(opts->set, "inbox") != 0) {
		snprintf(err, errlen, "unknown schema set '%s' (outbox, inbox or all)", opts->set);
		return OB_EINVAL;
	}
	if (opts->demo && strcmp(opts->set, "inbox") == 0) {
		snprintf(err, errlen, "the demo (schema app) is the producer's business: it needs"
		    " the outbox set (--schema outbox or all), not inbox alone");
		return OB_EINVAL;
	}
	uint64_t rng = ob_rand_seed();
	for (uint32_t attempt = 1;; attempt++) {
		int rc = migrate_once(conn, opts, report, err, errlen);
		if (rc == OB_OK || attempt == MIGRATE_ATTEMPTS || ob_pg_broken(conn) ||
		    !ob_sqlstate_is(ob_pg_failed_sqlstate(), OB_SQLSTATE_DEADLOCK_DETECTED))
			return rc;
		int64_t ms = ob_backoff_full_jitter(MIGRATE_RETRY_BASE_MS, MIGRATE_RETRY_CAP_MS,
		    attempt, &rng);
		struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
		nanosleep(&ts, NULL);
	}
}
