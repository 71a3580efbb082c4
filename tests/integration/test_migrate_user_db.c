/*
 * test_migrate_user_db.c - `outboxctl migrate` into a user's own database
 * changes nothing outside schemas outbox and inbox (issue 33 item 0): the
 * user's schemas, tables, privileges, default privileges and role stay as
 * they were, even a schema of theirs named app; the demo business (schema
 * app) and the REVOKE of CREATE on schema public come only when asked
 * (--demo, --harden-public). A database of an earlier release has its
 * bookkeeping moved out of public and its /v1/messages keys into outbox.
 *
 * Before issue 33 the first test failed: the migration made
 * app.bug_reports, app.idempotency_keys and app.message_keys in the user's
 * schema app, rewrote the privileges of the user's own table there (a
 * REVOKE ALL ON ALL TABLES IN SCHEMA app), took CREATE on public from
 * PUBLIC and left two tables in public.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "outbox/migrate.h"
#include "testsupport.h"

#define OUT_MAX 8192
#define RUN_TIMEOUT_MS 120000

/* Everything of db outside schemas outbox and inbox that a migration could
 * change, as text: every other schema with its privileges, its relations
 * with theirs, its functions, the default privileges, the database's own
 * privileges and role's memberships. Free with free(). */
static char *
user_snapshot(PGconn *c, const char *role)
{
	const char *params[1] = { role };
	PGresult *r = PQexecParams(c,
	    "SELECT concat_ws(E'\\n',"
	    " (SELECT string_agg(n.nspname || ' ' || coalesce(n.nspacl::text, '-'), E'\\n'"
	    "                    ORDER BY n.nspname) FROM pg_namespace n"
	    "   WHERE n.nspname NOT IN ('outbox', 'inbox', 'information_schema')"
	    "     AND n.nspname NOT LIKE 'pg\\_%'),"
	    " (SELECT string_agg(c.oid::regclass::text || ' ' || c.relkind::text || ' '"
	    "                    || coalesce(c.relacl::text, '-'), E'\\n' ORDER BY 1)"
	    "    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
	    "   WHERE n.nspname NOT IN ('outbox', 'inbox', 'information_schema')"
	    "     AND n.nspname NOT LIKE 'pg\\_%'),"
	    " (SELECT string_agg(p.oid::regprocedure::text || ' ' || coalesce(p.proacl::text, '-'),"
	    "                    E'\\n' ORDER BY 1)"
	    "    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
	    "   WHERE n.nspname NOT IN ('outbox', 'inbox', 'information_schema')"
	    "     AND n.nspname NOT LIKE 'pg\\_%'),"
	    " (SELECT string_agg(d.defaclobjtype::text || ' ' || d.defaclacl::text, E'\\n' ORDER BY 1)"
	    "    FROM pg_default_acl d),"
	    " (SELECT 'db ' || coalesce(datacl::text, '-') FROM pg_database"
	    "   WHERE datname = current_database()),"
	    " (SELECT 'member of ' || coalesce(string_agg(m.roleid::regrole::text, ',' ORDER BY 1), '-')"
	    "    FROM pg_auth_members m WHERE m.member = $1::text::regrole),"
	    " (SELECT 'role ' || concat_ws(',', rolsuper, rolcreaterole, rolcreatedb, rolcanlogin)"
	    "    FROM pg_roles WHERE rolname = $1::text))",
	    1, NULL, params, NULL, NULL, 0);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "snapshot: %s", PQerrorMessage(c));
	char *s = strdup(PQgetvalue(r, 0, 0));
	PQclear(r);
	ck_assert_ptr_nonnull(s);
	return s;
}

/* outboxctl migrate --db db ARGS... (NULL-terminated); the exit code, the
 * output in out. */
static int
migrate(const char *db, char *out, const char *a0, ...)
{
	char *argv[16];
	int n = 0;
	argv[n++] = "outboxctl";
	argv[n++] = "migrate";
	argv[n++] = "--db";
	argv[n++] = (char *)db;
	va_list ap;
	va_start(ap, a0);
	for (const char *a = a0; a != NULL && n < 14; a = va_arg(ap, const char *))
		argv[n++] = (char *)a;
	va_end(ap);
	argv[n] = NULL;
	return ts_run(argv, NULL, out, OUT_MAX, RUN_TIMEOUT_MS);
}

