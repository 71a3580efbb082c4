/*
 * test_consumer_metrics.c - outbox-consumer's /metrics, /healthz and
 * /readyz against a real PostgreSQL, real nng sockets and a real HTTP
 * client (nng's): the output passes `promtool check metrics` (when
 * $OUTBOX_PROMTOOL exists), and the numbers move exactly: N applied, the
 * same N redelivered -> N duplicates, a key reused with another payload ->
 * one fingerprint-mismatch reject, a garbage frame -> one bad frame, the
 * webhook handler's calls by outcome; /readyz goes 503 when the database
 * is gone (its connections terminated, new ones refused) and 200 when it is
 * back. Bad --metrics values and a port in use are start-up errors. The
 * log never shows a conninfo's password. Every listener here binds port 0
 * and the test reads back the port it got: --metrics from the
 * consumer.metrics.listening line, --listen tcp://127.0.0.1:0 from the
 * --ready-file (and the consumer.started line); a --ready-file that cannot
 * be written is a start-up error.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <nng/nng.h>

#include "outbox/buf.h"
#include "outbox/err.h"
#include "outbox/wire.h"
#include "testsupport.h"
#include "ts_consumer.h"
#include "webhook_target.h"

#define T_SEC 1000
#define N_MSGS 10

#define ASSERT_METRIC(port, series, want)                                        \
	do {                                                                     \
		double v_ = ts_metric(port, series);                                \
		ck_assert_msg(v_ == (double)(want), "%s = %g, want %g", series, v_, \
		    (double)(want));                                             \
	} while (0)

/* promtool check metrics on a scrape; SKIPPED (said on stderr) without it. */
static void
promtool_check(int port)
{
	char *text = ts_scrape(port);
	ts_promtool_check("test_consumer_metrics", text);
	free(text);
}

/* Start the consumer with --metrics on port 0 (wait_serving reads the
 * port it bound). */
static pid_t
consumer_spawn(char *log, const char *db, const char *url, const char *const *extra)
{
	static const char *const metrics[] = { "--metrics", "127.0.0.1:0", NULL };
	const char *args[64];
	return ts_consumer_spawn(log, db, url, ts_args_cat(args, 64, metrics, extra));
}

/* The consumer is up and its endpoint answers; returns the endpoint's port. */
static int
wait_serving(const char *log)
{
	ck_assert_msg(ts_log_wait(log, "consumer.started", 1, 60 * T_SEC) >= 1, "never started: %s", log);
	int port = ts_log_wait_port(log, "consumer.metrics.listening", 30 * T_SEC);
	ck_assert_int_eq(ts_http_wait_status(port, "GET", "/healthz", 200, 30 * T_SEC), 200);
	return port;
}

/* The database name in a conninfo (the last dbname= wins). */
static void
db_name(const char *conninfo, char *out, size_t outlen)
{
	const char *dn = NULL;
	for (const char *p = conninfo; (p = strstr(p, "dbname=")) != NULL; p++)
		dn = p;
	ck_assert_ptr_nonnull(dn);
	snprintf(out, outlen, "%.*s", (int)strcspn(dn + 7, " "), dn + 7);
}

static void
assert_no_password_json_log(const char *log)
{
	char *text = ts_read_file(log);
	ck_assert_ptr_nonnull(text);
	ck_assert_msg(strstr(text, "hunter2") == NULL, "password in the log:\n%s", text);
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
}

/* The record handler: every counter moves by exactly what was sent; the
 * endpoint's paths and methods; readiness follows the database. The
 * conninfo carries password=hunter2 (the test server trusts), logs are
 * JSON at debug level: no line shows the password. */
