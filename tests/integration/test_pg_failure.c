/*
 * test_pg_failure.c - what common/pg.c says about a failure: the SQLSTATE
 * of the last one in this thread (ob_pg_failed_sqlstate), which a caller
 * maps to an answer (the producer's 404 not_installed for 42P01), is never
 * an older failure's: a failed connect or a COMMIT that rolled back carry
 * none and empty it.
 */
#include <string.h>

#include <check.h>
#include <libpq-fe.h>

#include "outbox/err.h"
#include "outbox/pg.h"
#include "testsupport.h"

/* a 42P01 on conn: the state a later failure must not inherit */
static void
undefined_table(PGconn *conn)
{
	char err[256];
	ck_assert_int_eq(ob_pg_exec(conn, "SELECT * FROM no_such_table_here", "select", err,
	                     sizeof(err)), OB_EDB);
	ck_assert_str_eq(ob_pg_failed_sqlstate(), "42P01");
}

START_TEST(test_failed_connect_carries_no_sqlstate)
{
	PGconn *conn = ts_connect(ts_server_conninfo()), *none = NULL;
	char err[512];
	undefined_table(conn);
	ck_assert_int_eq(ob_pg_connect("host=/nonexistent-outbox-dir port=1 dbname=x", "t", &none,
	                     err, sizeof(err)), OB_EDB);
	ck_assert_ptr_null(none);
	ck_assert_str_eq(ob_pg_failed_sqlstate(), "");
	PQfinish(conn);
}
END_TEST

START_TEST(test_rolled_back_commit_carries_no_sqlstate)
{
	PGconn *conn = ts_connect(ts_server_conninfo());
	char err[512];
	undefined_table(conn);
	ts_exec(conn, "BEGIN");
	PQclear(PQexec(conn, "SELECT 1/0")); /* aborted, unreported */
	ck_assert_int_eq(ob_pg_commit(conn, err, sizeof(err)), OB_EDB);
	ck_assert_msg(strstr(err, "rolled back") != NULL, "%s", err);
	ck_assert_str_eq(ob_pg_failed_sqlstate(), "");
	PQfinish(conn);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("pg_failure");
	TCase *tc = tcase_create("pg_failure");
	tcase_add_test(tc, test_failed_connect_carries_no_sqlstate);
	tcase_add_test(tc, test_rolled_back_commit_carries_no_sqlstate);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
