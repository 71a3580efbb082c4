/*
 * test_web_demo.c - the guided demonstration (ctl/web_demo.h) driven
 * through its interface, without the web server, against the real stack
 * of scripts/demo.sh --web: a real PostgreSQL (the producer's and the
 * consumer's databases), outbox-producer serve --demo-admin,
 * outbox-consumer --demo-admin, the demo's relay (report.created), and the
 * short-lived relays the steps start themselves. Each step is started,
 * waited for (its state polled until done), and its facts are checked
 * against psql: one report, then two in the broken mode; one effect and a
 * duplicate answer after a relay died; fence+1 and a refused write after a
 * stall; two effects without dedup; both fault matrices streamed cell by
 * cell (two of the relay/consumer matrix's columns). The modes and faults are back to the
 * real ones after each step. Bad config files are refused with the reason;
 * a second start while a step runs is OB_EEXIST, a step that is not one
 * OB_EINVAL. The tools' parameters are refused with one line naming them,
 * nothing started; the herd simulator shows what outbox-herd prints. A relay leaves a topic it has no route for pending (what the
 * demo's steps rely on), where --unrouted dead-letter dead-letters it.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "outbox/err.h"
#include "testsupport.h"
#include "ts_demo.h"
#include "ts_producer.h"
#include "ts_relay.h"
#include "web_demo.h"

#define T_SEC 1000
#define STEP_WAIT_MS (120 * T_SEC)

/* The state's step n (a new reference; json_decref). */
static json_t *
step_of(struct web_demo *d, int n)
{
	char *text = web_demo_state_json(d);
	ck_assert(text != NULL);
	json_t *root = json_loads(text, 0, NULL);
	ck_assert_msg(root != NULL, "state is not JSON: %s", text);
	free(text);
	json_t *st = json_array_get(json_object_get(root, "steps"), (size_t)(n - 1));
	ck_assert(st != NULL);
	ck_assert_int_eq(json_integer_value(json_object_get(st, "n")), n);
	json_incref(st);
	json_decref(root);
	return st;
}

/* Start step n, poll until it is no longer running; it must be done.
 * Returns its result's facts (a new reference). */
static json_t *
run_step(struct web_demo *d, int n)
{
	ck_assert_int_eq(web_demo_start(d, n), OB_OK);
	int64_t end = ts_now_ms() + STEP_WAIT_MS;
	json_t *st;
	for (;;) {
		st = step_of(d, n);
		const char *status = json_string_value(json_object_get(st, "status"));
		if (strcmp(status, "running") != 0)
			break;
		ck_assert_msg(ts_now_ms() < end, "step %d still running after %d s", n,
		    STEP_WAIT_MS / T_SEC);
		json_decref(st);
		usleep(50 * 1000);
	}
	json_t *res = json_object_get(st, "result");
	char *dump = json_dumps(res, JSON_INDENT(1));
	ck_assert_msg(strcmp(json_string_value(json_object_get(st, "status")), "done") == 0,
	    "step %d: %s", n, dump);
	ck_assert(json_string_length(json_object_get(st, "explain")) > 20);
	ck_assert(json_string_length(json_object_get(res, "summary")) > 0);
	ck_assert(json_array_size(json_object_get(res, "log")) > 0);
	ck_assert_msg(n == 6 ||
	        json_array_size(json_object_get(json_object_get(res, "highlight"), "keys")) > 0,
	    "step %d highlights nothing: %s", n, dump);
	free(dump);
	json_t *facts = json_object_get(res, "facts");
	json_incref(facts);
	json_decref(st);
	return facts;
}

static long long
fint(json_t *facts, const char *name)
{
	json_t *v = json_object_get(facts, name);
	ck_assert_msg(json_is_integer(v), "fact %s is not an integer", name);
	return (long long)json_integer_value(v);
}

static bool
fbool(json_t *facts, const char *name)
{
	json_t *v = json_object_get(facts, name);
	ck_assert_msg(json_is_boolean(v), "fact %s is not a boolean", name);
	return json_is_true(v);
}

