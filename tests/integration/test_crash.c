/*
 * test_crash.c - what the relay and the consumer promised before
 * PostgreSQL crashed is still true after (issue 30, items 3 to 5), on the
 * crash harness
 * (tests/support/ts_crash.h): a server of the test's own whose default is
 * synchronous_commit = off, with the WAL writer's round at 10 s, stopped
 * immediately (pg-tmp.sh crash) at the point each case chooses. Only a
 * commit that waited for its WAL flush survives it; a marker committed
 * asynchronously right before every crash shows that the crash really
 * lost what was not on disk (else the run is repeated).
 *
 * - An "applied" reply, then the crash: the dedup record and the effect
 *   are still there, and the redelivery is a duplicate (the consumer's
 *   commits waited for the disk whatever the server's default; before,
 *   both were gone, and a relay that had recorded the message delivered
 *   would never send it again).
 * - The same through a real relay, judged by outboxctl prove --drained:
 *   nothing lost, nothing delivered but not applied.
 * - A producer that commits asynchronously (the server's default here),
 *   its message delivered and applied at a consumer whose inbox is on
 *   another server, then the producer's server crashes: the business rows
 *   are still there and outboxctl prove --drained finds no phantom (a
 *   claim that returns messages waits for the flush; before, the crash
 *   lost the producer's transaction and prove found phantom 2).
 * - The producer API answered 201 for a report, then its server crashed:
 *   the report and its message are still there (its sessions commit
 *   durably whatever the server's default; before, the 201 was answered
 *   and both were gone).
 * - The webhook in at-most-once mode, PostgreSQL crashing while the call
 *   is in flight (the target holds it): the claim committed before the
 *   call survives, so the redelivery finds it and parks the call instead
 *   of calling again (before, the claim committed asynchronously and was
 *   lost, and the redelivery called the target a second time).
 *
 * No Check-managed PostgreSQL: each case starts its own (ts_crash_start),
 * and its teardown stops it and every program the case started, also
 * after a failure.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/supplemental/util/platform.h>

#include "outbox/wire.h"
#include "testsupport.h"
#include "ts_consumer.h"
#include "ts_crash.h"
#include "ts_pgserver.h"
#include "ts_producer.h"
#include "ts_relay.h"
#include "webhook_target.h"

#define T_SEC 1000
#define SETTLE_MS (60 * T_SEC)
#define POLL_MS 50
#define SOURCE "crash-src"
#define TOPIC "crash"
#define AMO_TOPIC "notify.sms"
#define PIPE_MESSAGES 5 /* their WAL fits in one page: no page wakes the WAL writer */
#define ASYNC_MESSAGES 2 /* with the relay's claim and record after them, still one page */

/* Named by main (the parent), so that the teardown finds the server. */
static struct ts_crash H;

static void
teardown(void)
{
	ts_crash_teardown(&H);
}

/* Count of rows of sql's first column (an integer). */
static int64_t
count(const char *db, const char *sql)
{
	PGconn *c = ts_connect(db);
	int64_t n = ts_query_int(c, sql);
	PQfinish(c);
	return n;
}

/* A run whose crash lost nothing shows nothing: said, then repeated. */
static void
note_run(const char *test, int run, bool lost)
{
	if (!lost)
		fprintf(stderr, "%s: run %d: the WAL writer wrote the marker before the crash:"
		    " the run shows nothing, repeated\n", test, run);
}

/* Send m until the answer is not RETRY (the consumer reconnecting after
 * the crash answers retry, "database unavailable"; a busy key too), every
 * POLL_MS, up to SETTLE_MS. The last status; its detail into detail. */
static int
call_until_final(struct ts_consumer_conn *c, struct ob_wire_msg m, char *detail,
    size_t detaillen)
{
	int64_t end = ts_now_ms() + SETTLE_MS;
	int st;
	while ((st = ts_consumer_call1(c, m, detail, detaillen)) == OB_WIRE_RETRY &&
	    ts_now_ms() < end)
		nng_msleep(POLL_MS);
	return st;
}

/* The records and effect rows of key in the inbox at db. */
static void
inbox_rows(const char *db, const char *key, int64_t *records, int64_t *effects)
{
	char sql[256];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM inbox.processed WHERE idempotency_key"
	    " = '%s'", key);
	*records = count(db, sql);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM inbox.notifications WHERE"
	    " idempotency_key = '%s'", key);
	*effects = count(db, sql);
}

