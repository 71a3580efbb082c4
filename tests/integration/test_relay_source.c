/*
 * test_relay_source.c - the relay's derived source (relay/source.c) on
 * real servers: one database name on two servers gives two sources (the
 * system identifiers differ), two names on one server two sources, a
 * streaming standby the same source as its primary (a promotion keeps
 * every message's identity), and a name that is not plain the hashed
 * form. The second server and its standby are made here with
 * scripts/pg-tmp.sh and removed at the end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "outbox/err.h"
#include "outbox/wire.h"
#include "source.h"
#include "testsupport.h"

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
	ck_assert_msg(relay_source_derive(c, out, err, sizeof(err)) == OB_OK, "%s: %s", conninfo,
	    err);
	ck_assert_msg(ob_wire_source_ok(out, strlen(out)) && strlen(out) >= 18 && out[16] == '.',
	    "'%s'", out);
	PQfinish(c);
}

/* pg-tmp.sh CMD ARGS...; ck_assert it worked. */
static void
pg_tmp(const char *cmd, const char *a, const char *b, const char *c)
{
	const char *src = getenv("OUTBOX_SOURCE_DIR");
	ck_assert_ptr_nonnull(src);
	char script[600], out[8192];
	snprintf(script, sizeof(script), "%s/scripts/pg-tmp.sh", src);
	char *argv[] = { "/bin/bash", script, (char *)cmd, (char *)a, (char *)b, (char *)c, NULL };
	ck_assert_msg(ts_run(argv, NULL, out, sizeof(out), 120 * T_SEC) == 0, "pg-tmp.sh %s: %s",
	    cmd, out);
}

/* The conninfo a pg-tmp.sh env file names, for database db. */
static void
env_conninfo(const char *dir, const char *db, char *out, size_t outlen)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/env", dir);
	char *env = ts_read_file(path);
	ck_assert_ptr_nonnull(env);
	const char *host = strstr(env, "PGHOST="), *port = strstr(env, "PGPORT=");
	ck_assert(host != NULL && port != NULL);
	int hl = (int)strcspn(host + 7, "\n"), pl = (int)strcspn(port + 7, "\n");
	snprintf(out, outlen, "host=%.*s port=%.*s user=postgres dbname=%s", hl, host + 7, pl,
	    port + 7, db);
	free(env);
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
	pg_tmp("start", dir_b, NULL, NULL);
	env_conninfo(dir_b, "postgres", conn, sizeof(conn));
	derive(conn, b);
	ck_assert_str_ne(a, b);
	ck_assert_str_eq(b + 16, ".postgres");
	/* its streaming standby: the same source (a promotion keeps it) */
	pg_tmp("standby", dir_b, dir_s, "src_standby");
	env_conninfo(dir_s, "postgres", conn, sizeof(conn));
	derive(conn, s);
	ck_assert_str_eq(s, b);
	pg_tmp("stop", dir_s, NULL, NULL);
	pg_tmp("stop", dir_b, NULL, NULL);
}
END_TEST

/* Stop whatever test_derived_sources left running (pg-tmp.sh stop removes
 * its directory: nothing left means nothing to do). */
static void
stop_servers(void)
{
	const char *src = getenv("OUTBOX_SOURCE_DIR");
	const char *dirs[] = { dir_s, dir_b };
	for (int i = 0; i < 2 && src != NULL; i++) {
		char env[200], cmd[1200];
		snprintf(env, sizeof(env), "%s/env", dirs[i]);
		if (access(env, F_OK) != 0)
			continue;
		snprintf(cmd, sizeof(cmd), "bash '%s/scripts/pg-tmp.sh' stop '%s' >/dev/null 2>&1",
		    src, dirs[i]);
		if (system(cmd) != 0)
			fprintf(stderr, "test_relay_source: could not stop the server in %s\n", dirs[i]);
	}
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