static long long
q1(PGconn *conn, const char *fmt, const char *arg)
{
	char sql[600];
	char *lit = PQescapeLiteral(conn, arg, strlen(arg));
	snprintf(sql, sizeof(sql), fmt, lit);
	PQfreemem(lit);
	return (long long)ts_query_int(conn, sql);
}

/* GET base/admin/faults: the string at modes.name and faults.fault. */
static void
admin_state(const char *base, const char *mode, const char *want, const char *fault)
{
	struct ts_producer_reply r;
	ts_producer_http(base, "GET", "/admin/faults", NULL, NULL, 0, &r);
	ck_assert_int_eq(r.status, 200);
	json_t *j = json_loads(r.body, 0, NULL);
	ck_assert(j != NULL);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "modes"), mode)), want);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "faults"), fault)), 0);
	json_decref(j);
}

START_TEST(test_steps)
{
	struct ts_demo_stack s;
	struct web_demo *d = NULL;
	char err[600];
	/* step 6: two of the fault matrix's columns (the whole one is the
	 * suite's test_faultmatrix) */
	ts_demo_start(&s, "webdemo", "none,relay-die-after-send");
	ck_assert_msg(web_demo_open(s.conf, s.db, s.idb, &d, err, sizeof(err)) == OB_OK, "%s", err);
	ck_assert_int_eq(web_demo_start(d, 0), OB_EINVAL);
	ck_assert_int_eq(web_demo_start(d, 7), OB_EINVAL);
	json_t *st = step_of(d, 1);
	ck_assert_str_eq(json_string_value(json_object_get(st, "status")), "idle");
	ck_assert(json_is_null(json_object_get(st, "result")));
	json_decref(st);

	/* 1: the lost response is replayed: one report */
	json_t *f = run_step(d, 1);
	ck_assert_int_eq(fint(f, "reports"), 1);
	ck_assert(fbool(f, "replayed"));
	ck_assert_int_eq(fint(f, "attempts"), 2);
	ck_assert_int_eq(ts_query_int(s.pconn, "SELECT count(*) FROM app.bug_reports"
	    " WHERE title LIKE 'Lost response, step 1 %'"), 1);
	ck_assert_int_eq(ts_log_count(s.p.log, "fault.fired"), 1);
	admin_state(s.padmin, "idempotency", "atomic", "producer.lose_response");
	json_decref(f);

	/* 2: the broken mode: two reports */
	f = run_step(d, 2);
	ck_assert_int_eq(fint(f, "reports"), 2);
	ck_assert(!fbool(f, "replayed"));
	ck_assert_int_eq(ts_query_int(s.pconn, "SELECT count(*) FROM app.bug_reports"
	    " WHERE title LIKE 'Lost response, step 2 %'"), 2);
	admin_state(s.padmin, "idempotency", "atomic", "producer.lose_response");
	json_decref(f);

	/* 3: a relay dies after sending: redelivered, answered duplicate */
	f = run_step(d, 3);
	const char *key = json_string_value(json_object_get(f, "key"));
	ck_assert_int_eq(fint(f, "effects"), 1);
	ck_assert_int_eq(fint(f, "duplicates"), 1);
	ck_assert_int_ge(fint(f, "attempts"), 2);
	ck_assert_int_eq(q1(s.iconn, "SELECT count(*) FROM inbox.notifications"
	    " WHERE idempotency_key = %s", key), 1);
	ck_assert_int_eq(q1(s.pconn, "SELECT count(*) FROM outbox.messages WHERE"
	    " idempotency_key = %s AND status = 'delivered'", key), 1);
	json_decref(f);

	/* a second start while one runs is refused, nothing started */
	ck_assert_int_eq(web_demo_start(d, 4), OB_OK);
	ck_assert_int_eq(web_demo_start(d, 1), OB_EEXIST);
	st = step_of(d, 1);
	ck_assert_str_eq(json_string_value(json_object_get(st, "status")), "done");
	json_decref(st);
	/* 4 (started just above): the stale worker is fenced out */
	int64_t end = ts_now_ms() + STEP_WAIT_MS;
	for (;;) {
		st = step_of(d, 4);
		if (strcmp(json_string_value(json_object_get(st, "status")), "running") != 0)
			break;
		ck_assert(ts_now_ms() < end);
		json_decref(st);
		usleep(50 * 1000);
	}
	char *dump = json_dumps(st, 0);
	ck_assert_msg(strcmp(json_string_value(json_object_get(st, "status")), "done") == 0, "%s",
	    dump);
	free(dump);
	f = json_object_get(json_object_get(st, "result"), "facts");
	key = json_string_value(json_object_get(f, "key"));
	ck_assert(fbool(f, "fenced_out"));
	/* fences come from one sequence: the takeover's is the next one drawn */
	ck_assert_int_gt(fint(f, "fence_after"), fint(f, "fence_before"));
	ck_assert_int_eq(fint(f, "effects"), 1);
	ck_assert_int_eq(q1(s.pconn, "SELECT max(fence) FROM outbox.messages WHERE"
	    " idempotency_key = %s", key), fint(f, "fence_after"));
	ck_assert_int_eq(q1(s.iconn, "SELECT count(*) FROM inbox.notifications"
	    " WHERE idempotency_key = %s", key), 1);
	json_decref(st);

	/* 5: without dedup the redelivery applies twice; dedup back on after */
	f = run_step(d, 5);
	key = json_string_value(json_object_get(f, "key"));
	ck_assert_int_eq(fint(f, "effects"), 2);
	ck_assert_int_eq(q1(s.iconn, "SELECT count(*) FROM inbox.notifications"
	    " WHERE idempotency_key = %s", key), 2);
	admin_state(s.cadmin, "dedup", "on", "consumer.drop_reply");
	json_decref(f);

	/* 6: both matrices, cell by cell (two fault columns here) */
	f = run_step(d, 6);
	ck_assert_str_eq(json_string_value(json_object_get(f, "fault_matrix")), "pass");
	ck_assert_int_eq(fint(f, "fault_cells"), 6);
	ck_assert_int_eq(fint(f, "full_row_cells"), 2);
	ck_assert_int_eq(fint(f, "full_row_ones"), 2);
	ck_assert_str_eq(json_string_value(json_object_get(f, "producer_matrix")),
	    "equal to the article");
	ck_assert_int_eq(fint(f, "producer_cells"), 25);
	ck_assert_int_eq(fint(f, "producer_equal_article"), 25);
	json_decref(f);
	st = step_of(d, 6);
	ck_assert_int_ge(json_array_size(json_object_get(json_object_get(st, "result"), "log")),
	    6 + 25);
	json_decref(st);

	/* the demo's own relay never saw the steps' topics */
	ck_assert_int_eq(ts_query_int(s.pconn, "SELECT count(*) FROM outbox.messages"
	    " WHERE topic LIKE 'demo.%' AND status <> 'delivered'"), 0);
	web_demo_close(d);
	ts_demo_stop(&s);
}
END_TEST