START_TEST(test_applied_survives_a_crash)
{
	char db[TS_CONNINFO_MAX], url[256], log[256], key[32], detail[512];
	ts_crash_start(&H);
	ts_crash_db(&H, "inbox", "inbox", db, sizeof(db));
	ts_ipc_url("crash_applied", url, sizeof(url));
	pid_t pid = ts_crash_track(&H, ts_consumer_spawn(log, db, url, NULL));
	struct ts_consumer_conn c;
	ts_consumer_open(&c, url);
	/* its connections open and its statements prepared before the runs */
	ck_assert_int_eq(call_until_final(&c, ts_consumer_msg(1, TOPIC, "warm", "{}"), NULL, 0),
	    OB_WIRE_APPLIED);

	bool lost = false;
	struct ob_wire_msg m;
	for (int run = 1; run <= TS_CRASH_TRIES && !lost; run++) {
		snprintf(key, sizeof(key), "applied-%d", run);
		m = ts_consumer_msg((uint64_t)(10 + run), TOPIC, key, "{\"n\": 1}");
		ts_crash_arm(&H);
		int st = call_until_final(&c, m, detail, sizeof(detail));
		ck_assert_msg(st == OB_WIRE_APPLIED, "%s: %d (%s)", key, st, detail);
		/* the reply is here: the crash, at once */
		lost = ts_crash_now(&H);
		note_run("test_applied_survives_a_crash", run, lost);
		int64_t records, effects;
		inbox_rows(db, key, &records, &effects);
		ck_assert_msg(records == 1 && effects == 1, "run %d: the consumer answered applied"
		    " for %s, and after PostgreSQL stopped immediately its dedup record (%lld rows)"
		    " and effect (%lld rows) were gone: it replied before its commit was on disk"
		    " (the crash lost the marker committed after it: %s; log %s)", run, key,
		    (long long)records, (long long)effects, lost ? "yes" : "no", log);
	}
	ck_assert_msg(lost, "the crash lost nothing that was not on disk in %d runs: the WAL"
	    " writer was faster every time", TS_CRASH_TRIES);
	/* the relay's redelivery of it: a duplicate, still one effect */
	ck_assert_int_eq(call_until_final(&c, m, detail, sizeof(detail)), OB_WIRE_DUPLICATE);
	int64_t records, effects;
	inbox_rows(db, key, &records, &effects);
	ck_assert_int_eq(records, 1);
	ck_assert_int_eq(effects, 1);
	ts_consumer_close(&c);
	ts_stop(pid, SIGTERM);
}
END_TEST

