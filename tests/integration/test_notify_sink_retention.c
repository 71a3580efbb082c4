/*
 * test_notify_sink_retention.c - who frees outbox-notify-sink --db's
 * records, and why a purged key is never applied twice.
 *
 * The sink keeps each call's dedup record in its inbox database through
 * the inbox's SQL contract (docs/inbox-sql.md, "Retention"). The record's
 * created_at must be the message's enqueue time (the call's
 * Outbox-Created-At), the retention counts from it, a call older than the
 * retention by the inbox database's clock is refused (422, nothing done),
 * and the sink itself deletes the records past the retention plus the
 * margin every --purge-interval-ms. Before this, it stored its own receipt
 * time and never purged: its inbox grew forever.
 *
 * The retention and the purge interval are set through the environment
 * (OUTBOX_SINK_RETENTION_MS, OUTBOX_SINK_PURGE_INTERVAL_MS: the same
 * config table as the flags), which a sink from before them ignores: this
 * file run against such a sink fails on its behaviour (the stored time,
 * the 200 for an old or malformed call, no purge), not on an unknown flag.
 * Every wait is on a condition (a row count, a log line, a /stats member),
 * bounded; the sink binds port 0 and says its URL in --ready-file.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "testsupport.h"

#define RETENTION_ENV "OUTBOX_SINK_RETENTION_MS=60000"
#define WAIT_MS 15000

struct sink {
	pid_t pid;
	char url[256];   /* http://127.0.0.1:PORT/notify */
	char stats[256]; /* http://127.0.0.1:PORT/stats */
	char log[256];
};

static void
sink_start(struct sink *k, const char *db, const char *tag, char *const env[])
{
	char ready[512];
	snprintf(ready, sizeof(ready), "%s/sink-%s.url", ts_tmpdir(), tag);
	char *argv[] = { "outbox-notify-sink", "--http", "http://127.0.0.1:0", "--db", (char *)db,
		"--ready-file", ready, NULL };
	k->pid = ts_spawn(argv, env, k->log);
	char *line = ts_wait_ready_file(ready, k->pid, k->log, 20000);
	snprintf(k->url, sizeof(k->url), "%s", line);
	free(line);
	snprintf(k->stats, sizeof(k->stats), "%.*s/stats", (int)(strchr(k->url + 7, '/') - k->url),
	    k->url);
}

/* SIGTERM; it must exit 0 and its log hold no sanitizer report. */
static void
sink_stop(struct sink *k)
{
	ck_assert_int_eq(kill(k->pid, SIGTERM), 0);
	int rc = ts_wait_exit(k->pid, 10000);
	char *log = ts_read_file(k->log);
	ck_assert_msg(rc == 0, "the sink exited %d: %s", rc, log ? log : "");
	ck_assert_msg(log == NULL || (strstr(log, "Sanitizer") == NULL &&
	    strstr(log, "runtime error") == NULL), "sanitizer report: %s", log);
	free(log);
}

/* A member of the sink's GET /stats (-1 when absent). */
static long
sink_stat(const struct sink *k, const char *name)
{
	struct ts_http_req req = { .url = k->stats };
	struct ts_http_res res;
	int status = ts_http(&req, &res);
	ck_assert_msg(status == 200, "GET %s: %d", k->stats, status);
	json_t *o = json_loads(res.body, 0, NULL);
	ck_assert_msg(o != NULL, "stats: %s", res.body);
	json_t *v = json_object_get(o, name);
	long n = v != NULL ? (long)json_integer_value(v) : -1;
	json_decref(o);
	free(res.body);
	return n;
}

/* POST {"n":1} with key and Outbox-Created-At created (NULL: none). The
 * status; the body into body (bodylen) when not NULL. */
static int
post(const struct sink *k, const char *key, const char *created, char *body, size_t bodylen)
{
	static const char payload[] = "{\"n\":1}";
	const char *headers[] = { "Content-Type", "application/json", "Idempotency-Key", key,
		"Outbox-Topic", "notify.retention", "Outbox-Fence", "1",
		created != NULL ? "Outbox-Created-At" : NULL, created, NULL };
	struct ts_http_req req = { .method = "POST", .url = k->url, .headers = headers,
		.body = payload, .body_len = strlen(payload) };
	struct ts_http_res res;
	int status = ts_http(&req, &res);
	if (body != NULL)
		snprintf(body, bodylen, "%s", res.body != NULL ? res.body : "");
	free(res.body);
	return status;
}

/* The inbox database's clock plus offset (an interval: '-10 seconds'), as
 * the consumer formats Outbox-Created-At: RFC 3339 UTC, microseconds. */
