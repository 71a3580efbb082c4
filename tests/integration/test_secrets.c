/*
 * test_secrets.c - no program prints a conninfo's password, whatever form
 * the conninfo takes: outbox-relay, outbox-consumer, outbox-producer
 * (serve, enqueue), outboxctl (status, migrate) run with each bad
 * conninfo, by flag and by environment, and their whole output (stdout +
 * stderr) must not hold the password. The forms: keywords, URIs with the
 * password in the user info or the query (any percent-encoding of the
 * key), malformed URIs (bad percent escapes, bad brackets, an unencoded
 * '/'), a URI where a keyword goes, and, against the test PostgreSQL, a URI
 * given as a database or user name, which the server echoes back. For the
 * forms libpq or the server echoes, libpq's own message is shown holding
 * the password first: the scrub is what keeps it out. Also the config
 * layer: a conninfo given to the wrong flag, or left over as an argument.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testsupport.h"

#define SECRET "S3cretPw"
#define NOSOCK "/nonexistent-outbox-test"
#define RUN_TIMEOUT_MS 60000
#define OUT_MAX 16384

/* A conninfo form; server: appended to the test server's conninfo;
 * leaks: libpq's own message (connecting as ob_pg_connect does) holds the
 * password. */
struct form {
	const char *conninfo;
	bool server, leaks;
};

static const struct form forms[] = {
	{ "host=" NOSOCK " port=1 dbname=x user=u password=" SECRET, false, false },
	{ "host=" NOSOCK " password = '" SECRET "'", false, false },
	{ "postgresql://u:" SECRET "@/x?host=" NOSOCK, false, false },
	{ "postgresql://u:" SECRET "%zz@/x?host=" NOSOCK, false, true },
	{ "postgresql://u:" SECRET "@[::1]x/db", false, true },
	{ "postgresql://u:" SECRET "@[::1/db", false, true },
	{ "postgresql://u:" SECRET "/x@/db?host=" NOSOCK, false, true },
	{ "postgresql:///x?host=" NOSOCK "&%70assword=" SECRET, false, false },
	{ "postgresql:///x?host=" NOSOCK "&pass%77ord=" SECRET, false, false },
	{ "postgresql:///x?host=" NOSOCK "&sslpassword=" SECRET, false, false },
	{ "  postgresql://u:" SECRET "@/x?host=" NOSOCK, false, true },
	{ " dbname=postgresql://u:" SECRET "@/x", true, true },
	{ " user='postgresql://u:" SECRET "@h'", true, true },
};

#define NFORMS (sizeof forms / sizeof forms[0])

static void
form_conninfo(const struct form *f, char *out, size_t outlen)
{
	snprintf(out, outlen, "%s%s", f->server ? ts_server_conninfo() : "", f->conninfo);
}

/* The whole output of a run must not hold the password; it must say what
 * failed (the redacted conninfo or libpq's note) and exit non-zero. */
static void
assert_clean_run(char *const argv[], char *const env[], const char *what)
{
	char *out = malloc(OUT_MAX);
	int rc = ts_run(argv, env, out, OUT_MAX, RUN_TIMEOUT_MS);
	ck_assert_msg(rc > 0, "%s: exit %d: %s", what, rc, out);
	ck_assert_msg(strstr(out, SECRET) == NULL, "%s printed the password:\n%s", what, out);
	ck_assert_msg(strstr(out, "***") != NULL, "%s: no redacted conninfo in:\n%s", what, out);
	free(out);
}

/* libpq's message, connecting the way ob_pg_connect does (the conninfo as
 * an expanded dbname), holds the password for the forms that say so. */
START_TEST(test_libpq_echoes)
{
	const struct form *f = &forms[_i];
	char ci[TS_CONNINFO_MAX + 128];
	form_conninfo(f, ci, sizeof ci);
	const char *keys[] = { "dbname", NULL }, *vals[] = { ci, NULL };
	PGconn *c = PQconnectdbParams(keys, vals, 1);
	ck_assert_int_ne(PQstatus(c), CONNECTION_OK);
	ck_assert_msg((strstr(PQerrorMessage(c), SECRET) != NULL) == f->leaks,
	    "form %d <%s>: libpq's message %s the password: %s", _i, ci,
	    f->leaks ? "no longer holds" : "holds", PQerrorMessage(c));
	PQfinish(c);
}
END_TEST