/* A user's database as it was before the outbox came: a role of theirs, a
 * schema app of their own with a table, a table in public granted to the
 * role, a default privilege, and CREATE on public for everyone (as every
 * database made before PostgreSQL 15 has it). */
static void
user_database(const char *tag, char *db, size_t dblen, char *role)
{
	char sql[512];
	ts_db_create(tag, NULL, db, dblen);
	ts_role_create("shop", NULL, role);
	PGconn *c = ts_connect(db);
	ts_exec(c, "GRANT CREATE ON SCHEMA public TO PUBLIC");
	ts_exec(c, "CREATE SCHEMA app");
	ts_exec(c, "CREATE TABLE app.orders (id int PRIMARY KEY, total numeric NOT NULL)");
	ts_exec(c, "CREATE TABLE public.customers (id int PRIMARY KEY, name text)");
	ts_exec(c, "CREATE FUNCTION app.order_total(int) RETURNS numeric LANGUAGE sql"
	           " AS 'SELECT total FROM app.orders WHERE id = $1'");
	snprintf(sql, sizeof(sql), "GRANT USAGE ON SCHEMA app TO %s;"
	    " GRANT SELECT, INSERT ON app.orders TO %s; GRANT SELECT ON public.customers TO %s;"
	    " ALTER DEFAULT PRIVILEGES IN SCHEMA app GRANT SELECT ON TABLES TO %s",
	    role, role, role, role);
	ts_exec(c, sql);
	PQfinish(c);
}

/* The user's role is let go with what it was granted. */
static void
drop_user_role(const char *db, const char *role)
{
	char sql[256];
	PGconn *c = ts_connect(db);
	snprintf(sql, sizeof(sql), "DROP OWNED BY %s", role);
	ts_exec(c, sql);
	PQfinish(c);
	ts_role_drop(role);
}

START_TEST(test_user_database_is_left_as_it_was)
{
	char db[TS_CONNINFO_MAX], role[64], out[OUT_MAX];
	user_database("userdb", db, sizeof(db), role);
	PGconn *c = ts_connect(db);
	char *before = user_snapshot(c, role);

	ck_assert_msg(migrate(db, out, NULL) == 0, "migrate: %s", out);
	char *after = user_snapshot(c, role);
	ck_assert_msg(strcmp(before, after) == 0, "the user's database changed:\n--- before\n%s\n"
	    "--- after\n%s", before, after);

	/* the outbox is there and works; the demo is not */
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM (SELECT outbox.enqueue('t', 'k-1',"
	                                 " '{}'::jsonb)) x"), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM pg_class"
	                                 " WHERE relname IN ('bug_reports', 'idempotency_keys')"), 0);
	int outbox_migrations = 0;
	for (const struct ob_migration *m = ob_migrations; m->set != NULL; m++)
		outbox_migrations += strcmp(m->set, "outbox") == 0;
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.schema_migrations"
	                                 " WHERE schema_set = 'outbox'"), outbox_migrations);
	ck_assert_int_gt(ts_query_int(c, "SELECT count(*) FROM inbox.schema_migrations"), 0);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM pg_class WHERE relname LIKE"
	                                 " 'outbox\\_schema\\_%'"), 0);
	/* CREATE on public is still everyone's */
	ck_assert_int_eq(ts_query_int(c, "SELECT has_schema_privilege('public', 'public',"
	                                 " 'CREATE')::int"), 1);

	/* again: nothing to do, and still nothing of the user's changed */
	ck_assert_msg(migrate(db, out, NULL) == 0, "migrate again: %s", out);
	ck_assert_msg(strstr(out, "already up to date") != NULL, "%s", out);
	free(after);
	after = user_snapshot(c, role);
	ck_assert_str_eq(before, after);
	free(before);
	free(after);
	PQfinish(c);
	drop_user_role(db, role);
}
END_TEST