static void
db_time(PGconn *conn, const char *offset, char *out, size_t outlen)
{
	char sql[256];
	snprintf(sql, sizeof(sql), "SELECT to_char((clock_timestamp() + interval '%s')"
	    " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')", offset);
	PGresult *r = PQexec(conn, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQerrorMessage(conn));
	snprintf(out, outlen, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
}

/* The stored created_at of key, formatted as db_time does ("" when none). */
static void
stored_created_at(PGconn *conn, const char *key, char *out, size_t outlen)
{
	const char *params[1] = { key };
	PGresult *r = PQexecParams(conn, "SELECT to_char(created_at AT TIME ZONE 'UTC',"
	    " 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') FROM inbox.processed WHERE idempotency_key = $1",
	    1, NULL, params, NULL, NULL, 0);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQerrorMessage(conn));
	snprintf(out, outlen, "%s", PQntuples(r) == 1 ? PQgetvalue(r, 0, 0) : "");
	PQclear(r);
}

/* Rows of inbox.processed and inbox.notifications for key. */
static int64_t
rows_of(PGconn *conn, const char *table, const char *key)
{
	char sql[256];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM inbox.%s WHERE idempotency_key = '%s'",
	    table, key);
	return ts_query_int(conn, sql);
}

/* (a) the record keeps the message's enqueue time, to the microsecond, in
 * each accepted form; without the header, the time of receipt (logged
 * once). */
START_TEST(test_created_at_is_the_messages)
{
	char db[TS_CONNINFO_MAX], at[64], got[64], body[512];
	ts_db_create("sinkca", "inbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	struct sink k;
	sink_start(&k, db, "ca", NULL);

	db_time(conn, "-10 seconds", at, sizeof(at));
	ck_assert_int_eq(post(&k, "ca-1", at, body, sizeof(body)), 200);
	stored_created_at(conn, "ca-1", got, sizeof(got));
	ck_assert_msg(strcmp(got, at) == 0, "stored %s, sent %s", got, at);

	/* no fraction: .000000 */
	db_time(conn, "-5 seconds", at, sizeof(at));
	char whole[64];
	snprintf(whole, sizeof(whole), "%.19sZ", at);
	ck_assert_int_eq(post(&k, "ca-2", whole, body, sizeof(body)), 200);
	stored_created_at(conn, "ca-2", got, sizeof(got));
	char want[64];
	snprintf(want, sizeof(want), "%.19s.000000Z", at);
	ck_assert_str_eq(got, want);

	/* a numeric offset: the same instant in UTC; 7 fraction digits cut to 6 */
	ck_assert_int_eq(post(&k, "ca-3", "2026-12-05T12:30:00.1234567+02:00", body,
	    sizeof(body)), 200);
	stored_created_at(conn, "ca-3", got, sizeof(got));
	ck_assert_str_eq(got, "2026-12-05T10:30:00.123456Z");

	/* none: the time of receipt (the transaction's now(), as processed_at) */
	ck_assert_int_eq(post(&k, "ca-4", NULL, body, sizeof(body)), 200);
	ck_assert_int_eq(post(&k, "ca-5", NULL, body, sizeof(body)), 200);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.processed"
	    " WHERE idempotency_key IN ('ca-4', 'ca-5') AND created_at = processed_at"), 2);
	ck_assert_int_eq(sink_stat(&k, "created_at_missing"), 2);
	ck_assert_int_eq(ts_log_count(k.log, "sink.created_at.missing"), 1);
	ck_assert_int_eq(sink_stat(&k, "effects"), 5);
	PQfinish(conn);
	sink_stop(&k);
}
END_TEST

/* (b) older than --retention-ms by the database's clock: 422, nothing
 * written, even for a key already applied (its record may be the only
 * thing that made it a replay, and the purge may take it at any time). */
