/*
 * test_schema.c - the schema's two layers (sql/README.md): numbered
 * migrations, then one file per function, view and trigger re-applied by
 * migrate. A fresh database and one upgraded a step at a time (in number
 * order, and in the order the migrations were committed: 002, now the
 * demo's 001, after 005) have the same pg_dump; a second run changes nothing; a forced re-apply
 * drops nothing from a fresh database (every object has its file) and
 * drops what no file defines; a file that CREATE OR REPLACE cannot apply
 * (a changed return type) fails the run, names the file and changes nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/err.h"
#include "outbox/migrate.h"
#include "testsupport.h"

/* The runner's own table, as a binary of before the schema files made it. */
static const char old_runner_table_sql[] =
    "CREATE TABLE IF NOT EXISTS public.outbox_schema_migrations ("
    " schema_set text NOT NULL, version integer NOT NULL, name text NOT NULL,"
    " applied_at timestamptz NOT NULL DEFAULT now(),"
    " PRIMARY KEY (schema_set, version))";

/* Every set, the demo too: a fresh database of ts_db_create has it. */
static const struct ob_migrate_opts all_sets = { .set = "all", .demo = true };

static void
migrate_ok(const char *db, struct ob_migrate_report *r)
{
	PGconn *c = ts_connect(db);
	char err[1024];
	ck_assert_msg(ob_migrate(c, &all_sets, r, err, sizeof(err)) == OB_OK, "migrate: %s", err);
	PQfinish(c);
}

/* Apply migration m alone in its own transaction and record it, as a
 * release that stopped at m did. */
static void
apply_step(PGconn *c, const struct ob_migration *m)
{
	char sql[256];
	ts_exec(c, "BEGIN");
	ts_exec(c, old_runner_table_sql);
	ts_exec(c, m->sql);
	snprintf(sql, sizeof(sql), "INSERT INTO public.outbox_schema_migrations"
	    " (schema_set, version, name) VALUES ('%s', %d, '%s')", m->set, m->version, m->name);
	ts_exec(c, sql);
	ts_exec(c, "COMMIT");
}

static const struct ob_migration *
find_migration(const char *set, int version)
{
	for (const struct ob_migration *m = ob_migrations; m->set != NULL; m++)
		if (strcmp(m->set, set) == 0 && m->version == version)
			return m;
	ck_abort_msg("no migration %s/%d", set, version);
	return NULL;
}

/* pg_dump --schema-only of db, without the lines that differ on every run
 * (\restrict's random key). Free with free(). */
static char *
schema_dump(const char *db, const char *tag)
{
	char path[512], out[2048];
	const char *pg_dump = getenv("OUTBOX_PG_DUMP");
	ck_assert_msg(pg_dump != NULL, "OUTBOX_PG_DUMP is not set: no pg_dump was found when"
	    " the build was configured (install postgresql-client-15, configure again)");
	snprintf(path, sizeof(path), "%s/%s.sql", ts_tmpdir(), tag);
	char *argv[] = { (char *)pg_dump, "--schema-only", "--no-owner", "-f", path, "-d", (char *)db,
		NULL };
	ck_assert_msg(ts_run(argv, NULL, out, sizeof(out), 60000) == 0, "pg_dump: %s", out);
	char *text = ts_read_file(path);
	ck_assert_ptr_nonnull(text);
	char *w = text;
	for (char *line = text; *line != '\0';) {
		char *end = strchr(line, '\n');
		size_t n = end ? (size_t)(end - line + 1) : strlen(line);
		if (strncmp(line, "\\restrict", 9) != 0 && strncmp(line, "\\unrestrict", 11) != 0) {
			memmove(w, line, n);
			w += n;
		}
		line += n;
	}
	*w = '\0';
	return text;
}

/* Where a and b first differ, for the failure message. */
static void
assert_same_dump(const char *a, const char *b, const char *what)
{
	size_t i = 0;
	while (a[i] != '\0' && a[i] == b[i])
		i++;
	size_t from = i > 200 ? i - 200 : 0;
	ck_assert_msg(a[i] == '\0' && b[i] == '\0', "%s: the dumps differ at byte %zu:\n"
	    "--- first:\n%.400s\n--- second:\n%.400s", what, i, a + from, b + from);
}

static int
object_count(PGconn *c, const char *sql)
{
	return (int)ts_query_int(c, sql);
}

