/*
 * test_producer_api.c - the producer's HTTP API against a real PostgreSQL
 * and a real `outbox-producer serve`: create/replay/422/lookup, bad input
 * (nothing stored, the server keeps serving), the lease check at start-up,
 * a key left by a dead process (409 within the lease, taken over after),
 * a concurrent same-key pair, the slow request taken over (fencing off: 2
 * reports; on: 1, both callers with the same id), and key expiry.
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <jansson.h>
#include <nng/nng.h>

#include "outbox/err.h"
#include "report_input.h"
#include "testsupport.h"
#include "ts_producer.h"

static PGconn *
fresh_db(char *db, size_t dblen)
{
	ts_db_create("prodapi", "outbox", db, dblen);
	return ts_connect(db);
}

START_TEST(test_create_replay_mismatch_lookup)
{
	char db[TS_CONNINFO_MAX], path[128];
	PGconn *c = fresh_db(db, sizeof(db));
	struct ts_producer_server s;
	struct ts_producer_reply r;
	ts_producer_serve(db, NULL, &s);

	ts_producer_post(s.url, "k1", TS_PRODUCER_BODY, &r);
	ck_assert_int_eq(r.status, 201);
	ck_assert(!r.replayed);
	long long id = ts_producer_report_id(r.body);
	ck_assert_int_gt(id, 0);
	/* Same key, same body in another member order, quoted key: replayed. */
	ts_producer_post(s.url, "\"k1\"",
	    "{\"severity\":\"high\", \"module\":\"editor\", \"title\":\"Crash on save\"}", &r);
	ck_assert_int_eq(r.status, 201);
	ck_assert(r.replayed);
	ck_assert_int_eq(ts_producer_report_id(r.body), id);
	/* Same key, different body: 422, nothing new. */
	ts_producer_post(s.url, "k1", "{\"title\":\"Other\",\"module\":\"editor\",\"severity\":\"high\"}", &r);
	ck_assert_int_eq(r.status, 422);
	/* No key: 400 saying the header is required. */
	ts_producer_post(s.url, NULL, TS_PRODUCER_BODY, &r);
	ck_assert_int_eq(r.status, 400);
	ck_assert(strstr(r.body, "Idempotency-Key header is required") != NULL);

	ts_producer_http(s.url, "GET", "/v1/reports?idempotency_key=k1", NULL, NULL, 0, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(ts_producer_report_id(r.body), id);
	ts_producer_http(s.url, "GET", "/v1/reports?idempotency_key=nope", NULL, NULL, 0, &r);
	ck_assert_int_eq(r.status, 404);
	snprintf(path, sizeof(path), "/v1/reports/%lld", id);
	ts_producer_http(s.url, "GET", path, NULL, NULL, 0, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert(strstr(r.body, "Crash on save") != NULL);
	ts_producer_http(s.url, "GET", "/v1/reports/999999", NULL, NULL, 0, &r);
	ck_assert_int_eq(r.status, 404);
	ts_producer_http(s.url, "GET", "/healthz", NULL, NULL, 0, &r);
	ck_assert_int_eq(r.status, 200);

	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.bug_reports"), 1);
	/* Report and outbox record committed together: the report with the
	 * request's key, its message keyed by the report (enqueue.h). */
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages m JOIN"
	    " app.bug_reports b ON m.idempotency_key = 'report-' || b.id"
	    " AND b.idempotency_key = 'k1'"
	    " AND (m.payload->>'report_id')::bigint = b.id AND m.topic = 'report.created'"), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.idempotency_keys"
	    " WHERE state = 'done' AND response_status = 201 AND fence = 1"), 1);
	ts_stop(s.pid, SIGTERM);
	PQfinish(c);
}
END_TEST