START_TEST(test_older_than_retention_refused)
{
	char db[TS_CONNINFO_MAX], at[64], body[512];
	ts_db_create("sinkold", "inbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	struct sink k;
	char *env[] = { RETENTION_ENV, NULL };
	sink_start(&k, db, "old", env);

	db_time(conn, "-120 seconds", at, sizeof(at));
	ck_assert_int_eq(post(&k, "old-1", at, body, sizeof(body)), 422);
	ck_assert_msg(strstr(body, "\"error\":\"older_than_retention\"") != NULL, "%s", body);
	ck_assert_msg(strstr(body, "\"retention_ms\":60000") != NULL, "%s", body);
	ck_assert_int_eq(rows_of(conn, "processed", "old-1"), 0);
	ck_assert_int_eq(rows_of(conn, "notifications", "old-1"), 0);
	ck_assert_int_eq(ts_log_wait(k.log, "sink.too_old", 1, WAIT_MS), 1);
	/* before 1970 (a negative Unix time) and the first year: as old */
	ck_assert_int_eq(post(&k, "old-2", "1969-12-31T23:59:59.999999Z", body, sizeof(body)),
	    422);
	ck_assert_int_eq(post(&k, "old-3", "0000-01-01T00:00:00Z", body, sizeof(body)), 422);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.processed"), 0);

	/* within the retention: applied */
	db_time(conn, "-30 seconds", at, sizeof(at));
	ck_assert_int_eq(post(&k, "new-1", at, body, sizeof(body)), 200);
	ck_assert_int_eq(rows_of(conn, "processed", "new-1"), 1);
	/* the same key sent as older than the retention: refused, not replayed */
	db_time(conn, "-90 seconds", at, sizeof(at));
	ck_assert_int_eq(post(&k, "new-1", at, body, sizeof(body)), 422);
	ck_assert_int_eq(rows_of(conn, "notifications", "new-1"), 1);
	ck_assert_int_eq(sink_stat(&k, "too_old"), 4);
	ck_assert_int_eq(sink_stat(&k, "effects"), 1);
	ck_assert_int_eq(sink_stat(&k, "replays"), 0);
	PQfinish(conn);
	sink_stop(&k);
}
END_TEST

/* (c) an Outbox-Created-At that is not an RFC 3339 time: 400, nothing
 * written. */
START_TEST(test_malformed_created_at_refused)
{
	static const char *const bad[] = {
		"", "yesterday", "1733400000", "2026-12-05", "2026-12-05T10:00:00",
		"2026-12-05 10:00:00Z", "2026-12-05T10:00:00.Z", "2026-12-05T10:00:00+0100",
		"2026-13-05T10:00:00Z", "2026-02-29T10:00:00Z", "2026-04-31T10:00:00Z",
		"2026-12-05T24:00:00Z", "2026-12-05T10:60:00Z", "2026-12-05T10:00:00ZZ",
		"+2026-12-05T10:00:00Z", "2026-1-05T10:00:00Z",
	};
	char db[TS_CONNINFO_MAX], body[512], key[32];
	ts_db_create("sinkbad", "inbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	struct sink k;
	sink_start(&k, db, "bad", NULL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(key, sizeof(key), "bad-%zu", i);
		int status = post(&k, key, bad[i], body, sizeof(body));
		ck_assert_msg(status == 400, "'%s': %d %s", bad[i], status, body);
		ck_assert_msg(strstr(body, "Outbox-Created-At") != NULL, "'%s': %s", bad[i], body);
	}
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.processed"), 0);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.notifications"), 0);
	ck_assert_int_eq(sink_stat(&k, "effects"), 0);
	PQfinish(conn);
	sink_stop(&k);
}
END_TEST

/* (d) the sink deletes the records past the retention plus the margin
 * itself, in calls of 1000 rows until fewer come back, and keeps the
 * others. Setup, explicit: records applied through the sink (and 2500
 * written through the contract in SQL) are aged by backdating created_at
 * and processed_at in one transaction, as time passing would. */
