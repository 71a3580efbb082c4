/*
 * test_bus_tls.c - the TLS settings' start-up check (no nng: what the
 * relay's supervisor may call before it forks), the TLS URL test, and the
 * refusal watch's rate limit: the first refusal of a class logged at once,
 * later ones counted and carried on the next line one interval on.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "outbox/bus_tls.h"
#include "outbox/err.h"
#include "testsupport.h"

START_TEST(test_tls_url)
{
	ck_assert(ob_bus_tls_url("tls+tcp://127.0.0.1:7450"));
	ck_assert(ob_bus_tls_url("tls+tcp4://h:1"));
	ck_assert(ob_bus_tls_url("tls+tcp6://[::1]:1"));
	ck_assert(!ob_bus_tls_url("tcp://127.0.0.1:7450"));
	ck_assert(!ob_bus_tls_url("ipc:///tmp/x"));
	ck_assert(!ob_bus_tls_url("tls+tcpx://h:1"));
	ck_assert(!ob_bus_tls_url(NULL));
}
END_TEST

START_TEST(test_check)
{
	char err[512], file[300];
	snprintf(file, sizeof(file), "%s/x.pem", ts_tmpdir());
	FILE *f = fopen(file, "w");
	ck_assert_ptr_nonnull(f);
	fputs("x\n", f);
	fclose(f);
	const char *plain[] = { "tcp://127.0.0.1:1", "ipc:///tmp/a" };
	const char *tls[] = { "tcp://127.0.0.1:1", "tls+tcp://h:1" };
	struct ob_bus_tls_files none = { 0 }, all = { file, file, file, NULL };

	ck_assert_int_eq(ob_bus_tls_check(plain, 2, &none, false, err, sizeof(err)), OB_OK);
	ck_assert_int_eq(ob_bus_tls_check(tls, 2, &all, false, err, sizeof(err)), OB_OK);
	/* settings that protect nothing */
	struct ob_bus_tls_files only_ca = { NULL, NULL, file, NULL };
	ck_assert_int_eq(ob_bus_tls_check(plain, 2, &only_ca, true, err, sizeof(err)), OB_EINVAL);
	ck_assert_str_eq(err, "--tls-ca is set but no --listen is a tls+tcp:// URL: nothing would"
	    " be encrypted or authenticated");
	struct ob_bus_tls_files only_name = { NULL, NULL, NULL, "x" };
	ck_assert_int_eq(ob_bus_tls_check(plain, 2, &only_name, false, err, sizeof(err)), OB_EINVAL);
	ck_assert(strstr(err, "--tls-server-name is set but no --route") == err);
	/* a TLS URL without all three */
	struct ob_bus_tls_files no_key = { file, NULL, file, NULL };
	ck_assert_int_eq(ob_bus_tls_check(tls, 2, &no_key, false, err, sizeof(err)), OB_EINVAL);
	ck_assert(strstr(err, "--route tls+tcp://h:1 needs --tls-cert, --tls-key and --tls-ca") ==
	    err);
	/* unreadable: named, with the reason */
	struct ob_bus_tls_files missing = { file, "/nonexistent/k.pem", file, NULL };
	ck_assert_int_eq(ob_bus_tls_check(tls, 2, &missing, true, err, sizeof(err)), OB_EINVAL);
	ck_assert_str_eq(err, "--tls-key /nonexistent/k.pem: No such file or directory");
	struct ob_bus_tls_files dir = { file, file, ts_tmpdir(), NULL };
	ck_assert_int_eq(ob_bus_tls_check(tls, 2, &dir, true, err, sizeof(err)), OB_EINVAL);
	ck_assert(strstr(err, ": not a regular file") != NULL);
	struct ob_bus_tls_files empty_name = { file, file, file, "" };
	ck_assert_int_eq(ob_bus_tls_check(tls, 2, &empty_name, false, err, sizeof(err)),
	    OB_EINVAL);
	ck_assert_str_eq(err, "--tls-server-name: empty");
}
END_TEST

START_TEST(test_watch_rate_limit)
{
	struct ob_bus_watch w = { .every_ms = 1000 };
	struct ob_bus_refusals now = { { 0 } };
	struct ob_bus_watch_news n;
	ck_assert(!ob_bus_watch_update(&w, &now, 0, &n)); /* nothing yet */

	now.n[OB_BUS_REFUSED_AUTH] = 3;
	ck_assert(ob_bus_watch_update(&w, &now, 10, &n));
	ck_assert_uint_eq(n.fresh[OB_BUS_REFUSED_AUTH], 3);
	ck_assert_uint_eq(n.log[OB_BUS_REFUSED_AUTH], 3); /* the first: at once */
	ck_assert_uint_eq(n.log[OB_BUS_REFUSED_PROTO], 0);

	now.n[OB_BUS_REFUSED_AUTH] = 10; /* a retry flood */
	ck_assert(ob_bus_watch_update(&w, &now, 500, &n));
	ck_assert_uint_eq(n.fresh[OB_BUS_REFUSED_AUTH], 7); /* counted */
	ck_assert_uint_eq(n.log[OB_BUS_REFUSED_AUTH], 0);   /* not logged */
	now.n[OB_BUS_REFUSED_PROTO] = 1;                     /* another class: its own line */
	ck_assert(ob_bus_watch_update(&w, &now, 600, &n));
	ck_assert_uint_eq(n.log[OB_BUS_REFUSED_PROTO], 1);
	ck_assert_uint_eq(n.log[OB_BUS_REFUSED_AUTH], 0);

	/* an interval on: the refusals since the last line, on one line */
	ck_assert(ob_bus_watch_update(&w, &now, 1010, &n));
	ck_assert_uint_eq(n.fresh[OB_BUS_REFUSED_AUTH], 0);
	ck_assert_uint_eq(n.log[OB_BUS_REFUSED_AUTH], 7);
	ck_assert_uint_eq(n.total[OB_BUS_REFUSED_AUTH], 10);
	ck_assert(!ob_bus_watch_update(&w, &now, 5000, &n)); /* quiet: nothing to say */

	/* a counter that went back (a new endpoint): counted from zero */
	now.n[OB_BUS_REFUSED_AUTH] = 2;
	ck_assert(ob_bus_watch_update(&w, &now, 6000, &n));
	ck_assert_uint_eq(n.fresh[OB_BUS_REFUSED_AUTH], 2);
	ck_assert_uint_eq(n.log[OB_BUS_REFUSED_AUTH], 2);
}
END_TEST

START_TEST(test_names)
{
	ck_assert_str_eq(ob_bus_refusal_name(OB_BUS_REFUSED_AUTH), "tls_auth");
	ck_assert_str_eq(ob_bus_refusal_name(OB_BUS_REFUSED_PROTO), "protocol");
	ck_assert_str_eq(ob_bus_refusal_name(OB_BUS_REFUSED_TIMEOUT), "timeout");
	ck_assert_str_eq(ob_bus_refusal_name(OB_BUS_REFUSED_CLOSED), "closed");
	ck_assert_str_eq(ob_bus_refusal_name(OB_BUS_REFUSED_COUNT), "unknown");
	for (int r = 0; r < OB_BUS_REFUSED_COUNT; r++)
		ck_assert(strlen(ob_bus_refusal_hint((enum ob_bus_refusal)r)) > 10);
}
END_TEST

static Suite *
bus_tls_suite(void)
{
	Suite *s = suite_create("bus_tls_unit");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_tls_url);
	tcase_add_test(tc, test_check);
	tcase_add_test(tc, test_watch_rate_limit);
	tcase_add_test(tc, test_names);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return ts_run_suite(bus_tls_suite());
}