START_TEST(test_bad_input_changes_nothing)
{
	char db[TS_CONNINFO_MAX], big[2048], longkey[300];
	PGconn *c = fresh_db(db, sizeof(db));
	struct ts_producer_server s;
	struct ts_producer_reply r;
	char *extra[] = { "--max-body", "1k", NULL };
	ts_producer_serve(db, extra, &s);

	snprintf(big, sizeof(big), "{\"title\":\"%0*d\",\"module\":\"m\",\"severity\":\"low\"}",
	    1100, 0);
	ts_producer_post(s.url, "big", big, &r);
	ck_assert_int_eq(r.status, 413);
	ts_producer_post(s.url, "j1", "{\"title\": oops", &r);
	ck_assert_int_eq(r.status, 400);
	ck_assert(strstr(r.body, "not valid JSON") != NULL);
	ts_producer_post(s.url, "j2", "{\"title\":\"t\",\"severity\":\"low\"}", &r);
	ck_assert_int_eq(r.status, 400);
	ck_assert(strstr(r.body, "'module'") != NULL);
	ts_producer_post(s.url, "j3", "{\"title\":\"t\",\"module\":\"m\",\"severity\":7}", &r);
	ck_assert_int_eq(r.status, 400);
	ck_assert(strstr(r.body, "'severity'") != NULL);
	ts_producer_post(s.url, "a\tb", TS_PRODUCER_BODY, &r);
	ck_assert_msg(r.rv != 0 || r.status == 400, "tab in key: %d", r.status);
	memset(longkey, 'k', 256);
	longkey[256] = '\0';
	ts_producer_post(s.url, longkey, TS_PRODUCER_BODY, &r);
	ck_assert_int_eq(r.status, 400);
	ck_assert(strstr(r.body, "256 bytes") != NULL);
	ts_producer_http(s.url, "DELETE", "/v1/reports", "k", NULL, 0, &r);
	ck_assert_int_eq(r.status, 405);
	ts_producer_http(s.url, "PUT", "/v1/reports/1", "k", TS_PRODUCER_BODY, strlen(TS_PRODUCER_BODY), &r);
	ck_assert_int_eq(r.status, 405);
	ts_producer_http(s.url, "GET", "/v1/reports?idempotency_key=", NULL, NULL, 0, &r);
	ck_assert_int_eq(r.status, 400);

	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.bug_reports"), 0);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.idempotency_keys"), 0);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages"), 0);
	/* Still serving; and a key refused for a bad body is usable afterwards. */
	ts_producer_post(s.url, "j2", TS_PRODUCER_BODY, &r);
	ck_assert_int_eq(r.status, 201);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.bug_reports"), 1);
	ts_stop(s.pid, SIGTERM);
	PQfinish(c);
}
END_TEST

START_TEST(test_lease_shorter_than_processing_refused)
{
	char db[TS_CONNINFO_MAX], out[2048];
	PGconn *c = fresh_db(db, sizeof(db));
	char *argv[] = { "outbox-producer", "serve", "--db", db, "--http", "http://127.0.0.1:0",
		"--lease", "1s", "--max-processing", "2s", NULL };
	ck_assert_int_eq(ts_run(argv, NULL, out, sizeof(out), 20000), 2);
	ck_assert_msg(strstr(out, "shorter than --max-processing") != NULL, "%s", out);
	PQfinish(c);
}
END_TEST

/* The fingerprint input of TS_PRODUCER_BODY, as the server computes it. */
static void
canonical(const char *body, char *out, size_t outlen)
{
	struct report_input in;
	char err[256];
	ck_assert_int_eq(report_parse_body(body, strlen(body), &in, err, sizeof(err)), OB_OK);
	snprintf(out, outlen, "%s", in.canonical);
	report_input_fini(&in);
}

START_TEST(test_dead_holder_busy_then_taken_over)
{
	char db[TS_CONNINFO_MAX], canon[512], sql[1024];
	PGconn *c = fresh_db(db, sizeof(db));
	struct ts_producer_server s;
	struct ts_producer_reply r;
	ts_producer_serve(db, NULL, &s);
	/* A process that claimed the key and died: STARTED, fence 1, lease 2 s. */
	canonical(TS_PRODUCER_BODY, canon, sizeof(canon));
	snprintf(sql, sizeof(sql), "INSERT INTO app.idempotency_keys (idempotency_key, fingerprint,"
	    " state, fence, lease_until) VALUES ('dead-1', encode(sha256(convert_to('%s', 'UTF8')),"
	    " 'hex'), 'started', 1, clock_timestamp() + interval '2 seconds')", canon);
	ts_exec(c, sql);
	ts_producer_post(s.url, "dead-1", TS_PRODUCER_BODY, &r);
	ck_assert_int_eq(r.status, 409);
	/* 1 s, spread to 2 at random (ob_retry_after_spread_s) */
	ck_assert_msg(strcmp(r.retry_after, "1") == 0 || strcmp(r.retry_after, "2") == 0, "%s",
	    r.retry_after);
	ts_producer_http(s.url, "GET", "/v1/reports?idempotency_key=dead-1", NULL, NULL, 0, &r);
	ck_assert_int_eq(r.status, 404);
	ck_assert(strstr(r.body, "in_progress") != NULL);
	ts_wait_value(c, "SELECT count(*) FROM app.idempotency_keys WHERE lease_until < clock_timestamp()",
	    1, 20000);
	ts_producer_post(s.url, "dead-1", TS_PRODUCER_BODY, &r);
	ck_assert_int_eq(r.status, 201);
	ck_assert(!r.replayed);
	ck_assert_int_eq(ts_query_int(c, "SELECT fence FROM app.idempotency_keys"), 2);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.bug_reports"), 1);
	ts_stop(s.pid, SIGTERM);
	PQfinish(c);
}
END_TEST

