/*
 * test_webhook_fence.c - a fence the effect itself checks (issue 33 item
 * 1): the downstream, outbox-notify-sink --db, applies each call through
 * the inbox's SQL contract with the call's Outbox-Fence, and refuses a
 * call whose fence is lower than the one its message was applied under.
 *
 * The failure it closes: consumer A claims a message's key (token 1) and
 * stalls before its call (--fault-stall-before-call, as a process stopped
 * by SIGSTOP would) past its 1 s lease; consumer B takes the key over
 * (token 2) and the downstream applies it; then A wakes and makes its late
 * call with token 1. The downstream that deduplicates by key alone
 * (--ignore-fence, the broken mode) answers that call 200, a replay: a
 * holder that lost its lease is told its call went through. The real one
 * answers 409 stale_fence, so the refusal comes from the effect's own
 * check. One effect either way (the key at the downstream, and the
 * consumer's own record of B's delivery, see to that).
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "testsupport.h"
#include "ts_consumer.h"

/* A member of the sink's GET /stats (url: its http://HOST:PORT/notify). */
static long
sink_stat(const char *url, const char *name)
{
	char stats[512];
	snprintf(stats, sizeof(stats), "%.*s/stats", (int)(strchr(url + 7, '/') - url), url);
	struct ts_http_req req = { .url = stats };
	struct ts_http_res res;
	int status = ts_http(&req, &res);
	ck_assert_msg(status == 200, "GET %s: %d %s", stats, status, res.body ? res.body : "");
	json_error_t je;
	json_t *o = json_loads(res.body, 0, &je);
	ck_assert_msg(o != NULL, "stats: %s", res.body);
	long v = (long)json_integer_value(json_object_get(o, name));
	json_decref(o);
	free(res.body);
	return v;
}

static pid_t
start_sink(const char *db, bool ignore_fence, char *log, char *url, size_t urllen)
{
	char ready[512];
	snprintf(ready, sizeof(ready), "%s/sink-%d.url", ts_tmpdir(), ignore_fence);
	char *argv[] = { "outbox-notify-sink", "--http", "http://127.0.0.1:0", "--db", (char *)db,
		"--ready-file", ready, ignore_fence ? "--ignore-fence" : NULL, NULL };
	pid_t pid = ts_spawn(argv, NULL, log);
	char *line = ts_wait_ready_file(ready, pid, log, 20000);
	snprintf(url, urllen, "%s", line);
	free(line);
	return pid;
}

static pid_t
start_consumer(const char *db, const char *url, const char *hook, char *log, bool stall)
{
	const char *args[] = { "--handler", "webhook", "--webhook-url", hook, "--webhook-lease",
		"1s", "--webhook-timeout", "500ms", "--log-level", "debug",
		stall ? "--fault-stall-before-call" : NULL, "1", "--fault-slow-ms", "3s", NULL };
	return ts_consumer_spawn(log, db, url, args);
}