START_TEST(test_counters_move_and_readiness)
{
	char db[TS_CONNINFO_MAX], pw[TS_CONNINFO_MAX + 64], url[256], log[256], sql[512];
	char name[128], series[160], payload[64];
	ts_db_create("cmetrics", "inbox", db, sizeof(db));
	db_name(db, name, sizeof(name));
	snprintf(pw, sizeof(pw), "%s password=hunter2", db);
	ts_ipc_url("cmetrics", url, sizeof(url));
	const char *extra[] = { "--threads", "2", "--log-format", "json", "--log-level", "debug",
		NULL };
	pid_t pid = consumer_spawn(log, pw, url, extra);
	int port = wait_serving(log);

	/* The endpoint. */
	ck_assert_int_eq(ts_http_wait_status(port, "GET", "/readyz", 200, 30 * T_SEC), 200);
	ck_assert_int_eq(ts_http_local(port, "GET", "/nope", NULL), 404);
	ck_assert_int_eq(ts_http_local(port, "POST", "/metrics", NULL), 405);
	/* Static series at 0 from the start. */
	ASSERT_METRIC(port, "outbox_consumer_requests_total", 0);
	ASSERT_METRIC(port, "outbox_consumer_rejected_total{reason=\"fingerprint_mismatch\"}", 0);
	ASSERT_METRIC(port, "outbox_consumer_retried_total{reason=\"database\"}", 0);
	ASSERT_METRIC(port, "outbox_consumer_bad_frames_total{reason=\"wire.magic\"}", 0);
	ASSERT_METRIC(port, "outbox_consumer_fingerprint_mismatch_total", 0);
	ASSERT_METRIC(port, "outbox_consumer_dedup_purged_total", 0);
	ASSERT_METRIC(port, "outbox_consumer_apply_seconds_count", 0);
	ASSERT_METRIC(port, "outbox_consumer_db_connections", 2);
	ck_assert(ts_metric(port, "outbox_consumer_applied_total{topic=\"t\"}") == -1);
	promtool_check(port);

	/* N applied, in one request. */
	struct ts_consumer_conn c;
	ts_consumer_open(&c, url);
	static char keys[N_MSGS][16];
	struct ob_wire_msg msgs[N_MSGS];
	for (int i = 0; i < N_MSGS; i++) {
		snprintf(keys[i], sizeof(keys[i]), "m-%d", i);
		msgs[i] = ts_consumer_msg((uint64_t)i + 1, "t", keys[i], "{\"n\":1}");
	}
	struct ts_consumer_reply r;
	ts_consumer_call(&c, msgs, N_MSGS, &r);
	for (int i = 0; i < N_MSGS; i++)
		ck_assert_int_eq(r.rep.results[i].status, OB_WIRE_APPLIED);
	ts_consumer_reply_fini(&r);
	ASSERT_METRIC(port, "outbox_consumer_applied_total{topic=\"t\"}", N_MSGS);
	ASSERT_METRIC(port, "outbox_consumer_duplicate_total{topic=\"t\"}", 0);
	ASSERT_METRIC(port, "outbox_consumer_requests_total", 1);
	ASSERT_METRIC(port, "outbox_consumer_batch_size_count", 1);
	ASSERT_METRIC(port, "outbox_consumer_batch_size_sum", N_MSGS);
	ASSERT_METRIC(port, "outbox_consumer_batch_size_bucket{le=\"5\"}", 0);
	ASSERT_METRIC(port, "outbox_consumer_batch_size_bucket{le=\"10\"}", 1);
	ASSERT_METRIC(port, "outbox_consumer_apply_seconds_count", 1);

	/* The same N redelivered: N duplicates, nothing applied. */
	ts_consumer_call(&c, msgs, N_MSGS, &r);
	for (int i = 0; i < N_MSGS; i++)
		ck_assert_int_eq(r.rep.results[i].status, OB_WIRE_DUPLICATE);
	ts_consumer_reply_fini(&r);
	ASSERT_METRIC(port, "outbox_consumer_duplicate_total{topic=\"t\"}", N_MSGS);
	ASSERT_METRIC(port, "outbox_consumer_applied_total{topic=\"t\"}", N_MSGS);
	ASSERT_METRIC(port, "outbox_consumer_apply_seconds_count", 2);

	/* A key reused with another payload: one fingerprint-mismatch reject. */
	snprintf(payload, sizeof(payload), "{\"n\":2}");
	ck_assert_int_eq(ts_consumer_call1(&c, ts_consumer_msg(1, "t", keys[0], payload), NULL, 0), OB_WIRE_REJECT);
	ASSERT_METRIC(port, "outbox_consumer_rejected_total{reason=\"fingerprint_mismatch\"}", 1);
	ASSERT_METRIC(port, "outbox_consumer_fingerprint_mismatch_total", 1);
	ASSERT_METRIC(port, "outbox_consumer_applied_total{topic=\"t\"}", N_MSGS);

	/* A garbage frame: an error reply and one bad frame under its wire error. */
	static const char garbage[] = "this is not an outbox frame at all";
	ts_consumer_send_raw(&c, garbage, sizeof(garbage) - 1);
	ck_assert_int_eq(ts_consumer_recv(&c, &r, TS_CONSUMER_REPLY_TIMEOUT_MS), 0);
	int ferr = r.rep.frame_err;
	ts_consumer_reply_fini(&r);
	ck_assert_int_gt(ferr, 0);
	snprintf(series, sizeof(series), "outbox_consumer_bad_frames_total{reason=\"%s\"}",
	    ob_err_name(ferr));
	ASSERT_METRIC(port, series, 1);
	ASSERT_METRIC(port, "outbox_consumer_requests_total", 4);
	/* Batch histograms count well-formed requests only. */
	ASSERT_METRIC(port, "outbox_consumer_batch_size_count", 3);
	PGconn *conn = ts_connect(db);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.notifications"), N_MSGS);
	PQfinish(conn);
	promtool_check(port);

	/* The database gone: connections terminated, new ones refused. The
	 * idle serving threads notice within CONSUMER_IDLE_CHECK_MS. */
	PGconn *srv = ts_connect(ts_server_conninfo());
	snprintf(sql, sizeof(sql), "ALTER DATABASE \"%s\" ALLOW_CONNECTIONS false", name);
	ts_exec(srv, sql);
	snprintf(sql, sizeof(sql), "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
	    " WHERE datname = '%s' AND application_name = 'outbox-consumer'", name);
	ts_exec(srv, sql);
	ck_assert_int_eq(ts_http_wait_status(port, "GET", "/readyz", 503, 30 * T_SEC), 503);
	ck_assert_int_eq(ts_http_local(port, "GET", "/healthz", NULL), 200);
	ck_assert_int_eq(ts_wait_metric(port, "outbox_consumer_db_connections", 0, 30 * T_SEC), 0);
	/* A message meanwhile: retry, counted under reason "database". */
	ck_assert_int_eq(ts_consumer_call1(&c, ts_consumer_msg(100, "t", "during-outage", "{}"), NULL, 0),
	    OB_WIRE_RETRY);
	ASSERT_METRIC(port, "outbox_consumer_retried_total{reason=\"database\"}", 1);
	ASSERT_METRIC(port, "outbox_consumer_applied_total{topic=\"t\"}", N_MSGS);
	snprintf(sql, sizeof(sql), "ALTER DATABASE \"%s\" ALLOW_CONNECTIONS true", name);
	ts_exec(srv, sql);
	ck_assert_int_eq(ts_http_wait_status(port, "GET", "/readyz", 200, 30 * T_SEC), 200);
	ck_assert_int_eq(ts_wait_metric(port, "outbox_consumer_db_connections", 2, 30 * T_SEC), 2);
	ck_assert_int_eq(ts_consumer_call1(&c, ts_consumer_msg(100, "t", "during-outage", "{}"), NULL, 0),
	    OB_WIRE_APPLIED);
	ASSERT_METRIC(port, "outbox_consumer_applied_total{topic=\"t\"}", N_MSGS + 1);
	PQfinish(srv);
	ts_consumer_close(&c);

	kill(pid, SIGTERM);
	ck_assert_int_eq(ts_wait_exit(pid, 30 * T_SEC), 0);
	ck_assert(ts_log_count(log, "consumer.db.reconnected") >= 2);
	assert_no_password_json_log(log);

	/* The start-up error of an unreachable database: redacted. */
	char out[4096];
	char *bad[] = { "outbox-consumer", "--db",
		"host=/nonexistent/sock port=1 dbname=x password=hunter2", "--listen", url, NULL };
	ck_assert_int_ne(ts_run(bad, NULL, out, sizeof(out), 30 * T_SEC), 0);
	ck_assert_msg(strstr(out, "hunter2") == NULL, "%s", out);
	ck_assert_msg(strstr(out, "password=***") != NULL, "%s", out);
}
END_TEST