/* What lets the steps' relays have their topics: a relay with no default
 * route leaves another topic pending, untouched, while it delivers its
 * own (--unrouted wait, the default since issue 30; the demo's relay ran
 * with --only-routed, its old name); with --unrouted dead-letter it claims
 * that topic and dead-letters it ("no route"). */
START_TEST(test_only_routed)
{
	for (int only = 0; only <= 1; only++) {
		char db[TS_CONNINFO_MAX], url[256], route[300], log[256];
		struct ts_fake_consumer fc;
		ts_db_create("onlyrouted", "outbox", db, sizeof(db));
		PGconn *conn = ts_connect(db);
		ts_fake_consumer_routed(&fc, only ? "only-1" : "only-0", "report.created",
		    TS_FAKE_APPLIED, url, sizeof(url), route, sizeof(route));
		ts_enqueue_n(conn, "demo.redelivery", "step", 1);
		ts_enqueue_n(conn, "report.created", "first", 1);
		const char *const extra[] = { "--poll-ms", "100", only ? NULL : "--unrouted",
			"dead-letter", NULL };
		pid_t relay = ts_relay_spawn(log, db, route, extra);
		const char *dead = "SELECT count(*) FROM outbox.messages WHERE topic ="
		    " 'demo.redelivery' AND status = 'dead'";
		const char *delivered = "SELECT count(*) FROM outbox.messages WHERE topic ="
		    " 'report.created' AND status = 'delivered'";
		if (!only) {
			ck_assert_int_eq(ts_wait_value(conn, dead, 1, 30 * T_SEC), 1);
		} else {
			/* two claim rounds of its own topic later, the other is untouched */
			ck_assert_int_eq(ts_wait_value(conn, delivered, 1, 30 * T_SEC), 1);
			ts_enqueue_n(conn, "report.created", "second", 1);
			ck_assert_int_eq(ts_wait_value(conn, delivered, 2, 30 * T_SEC), 2);
			ck_assert_int_eq(ts_query_int(conn, dead), 0);
			ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.messages"
			    " WHERE topic = 'demo.redelivery' AND status = 'pending' AND attempts = 0"), 1);
		}
		ts_stop(relay, SIGTERM);
		ts_fake_consumer_stop(&fc);
		PQfinish(conn);
	}
}
END_TEST