/* The time now by db's clock, as outboxctl prove --since reads it. */
static void
since_now(PGconn *db, char *out, size_t outlen)
{
	PGresult *r = PQexec(db, "SELECT to_char(now() AT TIME ZONE 'UTC',"
	    " 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	snprintf(out, outlen, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
}

/* A consumer on in_db at the ipc path named name (ready when this
 * returns) and a relay on out_db routing TOPIC to it, both tracked for the
 * teardown; their logs into clog and rlog (256 bytes each). */
static void
start_pipeline(const char *name, const char *in_db, const char *out_db, char *clog,
    char *rlog, pid_t *consumer, pid_t *relay)
{
	char url[256], ready[300], route[300];
	ts_ipc_url(name, url, sizeof(url));
	snprintf(ready, sizeof(ready), "%s/%s.ready", H.base, name);
	const char *cargs[] = { "--ready-file", ready, NULL };
	*consumer = ts_crash_track(&H, ts_consumer_spawn(clog, in_db, url, cargs));
	free(ts_wait_ready_file(ready, *consumer, clog, 30 * T_SEC));
	snprintf(route, sizeof(route), "%s=%s", TOPIC, url);
	const char *rargs[] = { "--poll-ms", "50", "--source", SOURCE, "--backoff-base-ms", "20",
		"--backoff-cap-ms", "200", NULL };
	*relay = ts_crash_track(&H, ts_relay_spawn(rlog, out_db, route, rargs));
}

/* outboxctl prove of the window since T, --drained: exit code, output. */
static int
prove(const char *out_db, const char *in_db, const char *since, char *out, size_t outlen)
{
	char *argv[] = { "outboxctl", "prove", "--db", (char *)out_db, "--inbox-db",
		(char *)in_db, "--since", (char *)since, "--source", SOURCE, "--drained", NULL };
	return ts_run(argv, NULL, out, outlen, SETTLE_MS);
}

START_TEST(test_delivered_survives_an_inbox_crash)
{
	char in_db[TS_CONNINFO_MAX], out_db[TS_CONNINFO_MAX], out_conn[TS_CONNINFO_MAX];
	char out_dir[200], clog[256], rlog[256];
	char since[64], prefix[32], text[8192];
	ts_crash_start(&H);
	ts_crash_db(&H, "inbox", "inbox", in_db, sizeof(in_db));
	/* the outbox on a server of its own, which does not crash: the relay
	 * records each message delivered there, for good */
	snprintf(out_dir, sizeof(out_dir), "%s/out", H.base);
	ts_pgserver_start(out_dir, out_conn, sizeof(out_conn));
	ts_pgserver_db_create(out_conn, "outbox", "outbox", out_db, sizeof(out_db));
	PGconn *out = ts_connect(out_db);
	since_now(out, since, sizeof(since));

	pid_t consumer, relay;
	start_pipeline("crash_pipe", in_db, out_db, clog, rlog, &consumer, &relay);

	bool lost = false;
	for (int run = 1; run <= TS_CRASH_TRIES && !lost; run++) {
		ts_crash_arm(&H);
		snprintf(prefix, sizeof(prefix), "pipe-%d", run);
		ts_enqueue_n(out, TOPIC, prefix, PIPE_MESSAGES);
		/* every message answered and recorded delivered: the crash */
		ck_assert_msg(ts_wait_value(out, "SELECT outbox.backlog_empty()::int", 1, SETTLE_MS)
		    == 1, "run %d: not drained (logs %s, %s)", run, clog, rlog);
		lost = ts_crash_now(&H);
		note_run("test_delivered_survives_an_inbox_crash", run, lost);
		int code = prove(out_db, in_db, since, text, sizeof(text));
		ck_assert_msg(code == 0, "run %d: after the inbox's server crashed, outboxctl prove"
		    " exits %d (the crash lost the marker committed after the replies: %s):\n%s",
		    run, code, lost ? "yes" : "no", text);
	}
	ck_assert_msg(lost, "the crash lost nothing that was not on disk in %d runs",
	    TS_CRASH_TRIES);
	PQfinish(out);
	ts_stop(relay, SIGTERM);
	ts_stop(consumer, SIGTERM);
}
END_TEST

/* The business rows and messages of run prefix committed by one producer
 * transaction, asynchronously (the server's default here): an order row
 * and its message per n, as an application's enqueue does. */
static void
produce_async(PGconn *out, const char *prefix, int n)
{
	char sql[512];
	snprintf(sql, sizeof(sql), "BEGIN;"
	    " INSERT INTO crash_orders SELECT '%s-' || g FROM generate_series(1, %d) g;"
	    " SELECT count(outbox.enqueue('%s', '%s-' || g, jsonb_build_object('n', g)))"
	    "   FROM generate_series(1, %d) g;"
	    " COMMIT", prefix, n, TOPIC, prefix, n);
	ts_exec(out, sql);
}

START_TEST(test_async_producer_no_phantom)
{
	char in_db[TS_CONNINFO_MAX], in_conn[TS_CONNINFO_MAX], out_db[TS_CONNINFO_MAX];
	char in_dir[200], clog[256], rlog[256];
	char since[64], prefix[32], sql[256], text[8192];
	ts_crash_start(&H);
	/* the producer's database on the crashing server, whose default is
	 * synchronous_commit = off: every producer commit is asynchronous */
	ts_crash_db(&H, "outbox", "outbox", out_db, sizeof(out_db));
	/* the inbox on a server of its own, which does not crash: an effect
	 * applied there stays, whatever the producer's server loses */
	snprintf(in_dir, sizeof(in_dir), "%s/in", H.base);
	ts_pgserver_start(in_dir, in_conn, sizeof(in_conn));
	ts_pgserver_db_create(in_conn, "inbox", "inbox", in_db, sizeof(in_db));
	PGconn *out = ts_connect(out_db);
	ts_exec(out, "SET synchronous_commit = on; CREATE TABLE crash_orders (id text PRIMARY KEY)");
	since_now(out, since, sizeof(since));
	ts_exec(out, "RESET synchronous_commit");

	/* the relay with its defaults for its own commits
	 * (--synchronous-commit off) */
	pid_t consumer, relay;
	start_pipeline("crash_producer", in_db, out_db, clog, rlog, &consumer, &relay);
	PGconn *in = ts_connect(in_db);
	/* the first round trip of each session is larger in WAL (its caches
	 * fill): done before the runs, so a run's WAL stays in one page */
	produce_async(out, "warm", 1);
	ck_assert_msg(ts_wait_value(in, "SELECT count(*) FROM inbox.notifications WHERE"
	    " idempotency_key = 'warm-1'", 1, SETTLE_MS) == 1, "warm-up not applied (logs %s, %s)",
	    clog, rlog);

	bool lost = false;
	for (int run = 1; run <= TS_CRASH_TRIES && !lost; run++) {
		snprintf(prefix, sizeof(prefix), "async-%d", run);
		ts_crash_arm(&H);
		produce_async(out, prefix, ASYNC_MESSAGES);
		/* every message applied at the consumer: the crash, at once */
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM inbox.notifications WHERE"
		    " idempotency_key LIKE '%s-%%'", prefix);
		ck_assert_msg(ts_wait_value(in, sql, ASYNC_MESSAGES, SETTLE_MS) == ASYNC_MESSAGES,
		    "run %d: not applied (logs %s, %s)", run, clog, rlog);
		lost = ts_crash_now(&H);
		note_run("test_async_producer_no_phantom", run, lost);
		PQfinish(out);
		out = ts_connect(out_db);
		/* the relay's own asynchronous writes may be gone: it delivers
		 * again, and the consumer answers duplicate */
		ck_assert_msg(ts_wait_value(out, "SELECT outbox.backlog_empty()::int", 1, SETTLE_MS)
		    == 1, "run %d: not drained after the crash (logs %s, %s)", run, clog, rlog);
		int code = prove(out_db, in_db, since, text, sizeof(text));
		ck_assert_msg(code == 0, "run %d: after the producer's server crashed, outboxctl"
		    " prove exits %d (the crash lost the marker committed after the effects: %s):\n%s",
		    run, code, lost ? "yes" : "no", text);
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM crash_orders WHERE id LIKE '%s-%%'",
		    prefix);
		int64_t orders = ts_query_int(out, sql);
		ck_assert_msg(orders == ASYNC_MESSAGES, "run %d: the consumer applied %d messages"
		    " whose producer transaction, committed with synchronous_commit = off, was lost"
		    " when PostgreSQL stopped immediately (%lld of %d order rows left): effects"
		    " without their cause, delivered before the commit was on disk (the crash lost"
		    " the marker committed after them: %s; logs %s, %s)", run, ASYNC_MESSAGES,
		    (long long)orders, ASYNC_MESSAGES, lost ? "yes" : "no", clog, rlog);
	}
	ck_assert_msg(lost, "the crash lost nothing that was not on disk in %d runs",
	    TS_CRASH_TRIES);
	PQfinish(in);
	PQfinish(out);
	ts_stop(relay, SIGTERM);
	ts_stop(consumer, SIGTERM);
}
END_TEST