static void
late_call_run(bool ignore_fence)
{
	const char *tag = ignore_fence ? "fence_broken" : "fence_real";
	char sinkdb[TS_CONNINFO_MAX], db[TS_CONNINFO_MAX], sink_log[256], hook[256];
	char url_a[256], url_b[256], log_a[256], log_b[256], detail[512];
	ts_db_create(ignore_fence ? "fsinkb" : "fsinkr", "inbox", sinkdb, sizeof(sinkdb));
	ts_db_create(tag, "inbox", db, sizeof(db));
	pid_t sink = start_sink(sinkdb, ignore_fence, sink_log, hook, sizeof(hook));
	ts_ipc_url(ignore_fence ? "fence-ba" : "fence-ra", url_a, sizeof(url_a));
	ts_ipc_url(ignore_fence ? "fence-bb" : "fence-rb", url_b, sizeof(url_b));
	pid_t a = start_consumer(db, url_a, hook, log_a, true);
	pid_t b = start_consumer(db, url_b, hook, log_b, false);
	PGconn *conn = ts_connect(db), *sconn = ts_connect(sinkdb);
	struct ts_consumer_conn ca, cb;
	ts_consumer_open(&ca, url_a);
	ts_consumer_open(&cb, url_b);
	struct ob_wire_msg m = ts_consumer_msg(7, "notify.fence", "fence-1", "{\"text\":\"hi\"}");

	/* A claims the key (token 1) and stalls before its call; its lease ends */
	ts_consumer_send(&ca, &m, 1);
	ck_assert(ts_log_wait(log_a, "fault=consumer.webhook.stall_before_call", 1, 20000) >= 1);
	ck_assert_int_eq(ts_wait_value(conn, "SELECT count(*) FROM inbox.webhook_calls"
	    " WHERE lease_until < now()", 1, 10000), 1);
	/* B takes it over (token 2); the downstream applies it */
	ck_assert_int_eq(ts_consumer_call1(&cb, m, detail, sizeof(detail)), OB_WIRE_APPLIED);
	ck_assert_int_eq(ts_query_int(sconn, "SELECT fence FROM inbox.processed"
	    " WHERE idempotency_key = 'fence-1'"), 2);

	/* A wakes and calls late, with token 1 */
	int status = ts_consumer_recv1(&ca, detail, sizeof(detail));
	ck_assert_int_eq(sink_stat(hook, "requests"), 2);
	if (ignore_fence) {
		/* the downstream took the late call for a replay: 200, and A, told
		 * its call went through, answers as for a redelivery (its
		 * consumer's record, B's, says the message was applied) */
		ck_assert_msg(status == OB_WIRE_DUPLICATE, "%d %s", status, detail);
		ck_assert_int_eq(sink_stat(hook, "replays"), 1);
		ck_assert_int_eq(sink_stat(hook, "stale"), 0);
	} else {
		/* refused at the downstream, by the fence: A learns it was late */
		ck_assert_msg(status == OB_WIRE_RETRY, "%d %s", status, detail);
		ck_assert_int_eq(sink_stat(hook, "replays"), 0);
		ck_assert_int_eq(sink_stat(hook, "stale"), 1);
		ck_assert_msg(strstr(detail, "downstream answered 409") != NULL, "%s", detail);
		ck_assert(ts_log_wait(sink_log, "sink.stale_fence", 1, 5000) >= 1);
		char line[64];
		ts_log_wait_field(sink_log, "sink.stale_fence", "applied_fence", line, sizeof(line),
		    5000);
		ck_assert_str_eq(line, "2");
	}
	/* the verdicts themselves, asked of the sink's inbox as any service asks */
	static const struct {
		const char *fence, *payload, *verdict;
	} ask[] = {
		{ "1", "{\"text\":\"hi\"}", "stale" }, { "2", "{\"text\":\"hi\"}", "duplicate" },
		{ "3", "{\"text\":\"hi\"}", "duplicate" }, { "NULL", "{\"text\":\"hi\"}", "duplicate" },
		{ "1", "{\"text\":\"other\"}", "mismatch" },
	};
	for (size_t i = 0; i < sizeof(ask) / sizeof(ask[0]); i++) {
		char sql[512];
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM inbox.dedup_lookup(source => '',"
		    " topic => 'notify.fence', idempotency_key => 'fence-1', payload =>"
		    " convert_to('%s', 'UTF8'), fence => %s) WHERE verdict = '%s'", ask[i].payload,
		    ask[i].fence, ask[i].verdict);
		ck_assert_msg(ts_query_int(sconn, sql) == 1, "fence %s: not %s", ask[i].fence,
		    ask[i].verdict);
	}
	/* one effect, in the downstream's own database */
	ck_assert_int_eq(sink_stat(hook, "effects"), 1);
	ck_assert_int_eq(ts_query_int(sconn, "SELECT count(*) FROM inbox.notifications"
	    " WHERE idempotency_key = 'fence-1'"), 1);
	ts_consumer_close(&ca);
	ts_consumer_close(&cb);
	PQfinish(conn);
	PQfinish(sconn);
	ts_stop(a, SIGTERM);
	ts_stop(b, SIGTERM);
	ts_stop(sink, SIGTERM);
}

START_TEST(test_late_call_answered_as_replay_without_the_fence)
{
	late_call_run(true);
}
END_TEST

START_TEST(test_late_call_refused_by_the_fence)
{
	late_call_run(false);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("webhook_fence");
	TCase *tc = tcase_create("webhook_fence");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_late_call_answered_as_replay_without_the_fence);
	tcase_add_test(tc, test_late_call_refused_by_the_fence);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