/* web_demo_close while a long step runs: the step stops waiting, its child
 * (here the fault matrix, all its columns) is stopped and reaped, and close
 * returns well before the step would have ended. */
START_TEST(test_close_cancels)
{
	char db[TS_CONNINFO_MAX], conf[300], text[2048], err[600];
	struct web_demo *d = NULL;
	ts_db_create("webdemo_close", "outbox", db, sizeof(db));
	snprintf(text, sizeof(text), "producer_url=http://127.0.0.1:1\nproducer_admin=http://"
	    "127.0.0.1:1\nconsumer_admin=http://127.0.0.1:1\nconsumer_listen=ipc:///nonexistent\n"
	    "relay_db=%s\nbin_dir=%s\nwork_dir=%s\n", db, getenv("OUTBOX_BIN_DIR"), ts_tmpdir());
	snprintf(conf, sizeof(conf), "%s/close.conf", ts_tmpdir());
	ts_write_file(conf, text);
	ck_assert_msg(web_demo_open(conf, db, NULL, &d, err, sizeof(err)) == OB_OK, "%s", err);
	ck_assert_int_eq(web_demo_start(d, 6), OB_OK);
	int pid = 0;
	int64_t end = ts_now_ms() + 60 * T_SEC;
	while (pid == 0) {
		json_t *st = step_of(d, 6);
		json_t *log = json_object_get(json_object_get(st, "result"), "log");
		size_t i;
		json_t *line;
		json_array_foreach(log, i, line) {
			const char *p = strstr(json_string_value(line), "outbox-fault-matrix started (pid ");
			if (p != NULL)
				pid = atoi(p + strlen("outbox-fault-matrix started (pid "));
		}
		json_decref(st);
		ck_assert_msg(pid > 0 || ts_now_ms() < end, "the fault matrix never started");
		if (pid == 0)
			usleep(50 * 1000);
	}
	ck_assert_int_eq(kill(pid, 0), 0);
	int64_t t0 = ts_now_ms();
	web_demo_close(d);
	ck_assert_msg(ts_now_ms() - t0 < 30 * T_SEC, "close waited %lld ms",
	    (long long)(ts_now_ms() - t0));
	ck_assert_msg(kill(pid, 0) != 0, "the fault matrix (pid %d) is still there", pid);
}
END_TEST