START_TEST(test_fresh_equals_upgraded_step_by_step)
{
	char fresh[TS_CONNINFO_MAX], steps[TS_CONNINFO_MAX], committed[TS_CONNINFO_MAX];
	struct ob_migrate_report r;
	ts_db_create("schema_fresh", "all", fresh, sizeof(fresh));

	/* One release at a time, in number order, then this binary. */
	ts_db_create("schema_steps", NULL, steps, sizeof(steps));
	PGconn *c = ts_connect(steps);
	for (const struct ob_migration *m = ob_migrations; m->set != NULL; m++)
		apply_step(c, m);
	PQfinish(c);
	migrate_ok(steps, &r);
	ck_assert_int_eq(r.migrations, 0);
	ck_assert_int_gt(r.files, 0);
	ck_assert_int_eq(r.dropped, 0);

	/* The order the migrations were committed in: outbox 002 came after 005
	 * (since issue 33 it is the demo's 001, after the outbox's). */
	ts_db_create("schema_committed", NULL, committed, sizeof(committed));
	c = ts_connect(committed);
	apply_step(c, find_migration("outbox", 1));
	apply_step(c, find_migration("outbox", 5));
	apply_step(c, find_migration("demo", 1));
	PQfinish(c);
	migrate_ok(committed, &r); /* the rest, in number order, then the files */
	ck_assert_int_gt(r.migrations, 0);
	ck_assert_int_eq(r.dropped, 0);

	/* the runner's tables of those releases, in public, are moved */
	c = ts_connect(steps);
	ck_assert_int_eq(object_count(c, "SELECT count(*) FROM pg_class"
	                                 " WHERE relname LIKE 'outbox\\_schema\\_%'"), 0);
	ck_assert_int_eq(object_count(c, "SELECT count(*) FROM outbox.schema_migrations"),
	    object_count(c, "SELECT count(*) FROM outbox.schema_migrations"
	                    " WHERE schema_set IN ('outbox', 'demo')"));
	PQfinish(c);

	char *a = schema_dump(fresh, "fresh"), *b = schema_dump(steps, "steps"),
	     *d = schema_dump(committed, "committed");
	assert_same_dump(a, b, "fresh vs upgraded step by step");
	assert_same_dump(a, d, "fresh vs upgraded in commit order");
	free(a);
	free(b);
	free(d);
}
END_TEST

START_TEST(test_second_run_and_forced_reapply_change_nothing)
{
	char db[TS_CONNINFO_MAX];
	struct ob_migrate_report r;
	ts_db_create("schema_again", "all", db, sizeof(db));
	char *before = schema_dump(db, "again0");

	migrate_ok(db, &r);
	ck_assert_int_eq(r.migrations, 0);
	ck_assert_int_eq(r.files, 0); /* nothing changed: not even re-applied */

	/* As if a file had changed: every file runs again and, since every
	 * object of a fresh database has its file, nothing is dropped. */
	PGconn *c = ts_connect(db);
	ts_exec(c, "DELETE FROM outbox.schema_files; DELETE FROM inbox.schema_files");
	migrate_ok(db, &r);
	ck_assert_int_eq(r.migrations, 0);
	int files = 0;
	for (const struct ob_schema_file *f = ob_schema_files; f->set != NULL; f++)
		files++;
	ck_assert_int_eq(r.files, files);
	ck_assert_msg(r.dropped == 0, "dropped: %s", r.dropped_names);
	ck_assert_int_eq(object_count(c, "SELECT (SELECT count(*) FROM outbox.schema_files)"
	                                 " + (SELECT count(*) FROM inbox.schema_files)"), 3);
	PQfinish(c);

	char *after = schema_dump(db, "again1");
	assert_same_dump(before, after, "before vs after a forced re-apply");
	free(before);
	free(after);
}
END_TEST

