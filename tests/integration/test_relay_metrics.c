/*
 * test_relay_metrics.c - the relay's /metrics, /healthz and /readyz against
 * a real PostgreSQL, real nng sockets and a real HTTP client (nng's): the
 * output passes `promtool check metrics` (when $OUTBOX_PROMTOOL exists),
 * and the numbers move as the relay works: delivered/retried/dead-lettered
 * by topic summed over two workers, pending and oldest-claimable-age fall
 * to 0, a stalled worker's fenced-out write counts in fenced_out_total and
 * lease_takeovers_total, a dead head shows as a blocked key, a consumer
 * that is down opens the breaker gauge. The endpoint is its own process:
 * stopped (SIGSTOP), delivery still completes; killed, it is restarted and
 * the counts are still there. Bad --metrics values and a port in use are
 * start-up errors. The log never shows a conninfo's password.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>
#include <nng/nng.h>

#include "outbox/buf.h"
#include "outbox/err.h"
#include "outbox/wire.h"
#include "testsupport.h"
#include "ts_relay.h"

#define T_SEC 1000

/* promtool check metrics on a scrape; SKIPPED (said on stderr) without it. */
static void
promtool_check(int port)
{
	char *text = ts_scrape(port);
	ts_promtool_check("test_relay_metrics", text);
	free(text);
}

/* Start the relay with --metrics on port 0 (wait_serving reads the port
 * its metrics process bound). */
static pid_t
metrics_relay_spawn(char *log, const char *db, const char *route, const char *const *extra)
{
	static const char *const metrics[] = { "--metrics", "127.0.0.1:0", "--metrics-interval",
		"200ms", "--poll-ms", "100", NULL };
	const char *args[64];
	return ts_relay_spawn(log, db, route, ts_args_cat(args, 64, metrics, extra));
}

/* The relay is up and its endpoint answers; returns the endpoint's port. */
static int
wait_serving(const char *log)
{
	ck_assert_int_ge(ts_log_wait(log, "relay.metrics.listening", 1, 30 * T_SEC), 1);
	int port = ts_log_wait_port(log, "relay.metrics.listening", 30 * T_SEC);
	ck_assert_int_eq(ts_http_wait_status(port, "GET", "/healthz", 200, 30 * T_SEC), 200);
	return port;
}

/* After a relay exited: no sanitizer report from any of its processes,
 * and the metrics process exited cleanly. */
static void
assert_clean_exit(const char *log)
{
	ck_assert_int_eq(ts_log_count(log, "Sanitizer"), 0);
	ck_assert_int_eq(ts_log_count(log, "runtime error:"), 0);
	char *text = ts_read_file(log);
	const char *last = NULL;
	for (const char *p = text; p != NULL && (p = strstr(p, "relay.metrics.exited")) != NULL; p++)
		last = p;
	ck_assert_ptr_nonnull(last);
	const char *eol = strchr(last, '\n');
	const char *ok = strstr(last, "exit:0"); /* text or json */
	ck_assert_msg(ok != NULL && (eol == NULL || ok < eol), "metrics process: %.*s",
	    eol ? (int)(eol - last) : 80, last);
	free(text);
}

static int64_t
delivered_in_db(PGconn *conn)
{
	return ts_query_int(conn, "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'");
}

/* Sum of key over every line containing event. */
static int64_t
log_sum(const char *path, const char *event, const char *key)
{
	char *text = ts_read_file(path);
	int64_t sum = 0;
	char k[64];
	snprintf(k, sizeof(k), " %s=", key);
	for (const char *p = text; p != NULL && (p = strstr(p, event)) != NULL; p++) {
		const char *eol = strchr(p, '\n');
		const char *kv = strstr(p, k);
		if (kv != NULL && (eol == NULL || kv < eol))
			sum += strtoll(kv + strlen(k), NULL, 10);
	}
	free(text);
	return sum;
}

