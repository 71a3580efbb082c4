/*
 * test_demo_admin.c - the demo admin endpoint (--demo-admin, outbox/
 * demo_admin.h) of the real outbox-producer serve and outbox-consumer on a
 * real PostgreSQL: without the switch /admin/faults is 404; the switch is
 * refused unless --metrics is loopback (and without --metrics); with it
 * the program warns at start, GET lists the faults and modes, an unknown
 * name or a bad value is 400 and changes nothing, other methods 405.
 * Arming producer.lose_response once loses exactly one response (the retry
 * is answered from the stored response: one report); switching idempotency
 * to none at run time makes the same key two reports. Switching the
 * consumer's dedup off at run time makes a redelivery apply twice (two
 * effect rows), and back on answers duplicate again.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <nng/nng.h>

#include "outbox/wire.h"
#include "testsupport.h"
#include "ts_consumer.h"
#include "ts_producer.h"

#define T_SEC 1000

/* method on base+path with body (NULL: none); the reply into out. */
static int
call(const char *base, const char *method, const char *body, struct ts_producer_reply *out)
{
	ts_producer_http(base, method, "/admin/faults", NULL, body, body ? strlen(body) : 0, out);
	ck_assert_msg(out->rv == 0, "%s %s/admin/faults: %s", method, base, nng_strerror(out->rv));
	return out->status;
}

/* The integer at faults.NAME (or -1) and the string at modes.NAME of a
 * GET /admin/faults body. */
static long long
fault_of(const char *body, const char *name)
{
	json_t *j = json_loads(body, 0, NULL);
	ck_assert_msg(j != NULL, "not JSON: %s", body);
	json_t *v = json_object_get(json_object_get(j, "faults"), name);
	long long n = json_is_integer(v) ? (long long)json_integer_value(v) : -1;
	json_decref(j);
	return n;
}

static void
mode_of(const char *body, const char *name, char *out, size_t outlen)
{
	json_t *j = json_loads(body, 0, NULL);
	ck_assert_msg(j != NULL, "not JSON: %s", body);
	const char *s = json_string_value(json_object_get(json_object_get(j, "modes"), name));
	snprintf(out, outlen, "%s", s ? s : "");
	json_decref(j);
}

static void
serve(const char *db, bool admin, struct ts_producer_server *s, char *murl, size_t murllen)
{
	char *argv[] = { "--metrics", "127.0.0.1:0", admin ? "--demo-admin" : NULL, NULL };
	ts_producer_serve(db, argv, s);
	snprintf(murl, murllen, "http://127.0.0.1:%d",
	    ts_log_wait_port(s->log, "producer.metrics.listening", 30 * T_SEC));
}

START_TEST(test_absent_without_switch)
{
	char db[TS_CONNINFO_MAX], murl[64];
	struct ts_producer_server s;
	struct ts_producer_reply r;
	ts_db_create("demoadm", "outbox", db, sizeof(db));
	serve(db, false, &s, murl, sizeof(murl));
	ck_assert_int_eq(call(murl, "GET", NULL, &r), 404);
	ck_assert_int_eq(call(murl, "POST", "{\"producer.lose_response\":1}", &r), 404);
	/* nothing was armed: the next report is answered */
	ts_producer_post(s.url, "absent-1", TS_PRODUCER_BODY, &r);
	ck_assert_int_eq(r.rv, 0);
	ck_assert_int_eq(r.status, 201);
	ck_assert_int_eq(ts_log_count(s.log, "demo.admin"), 0);
	ts_stop(s.pid, SIGTERM);

	/* the consumer likewise */
	char idb[TS_CONNINFO_MAX], log[256], url[256];
	ts_db_create("demoadm_in", "inbox", idb, sizeof(idb));
	ts_ipc_url("absent", url, sizeof(url));
	const char *const extra[] = { "--metrics", "127.0.0.1:0", NULL };
	pid_t c = ts_consumer_spawn(log, idb, url, extra);
	snprintf(murl, sizeof(murl), "http://127.0.0.1:%d",
	    ts_log_wait_port(log, "consumer.metrics.listening", 30 * T_SEC));
	ck_assert_int_eq(call(murl, "GET", NULL, &r), 404);
	ts_stop(c, SIGTERM);
}
END_TEST