/* The webhook handler: calls by outcome, retries by reason. */
START_TEST(test_webhook_outcomes)
{
	char db[TS_CONNINFO_MAX], url[256], log[256], hook[256];
	ts_db_create("cmhook", "inbox", db, sizeof(db));
	ts_ipc_url("cmhook", url, sizeof(url));
	struct wt_target *t = wt_start(hook, sizeof(hook));
	ck_assert_ptr_nonnull(t);
	const char *extra[] = { "--handler", "webhook", "--webhook-url", hook,
		"--webhook-timeout", "1s", "--webhook-lease", "5s", NULL };
	pid_t pid = consumer_spawn(log, db, url, extra);
	int port = wait_serving(log);
	ASSERT_METRIC(port, "outbox_consumer_webhook_calls_total{outcome=\"2xx\"}", 0);
	ASSERT_METRIC(port, "outbox_consumer_webhook_claims_total{event=\"replayed\"}", 0);
	promtool_check(port);

	struct ts_consumer_conn c;
	ts_consumer_open(&c, url);
	wt_fail_next(t, 1, 503);
	ck_assert_int_eq(ts_consumer_call1(&c, ts_consumer_msg(1, "hook", "h-1", "{}"), NULL, 0), OB_WIRE_RETRY);
	ASSERT_METRIC(port, "outbox_consumer_webhook_calls_total{outcome=\"5xx\"}", 1);
	ASSERT_METRIC(port, "outbox_consumer_retried_total{reason=\"handler\"}", 1);
	ck_assert_int_eq(ts_consumer_call1(&c, ts_consumer_msg(1, "hook", "h-1", "{}"), NULL, 0), OB_WIRE_APPLIED);
	ASSERT_METRIC(port, "outbox_consumer_webhook_calls_total{outcome=\"2xx\"}", 1);
	ASSERT_METRIC(port, "outbox_consumer_applied_total{topic=\"hook\"}", 1);
	ck_assert_int_eq(ts_consumer_call1(&c, ts_consumer_msg(1, "hook", "h-1", "{}"), NULL, 0),
	    OB_WIRE_DUPLICATE);
	ASSERT_METRIC(port, "outbox_consumer_duplicate_total{topic=\"hook\"}", 1);
	wt_fail_next(t, 1, 400);
	ck_assert_int_eq(ts_consumer_call1(&c, ts_consumer_msg(2, "hook", "h-2", "{}"), NULL, 0), OB_WIRE_REJECT);
	ASSERT_METRIC(port, "outbox_consumer_webhook_calls_total{outcome=\"4xx\"}", 1);
	ASSERT_METRIC(port, "outbox_consumer_rejected_total{reason=\"handler\"}", 1);
	ck_assert_int_eq(wt_total(t), 3);
	ASSERT_METRIC(port, "outbox_consumer_webhook_calls_total{outcome=\"timeout\"}", 0);
	promtool_check(port);
	ts_consumer_close(&c);
	kill(pid, SIGTERM);
	ck_assert_int_eq(ts_wait_exit(pid, 30 * T_SEC), 0);
	wt_stop(t);
}
END_TEST

