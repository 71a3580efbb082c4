/*
 * test_producer_metrics.c - `outbox-producer serve --metrics ADDR` against a
 * real PostgreSQL and a real HTTP client (nng's): the counters move exactly
 * as the requests say (create, replay, 409 held by the slow fault, 422,
 * 400s, lookups), the route label is the pattern and never a raw path, the
 * output passes `promtool check metrics` (when $OUTBOX_PROMTOOL exists), a
 * taken-over key counts one takeover and one fenced-out commit, the key GC
 * counts what it deletes, /readyz follows the database connection, other
 * paths and methods get 404/405, and no subcommand ever prints or logs the
 * password of a conninfo.
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>
#include <nng/nng.h>

#include "testsupport.h"
#include "ts_producer.h"

#define SECRET "hunter2"

/* A fresh database; its conninfo with a password appended (the throwaway
 * server trusts local connections, so libpq's password is never asked for,
 * but it is part of what the program was given). */
static PGconn *
fresh_db(char *db, size_t dblen, char *secret_db, size_t secretlen)
{
	ts_db_create("prodmetrics", "outbox", db, dblen);
	snprintf(secret_db, secretlen, "%s password=" SECRET, db);
	return ts_connect(db);
}

/* Serve with --metrics on port 0; murl gets the base of the port it bound
 * (read back from its producer.metrics.listening line). */
static void
serve_metrics(const char *db, char *const extra[], struct ts_producer_server *s, char *murl,
    size_t murllen)
{
	char *argv[32] = { "--metrics", "127.0.0.1:0", "--log-level", "debug" };
	int argc = 4;
	for (int i = 0; extra != NULL && extra[i] != NULL && argc < 30; i++)
		argv[argc++] = extra[i];
	argv[argc] = NULL;
	ts_producer_serve(db, argv, s);
	snprintf(murl, murllen, "http://127.0.0.1:%d",
	    ts_log_wait_port(s->log, "producer.metrics.listening", 30000));
}

/* GET base+path; the status, the body into out. */
static int
get(const char *base, const char *method, const char *path, struct ts_producer_reply *out)
{
	ts_producer_http(base, method, path, NULL, NULL, 0, out);
	ck_assert_msg(out->rv == 0, "%s %s%s: %s", method, base, path, nng_strerror(out->rv));
	return out->status;
}

/* The whole /metrics text (owned). */
static char *
scrape(const char *murl)
{
	char u[512];
	struct ts_http_res r;
	snprintf(u, sizeof(u), "%s/metrics", murl);
	struct ts_http_req q = { .url = u, .timeout_ms = 20000 };
	ts_http(&q, &r);
	ck_assert_int_eq(r.rv, 0);
	ck_assert_int_eq(r.status, 200);
	return r.body;
}

static double
metric(const char *murl, const char *series)
{
	char *text = scrape(murl);
	double v = ts_metric_value(text, series);
	free(text);
	return v;
}

#define REQ(method, route, status)                                                   \
	"outbox_producer_requests_total{method=\"" method "\",route=\"" route "\",status=\"" \
	    status "\"}"

/* Poll until series equals want (the counters move after the answer is
 * written, so a scrape right after a reply may be a moment early). */
static void
expect(const char *murl, const char *series, double want)
{
	int64_t deadline = ts_now_ms() + 10000;
	double v;
	while ((v = metric(murl, series)) != want && ts_now_ms() < deadline)
		usleep(10000);
	ck_assert_msg(v == want, "%s = %g, want %g", series, v, want);
}