START_TEST(test_demo_and_hardening_only_when_asked)
{
	char db[TS_CONNINFO_MAX], role[64], out[OUT_MAX];
	user_database("userdemo", db, sizeof(db), role);
	PGconn *c = ts_connect(db);

	/* the demo needs the outbox side: refused, nothing written */
	ck_assert_int_ne(migrate(db, out, "--schema", "inbox", "--demo", NULL), 0);
	ck_assert_msg(strstr(out, "needs the outbox set") != NULL, "%s", out);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM pg_namespace"
	                                 " WHERE nspname IN ('outbox', 'inbox')"), 0);

	ck_assert_msg(migrate(db, out, "--demo", "--harden-public", NULL) == 0, "migrate: %s", out);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM pg_class WHERE relnamespace ="
	                                 " 'app'::regnamespace AND relname IN ('bug_reports',"
	                                 " 'idempotency_keys')"), 2);
	ck_assert_int_eq(ts_query_int(c, "SELECT has_schema_privilege('public', 'public',"
	                                 " 'CREATE')::int"), 0);
	/* the demo's grants name only its own tables: the user's app.orders
	 * keeps its privileges, and its function stays (no stale drop in app) */
	char sql[256];
	snprintf(sql, sizeof(sql), "SELECT has_table_privilege('%s', 'app.orders', 'INSERT')::int",
	    role);
	ck_assert_int_eq(ts_query_int(c, sql), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM pg_proc WHERE proname ="
	                                 " 'order_total'"), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT has_table_privilege('outbox_producer',"
	                                 " 'app.bug_reports', 'INSERT')::int"), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.schema_migrations"
	                                 " WHERE schema_set = 'demo'"), 1);
	PQfinish(c);
	drop_user_role(db, role);
}
END_TEST

/* A database of a release before issue 33: its runner's tables in public,
 * the keys of /v1/messages in app.message_keys. */
START_TEST(test_earlier_release_is_moved_in)
{
	char db[TS_CONNINFO_MAX], out[OUT_MAX];
	ts_db_create_at("userold", "outbox", 25, db, sizeof(db));
	PGconn *c = ts_connect(db);
	ts_exec(c, "CREATE SCHEMA app");
	ts_exec(c, "CREATE TABLE app.message_keys (idempotency_key text PRIMARY KEY,"
	           " fingerprint text NOT NULL, state text NOT NULL, fence bigint NOT NULL,"
	           " lease_until timestamptz NOT NULL, response_status integer, response_body text,"
	           " created_at timestamptz NOT NULL DEFAULT now(), completed_at timestamptz)");
	ts_exec(c, "INSERT INTO app.message_keys VALUES ('default:k-1', 'fp', 'done', 7, now(),"
	           " 201, '{\"id\":1}', now(), now())");
	ts_exec(c, "CREATE TABLE public.outbox_schema_files (schema_set text PRIMARY KEY,"
	           " digest text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())");
	ts_exec(c, "INSERT INTO public.outbox_schema_files VALUES ('outbox', 'old', now())");

	ck_assert_msg(migrate(db, out, "--schema", "outbox", NULL) == 0, "migrate: %s", out);
	ck_assert_msg(strstr(out, "1 migration applied") != NULL, "%s", out); /* 026 alone */
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM pg_class WHERE relname LIKE"
	                                 " 'outbox\\_schema\\_%'"), 0);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.schema_migrations"
	                                 " WHERE version <= 25"), 22); /* 001, 005-025 */
	ck_assert_int_eq(ts_query_int(c, "SELECT fence FROM outbox.message_keys"
	                                 " WHERE idempotency_key = 'default:k-1'"), 7);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM pg_class"
	                                 " WHERE relname = 'message_keys'"), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT min_version FROM outbox.protocols"
	                                 " WHERE component = 'producer'"), 3);
	PQfinish(c);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("migrate_user_db");
	TCase *tc = tcase_create("migrate_user_db");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_user_database_is_left_as_it_was);
	tcase_add_test(tc, test_demo_and_hardening_only_when_asked);
	tcase_add_test(tc, test_earlier_release_is_moved_in);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
