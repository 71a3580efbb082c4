/*
 * test_routes.c - the relay's route table (relay/routes.c) and a worker's
 * pick of a destination over it, without sockets (relay/dest.c):
 * every --route form that parses and every one refused with its error
 * line, and the pick of a destination: the exact topic before the default
 * "*", round-robin across a topic's destinations, and a destination that
 * is down or full passed over while another can take the batch.
 */
#include <check.h>
#include <string.h>

#include <nng/nng.h>

#include "dest.h"
#include "outbox/err.h"
#include "testsupport.h"

static struct relay_routes rt;
static struct relay_dest_table d;
static char err[512];

static void
teardown(void)
{
	relay_dest_table_close(&d);
	memset(&d, 0, sizeof(d));
	relay_routes_free(&rt);
}

/* Parse specs into rt, and set a destination table up over them (no sockets). */
static int
parse(const char *const *specs, size_t n)
{
	teardown();
	err[0] = '\0';
	int rc = relay_routes_parse(&rt, (char **)specs, n, err, sizeof(err));
	if (rc == OB_OK)
		ck_assert_int_eq(relay_dest_table_init(&d, &rt), OB_OK);
	return rc;
}

START_TEST(test_parse_good)
{
	const char *specs[] = { "report.created=ipc:///tmp/a.ipc", "*=tcp://127.0.0.1:5555",
		"report.created=tcp://[::1]:5556", "audit=ipc:///tmp/a.ipc" };
	ck_assert_int_eq(parse(specs, 4), OB_OK);
	ck_assert_int_eq(rt.nroutes, 3);
	ck_assert_int_eq(rt.nurls, 3); /* ipc:///tmp/a.ipc is one destination */
	ck_assert_int_eq(d.n, 3);
	ck_assert_str_eq(rt.routes[0].topic, "report.created");
	ck_assert_int_eq(rt.routes[0].ndests, 2);
	ck_assert_str_eq(d.dest[rt.routes[0].dests[1]].url, "tcp://[::1]:5556");
	ck_assert_str_eq(rt.routes[1].topic, "*");
	ck_assert_int_eq(rt.routes[2].dests[0], rt.routes[0].dests[0]);
	/* the lookup: its own route, else the default, else none */
	ck_assert_int_eq(relay_routes_find(&rt, "audit", 5), 2);
	ck_assert_int_eq(relay_routes_find(&rt, "other", 5), 1);
}
END_TEST

START_TEST(test_parse_refused)
{
	static const struct {
		const char *spec;
		const char *want; /* the start of the error line */
	} cases[] = {
		{ "no-equals-sign", "--route 'no-equals-sign': expected TOPIC=URL (TOPIC may be *)" },
		{ "=ipc:///tmp/a", "--route '=ipc:///tmp/a': expected TOPIC=URL" },
		{ "t=", "--route 't=': expected TOPIC=URL" },
		{ "t=not a url", "--route 't=not a url': nng cannot parse URL 'not a url'" },
		{ "t=http://127.0.0.1:80", "--route 't=http://127.0.0.1:80': nng cannot parse URL" },
		/* user info with no host: nng 1.5.2's parser reads past the end of
		 * these (fuzz_config under ASan); refused before nng sees them */
		{ "t=tcp://@", "--route 't=tcp://@': nng cannot parse URL 'tcp://@': Invalid argument" },
		{ "t=tcp://x:y@", "--route 't=tcp://x:y@': nng cannot parse URL" },
		{ "t=tls+tcp://@", "--route 't=tls+tcp://@': nng cannot parse URL" },
		{ "t=tcp://u@127.0.0.1:7450", "--route 't=tcp://u@127.0.0.1:7450': nng cannot parse URL" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *specs[] = { cases[i].spec };
		ck_assert_msg(parse(specs, 1) == OB_EINVAL, "case %zu parsed", i);
		ck_assert_msg(strncmp(err, cases[i].want, strlen(cases[i].want)) == 0,
		    "case %zu: %s", i, err);
	}
	char longtopic[400];
	memset(longtopic, 'x', 256);
	strcpy(longtopic + 256, "=ipc:///tmp/a");
	const char *specs[] = { longtopic };
	ck_assert_int_eq(parse(specs, 1), OB_EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "topic longer than 255 bytes"));
	ck_assert_int_eq(parse(NULL, 0), OB_EINVAL);
	ck_assert_str_eq(err, "--route: at least one TOPIC=URL is required (or set OUTBOX_ROUTE)");
}
END_TEST

/* Every destination live: closed breaker, a connection, room. */
static void
all_live(void)
{
	for (int i = 0; i < d.n; i++) {
		d.dest[i].breaker.state = RELAY_BREAKER_CLOSED;
		atomic_store(&d.dest[i].pipes, 1);
		d.dest[i].inflight = 0;
		d.dest[i].window = 2;
	}
}

START_TEST(test_pick)
{
	const char *specs[] = { "a=ipc:///tmp/a1", "a=ipc:///tmp/a2", "*=ipc:///tmp/def" };
	ck_assert_int_eq(parse(specs, 3), OB_OK);
	all_live();
	/* the exact topic before the default; round-robin over its two */
	int first = relay_route_pick(&d, "a", 1);
	int second = relay_route_pick(&d, "a", 1);
	ck_assert_int_ne(first, second);
	ck_assert_int_eq(relay_route_pick(&d, "a", 1), first);
	ck_assert_str_eq(d.dest[relay_route_pick(&d, "other", 5)].url, "ipc:///tmp/def");
	/* a prefix of a topic is not the topic */
	ck_assert_str_eq(d.dest[relay_route_pick(&d, "a", 0)].url, "ipc:///tmp/def");

	/* a1 down (breaker open, probe not due): a2 takes every batch */
	int a1 = rt.routes[0].dests[0], a2 = rt.routes[0].dests[1];
	d.dest[a1].breaker.state = RELAY_BREAKER_OPEN;
	d.dest[a1].breaker.next_probe_ms = INT64_MAX;
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(relay_route_pick(&d, "a", 1), a2);
	/* a2 full: an open breaker still is not picked while a2 is closed */
	d.dest[a2].inflight = d.dest[a2].window;
	ck_assert_int_eq(relay_route_pick(&d, "a", 1), a2);
	/* a1 back, a2 full: a1 */
	d.dest[a1].breaker.state = RELAY_BREAKER_CLOSED;
	ck_assert_int_eq(relay_route_pick(&d, "a", 1), a1);
	/* a1 has no connection yet, a2 full: a1 (room beats a connection) */
	atomic_store(&d.dest[a1].pipes, 0);
	ck_assert_int_eq(relay_route_pick(&d, "a", 1), a1);
}
END_TEST

START_TEST(test_pick_without_default)
{
	const char *specs[] = { "a=ipc:///tmp/a1" };
	ck_assert_int_eq(parse(specs, 1), OB_OK);
	all_live();
	ck_assert_int_eq(relay_route_pick(&d, "b", 1), -1);
	ck_assert_int_eq(relay_routes_find(&rt, "b", 1), -1);
	ck_assert_int_eq(relay_route_pick(&d, "a", 1), 0);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("routes");
	TCase *tc = tcase_create("routes");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_add_test(tc, test_parse_good);
	tcase_add_test(tc, test_parse_refused);
	tcase_add_test(tc, test_pick);
	tcase_add_test(tc, test_pick_without_default);
	suite_add_tcase(s, tc);
	int rc = ts_run_suite(s);
	nng_fini(); /* the pick reads nng_clock, which starts nng's threads */
	return rc;
}