START_TEST(test_counters_move)
{
	char db[TS_CONNINFO_MAX], sdb[TS_CONNINFO_MAX + 32], murl[80], path[64];
	PGconn *c = fresh_db(db, sizeof(db), sdb, sizeof(sdb));
	struct ts_producer_server s;
	struct ts_producer_reply r;
	char *extra[] = { "--fault-slow", "1", "--fault-slow-ms", "1500ms", NULL };
	serve_metrics(sdb, extra, &s, murl, sizeof(murl));

	/* Before any request: the event counters are there, at 0. */
	char *text = scrape(murl);
	ck_assert(ts_metric_value(text, "outbox_producer_replays_total") == 0);
	ck_assert(ts_metric_value(text, "outbox_producer_conflicts_total") == 0);
	ck_assert(ts_metric_value(text, "outbox_producer_key_mismatch_total") == 0);
	ck_assert(ts_metric_value(text, "outbox_producer_takeovers_total") == 0);
	ck_assert(ts_metric_value(text, "outbox_producer_fenced_out_total") == 0);
	ck_assert(ts_metric_value(text, "outbox_producer_keys_collected_total") == 0);
	ck_assert(ts_metric_value(text,
	    "outbox_producer_request_seconds_count{route=\"/v1/reports\"}") == 0);
	ck_assert(strstr(text, "outbox_producer_requests_total{") == NULL);
	free(text);

	/* A create held in the slow point; the same key meanwhile: 409. */
	struct ts_producer_poster a = { .url = s.url, .key = "m-1" };
	pthread_create(&a.t, NULL, ts_producer_poster_main, &a);
	ts_assert_logged(s.log, "fault=producer.slow");
	ts_producer_post(s.url, "m-1", TS_PRODUCER_BODY, &r);
	ck_assert_int_eq(r.status, 409);
	pthread_join(a.t, NULL);
	ck_assert_int_eq(a.r.status, 201);
	long long id = ts_producer_report_id(a.r.body);
	/* Replay, 422, two 400s (no key; bad JSON), a second create. */
	ts_producer_post(s.url, "m-1", TS_PRODUCER_BODY, &r);
	ck_assert_int_eq(r.status, 201);
	ck_assert(r.replayed);
	ts_producer_post(s.url, "m-1", "{\"title\":\"Other\",\"module\":\"editor\",\"severity\":\"high\"}",
	    &r);
	ck_assert_int_eq(r.status, 422);
	ts_producer_post(s.url, NULL, TS_PRODUCER_BODY, &r);
	ck_assert_int_eq(r.status, 400);
	ts_producer_post(s.url, "m-bad", "{\"title\": ", &r);
	ck_assert_int_eq(r.status, 400);
	ts_producer_post(s.url, "m-2", TS_PRODUCER_BODY, &r);
	ck_assert_int_eq(r.status, 201);
	ck_assert(!r.replayed);
	/* Lookups: by key (route /v1/reports), by id (route /v1/reports/{id}). */
	ck_assert_int_eq(get(s.url, "GET", "/v1/reports?idempotency_key=m-1", &r), 200);
	snprintf(path, sizeof(path), "/v1/reports/%lld", id);
	ck_assert_int_eq(get(s.url, "GET", path, &r), 200);
	ck_assert_int_eq(get(s.url, "GET", "/v1/reports/99999", &r), 404);
	ck_assert_int_eq(get(s.url, "GET", "/healthz", &r), 200);

	expect(murl, REQ("POST", "/v1/reports", "201"), 3); /* create, replay, create */
	expect(murl, REQ("POST", "/v1/reports", "409"), 1);
	expect(murl, REQ("POST", "/v1/reports", "422"), 1);
	expect(murl, REQ("POST", "/v1/reports", "400"), 2);
	expect(murl, REQ("GET", "/v1/reports", "200"), 1);
	expect(murl, REQ("GET", "/v1/reports/{id}", "200"), 1);
	expect(murl, REQ("GET", "/v1/reports/{id}", "404"), 1);
	expect(murl, REQ("GET", "/healthz", "200"), 1);
	text = scrape(murl);
	ck_assert(ts_metric_value(text, "outbox_producer_replays_total") == 1);
	ck_assert(ts_metric_value(text, "outbox_producer_conflicts_total") == 1);
	ck_assert(ts_metric_value(text, "outbox_producer_key_mismatch_total") == 1);
	ck_assert(ts_metric_value(text, "outbox_producer_takeovers_total") == 0);
	ck_assert(ts_metric_value(text, "outbox_producer_fenced_out_total") == 0);
	ck_assert(ts_metric_value(text,
	    "outbox_producer_request_seconds_count{route=\"/v1/reports\"}") == 8);
	ck_assert(ts_metric_value(text,
	    "outbox_producer_request_seconds_count{route=\"/v1/reports/{id}\"}") == 2);
	/* The slow create alone took 1.5 s. */
	ck_assert(ts_metric_value(text,
	    "outbox_producer_request_seconds_sum{route=\"/v1/reports\"}") >= 1.5);
	ck_assert(ts_metric_value(text,
	    "outbox_producer_request_seconds_bucket{route=\"/v1/reports\",le=\"+Inf\"}") == 8);
	ck_assert(ts_metric_value(text,
	    "outbox_producer_request_seconds_bucket{route=\"/v1/reports\",le=\"1\"}") <= 7);
	/* Never the raw path. */
	snprintf(path, sizeof(path), "route=\"/v1/reports/%lld\"", id);
	ck_assert(strstr(text, path) == NULL);
	ck_assert(strstr(text, "/v1/reports/99999") == NULL); /* not a float that happens to hold 99999 */
	ck_assert(strstr(text, "idempotency_key") == NULL);
	ts_promtool_check("test_producer_metrics", text);
	free(text);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.bug_reports"), 2);

	/* The endpoint's own routes. */
	ck_assert_int_eq(get(murl, "GET", "/healthz", &r), 200);
	ck_assert_int_eq(get(murl, "GET", "/readyz", &r), 200);
	ck_assert_int_eq(get(murl, "GET", "/nope", &r), 404);
	ck_assert_int_eq(get(murl, "POST", "/metrics", &r), 405);

	ts_stop(s.pid, SIGTERM);
	/* The log saw the bad requests and the whole run, never the password. */
	ck_assert((ts_log_count(s.log, "producer.started") > 0));
	ck_assert_msg(!(ts_log_count(s.log, SECRET) > 0), "the log shows the password: %s", s.log);
	PQfinish(c);
}
END_TEST