START_TEST(test_bad_config)
{
	struct web_demo *d = NULL;
	char err[600], path[300];
	snprintf(path, sizeof(path), "%s/bad.conf", ts_tmpdir());
	static const struct {
		const char *text, *want;
	} cases[] = {
		{ "producer_url=http://127.0.0.1:1\n", "producer_admin is missing" },
		{ "producer_url=a\nproducer_url=b\n", "given twice" },
		{ "nonsense=1\n", "unknown key 'nonsense'" },
		{ "just a line\n", "want key=value" },
		{ "producer_url=\n", "empty" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ts_write_file(path, cases[i].text);
		err[0] = '\0';
		ck_assert_int_eq(web_demo_open(path, "dbname=x", NULL, &d, err, sizeof(err)), OB_EINVAL);
		ck_assert_msg(strstr(err, cases[i].want) != NULL, "%s: %s", cases[i].text, err);
	}
	ck_assert_int_eq(web_demo_open("/nonexistent/demo.conf", "dbname=x", NULL, &d, err,
	    sizeof(err)), OB_EINVAL);
	ck_assert(strstr(err, "No such file") != NULL);
	web_demo_close(NULL);
}
END_TEST

/* The state's tool name (a new reference). */
static json_t *
tool_of(struct web_demo *d, const char *name)
{
	char *text = web_demo_state_json(d);
	ck_assert(text != NULL);
	json_t *root = json_loads(text, 0, NULL);
	ck_assert_msg(root != NULL, "state is not JSON: %s", text);
	free(text);
	json_t *t = json_incref(json_object_get(json_object_get(root, "tools"), name));
	ck_assert_msg(t != NULL, "no tool %s in the state", name);
	json_t *events = json_incref(json_object_get(root, "events"));
	json_object_set_new(t, "events_now", events);
	json_decref(root);
	return t;
}

/* The tools' parameters are refused before anything starts; the herd
 * simulator runs outbox-herd and shows what it printed (the cell and the
 * 25 combinations need a producer: test_demo_page_browser runs them). */
START_TEST(test_tools)
{
	char db[TS_CONNINFO_MAX], path[300], text[2048], err[300];
	ts_db_create("webdemotools", "outbox", db, sizeof(db));
	const char *bindir = getenv("OUTBOX_BIN_DIR");
	ck_assert_ptr_nonnull(bindir);
	snprintf(text, sizeof(text), "producer_url=http://127.0.0.1:1\nproducer_admin="
	    "http://127.0.0.1:1\nconsumer_admin=http://127.0.0.1:1\nconsumer_listen=ipc:///x\n"
	    "relay_db=%s\nbin_dir=%s\nwork_dir=%s\n", db, bindir, ts_tmpdir());
	snprintf(path, sizeof(path), "%s/tools.conf", ts_tmpdir());
	ts_write_file(path, text);
	struct web_demo *d = NULL;
	ck_assert_int_eq(web_demo_open(path, db, NULL, &d, err, sizeof(err)), OB_OK);

	ck_assert(web_demo_has_tool("herd") && web_demo_has_tool("cell") &&
	    web_demo_has_tool("matrix") && !web_demo_has_tool("nosuch"));
	static const struct {
		const char *tool, *body, *want;
	} bad[] = {
		{ "nosuch", "{}", "no such tool" },
		{ "herd", "{\"clients\":0}", "clients must be an integer from 1 to 1000" },
		{ "herd", "{\"clients\":\"10\"}", "clients must be an integer" },
		{ "herd", "{\"seed\":-1}", "seed must be an integer from 0 to 2147483647" },
		{ "herd", "{\"strategy\":\"fast\"}", "strategy must be one of none, expo, expo-10pct,"
		    " equal, full, decorrelated" },
		{ "herd", "{\"runs\":5}", "unknown parameter 'runs'" },
		{ "herd", "[]", "must be a JSON object" },
		{ "herd", "{\"clients\":1,\"clients\":2}", "must be a JSON object" },
		{ "cell", "{\"fault\":\"meteor\"}", "fault must be one of lost-response," },
		{ "cell", "{\"server\":\"twice\"}", "server must be one of none, split, atomic" },
		{ "cell", "{\"keys\":\"random\"}", "keys must be one of none, per_attempt,"
		    " tool_call, business" },
		{ "matrix", "{\"x\":1}", "unknown parameter 'x'" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		ck_assert_int_eq(web_demo_start_tool(d, bad[i].tool, bad[i].body, strlen(bad[i].body),
		    err, sizeof(err)), OB_EINVAL);
		ck_assert_msg(strstr(err, bad[i].want) != NULL, "%s %s: %s", bad[i].tool, bad[i].body,
		    err);
	}
	json_t *t = tool_of(d, "herd");
	ck_assert_str_eq(json_string_value(json_object_get(t, "status")), "idle");
	ck_assert(json_is_null(json_object_get(t, "params")));
	json_decref(t);

	const char *body = "{\"strategy\":\"expo\",\"clients\":10,\"seed\":3}";
	ck_assert_int_eq(web_demo_start_tool(d, "herd", body, strlen(body), err, sizeof(err)),
	    OB_OK);
	ck_assert_int_eq(web_demo_start_tool(d, "herd", "", 0, err, sizeof(err)), OB_EEXIST);
	ck_assert_int_eq(web_demo_start(d, 1), OB_EEXIST);
	int64_t end = ts_now_ms() + STEP_WAIT_MS;
	for (;;) {
		t = tool_of(d, "herd");
		if (strcmp(json_string_value(json_object_get(t, "status")), "running") != 0)
			break;
		ck_assert(ts_now_ms() < end);
		json_decref(t);
		usleep(50 * 1000);
	}
	json_t *res = json_object_get(t, "result");
	ck_assert_msg(strcmp(json_string_value(json_object_get(t, "status")), "done") == 0, "%s",
	    json_string_value(json_object_get(res, "summary")));
	json_t *asked = json_pack("{s:s, s:i, s:i}", "strategy", "expo", "clients", 10, "seed", 3);
	ck_assert(json_equal(json_object_get(t, "params"), asked));
	json_decref(asked);
	ck_assert_str_eq(json_string_value(json_object_get(res, "command")), "outbox-herd"
	    " --strategy expo --clients 10 --runs 1 --seed 3 --json --histogram-bins 100");

	/* what the page shows is what the program prints */
	char *argv[] = { "outbox-herd", "--strategy", "expo", "--clients", "10", "--runs", "1",
		"--seed", "3", "--json", "--histogram-bins", "100", NULL };
	char out[16384];
	ck_assert_int_eq(ts_run(argv, NULL, out, sizeof(out), 60000), 0);
	json_t *want = json_loads(out, 0, NULL);
	ck_assert_ptr_nonnull(want);
	ck_assert(json_equal(json_object_get(res, "herd"), want));
	json_t *hist = json_object_get(json_array_get(json_object_get(json_array_get(
	    json_object_get(want, "strategies"), 0), "cells"), 0), "histogram");
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(res, "facts"), "calls")),
	    json_integer_value(json_object_get(hist, "calls")));
	/* and the picture was told */
	bool told = false;
	size_t i;
	json_t *e;
	json_array_foreach(json_object_get(t, "events_now"), i, e)
		told = told || (strcmp(json_string_value(json_object_get(e, "node")), "agent") == 0 &&
		    strcmp(json_string_value(json_object_get(e, "tool")), "herd") == 0 &&
		    strstr(json_string_value(json_object_get(e, "text")), "10 clients") != NULL);
	ck_assert(told);
	json_decref(want);
	json_decref(t);

	/* no parameters: the defaults, as the state shows them */
	ck_assert_int_eq(web_demo_start_tool(d, "herd", "", 0, err, sizeof(err)), OB_OK);
	t = tool_of(d, "herd");
	asked = json_pack("{s:s, s:i, s:i}", "strategy", "full", "clients", 100, "seed", 1);
	ck_assert(json_equal(json_object_get(t, "params"), asked));
	json_decref(asked);
	json_decref(t);
	web_demo_close(d);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("web_demo");
	TCase *tc = tcase_create("web_demo");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_bad_config);
	tcase_add_test(tc, test_tools);
	tcase_add_test(tc, test_only_routed);
	tcase_add_test(tc, test_close_cancels);
	tcase_add_test(tc, test_steps);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