START_TEST(test_purged_by_the_sink)
{
	char db[TS_CONNINFO_MAX], at[64], body[512];
	ts_db_create("sinkpurge", "inbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	struct sink k;
	char *env[] = { RETENTION_ENV, "OUTBOX_SINK_PURGE_INTERVAL_MS=100", NULL };
	sink_start(&k, db, "purge", env);

	db_time(conn, "-10 seconds", at, sizeof(at));
	static const char *const keys[] = { "old-1", "old-2", "mid-1", "new-1" };
	for (size_t i = 0; i < 4; i++)
		ck_assert_int_eq(post(&k, keys[i], at, body, sizeof(body)), 200);
	ts_exec(conn, "BEGIN;"
	    " SELECT inbox.dedup_insert(source => '', topic => 'notify.retention',"
	    "   idempotency_key => 'bulk-' || i, payload => convert_to('{}', 'UTF8'),"
	    "   message_id => i, fence => 0, created_at => now(), detail => NULL)"
	    "   FROM generate_series(1, 2500) i;"
	    /* older than 60 s + 1 h, applied 2 h ago: purged */
	    " UPDATE inbox.processed SET created_at = created_at - interval '2 hours',"
	    "   processed_at = processed_at - interval '2 hours'"
	    "  WHERE idempotency_key LIKE 'old-%' OR idempotency_key LIKE 'bulk-%';"
	    /* older than the retention, not than the retention plus the margin: kept */
	    " UPDATE inbox.processed SET created_at = created_at - interval '30 minutes',"
	    "   processed_at = processed_at - interval '2 hours'"
	    "  WHERE idempotency_key = 'mid-1';"
	    " COMMIT");
	ck_assert_int_eq(ts_wait_value(conn, "SELECT count(*) FROM inbox.processed"
	    " WHERE idempotency_key LIKE 'old-%' OR idempotency_key LIKE 'bulk-%'", 0, WAIT_MS), 0);
	ck_assert_int_eq(rows_of(conn, "processed", "mid-1"), 1);
	ck_assert_int_eq(rows_of(conn, "processed", "new-1"), 1);
	/* the records only: the effects stay */
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.notifications"), 4);
	/* one pass: 1000, 1000, 500 + 2 */
	ck_assert_int_eq(ts_log_wait(k.log, "sink.purge.deleted", 1, WAIT_MS), 1);
	ck_assert_int_eq(ts_log_last_value(k.log, "sink.purge.deleted", "rows"), 2502);
	ck_assert_int_eq(ts_log_last_value(k.log, "sink.purge.deleted", "calls"), 3);
	ck_assert_int_eq(sink_stat(&k, "purged"), 2502);
	ck_assert_int_eq(sink_stat(&k, "purge_failures"), 0);
	PQfinish(conn);
	sink_stop(&k);
}
END_TEST

/* A purge that fails is logged once and the sink keeps serving; once it
 * works again that is logged once too. The failure: inbox.purge renamed
 * away in this test's own database. */
START_TEST(test_purge_failure_logged_once)
{
	char db[TS_CONNINFO_MAX], at[64], body[512];
	ts_db_create("sinkpfail", "inbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	struct sink k;
	char *env[] = { RETENTION_ENV, "OUTBOX_SINK_PURGE_INTERVAL_MS=20", NULL };
	sink_start(&k, db, "pfail", env);

	ts_exec(conn, "ALTER FUNCTION inbox.purge(bigint, bigint, integer) RENAME TO purge_away");
	ck_assert_int_eq(ts_log_wait(k.log, "sink.purge.failed", 1, WAIT_MS), 1);
	/* more failed passes (polled every 10 ms), still one line */
	int64_t t0 = ts_now_ms();
	while (sink_stat(&k, "purge_failures") < 5 && ts_now_ms() - t0 < WAIT_MS)
		usleep(10000);
	ck_assert_int_ge(sink_stat(&k, "purge_failures"), 5);
	ck_assert_int_eq(ts_log_count(k.log, "sink.purge.failed"), 1);
	db_time(conn, "-1 second", at, sizeof(at));
	ck_assert_int_eq(post(&k, "pf-1", at, body, sizeof(body)), 200);

	ts_exec(conn, "ALTER FUNCTION inbox.purge_away(bigint, bigint, integer) RENAME TO purge");
	ck_assert_int_eq(ts_log_wait(k.log, "sink.purge.recovered", 1, WAIT_MS), 1);
	ck_assert_int_eq(ts_log_count(k.log, "sink.purge.failed"), 1);
	PQfinish(conn);
	sink_stop(&k);
}
END_TEST

/* The bounds: inbox.purge refuses a retention under a minute, so the
 * sink does at start (exit 2, naming the flag). */
START_TEST(test_retention_bounds)
{
	char out[1024];
	char *low[] = { "outbox-notify-sink", "--retention-ms", "59999", NULL };
	ck_assert_int_eq(ts_run(low, NULL, out, sizeof(out), 10000), 2);
	ck_assert_msg(strstr(out, "--retention-ms") != NULL && strstr(out, "minimum 60000"),
	    "%s", out);
	char *neg[] = { "outbox-notify-sink", "--purge-interval-ms", "-1", NULL };
	ck_assert_int_eq(ts_run(neg, NULL, out, sizeof(out), 10000), 2);
	ck_assert_msg(strstr(out, "--purge-interval-ms") != NULL, "%s", out);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("notify_sink_retention");
	TCase *tc = tcase_create("notify_sink_retention");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_created_at_is_the_messages);
	tcase_add_test(tc, test_older_than_retention_refused);
	tcase_add_test(tc, test_malformed_created_at_refused);
	tcase_add_test(tc, test_purged_by_the_sink);
	tcase_add_test(tc, test_purge_failure_logged_once);
	tcase_add_test(tc, test_retention_bounds);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