START_TEST(test_endpoint_and_counters_move)
{
	char db[TS_CONNINFO_MAX], url[256], route[300], log[256];
	ts_db_create("rmet", "outbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	struct ts_fake_consumer fc;
	ts_fake_consumer_routed(&fc, "met", "*", TS_FAKE_APPLIED, url,
	    sizeof(url), route, sizeof(route));
	const char *extra[] = { "--workers", "2", "--batch", "5", "--max-inflight", "1",
		"--max-attempts", "2", "--backoff-base-ms", "10ms", "--backoff-cap-ms", "50ms",
		NULL };
	pid_t sup = metrics_relay_spawn(log, db, route, extra);
	int port = wait_serving(log);

	/* The endpoint: health, readiness, other paths and methods. */
	ck_assert_int_eq(ts_http_wait_status(port, "GET", "/readyz", 200, 30 * T_SEC), 200);
	ck_assert_int_eq(ts_http_local(port, "GET", "/nope", NULL), 404);
	ck_assert_int_eq(ts_http_local(port, "POST", "/metrics", NULL), 405);
	/* Every static series is there at 0 from the start. */
	char *text = ts_scrape(port);
	ck_assert_msg(ts_metric_value(text, "outbox_relay_claimed_total") == 0, "%s", text);
	ck_assert(ts_metric_value(text, "outbox_relay_fenced_out_total") == 0);
	ck_assert(ts_metric_value(text, "outbox_relay_lease_takeovers_total") == 0);
	ck_assert(ts_metric_value(text, "outbox_relay_inflight") == 0);
	ck_assert(ts_metric_value(text, "outbox_relay_blocked_keys") == 0);
	ck_assert(ts_metric_value(text, "outbox_relay_purged_total") == 0);
	char breaker[400];
	snprintf(breaker, sizeof(breaker), "outbox_relay_breaker_open{destination=\"%s\"}", url);
	ck_assert_msg(ts_metric_value(text, breaker) == 0, "%s not 0 in:\n%s", breaker, text);
	free(text);

	/* N messages, two workers: delivered_total{topic} == N. */
	const int N = 60;
	ts_enqueue_n(conn, "t", "a", N);
	ck_assert_int_eq(ts_wait_metric(port, "outbox_relay_delivered_total{topic=\"t\"}", N,
	    60 * T_SEC), N);
	ck_assert_int_eq(delivered_in_db(conn), N);
	ck_assert_int_eq(ts_wait_metric(port, "outbox_relay_pending", 0, 30 * T_SEC), 0);
	ck_assert(ts_metric(port, "outbox_relay_oldest_claimable_age_seconds") == 0);
	ck_assert_int_eq(ts_wait_metric(port, "outbox_relay_inflight", 0, 30 * T_SEC), 0);
	ck_assert(ts_metric(port, "outbox_relay_claimed_total") >= N);
	ck_assert(ts_metric(port, "outbox_relay_frames_sent_total") >= N / 5);
	ck_assert(ts_metric(port, "outbox_relay_delivery_seconds_count") >= N / 5);
	ck_assert(ts_metric(port, "outbox_relay_frames_failed_total") == 0);
	promtool_check(port);

	/* A rejecting consumer: dead letters by topic. A retrying one: one
	 * retry each, then (max-attempts 2) a dead letter. */
	atomic_store(&fc.mode, TS_FAKE_REJECT);
	ts_enqueue_n(conn, "r", "b", 3);
	ck_assert_int_eq(ts_wait_metric(port, "outbox_relay_dead_lettered_total{topic=\"r\"}", 3,
	    30 * T_SEC), 3);
	atomic_store(&fc.mode, TS_FAKE_RETRY);
	ts_enqueue_n(conn, "q", "c", 2);
	ck_assert_int_eq(ts_wait_metric(port, "outbox_relay_dead_lettered_total{topic=\"q\"}", 2,
	    30 * T_SEC), 2);
	ck_assert(ts_metric(port, "outbox_relay_retried_total{topic=\"q\"}") == 2);
	ck_assert(ts_metric(port, "outbox_relay_delivered_total{topic=\"t\"}") == N);

	/* A stopped endpoint never holds up delivery. */
	atomic_store(&fc.mode, TS_FAKE_APPLIED);
	pid_t mpid = (pid_t)ts_log_last_value(log, "relay.metrics.listening", "pid");
	ck_assert_int_gt(mpid, 0);
	ck_assert_int_eq(kill(mpid, SIGSTOP), 0);
	ts_enqueue_n(conn, "t", "d", 40);
	ck_assert_int_eq(ts_wait_value(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'", N + 40,
	    60 * T_SEC), N + 40);
	ck_assert_int_eq(kill(mpid, SIGCONT), 0);
	ck_assert_int_eq(ts_wait_metric(port, "outbox_relay_delivered_total{topic=\"t\"}", N + 40,
	    30 * T_SEC), N + 40);

	/* A killed endpoint is restarted; the counts live in shared memory.
	 * The new process binds port 0 afresh: its port is on its own line. */
	ck_assert_int_eq(kill(mpid, SIGKILL), 0);
	ck_assert_int_ge(ts_log_wait(log, "relay.metrics.listening", 2, 30 * T_SEC), 2);
	port = ts_log_wait_port(log, "relay.metrics.listening", 30 * T_SEC);
	ck_assert_int_eq(ts_http_wait_status(port, "GET", "/healthz", 200, 30 * T_SEC), 200);
	ck_assert(ts_metric(port, "outbox_relay_delivered_total{topic=\"t\"}") == N + 40);
	ck_assert_int_ne((pid_t)ts_log_last_value(log, "relay.metrics.listening", "pid"), mpid);

	/* The sum over the workers: each worker's own totals add up to it. */
	double claimed = ts_metric(port, "outbox_relay_claimed_total");
	kill(sup, SIGTERM);
	ck_assert_int_eq(ts_wait_exit(sup, 30 * T_SEC), 0);
	assert_clean_exit(log);
	ck_assert_int_eq(ts_log_count(log, "relay.worker.totals"), 2);
	ck_assert_int_eq(log_sum(log, "relay.worker.totals", "delivered"), N + 40);
	ck_assert_int_eq((int64_t)claimed, log_sum(log, "relay.worker.totals", "claimed"));
	ck_assert_int_eq(ts_log_count(log, "relay.metrics.stopped"), 1);
	ts_fake_consumer_stop(&fc);
	PQfinish(conn);
}
END_TEST

START_TEST(test_fenced_out_and_takeovers)
{
	char db[TS_CONNINFO_MAX], url[256], route[300], log[256];
	ts_db_create("rmfence", "outbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	struct ts_fake_consumer fc;
	ts_fake_consumer_routed(&fc, "mfence", "*", TS_FAKE_APPLIED, url,
	    sizeof(url), route, sizeof(route));
	/* The first claim's worker stalls 4 s past a 1.5 s lease; the other
	 * worker takes its messages over. */
	const char *extra[] = { "--workers", "2",
		"--fault-stall-after-claim", "1", "--fault-stall-ms", "4s",
		"--delivery-timeout-ms", "300ms", "--lease-ms", "1500ms",
		"--batch", "10", "--max-inflight", "1", NULL };
	pid_t sup = metrics_relay_spawn(log, db, route, extra);
	int port = wait_serving(log);
	ck_assert_int_eq(ts_log_wait(log, "relay.db.connected", 2, 30 * T_SEC), 2);
	ts_enqueue_n(conn, "t", "s", 4);
	ck_assert_int_eq(ts_log_wait(log, "relay.fault.stall ", 1, 30 * T_SEC), 1);
	/* The stalled claim holds k of them (both workers may have claimed at
	 * once): while it stalls, at least those k are in flight. */
	int64_t k = ts_log_last_value(log, "relay.fault.stall ", "messages");
	ck_assert(k >= 1 && k <= 4);
	int64_t end = ts_now_ms() + 10 * T_SEC;
	double inflight;
	while ((inflight = ts_metric(port, "outbox_relay_inflight")) < (double)k &&
	    ts_now_ms() < end)
		usleep(50 * 1000);
	ck_assert_msg(inflight >= (double)k, "inflight %g < %" PRId64, inflight, k);
	ck_assert_int_eq(ts_wait_value(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'", 4, 30 * T_SEC), 4);
	ck_assert_int_eq(ts_wait_metric(port, "outbox_relay_fenced_out_total", k, 30 * T_SEC), k);
	ck_assert(ts_metric(port, "outbox_relay_lease_takeovers_total") == k);
	/* Counted once: the fenced-out outcomes are not. */
	ck_assert(ts_metric(port, "outbox_relay_delivered_total{topic=\"t\"}") == 4);
	ck_assert(ts_metric(port, "outbox_relay_claimed_total") == 4 + k);
	ck_assert_int_eq(ts_wait_metric(port, "outbox_relay_inflight", 0, 10 * T_SEC), 0);
	promtool_check(port);
	kill(sup, SIGTERM);
	ck_assert_int_eq(ts_wait_exit(sup, 30 * T_SEC), 0);
	assert_clean_exit(log);
	ck_assert_int_eq(ts_log_last_value(log, "relay.totals", "fenced_out"), k);
	ts_fake_consumer_stop(&fc);
	PQfinish(conn);
}
END_TEST

START_TEST(test_blocked_key_and_breaker)
{
	char db[TS_CONNINFO_MAX], url[256], route[300], log[256];
	ts_db_create("rmblock", "outbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	struct ts_fake_consumer fc;
	ts_fake_consumer_routed(&fc, "mblock", "*", TS_FAKE_REJECT, url,
	    sizeof(url), route, sizeof(route));
	const char *extra[] = { "--workers", "2", "--delivery-timeout-ms", "300ms",
		"--lease-ms", "2s", "--breaker-threshold", "2", "--breaker-probe-interval", "200ms",
		"--backoff-base-ms", "10ms", "--backoff-cap-ms", "100ms", NULL };
	pid_t sup = metrics_relay_spawn(log, db, route, extra);
	int port = wait_serving(log);

	/* A dead head blocks its key (--on-dead-head block, the default). */
	ts_exec(conn, "SELECT outbox.enqueue('t', 'k-' || g, '{}', 'K')"
	    " FROM generate_series(1, 3) g");
	ck_assert_int_eq(ts_wait_metric(port, "outbox_relay_blocked_keys", 1, 30 * T_SEC), 1);
	ck_assert(ts_metric(port, "outbox_relay_dead_lettered_total{topic=\"t\"}") == 1);
	ck_assert_int_eq(ts_wait_metric(port, "outbox_relay_pending", 2, 30 * T_SEC), 2);
	/* Requeued and accepted: unblocked. */
	atomic_store(&fc.mode, TS_FAKE_APPLIED);
	ts_exec(conn, "SELECT outbox.requeue_dead(ARRAY(SELECT id FROM outbox.dead))");
	ck_assert_int_eq(ts_wait_metric(port, "outbox_relay_blocked_keys", 0, 30 * T_SEC), 0);
	ck_assert_int_eq(ts_wait_metric(port, "outbox_relay_pending", 0, 30 * T_SEC), 0);

	/* The consumer goes away: the destination's breaker opens. */
	char breaker[400];
	snprintf(breaker, sizeof(breaker), "outbox_relay_breaker_open{destination=\"%s\"}", url);
	ck_assert(ts_metric(port, breaker) == 0);
	ts_fake_consumer_stop(&fc);
	ts_enqueue_n(conn, "u", "e", 10);
	ck_assert_int_eq(ts_wait_metric(port, breaker, 1, 30 * T_SEC), 1);
	ck_assert(ts_metric(port, "outbox_relay_frames_failed_total") >= 2);
	ck_assert(ts_metric(port, "outbox_relay_oldest_claimable_age_seconds") >= 0);
	promtool_check(port);
	/* Back: a probe closes it and the rest is delivered. */
	ts_fake_consumer_start(&fc, url, TS_FAKE_APPLIED);
	ck_assert_int_eq(ts_wait_value(conn,
	    "SELECT count(*) FROM outbox.messages WHERE topic = 'u' AND status = 'delivered'", 10,
	    60 * T_SEC), 10);
	ck_assert_int_eq(ts_wait_metric(port, breaker, 0, 30 * T_SEC), 0);
	ck_assert_int_eq(ts_wait_metric(port, "outbox_relay_delivered_total{topic=\"u\"}", 10,
	    30 * T_SEC), 10);
	kill(sup, SIGTERM);
	ck_assert_int_eq(ts_wait_exit(sup, 30 * T_SEC), 0);
	assert_clean_exit(log);
	ts_fake_consumer_stop(&fc);
	PQfinish(conn);
}
END_TEST

/* /readyz follows the workers' database connections: a database that
 * refuses connections (ALLOW_CONNECTIONS false, which binds superusers
 * too) after the relay's connections are terminated makes it 503 while
 * /healthz stays 200; allowed again, ready again. */
START_TEST(test_readyz_follows_db)
{
	char db[TS_CONNINFO_MAX], url[256], route[300], log[256], sql[400];
	ts_db_create("rmready", "outbox", db, sizeof(db));
	const char *dn = NULL; /* the last dbname= wins */
	for (const char *p = db; (p = strstr(p, "dbname=")) != NULL; p++)
		dn = p;
	ck_assert_ptr_nonnull(dn);
	char name[128];
	snprintf(name, sizeof(name), "%.*s", (int)strcspn(dn + 7, " "), dn + 7);
	ts_ipc_url("mready", url, sizeof(url));
	snprintf(route, sizeof(route), "*=%s", url);
	const char *extra[] = { "--workers", "2", NULL };
	pid_t sup = metrics_relay_spawn(log, db, route, extra);
	int port = wait_serving(log);
	ck_assert_int_eq(ts_http_wait_status(port, "GET", "/readyz", 200, 30 * T_SEC), 200);
	PGconn *srv = ts_connect(ts_server_conninfo());
	snprintf(sql, sizeof(sql), "ALTER DATABASE \"%s\" ALLOW_CONNECTIONS false", name);
	ts_exec(srv, sql);
	snprintf(sql, sizeof(sql), "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
	    " WHERE datname = '%s' AND application_name = 'outbox-relay'", name);
	ts_exec(srv, sql);
	ck_assert_int_eq(ts_http_wait_status(port, "GET", "/readyz", 503, 30 * T_SEC), 503);
	ck_assert_int_eq(ts_http_local(port, "GET", "/healthz", NULL), 200);
	snprintf(sql, sizeof(sql), "ALTER DATABASE \"%s\" ALLOW_CONNECTIONS true", name);
	ts_exec(srv, sql);
	ck_assert_int_eq(ts_http_wait_status(port, "GET", "/readyz", 200, 30 * T_SEC), 200);
	kill(sup, SIGTERM);
	ck_assert_int_eq(ts_wait_exit(sup, 30 * T_SEC), 0);
	assert_clean_exit(log);
	PQfinish(srv);
}
END_TEST

/* Bad --metrics values and a port in use are start-up errors. */
START_TEST(test_bad_metrics_config)
{
	char db[TS_CONNINFO_MAX], out[16384];
	ts_db_create("rmbad", "outbox", db, sizeof(db));
	char *bad[] = { "outbox-relay", "--db", db, "--route", "*=ipc:///tmp/x",
		"--metrics", "nohostport", NULL };
	ck_assert_int_eq(ts_run(bad, NULL, out, sizeof(out), 30 * T_SEC), 2);
	ck_assert_msg(strstr(out, "--metrics") != NULL, "%s", out);
	char *path[] = { "outbox-relay", "--db", db, "--route", "*=ipc:///tmp/x",
		"--metrics", "127.0.0.1:9/metrics", NULL };
	ck_assert_int_eq(ts_run(path, NULL, out, sizeof(out), 30 * T_SEC), 2);
	char *interval[] = { "outbox-relay", "--db", db, "--route", "*=ipc:///tmp/x",
		"--metrics-interval", "10ms", NULL };
	ck_assert_int_eq(ts_run(interval, NULL, out, sizeof(out), 30 * T_SEC), 2);
	ck_assert_msg(strstr(out, "--metrics-interval") != NULL, "%s", out);
	char *env_argv[] = { "outbox-relay", "--db", db, "--route", "*=ipc:///tmp/x", NULL };
	char *env[] = { "OUTBOX_METRICS=http://h:99999", NULL };
	ck_assert_int_eq(ts_run(env_argv, env, out, sizeof(out), 30 * T_SEC), 2);
	ck_assert_msg(strstr(out, "port must be") != NULL, "%s", out);

	/* A port in use: exit 1 at start, nothing claimed. */
	int busy_port;
	int fd = ts_listen_local(&busy_port);
	char addr[64];
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", busy_port);
	PGconn *conn = ts_connect(db);
	ts_enqueue_n(conn, "t", "x", 2);
	char *busy[] = { "outbox-relay", "--db", db, "--route", "*=ipc:///tmp/x",
		"--metrics", addr, NULL };
	ck_assert_int_eq(ts_run(busy, NULL, out, sizeof(out), 60 * T_SEC), 1);
	ck_assert_msg(strstr(out, "relay.metrics.start_failed") != NULL, "%s", out);
	ck_assert_msg(strstr(out, "relay.worker.forked") == NULL, "%s", out);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.messages"
	    " WHERE attempts > 0"), 0);
	close(fd);
	PQfinish(conn);

	/* The reference generator's input. */
	char *md[] = { "outbox-relay", "--help-markdown", NULL };
	ck_assert_int_eq(ts_run(md, NULL, out, sizeof(out), 30 * T_SEC), 0);
	ck_assert_msg(strncmp(out, "### outbox-relay", 16) == 0, "%s", out);
	ck_assert(strstr(out, "`OUTBOX_METRICS`") != NULL);
}
END_TEST

/* A conninfo's password never reaches the log: not while running (json
 * lines, each one parsed), not in the start-up error of an unreachable
 * database (redacted to ***). */
START_TEST(test_password_never_logged)
{
	char db[TS_CONNINFO_MAX], url[256], route[300], log[256], pw[TS_CONNINFO_MAX + 64];
	ts_db_create("rmpw", "outbox", db, sizeof(db));
	snprintf(pw, sizeof(pw), "%s password=hunter2", db);
	PGconn *conn = ts_connect(db);
	struct ts_fake_consumer fc;
	ts_fake_consumer_routed(&fc, "mpw", "*", TS_FAKE_APPLIED, url,
	    sizeof(url), route, sizeof(route));
	const char *extra[] = { "--workers", "2", "--log-format", "json", "--log-level",
		"debug", NULL };
	pid_t sup = metrics_relay_spawn(log, pw, route, extra);
	(void)wait_serving(log);
	ts_enqueue_n(conn, "t", "p", 5);
	ck_assert_int_eq(ts_wait_value(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'", 5, 30 * T_SEC), 5);
	kill(sup, SIGTERM);
	ck_assert_int_eq(ts_wait_exit(sup, 30 * T_SEC), 0);
	assert_clean_exit(log);
	char *text = ts_read_file(log);
	ck_assert_ptr_nonnull(text);
	ck_assert_msg(strstr(text, "hunter2") == NULL, "password in the log:\n%s", text);
	ck_assert(strstr(text, "relay.db.connected") != NULL);
	int lines = 0;
	for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
		json_error_t jerr;
		json_t *j = json_loads(line, 0, &jerr);
		ck_assert_msg(j != NULL && json_is_object(j), "not a JSON object: %s", line);
		json_decref(j);
		lines++;
	}
	ck_assert_int_gt(lines, 5);
	free(text);

	char out[4096];
	char *bad[] = { "outbox-relay", "--db",
		"host=/nonexistent/sock port=1 dbname=x password=hunter2",
		"--route", "*=ipc:///tmp/x", NULL };
	ck_assert_int_eq(ts_run(bad, NULL, out, sizeof(out), 30 * T_SEC), 2);
	ck_assert_msg(strstr(out, "hunter2") == NULL, "%s", out);
	ck_assert_msg(strstr(out, "password=***") != NULL, "%s", out);
	ts_fake_consumer_stop(&fc);
	PQfinish(conn);
}
END_TEST

static Suite *
relay_metrics_suite(void)
{
	Suite *s = suite_create("relay_metrics");
	TCase *tc = tcase_create("metrics");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_endpoint_and_counters_move);
	tcase_add_test(tc, test_fenced_out_and_takeovers);
	tcase_add_test(tc, test_blocked_key_and_breaker);
	tcase_add_test(tc, test_readyz_follows_db);
	tcase_add_test(tc, test_bad_metrics_config);
	tcase_add_test(tc, test_password_never_logged);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	int rc = ts_run_suite(relay_metrics_suite());
	nng_fini();
	return rc;
}