START_TEST(test_refused_unless_loopback)
{
	char out[4096];
	static const char *const bad[] = { "0.0.0.0:0", ":0", NULL };
	for (int i = 0; bad[i] != NULL; i++) {
		char *p[] = { "outbox-producer", "serve", "--db", "dbname=never", "--http",
			"http://127.0.0.1:0", "--demo-admin", "--metrics", (char *)bad[i], NULL };
		ck_assert_int_eq(ts_run(p, NULL, out, sizeof(out), 30 * T_SEC), 2);
		ck_assert_msg(strstr(out, "must be loopback") != NULL, "producer %s: %s", bad[i], out);
		char *c[] = { "outbox-consumer", "--db", "dbname=never", "--demo-admin",
			"--metrics", (char *)bad[i], NULL };
		ck_assert_int_eq(ts_run(c, NULL, out, sizeof(out), 30 * T_SEC), 2);
		ck_assert_msg(strstr(out, "must be loopback") != NULL, "consumer %s: %s", bad[i], out);
	}
	char *p[] = { "outbox-producer", "serve", "--db", "dbname=never", "--demo-admin", NULL };
	ck_assert_int_eq(ts_run(p, NULL, out, sizeof(out), 30 * T_SEC), 2);
	ck_assert_msg(strstr(out, "--demo-admin needs --metrics") != NULL, "%s", out);
}
END_TEST

