/*
 * test_relay_source.c - the relay's derived source (common/source.c) on
 * real servers: one database name on two servers gives two sources (the
 * system identifiers differ), two names on one server two sources, a
 * streaming standby the same source as its primary (a promotion keeps
 * every message's identity), and a name that is not plain the hashed
 * form. The second server and its standby are the test's own
 * (ts_pgserver.h), stopped at the end, after a failure too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "outbox/err.h"
#include "outbox/wire.h"
#include "outbox/source.h"
#include "testsupport.h"
#include "ts_pgserver.h"

#define T_SEC 1000

/* Where the second server and its standby live: made by main (the parent
 * process), so that its teardown stops them even after a failed test. */
static char base[64];
static char dir_b[128], dir_s[128];

static void
derive(const char *conninfo, char *out)
{
	char err[512];
	PGconn *c = ts_connect(conninfo);
	ck_assert_msg(ob_source_derive(c, out, err, sizeof(err)) == OB_OK, "%s: %s", conninfo,
	    err);
	ck_assert_msg(ob_wire_source_ok(out, strlen(out)) && strlen(out) >= 18 && out[16] == '.',
	    "'%s'", out);
	PQfinish(c);
}

START_TEST(test_derived_sources)
{
	char a[OB_WIRE_MAX_SOURCE + 1], b[OB_WIRE_MAX_SOURCE + 1], s[OB_WIRE_MAX_SOURCE + 1],
	    odd[OB_WIRE_MAX_SOURCE + 1], other[OB_WIRE_MAX_SOURCE + 1];
	char conn[TS_CONNINFO_MAX], name[64], sql[256];

	/* the fixture's server: its postgres database and one of another name */
	snprintf(conn, sizeof(conn), "%s dbname=postgres", ts_server_conninfo());
	derive(conn, a);
	ck_assert_str_eq(a + 16, ".postgres");
	ts_db_create("src_derive", NULL, conn, sizeof(conn));
	derive(conn, other);
	ck_assert_int_eq(strncmp(a, other, 16), 0); /* one server */
	ck_assert_str_ne(a, other);                 /* two names */

	/* a name with a '.' (not plain): hashed, so it can never meet a plain one */
	snprintf(name, sizeof(name), "src.odd %d", (int)getpid());
	PGconn *srv = ts_connect(ts_server_conninfo());
	snprintf(sql, sizeof(sql), "CREATE DATABASE \"%s\"", name);
	ts_exec(srv, sql);
	snprintf(conn, sizeof(conn), "%s dbname='%s'", ts_server_conninfo(), name);
	derive(conn, odd);
	char want[128];
	PGconn *oc = ts_connect(conn);
	PGresult *r = PQexec(oc, "SELECT left(encode(sha256(convert_to(current_database(),"
	    " 'UTF8')), 'hex'), 16)");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	snprintf(want, sizeof(want), "%.16s.sha256.%s", a, PQgetvalue(r, 0, 0));
	PQclear(r);
	PQfinish(oc);
	ck_assert_str_eq(odd, want);
	snprintf(sql, sizeof(sql), "DROP DATABASE \"%s\"", name);
	ts_exec(srv, sql);
	PQfinish(srv);

	/* a second server (its own initdb): the same name, another source */
	ts_pgserver_start(dir_b, conn, sizeof(conn));
	derive(conn, b);
	ck_assert_str_ne(a, b);
	ck_assert_str_eq(b + 16, ".postgres");
	/* its streaming standby: the same source (a promotion keeps it) */
	ts_pgserver_standby(dir_b, dir_s, "src_standby", conn, sizeof(conn));
	derive(conn, s);
	ck_assert_str_eq(s, b);
	ts_pgserver_stop_quiet(dir_s);
	ts_pgserver_stop_quiet(dir_b);
	ck_assert_int_ne(access(dir_b, F_OK), 0); /* stopped and removed */
}
END_TEST

/* Stop whatever test_derived_sources left running (pg-tmp.sh stop removes
 * its directory: nothing left means nothing to do). */
static void
stop_servers(void)
{
	ts_pgserver_stop_quiet(dir_s);
	ts_pgserver_stop_quiet(dir_b);
	rmdir(base);
}

int
main(void)
{
	snprintf(base, sizeof(base), "/tmp/obsrc.XXXXXX");
	if (mkdtemp(base) == NULL) {
		perror("mkdtemp");
		return EXIT_FAILURE;
	}
	snprintf(dir_b, sizeof(dir_b), "%s/b", base);
	snprintf(dir_s, sizeof(dir_s), "%s/s", base);
	Suite *s = suite_create("relay_source");
	TCase *tc = tcase_create("derive");
	tcase_set_timeout(tc, 300);
	tcase_add_unchecked_fixture(tc, NULL, stop_servers);
	tcase_add_test(tc, test_derived_sources);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