START_TEST(test_created_survives_a_crash)
{
	char db[TS_CONNINFO_MAX], key[32], sql[256];
	ts_crash_start(&H);
	ts_crash_db(&H, "app", "all", db, sizeof(db));
	struct ts_producer_server srv;
	ts_producer_serve(db, NULL, &srv);
	ts_crash_track(&H, srv.pid);
	struct ts_producer_reply r;
	/* its connections open and its statements prepared before the runs */
	ts_producer_post(srv.url, "warm", TS_PRODUCER_BODY, &r);
	ck_assert_int_eq(r.status, 201);

	bool lost = false;
	for (int run = 1; run <= TS_CRASH_TRIES && !lost; run++) {
		snprintf(key, sizeof(key), "created-%d", run);
		ts_crash_arm(&H);
		ts_producer_post(srv.url, key, TS_PRODUCER_BODY, &r);
		ck_assert_msg(r.status == 201, "%s: %d %s", key, r.status, r.body);
		/* the 201 is here: the crash, at once */
		lost = ts_crash_now(&H);
		note_run("test_created_survives_a_crash", run, lost);
		const char *mid = strstr(r.body, "\"message_id\" : ");
		ck_assert_msg(mid != NULL, "%s", r.body);
		snprintf(sql, sizeof(sql), "SELECT (SELECT count(*) FROM app.bug_reports WHERE"
		    " idempotency_key = '%s') + (SELECT count(*) FROM outbox.events WHERE"
		    " id = %lld)", key, atoll(mid + strlen("\"message_id\" : ")));
		int64_t rows = count(db, sql);
		ck_assert_msg(rows == 2, "run %d: the producer API answered 201 for %s, and after"
		    " PostgreSQL stopped immediately %lld of its 2 rows (report, message) were"
		    " left: it answered before its commit was on disk (the crash lost the marker"
		    " committed after it: %s; log %s)", run, key, (long long)rows,
		    lost ? "yes" : "no", srv.log);
	}
	ck_assert_msg(lost, "the crash lost nothing that was not on disk in %d runs",
	    TS_CRASH_TRIES);
	ts_stop(srv.pid, SIGTERM);
}
END_TEST