START_TEST(test_what_no_file_defines_is_dropped)
{
	char db[TS_CONNINFO_MAX];
	struct ob_migrate_report r;
	ts_db_create("schema_stale", "all", db, sizeof(db));
	PGconn *c = ts_connect(db);
	/* What a file that changed its argument list leaves behind (the old
	 * overload), and objects no file ever defined. */
	ts_exec(c, "CREATE FUNCTION outbox.max_payload_bytes(unit integer) RETURNS integer"
	           " LANGUAGE sql IMMUTABLE AS 'SELECT 1048576 / unit'");
	ts_exec(c, "CREATE FUNCTION outbox.stale_fn() RETURNS integer LANGUAGE sql AS 'SELECT 1'");
	ts_exec(c, "CREATE VIEW outbox.stale_view AS SELECT 1 AS one");
	ts_exec(c, "CREATE TRIGGER stale_trigger AFTER INSERT ON outbox.events"
	           " FOR EACH STATEMENT EXECUTE FUNCTION outbox.notify_enqueued()");
	/* Only a run that re-applies the files looks: a changed file does. */
	migrate_ok(db, &r);
	ck_assert_int_eq(r.dropped, 0);
	ts_exec(c, "UPDATE outbox.schema_files SET digest = 'changed'"
	           " WHERE schema_set = 'outbox'");
	migrate_ok(db, &r);
	ck_assert_msg(r.dropped == 4, "dropped %d: %s", r.dropped, r.dropped_names);
	ck_assert_msg(strstr(r.dropped_names, "outbox.max_payload_bytes(integer)") != NULL &&
	        strstr(r.dropped_names, "outbox.stale_fn()") != NULL &&
	        strstr(r.dropped_names, "outbox.stale_view") != NULL &&
	        strstr(r.dropped_names, "stale_trigger ON outbox.events") != NULL,
	    "%s", r.dropped_names);
	ck_assert_int_eq(object_count(c, "SELECT count(*) FROM pg_proc WHERE proname IN"
	                                 " ('max_payload_bytes', 'stale_fn')"), 1);
	ck_assert_int_eq(object_count(c, "SELECT outbox.max_payload_bytes()"), 1048576);
	ck_assert_int_eq(object_count(c, "SELECT count(*) FROM pg_views"
	                                 " WHERE viewname = 'stale_view'"), 0);
	ck_assert_int_eq(object_count(c, "SELECT count(*) FROM pg_trigger"
	                                 " WHERE tgname = 'stale_trigger'"), 0);

	/* One still in use is not dropped behind its user's back: the run fails,
	 * names it, and changes nothing. */
	ts_exec(c, "CREATE FUNCTION outbox.stale_fn() RETURNS integer LANGUAGE sql AS 'SELECT 1'");
	ts_exec(c, "CREATE VIEW public.uses_stale AS SELECT outbox.stale_fn() AS v");
	ts_exec(c, "DELETE FROM outbox.schema_files; DELETE FROM inbox.schema_files");
	PGconn *m = ts_connect(db);
	char err[1024];
	ck_assert_int_eq(ob_migrate(m, &all_sets, &r, err, sizeof(err)), OB_EDB);
	PQfinish(m);
	ck_assert_msg(strstr(err, "drop ROUTINE outbox.stale_fn(), which no file in"
	                          " sql/outbox/functions defines") != NULL &&
	        strstr(err, "depend") != NULL, "%s", err);
	ck_assert_int_eq(object_count(c, "SELECT count(*) FROM outbox.schema_files"), 0);
	ck_assert_int_eq(object_count(c, "SELECT outbox.stale_fn()"), 1);
	PQfinish(c);
}
END_TEST

START_TEST(test_changed_return_type_fails_and_changes_nothing)
{
	char db[TS_CONNINFO_MAX];
	struct ob_migrate_report r;
	ts_db_create("schema_rettype", "all", db, sizeof(db));
	PGconn *c = ts_connect(db);
	/* The database has max_payload_bytes() returning text; the file says
	 * integer: CREATE OR REPLACE cannot make that change. */
	ts_exec(c, "DROP FUNCTION outbox.max_payload_bytes()");
	ts_exec(c, "CREATE FUNCTION outbox.max_payload_bytes() RETURNS text"
	           " LANGUAGE sql IMMUTABLE AS $$SELECT 'big'$$");
	ts_exec(c, "DELETE FROM outbox.schema_files; DELETE FROM inbox.schema_files");
	PGconn *m = ts_connect(db);
	char err[1024];
	ck_assert_int_eq(ob_migrate(m, &all_sets, &r, err, sizeof(err)), OB_EDB);
	PQfinish(m);
	ck_assert_msg(strstr(err, "schema file outbox/functions/max_payload_bytes.sql") != NULL &&
	        strstr(err, "cannot change return type") != NULL &&
	        strstr(err, "a numbered migration must drop the old definition first") != NULL,
	    "%s", err);
	ck_assert_int_eq(r.files, 0);
	/* rolled back: the files before it did not stay applied either */
	ck_assert_int_eq(object_count(c, "SELECT count(*) FROM outbox.schema_files"), 0);
	ck_assert_int_eq(object_count(c, "SELECT count(*) FROM pg_proc p"
	                                 " WHERE p.proname = 'max_payload_bytes'"
	                                 "   AND p.prorettype = 'text'::regtype"), 1);
	PQfinish(c);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("schema");
	TCase *tc = tcase_create("schema");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_fresh_equals_upgraded_step_by_step);
	tcase_add_test(tc, test_second_run_and_forced_reapply_change_nothing);
	tcase_add_test(tc, test_what_no_file_defines_is_dropped);
	tcase_add_test(tc, test_changed_return_type_fails_and_changes_nothing);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