/* Every program, every form, by --db. */
START_TEST(test_programs_by_flag)
{
	const struct form *f = &forms[_i];
	char ci[TS_CONNINFO_MAX + 128], route[300], listen[300], what[128];
	char *env[] = { "PGHOST=" NOSOCK, NULL };
	form_conninfo(f, ci, sizeof ci);
	char u[256];
	ts_ipc_url("secrets-route", u, sizeof u);
	snprintf(route, sizeof route, "*=%s", u);
	ts_ipc_url("secrets-listen", listen, sizeof listen);

	char *relay[] = { "outbox-relay", "--db", ci, "--route", route, NULL };
	char *consumer[] = { "outbox-consumer", "--db", ci, "--listen", listen, NULL };
	char *serve[] = { "outbox-producer", "serve", "--db", ci, "--http", "http://127.0.0.1:0",
		NULL };
	char *enqueue[] = { "outbox-producer", "enqueue", "--db", ci, NULL };
	char *status[] = { "outboxctl", "status", "--db", ci, NULL };
	char *migrate[] = { "outboxctl", "migrate", "--db", ci, NULL };
	char *const *runs[] = { relay, consumer, serve, enqueue, status, migrate };
	for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
		snprintf(what, sizeof what, "form %d: %s %s", _i, runs[r][0],
		    runs[r][1][0] == '-' ? "" : runs[r][1]);
		assert_clean_run(runs[r], env, what);
	}
}
END_TEST

/* The same through the environment (OUTBOX_DB), for one program each. */
START_TEST(test_programs_by_env)
{
	const struct form *f = &forms[_i];
	char ci[TS_CONNINFO_MAX + 128], what[128], envdb[TS_CONNINFO_MAX + 160];
	form_conninfo(f, ci, sizeof ci);
	snprintf(envdb, sizeof envdb, "OUTBOX_DB=%s", ci);
	char *env[] = { "PGHOST=" NOSOCK, envdb, NULL };
	char *status[] = { "outboxctl", "status", NULL };
	char *enqueue[] = { "outbox-producer", "enqueue", NULL };
	snprintf(what, sizeof what, "form %d: outboxctl status (OUTBOX_DB)", _i);
	assert_clean_run(status, env, what);
	snprintf(what, sizeof what, "form %d: outbox-producer enqueue (OUTBOX_DB)", _i);
	assert_clean_run(enqueue, env, what);
}
END_TEST

/* A conninfo where another value goes: a bad value of another flag, an
 * argument left over after a flag that takes none, or the command name. */
START_TEST(test_conninfo_misplaced)
{
	char *uri = "postgresql://u:" SECRET "@h/x";
	char route[300], u[256];
	ts_ipc_url("secrets-route2", u, sizeof u);
	snprintf(route, sizeof route, "*=%s", u);
	char *env[] = { "PGHOST=" NOSOCK, NULL };
	char *bad_enum[] = { "outbox-relay", "--db", "host=" NOSOCK, "--route", route,
		"--log-level", uri, NULL };
	char *stray[] = { "outbox-relay", "--db", "host=" NOSOCK, "--route", route,
		"--no-fencing", uri, NULL };
	char *bad_bool[] = { "outboxctl", "status", "--db", "host=" NOSOCK,
		"--json=password=" SECRET, NULL };
	char *stray_ctl[] = { "outboxctl", "status", "--db", "host=" NOSOCK, uri, NULL };
	char *cmd_ctl[] = { "outboxctl", uri, NULL };
	char *cmd_producer[] = { "outbox-producer", uri, NULL };
	char *const *runs[] = { bad_enum, stray, bad_bool, stray_ctl, cmd_ctl, cmd_producer };
	for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
		char what[64];
		snprintf(what, sizeof what, "misplaced %zu (%s)", r, runs[r][0]);
		assert_clean_run(runs[r], env, what);
	}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("secrets");
	TCase *tc = tcase_create("secrets");
	tcase_set_timeout(tc, 240);
	tcase_add_loop_test(tc, test_libpq_echoes, 0, (int)NFORMS);
	tcase_add_loop_test(tc, test_programs_by_flag, 0, (int)NFORMS);
	tcase_add_loop_test(tc, test_programs_by_env, 0, (int)NFORMS);
	tcase_add_test(tc, test_conninfo_misplaced);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