/* Wait until the target was called for key n times. */
static void
wait_acts(struct wt_target *t, const char *key, int n, const char *log)
{
	int64_t end = ts_now_ms() + SETTLE_MS;
	while (wt_acts(t, key) < n && ts_now_ms() < end)
		nng_msleep(10);
	ck_assert_msg(wt_acts(t, key) >= n, "the target was called %d times for %s, not %d (log %s)",
	    wt_acts(t, key), key, n, log);
}

START_TEST(test_at_most_once_call_survives_a_crash)
{
	char db[TS_CONNINFO_MAX], url[256], hook[256], log[256], key[32], detail[512];
	ts_crash_start(&H);
	ts_crash_db(&H, "inbox", "inbox", db, sizeof(db));
	struct wt_target *target = wt_start(hook, sizeof(hook));
	ck_assert_ptr_nonnull(target);
	ts_ipc_url("crash_amo", url, sizeof(url));
	/* a short lease: the claim left by the crash expires soon, and the
	 * redelivery then parks it (it never calls) */
	const char *args[] = { "--handler", "webhook", "--webhook-url", hook,
		"--webhook-at-most-once", "notify.*", "--webhook-timeout", "3s", "--webhook-lease",
		"4s", NULL };
	pid_t pid = ts_crash_track(&H, ts_consumer_spawn(log, db, url, args));
	struct ts_consumer_conn c;
	ts_consumer_open(&c, url);
	ck_assert_int_eq(call_until_final(&c, ts_consumer_msg(1, AMO_TOPIC, "warm", "{}"), NULL, 0),
	    OB_WIRE_APPLIED);

	bool lost = false;
	for (int run = 1; run <= TS_CRASH_TRIES && !lost; run++) {
		snprintf(key, sizeof(key), "amo-crash-%d", run);
		struct ob_wire_msg m = ts_consumer_msg((uint64_t)(10 + run), AMO_TOPIC, key, "{}");
		ts_crash_arm(&H);
		wt_gate_next(target, 1);
		ts_consumer_send(&c, &m, 1);
		/* the claim committed, the call made and held by the target */
		wait_acts(target, key, 1, log);
		lost = ts_crash_now(&H);
		note_run("test_at_most_once_call_survives_a_crash", run, lost);
		wt_release(target);
		/* that attempt's answer: it could not record the call */
		struct ts_consumer_reply r;
		ck_assert_int_eq(ts_consumer_recv(&c, &r, SETTLE_MS), 0);
		int first = r.rep.results[0].status;
		ts_consumer_reply_fini(&r);
		ck_assert_msg(first == OB_WIRE_RETRY, "run %d: the attempt cut by the crash: %d", run,
		    first);
		/* the redelivery: busy while the lease lives, then parked */
		int st = call_until_final(&c, m, detail, sizeof(detail));
		ck_assert_msg(wt_acts(target, key) == 1, "run %d: the at-most-once call %s was made"
		    " %d times: its claim, committed before the call, was lost when PostgreSQL"
		    " stopped during the call, and the redelivery called again (answer %d: %s;"
		    " the crash lost the marker committed after the claim: %s; log %s)", run, key,
		    wt_acts(target, key), st, detail, lost ? "yes" : "no", log);
		ck_assert_msg(st == OB_WIRE_REJECT && strstr(detail, "parked") != NULL,
		    "run %d: %d (%s)", run, st, detail);
		char sql[256];
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM inbox.webhook_calls WHERE"
		    " idempotency_key = '%s' AND state = 'unknown'", key);
		ck_assert_int_eq(count(db, sql), 1);
	}
	ck_assert_msg(lost, "the crash lost nothing that was not on disk in %d runs",
	    TS_CRASH_TRIES);
	ts_consumer_close(&c);
	ts_stop(pid, SIGTERM);
	wt_stop(target);
}
END_TEST

static void
add_case(Suite *s, const char *name, const TTest *t)
{
	TCase *tc = tcase_create(name);
	tcase_set_timeout(tc, 240);
	tcase_add_unchecked_fixture(tc, NULL, teardown);
	tcase_add_test(tc, t);
	suite_add_tcase(s, tc);
}

int
main(void)
{
	ts_crash_init(&H);
	Suite *s = suite_create("crash");
	add_case(s, "applied", test_applied_survives_a_crash);
	add_case(s, "pipeline", test_delivered_survives_an_inbox_crash);
	add_case(s, "async_producer", test_async_producer_no_phantom);
	add_case(s, "created", test_created_survives_a_crash);
	add_case(s, "at_most_once", test_at_most_once_call_survives_a_crash);
	int rc = ts_run_suite(s);
	ts_crash_fini(&H);
	return rc;
}