/* split: both requests are past the key check, asleep in the slow point at
 * the same time (an explicit interleaving: the second is sent only once the
 * first sleeps, and awaited until it sleeps too). Either may wake and
 * record the key first, so the assertions do not depend on which: exactly
 * one caller gets 201 with its report, the other 500 (its key insert
 * collided, its report already committed: the duplicate split lets
 * through); that caller's retry replays the winner's id. Returns the
 * winner's id in *id_a and the replay's in *id_b. */
static void
split_pair(const char *url, const char *log, long long *id_a, long long *id_b)
{
	struct ts_producer_poster a = { .url = url, .key = "pair-1" };
	struct ts_producer_poster b = { .url = url, .key = "pair-1" };
	pthread_create(&a.t, NULL, ts_producer_poster_main, &a);
	ts_assert_logged(log, "fault=producer.slow");
	pthread_create(&b.t, NULL, ts_producer_poster_main, &b);
	ck_assert_msg(ts_log_wait(log, "fault=producer.slow", 2, 30000) == 2,
	    "the second request never reached the slow point");
	pthread_join(a.t, NULL);
	pthread_join(b.t, NULL);
	ck_assert_msg((a.r.status == 201 && b.r.status == 500) ||
	    (a.r.status == 500 && b.r.status == 201),
	    "split: want one 201 and one 500, got %d %s / %d %s", a.r.status, a.r.body,
	    b.r.status, b.r.body);
	const struct ts_producer_reply *win = a.r.status == 201 ? &a.r : &b.r;
	ck_assert(!win->replayed);
	*id_a = ts_producer_report_id(win->body);
	ck_assert_int_gt(*id_a, 0);
	struct ts_producer_reply retry;
	ts_producer_post(url, "pair-1", TS_PRODUCER_BODY, &retry);
	ck_assert_int_eq(retry.status, 201);
	ck_assert(retry.replayed);
	*id_b = ts_producer_report_id(retry.body);
}

/* Two requests with one key at once, while the first is held in the slow
 * point after its claim (or, for split, its check): see split_pair; atomic:
 * the second gets 409 while the first holds the key, then the replay. */
static int64_t
concurrent_pair(const char *mode, int *saw_409, long long *id_a, long long *id_b)
{
	char db[TS_CONNINFO_MAX];
	PGconn *c = fresh_db(db, sizeof(db));
	struct ts_producer_server s;
	char *extra[] = { "--idempotency", (char *)mode, "--fault-slow", "2", "--fault-slow-ms",
		"1500ms", NULL };
	ts_producer_serve(db, extra, &s);
	*saw_409 = 0;
	if (strcmp(mode, "split") == 0) {
		split_pair(s.url, s.log, id_a, id_b);
	} else {
		struct ts_producer_poster a = { .url = s.url, .key = "pair-1" };
		pthread_create(&a.t, NULL, ts_producer_poster_main, &a);
		ts_assert_logged(s.log, "fault=producer.slow");
		struct ts_producer_reply b;
		ts_producer_post(s.url, "pair-1", TS_PRODUCER_BODY, &b);
		while (b.status == 409) {
			(*saw_409)++;
			usleep(200 * 1000);
			ts_producer_post(s.url, "pair-1", TS_PRODUCER_BODY, &b);
		}
		pthread_join(a.t, NULL);
		ck_assert_int_eq(a.r.status, 201);
		ck_assert_msg(b.status == 201, "second: %d %s", b.status, b.body);
		*id_a = ts_producer_report_id(a.r.body);
		*id_b = ts_producer_report_id(b.body);
	}
	int64_t n = ts_query_int(c, "SELECT count(*) FROM app.bug_reports");
	ts_stop(s.pid, SIGTERM);
	PQfinish(c);
	return n;
}

START_TEST(test_concurrent_same_key)
{
	int saw;
	long long a, b;
	/* Broken first: split lets both requests past the check: 2 reports;
	 * one caller got 201, the other 500, and its retry replays the
	 * winner's id (whichever request woke first). */
	ck_assert_int_eq(concurrent_pair("split", &saw, &a, &b), 2);
	ck_assert_int_eq(saw, 0);
	ck_assert_int_eq(a, b);
	/* Atomic: at least one 409, one report, both callers with its id. */
	ck_assert_int_eq(concurrent_pair("atomic", &saw, &a, &b), 1);
	ck_assert_int_ge(saw, 1);
	ck_assert_int_eq(a, b);
}
END_TEST