/* Bad --metrics values exit 2; a port in use exits 1 at start. */
START_TEST(test_bad_metrics_config)
{
	char db[TS_CONNINFO_MAX], url[256], out[4096];
	ts_db_create("cmbad", "inbox", db, sizeof(db));
	ts_ipc_url("cmbad", url, sizeof(url));
	char *bad[] = { "outbox-consumer", "--db", db, "--listen", url, "--metrics", "nohostport",
		NULL };
	ck_assert_int_eq(ts_run(bad, NULL, out, sizeof(out), 30 * T_SEC), 2);
	ck_assert_msg(strstr(out, "--metrics") != NULL, "%s", out);
	char *path[] = { "outbox-consumer", "--db", db, "--listen", url, "--metrics",
		"127.0.0.1:9/metrics", NULL };
	ck_assert_int_eq(ts_run(path, NULL, out, sizeof(out), 30 * T_SEC), 2);
	char *env_argv[] = { "outbox-consumer", "--db", db, "--listen", url, NULL };
	char *env[] = { "OUTBOX_METRICS=http://h:99999", NULL };
	ck_assert_int_eq(ts_run(env_argv, env, out, sizeof(out), 30 * T_SEC), 2);
	ck_assert_msg(strstr(out, "--metrics") != NULL, "%s", out);

	int busy_port;
	int fd = ts_listen_local(&busy_port);
	char addr[64];
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", busy_port);
	char *busy[] = { "outbox-consumer", "--db", db, "--listen", url, "--metrics", addr, NULL };
	ck_assert_int_eq(ts_run(busy, NULL, out, sizeof(out), 30 * T_SEC), 1);
	ck_assert_msg(strstr(out, "--metrics") != NULL, "%s", out);
	close(fd);
}
END_TEST