START_TEST(test_producer_lose_response_once)
{
	char db[TS_CONNINFO_MAX], murl[64], mode[32];
	struct ts_producer_server s;
	struct ts_producer_reply r;
	ts_db_create("demoadm", "outbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	serve(db, true, &s, murl, sizeof(murl));
	ck_assert_int_eq(ts_log_count(s.log, "demo.admin.on"), 1);

	ck_assert_int_eq(call(murl, "GET", NULL, &r), 200);
	ck_assert_int_eq(fault_of(r.body, "producer.lose_response"), 0);
	ck_assert_int_eq(fault_of(r.body, "producer.crash"), 0);
	mode_of(r.body, "idempotency", mode, sizeof(mode));
	ck_assert_str_eq(mode, "atomic");

	/* bad input: 400 (or 405) and nothing changed */
	static const char *const bad[] = { "{\"producer.lose_response\":1,\"nope\":1}",
		"{\"producer.lose_response\":\"1\"}", "{\"producer.lose_response\":-1}",
		"{\"idempotency\":\"sometimes\"}", "{\"producer.lose_response\":1,"
		"\"idempotency\":2}", "[1]", "{}", "not json", NULL };
	for (int i = 0; bad[i] != NULL; i++) {
		ck_assert_msg(call(murl, "POST", bad[i], &r) == 400, "%s: %d", bad[i], r.status);
		ck_assert_msg(strstr(r.body, "\"error\"") != NULL, "%s", r.body);
	}
	ck_assert(strstr(r.body, "not JSON") != NULL);
	ck_assert_int_eq(call(murl, "PUT", "{}", &r), 405);
	ck_assert_int_eq(call(murl, "DELETE", NULL, &r), 405);
	ck_assert_int_eq(call(murl, "GET", NULL, &r), 200);
	ck_assert_int_eq(fault_of(r.body, "producer.lose_response"), 0);
	mode_of(r.body, "idempotency", mode, sizeof(mode));
	ck_assert_str_eq(mode, "atomic");
	ck_assert_int_eq(ts_log_count(s.log, "demo.admin.armed"), 0);

	/* arm once: exactly one response is lost, its retry is the replay */
	ck_assert_int_eq(call(murl, "POST", "{\"producer.lose_response\":1}", &r), 200);
	ck_assert_int_eq(fault_of(r.body, "producer.lose_response"), 1);
	ts_producer_post(s.url, "lost-1", TS_PRODUCER_BODY, &r);
	ck_assert_msg(r.rv != 0 && r.status == 0, "the first answer was not lost: %d", r.status);
	ts_producer_post(s.url, "lost-1", TS_PRODUCER_BODY, &r);
	ck_assert_int_eq(r.rv, 0);
	ck_assert_int_eq(r.status, 201);
	ck_assert(r.replayed);
	ts_producer_post(s.url, "lost-2", TS_PRODUCER_BODY, &r);
	ck_assert_int_eq(r.status, 201);
	ck_assert(!r.replayed);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM app.bug_reports"), 2);
	ck_assert_int_eq(ts_log_count(s.log, "fault.fired"), 1);
	ck_assert_int_eq(call(murl, "GET", NULL, &r), 200);
	ck_assert_int_eq(fault_of(r.body, "producer.lose_response"), 0);

	/* the broken mode at run time: the same key is two reports; back to
	 * atomic, a retry is answered from the stored response again */
	ck_assert_int_eq(call(murl, "POST", "{\"idempotency\":\"none\"}", &r), 200);
	mode_of(r.body, "idempotency", mode, sizeof(mode));
	ck_assert_str_eq(mode, "none");
	ts_producer_post(s.url, "twice-1", TS_PRODUCER_BODY, &r);
	ck_assert_int_eq(r.status, 201);
	ts_producer_post(s.url, "twice-1", TS_PRODUCER_BODY, &r);
	ck_assert_int_eq(r.status, 201);
	ck_assert(!r.replayed);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM app.bug_reports"), 4);
	ck_assert_int_eq(call(murl, "POST", "{\"idempotency\":\"atomic\"}", &r), 200);
	ts_producer_post(s.url, "again-1", TS_PRODUCER_BODY, &r);
	ts_producer_post(s.url, "again-1", TS_PRODUCER_BODY, &r);
	ck_assert(r.replayed);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM app.bug_reports"), 5);
	ck_assert_int_eq(ts_log_count(s.log, "demo.admin.mode"), 2);
	ts_stop(s.pid, SIGTERM);
	PQfinish(conn);
}
END_TEST

START_TEST(test_consumer_dedup_switched)
{
	char idb[TS_CONNINFO_MAX], log[256], url[256], murl[64], mode[32];
	struct ts_producer_reply r;
	struct ts_consumer_conn cc;
	ts_db_create("demoadm_in", "inbox", idb, sizeof(idb));
	PGconn *conn = ts_connect(idb);
	ts_ipc_url("dedup", url, sizeof(url));
	const char *const extra[] = { "--metrics", "127.0.0.1:0", "--demo-admin", NULL };
	pid_t c = ts_consumer_spawn(log, idb, url, extra);
	snprintf(murl, sizeof(murl), "http://127.0.0.1:%d",
	    ts_log_wait_port(log, "consumer.metrics.listening", 30 * T_SEC));
	ck_assert_int_eq(ts_log_wait(log, "demo.admin.on", 1, 30 * T_SEC), 1);
	ck_assert_int_eq(call(murl, "GET", NULL, &r), 200);
	mode_of(r.body, "dedup", mode, sizeof(mode));
	ck_assert_str_eq(mode, "on");
	ck_assert_int_eq(fault_of(r.body, "consumer.drop_reply"), 0);
	ck_assert_int_eq(call(murl, "POST", "{\"dedup\":false}", &r), 400);
	ck_assert_int_eq(call(murl, "POST", "{\"dedup\":\"off\",\"consumer.nope\":1}", &r), 400);

	ts_consumer_open(&cc, url);
	const char *q = "SELECT count(*) FROM inbox.notifications WHERE idempotency_key = 'k-1'";
	struct ob_wire_msg m = ts_consumer_msg(1, "report.created", "k-1", "{\"n\":1}");
	ck_assert_int_eq(ts_consumer_call1(&cc, m, NULL, 0), OB_WIRE_APPLIED);
	ck_assert_int_eq(ts_consumer_call1(&cc, m, NULL, 0), OB_WIRE_DUPLICATE);
	ck_assert_int_eq(ts_query_int(conn, q), 1);

	ck_assert_int_eq(call(murl, "POST", "{\"dedup\":\"off\"}", &r), 200);
	mode_of(r.body, "dedup", mode, sizeof(mode));
	ck_assert_str_eq(mode, "off");
	ck_assert_int_eq(ts_consumer_call1(&cc, m, NULL, 0), OB_WIRE_APPLIED);
	ck_assert_int_eq(ts_query_int(conn, q), 2);

	ck_assert_int_eq(call(murl, "POST", "{\"dedup\":\"on\"}", &r), 200);
	ck_assert_int_eq(ts_consumer_call1(&cc, m, NULL, 0), OB_WIRE_DUPLICATE);
	ck_assert_int_eq(ts_query_int(conn, q), 2);
	/* a new key under dedup on is applied once */
	struct ob_wire_msg m2 = ts_consumer_msg(2, "report.created", "k-2", "{\"n\":2}");
	ck_assert_int_eq(ts_consumer_call1(&cc, m2, NULL, 0), OB_WIRE_APPLIED);
	ck_assert_int_eq(ts_consumer_call1(&cc, m2, NULL, 0), OB_WIRE_DUPLICATE);
	ts_consumer_close(&cc);
	ts_stop(c, SIGTERM);
	PQfinish(conn);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("demo_admin");
	TCase *tc = tcase_create("demo_admin");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_absent_without_switch);
	tcase_add_test(tc, test_refused_unless_loopback);
	tcase_add_test(tc, test_producer_lose_response_once);
	tcase_add_test(tc, test_consumer_dedup_switched);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