/* Lease 0.5 s, first request processing 0.8 s: the second takes the key
 * over after the lease (before the first wakes up). */
static int64_t
slow_takeover(bool fencing, long long *id_a, long long *id_b)
{
	char db[TS_CONNINFO_MAX];
	PGconn *c = fresh_db(db, sizeof(db));
	struct ts_producer_server s;
	char *extra[] = { "--lease", "500ms", "--max-processing", "400ms", "--fault-slow", "1",
		"--fault-slow-ms", "800ms", fencing ? NULL : "--no-fencing", NULL };
	ts_producer_serve(db, extra, &s);
	struct ts_producer_poster a = { .url = s.url, .key = "slow-1" };
	pthread_create(&a.t, NULL, ts_producer_poster_main, &a);
	/* Wait for the first claim's lease to run out (it is still asleep). */
	ts_wait_value(c, "SELECT count(*) FROM app.idempotency_keys WHERE state = 'started'"
	    " AND lease_until < clock_timestamp()", 1, 20000);
	struct ts_producer_reply b;
	ts_producer_post(s.url, "slow-1", TS_PRODUCER_BODY, &b);
	int64_t b_done = ts_now_ms();
	pthread_join(a.t, NULL);
	int64_t a_done = ts_now_ms();
	ck_assert_int_eq(b.status, 201);
	ck_assert_msg(!b.replayed, "the second request did not take the key over");
	ck_assert_int_le(b_done, a_done);
	ck_assert_int_eq(a.r.status, 201);
	ck_assert_int_eq(ts_query_int(c, "SELECT fence FROM app.idempotency_keys"), 2);
	*id_a = ts_producer_report_id(a.r.body);
	*id_b = ts_producer_report_id(b.body);
	if (fencing)
		ck_assert(a.r.replayed); /* fenced out, answered with the winner's result */
	int64_t n = ts_query_int(c, "SELECT count(*) FROM app.bug_reports");
	ts_stop(s.pid, SIGTERM);
	PQfinish(c);
	return n;
}

START_TEST(test_slow_request_taken_over)
{
	long long a, b;
	ck_assert_int_eq(slow_takeover(false, &a, &b), 2); /* fencing off: the duplicate */
	ck_assert_int_ne(a, b);
	ck_assert_int_eq(slow_takeover(true, &a, &b), 1);  /* fencing on */
	ck_assert_int_eq(a, b);
}
END_TEST

START_TEST(test_keys_expire_in_batches)
{
	char db[TS_CONNINFO_MAX], key[32];
	PGconn *c = fresh_db(db, sizeof(db));
	struct ts_producer_server s;
	struct ts_producer_reply r;
	char *extra[] = { "--key-retention", "2s", "--gc-interval", "200ms", "--gc-batch", "2",
		NULL };
	ts_producer_serve(db, extra, &s);
	ts_producer_post(s.url, "gc-0", TS_PRODUCER_BODY, &r);
	ck_assert_int_eq(r.status, 201);
	ts_producer_post(s.url, "gc-0", TS_PRODUCER_BODY, &r);
	ck_assert(r.replayed); /* within the retention: replayed */
	for (int i = 1; i < 5; i++) {
		snprintf(key, sizeof(key), "gc-%d", i);
		ts_producer_post(s.url, key, TS_PRODUCER_BODY, &r);
		ck_assert_int_eq(r.status, 201);
	}
	ck_assert_int_eq(ts_wait_value(c, "SELECT count(*) FROM app.idempotency_keys", 0, 30000), 0);
	ck_assert((ts_log_count(s.log, "producer.keygc.deleted") > 0));
	/* After expiry the same key is a new request (documented policy). */
	ts_producer_post(s.url, "gc-0", TS_PRODUCER_BODY, &r);
	ck_assert_int_eq(r.status, 201);
	ck_assert(!r.replayed);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.bug_reports"), 6);
	ts_stop(s.pid, SIGTERM);
	PQfinish(c);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("producer_api");
	TCase *tc = tcase_create("api");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_create_replay_mismatch_lookup);
	tcase_add_test(tc, test_bad_input_changes_nothing);
	tcase_add_test(tc, test_lease_shorter_than_processing_refused);
	tcase_add_test(tc, test_dead_holder_busy_then_taken_over);
	tcase_add_test(tc, test_concurrent_same_key);
	tcase_add_test(tc, test_slow_request_taken_over);
	tcase_add_test(tc, test_keys_expire_in_batches);
	suite_add_tcase(s, tc);
	int rc = ts_run_suite(s);
	nng_fini();
	return rc;
}