/* Lease 0.5 s, first request processing 0.8 s: the second request takes
 * the key over; the first one's final commit is fenced out. */
START_TEST(test_takeover_and_fenced_out)
{
	char db[TS_CONNINFO_MAX], sdb[TS_CONNINFO_MAX + 32], murl[80];
	PGconn *c = fresh_db(db, sizeof(db), sdb, sizeof(sdb));
	struct ts_producer_server s;
	struct ts_producer_reply r;
	char *extra[] = { "--lease", "500ms", "--max-processing", "400ms", "--fault-slow", "1",
		"--fault-slow-ms", "800ms", NULL };
	serve_metrics(sdb, extra, &s, murl, sizeof(murl));
	struct ts_producer_poster a = { .url = s.url, .key = "t-1" };
	pthread_create(&a.t, NULL, ts_producer_poster_main, &a);
	ts_wait_value(c, "SELECT count(*) FROM app.idempotency_keys WHERE state = 'started'"
	    " AND lease_until < clock_timestamp()", 1, 20000);
	ts_producer_post(s.url, "t-1", TS_PRODUCER_BODY, &r);
	ck_assert_int_eq(r.status, 201);
	ck_assert(!r.replayed);
	pthread_join(a.t, NULL);
	ck_assert_int_eq(a.r.status, 201);
	ck_assert(a.r.replayed); /* fenced out: the winner's stored answer */
	expect(murl, "outbox_producer_takeovers_total", 1);
	expect(murl, "outbox_producer_fenced_out_total", 1);
	expect(murl, "outbox_producer_replays_total", 1);
	expect(murl, REQ("POST", "/v1/reports", "201"), 2);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.bug_reports"), 1);
	ts_stop(s.pid, SIGTERM);
	ck_assert(!(ts_log_count(s.log, SECRET) > 0));
	PQfinish(c);
}
END_TEST

START_TEST(test_keys_collected)
{
	char db[TS_CONNINFO_MAX], sdb[TS_CONNINFO_MAX + 32], murl[80], key[16];
	PGconn *c = fresh_db(db, sizeof(db), sdb, sizeof(sdb));
	struct ts_producer_server s;
	struct ts_producer_reply r;
	char *extra[] = { "--key-retention", "1s", "--gc-interval", "200ms", "--gc-batch", "2",
		NULL };
	serve_metrics(sdb, extra, &s, murl, sizeof(murl));
	for (int i = 0; i < 3; i++) {
		snprintf(key, sizeof(key), "gc-%d", i);
		ts_producer_post(s.url, key, TS_PRODUCER_BODY, &r);
		ck_assert_int_eq(r.status, 201);
	}
	ck_assert_int_eq(ts_wait_value(c, "SELECT count(*) FROM app.idempotency_keys", 0, 30000), 0);
	expect(murl, "outbox_producer_keys_collected_total", 3);
	ts_stop(s.pid, SIGTERM);
	PQfinish(c);
}
END_TEST

/* /readyz: 503 once the serving thread's connection broke, 200 again once
 * a request reconnected it. One serving thread, so that the broken
 * connection is the one the next requests use. */