/* --listen tcp://127.0.0.1:0: the consumer binds a free port itself and
 * says which, in its --ready-file and in consumer.started alike; a
 * request sent to that URL is applied. */
START_TEST(test_listen_port_zero)
{
	char db[TS_CONNINFO_MAX], log[256], ready[300], logged[300];
	ts_db_create("cmport0", "inbox", db, sizeof(db));
	snprintf(ready, sizeof(ready), "%s/consumer-port0.url", ts_tmpdir());
	char *argv[] = { "outbox-consumer", "--db", db, "--listen", "tcp://127.0.0.1:0",
		"--ready-file", ready, "--threads", "2", NULL };
	pid_t pid = ts_spawn(argv, NULL, log);
	char *url = ts_wait_ready_file(ready, pid, log, 60 * T_SEC);
	const char *prefix = "tcp://127.0.0.1:";
	ck_assert_msg(strncmp(url, prefix, strlen(prefix)) == 0, "ready file: %s", url);
	char *rest;
	long port = strtol(url + strlen(prefix), &rest, 10);
	ck_assert_msg(*rest == '\0' && port > 0 && port <= 65535, "ready file: %s", url);
	ts_log_wait_field(log, "consumer.started", "listen", logged, sizeof(logged), 30 * T_SEC);
	ck_assert_str_eq(logged, url);

	struct ts_consumer_conn c;
	ts_consumer_open(&c, url);
	ck_assert_int_eq(ts_consumer_call1(&c, ts_consumer_msg(1, "t", "port-zero", "{}"), NULL, 0),
	    OB_WIRE_APPLIED);
	ts_consumer_close(&c);
	PGconn *conn = ts_connect(db);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.notifications"), 1);
	PQfinish(conn);
	kill(pid, SIGTERM);
	ck_assert_int_eq(ts_wait_exit(pid, 30 * T_SEC), 0);
	free(url);
}
END_TEST

/* A --ready-file (or OUTBOX_READY_FILE) in a directory that does not
 * exist: exit 1 at start, one line naming the flag, the path and why. */
START_TEST(test_bad_ready_file)
{
	char db[TS_CONNINFO_MAX], url[256], bad[300], out[4096];
	static char env_bad[400];
	ts_db_create("cmbadready", "inbox", db, sizeof(db));
	ts_ipc_url("cmbadready", url, sizeof(url));
	snprintf(bad, sizeof(bad), "%s/no-such-dir/consumer.url", ts_tmpdir());
	char *flag[] = { "outbox-consumer", "--db", db, "--listen", url, "--ready-file", bad,
		NULL };
	ck_assert_int_eq(ts_run(flag, NULL, out, sizeof(out), 30 * T_SEC), 1);
	ck_assert_msg(strstr(out, "--ready-file") != NULL && strstr(out, bad) != NULL &&
	    strstr(out, "No such file or directory") != NULL, "%s", out);
	ck_assert_msg(strstr(out, "consumer.started") == NULL, "%s", out);

	snprintf(env_bad, sizeof(env_bad), "OUTBOX_READY_FILE=%s", bad);
	char *env[] = { env_bad, NULL };
	char *env_argv[] = { "outbox-consumer", "--db", db, "--listen", url, NULL };
	ck_assert_int_eq(ts_run(env_argv, env, out, sizeof(out), 30 * T_SEC), 1);
	ck_assert_msg(strstr(out, "--ready-file") != NULL && strstr(out, bad) != NULL, "%s",
	    out);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("consumer_metrics");
	TCase *tc = tcase_create("metrics");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_counters_move_and_readiness);
	tcase_add_test(tc, test_webhook_outcomes);
	tcase_add_test(tc, test_bad_metrics_config);
	tcase_add_test(tc, test_listen_port_zero);
	tcase_add_test(tc, test_bad_ready_file);
	suite_add_tcase(s, tc);
	int rc = ts_run_suite(s);
	nng_fini();
	return rc;
}