START_TEST(test_readyz_follows_db)
{
	char db[TS_CONNINFO_MAX], sdb[TS_CONNINFO_MAX + 32], murl[80];
	PGconn *c = fresh_db(db, sizeof(db), sdb, sizeof(sdb));
	struct ts_producer_server s;
	struct ts_producer_reply r;
	char *extra[] = { "--threads", "1", "--gc-interval", "24h", NULL };
	serve_metrics(sdb, extra, &s, murl, sizeof(murl));
	ck_assert_int_eq(get(murl, "GET", "/readyz", &r), 200);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(pg_terminate_backend(pid))"
	    "  FROM pg_stat_activity WHERE application_name = 'outbox-producer'"
	    "   AND datname = current_database()"), 1);
	/* The request that finds the connection dead: 503, and not ready. */
	ts_producer_post(s.url, "r-1", TS_PRODUCER_BODY, &r);
	ck_assert_int_eq(r.status, 503);
	ck_assert_int_eq(get(murl, "GET", "/readyz", &r), 503);
	/* The next request reconnects: ready again. */
	ts_producer_post(s.url, "r-1", TS_PRODUCER_BODY, &r);
	ck_assert_int_eq(r.status, 201);
	ck_assert_int_eq(get(murl, "GET", "/readyz", &r), 200);
	expect(murl, REQ("POST", "/v1/reports", "503"), 1);
	ts_stop(s.pid, SIGTERM);
	ck_assert(!(ts_log_count(s.log, SECRET) > 0));
	PQfinish(c);
}
END_TEST

/* Every subcommand that takes a conninfo, failing to connect or with a
 * bad flag next to it: the password is never printed. Bad --metrics values
 * are start-up errors (exit 2). */
START_TEST(test_no_password_printed)
{
	char out[8192];
	const char *bad = "host=/nonexistent port=1 dbname=x user=u password=" SECRET;
	const char *uri = "postgresql://u:" SECRET "@/x?host=/nonexistent&port=1";
	const char *dbs[] = { bad, uri };
	for (int i = 0; i < 2; i++) {
		char *serve[] = { "outbox-producer", "serve", "--db", (char *)dbs[i], "--http",
			"http://127.0.0.1:0", "--metrics", "127.0.0.1:0", NULL };
		int rc = ts_run(serve, NULL, out, sizeof(out), 60000);
		ck_assert_int_eq(rc, 1);
		ck_assert_msg(strstr(out, SECRET) == NULL, "serve printed the password: %s", out);
		ck_assert_msg(strstr(out, "***") != NULL, "serve: %s", out);
		char *enq[] = { "outbox-producer", "enqueue", "--db", (char *)dbs[i], NULL };
		rc = ts_run(enq, NULL, out, sizeof(out), 60000);
		ck_assert_int_ne(rc, 0);
		ck_assert_msg(strstr(out, SECRET) == NULL, "enqueue printed the password: %s", out);
		char *mx[] = { "outbox-producer", "matrix", "--db", (char *)dbs[i], NULL };
		rc = ts_run(mx, NULL, out, sizeof(out), 60000);
		ck_assert_int_ne(rc, 0);
		ck_assert_msg(strstr(out, SECRET) == NULL, "matrix printed the password: %s", out);
	}
	/* Bad flags next to a secret conninfo. */
	const char *badmetrics[] = { "nonsense", "127.0.0.1:99999", "http://h:1/path" };
	for (int i = 0; i < 3; i++) {
		char *argv[] = { "outbox-producer", "serve", "--db", (char *)bad, "--metrics",
			(char *)badmetrics[i], NULL };
		int rc = ts_run(argv, NULL, out, sizeof(out), 60000);
		ck_assert_msg(rc == 2, "--metrics %s: rc %d: %s", badmetrics[i], rc, out);
		ck_assert(strstr(out, "--metrics") != NULL);
		ck_assert(strstr(out, SECRET) == NULL);
	}
	char *badflag[] = { "outbox-producer", "serve", "--db", (char *)bad, "--threads", "257",
		NULL };
	ck_assert_int_eq(ts_run(badflag, NULL, out, sizeof(out), 60000), 2);
	ck_assert(strstr(out, SECRET) == NULL);
	/* The config reference names the flag and its variable. */
	char *md[] = { "outbox-producer", "--help-markdown", NULL };
	ck_assert_int_eq(ts_run(md, NULL, out, sizeof(out), 60000), 0);
	ck_assert(strstr(out, "### outbox-producer serve") != NULL);
	ck_assert(strstr(out, "`OUTBOX_METRICS`") != NULL);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("producer_metrics");
	TCase *tc = tcase_create("metrics");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_counters_move);
	tcase_add_test(tc, test_takeover_and_fenced_out);
	tcase_add_test(tc, test_keys_collected);
	tcase_add_test(tc, test_readyz_follows_db);
	tcase_add_test(tc, test_no_password_printed);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
