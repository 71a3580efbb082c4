/*
 * test_retention_clock.c - one clock decides the dedup retention (issue
 * 30, item 6): a message's created_at (stamped by the producer's
 * database) against the inbox database's clock, for both the purge and the
 * consumer's "older than the retention" check.
 *
 * The skew is explicit: a message whose created_at is S = 2 h ahead of the
 * inbox database's clock (the producer's clock runs ahead), applied now.
 * Time is then made to pass without waiting: every stored time of it (the
 * dedup record's processed_at and created_at, the webhook claim's times)
 * is moved X = 1 h 31 min into the past, and the redelivery carries its
 * created_at moved by X too: the state a real run is in X after the first
 * apply. With --dedup-retention 1m (R) the record is then older than R by
 * when it was applied, while its message is not older than R by the time it
 * carries. The purge that compared processed_at with the database's clock
 * deleted it, the check that compared created_at with the consumer host's
 * clock let the redelivery through, and it was applied a second time
 * (record handler: a second effect row; webhook: a second call). One
 * clock: the record is kept until the message is older than R (plus the
 * margin, 1 h) by the database's clock, so the redelivery is a duplicate;
 * the webhook's claim keeps the message's created_at as its own, so its
 * GC (counting from it) keeps it too. X > R + margin, so the margin alone
 * would not have kept the claim. A message older than that by the
 * database's clock is purged, and its redelivery rejected as too old.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "outbox/wire.h"
#include "testsupport.h"
#include "ts_consumer.h"
#include "webhook_target.h"

#define T_SEC 1000
#define US_PER_S INT64_C(1000000)
#define SKEW_S (2 * 3600)          /* S: the producer's clock ahead */
#define PASSED_S (91 * 60)         /* X: time made to pass after the apply */
#define PASSED_SQL "interval '91 minutes'"
#define OLD_SQL "now() - interval '3 hours'" /* older than R + margin: purged */

/* The consumer on db with --dedup-retention 1m, purging every 100 ms,
 * and the args in extra (NULL-ended, may be NULL). */
static pid_t
consumer(const char *db, const char *url, char *log, const char *const *extra)
{
	const char *base[] = { "--dedup-retention", "1m", "--max-redelivery-age", "1m",
		"--purge-interval", "100ms", NULL };
	const char *args[24];
	ts_args_cat(args, sizeof(args) / sizeof(args[0]), base, extra);
	return ts_consumer_spawn(log, db, url, args);
}

/* Move every stored time of key X into the past. */
static void
pass_time(PGconn *conn, const char *key)
{
	char sql[512];
	snprintf(sql, sizeof(sql), "UPDATE inbox.processed SET processed_at = processed_at - "
	    PASSED_SQL ", created_at = created_at - " PASSED_SQL " WHERE idempotency_key = '%s'",
	    key);
	ts_exec(conn, sql);
	snprintf(sql, sizeof(sql), "UPDATE inbox.webhook_calls SET created_at = created_at - "
	    PASSED_SQL ", completed_at = completed_at - " PASSED_SQL ", lease_until = lease_until"
	    " - " PASSED_SQL " WHERE idempotency_key = '%s'", key);
	ts_exec(conn, sql);
}

/* A record (and a done claim) of key "control", older than R + margin by
 * every time they carry; wait until a purge pass took both (the pass that
 * saw the records moved before). */
static void
purge_pass(PGconn *conn, const char *log)
{
	ts_exec(conn, "INSERT INTO inbox.processed (idempotency_key, topic, message_id, fence,"
	    " fingerprint, processed_at, created_at) VALUES ('control', 't', 999, 1, 'x', "
	    OLD_SQL ", " OLD_SQL ");"
	    "INSERT INTO inbox.webhook_calls (idempotency_key, fingerprint, state, fence,"
	    " lease_until, created_at, completed_at) VALUES ('control', 'x', 'done', 1, "
	    OLD_SQL ", " OLD_SQL ", " OLD_SQL ")");
	ck_assert_msg(ts_wait_value(conn, "SELECT (SELECT count(*) FROM inbox.processed WHERE"
	    " idempotency_key = 'control') + (SELECT count(*) FROM inbox.webhook_calls WHERE"
	    " idempotency_key = 'control')", 0, 30 * T_SEC) == 0, "no purge pass (log %s)", log);
}

static int64_t
rows(PGconn *conn, const char *table, const char *key)
{
	char sql[256];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s WHERE idempotency_key = '%s'", table,
	    key);
	return ts_query_int(conn, sql);
}

/* The purge of the inbox's SQL contract refuses arguments that would
 * purge what must be kept (a negative retention purged every record),
 * with 22023 and a message naming the argument, and deletes nothing. */
START_TEST(test_purge_refuses_bad_arguments)
{
	char db[TS_CONNINFO_MAX];
	ts_db_create("retclock_bad", "inbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	ts_exec(conn, "INSERT INTO inbox.processed (idempotency_key, topic, message_id, fence,"
	    " fingerprint, processed_at, created_at) VALUES ('kept', 't', 1, 1, 'x', "
	    OLD_SQL ", " OLD_SQL ")");
	static const struct { const char *call, *says; } cases[] = {
		{ "inbox.purge(-1, 0, 10)", "retention_ms must be at least 60000 (one minute), got -1" },
		{ "inbox.purge(NULL, 0, 10)", "retention_ms must be at least 60000 (one minute), got NULL" },
		{ "inbox.purge(60000, -5, 10)", "margin_ms must be 0 or more, got -5" },
		{ "inbox.purge(60000, 0, 0)", "max_rows must be 1 or more, got 0" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char sql[128];
		snprintf(sql, sizeof(sql), "SELECT %s", cases[i].call);
		PGresult *r = PQexec(conn, sql);
		ck_assert_int_eq(PQresultStatus(r), PGRES_FATAL_ERROR);
		ck_assert_str_eq(PQresultErrorField(r, PG_DIAG_SQLSTATE), "22023");
		ck_assert_msg(strstr(PQresultErrorMessage(r), cases[i].says) != NULL, "%s: %s",
		    cases[i].call, PQresultErrorMessage(r));
		PQclear(r);
		ck_assert_int_eq(rows(conn, "inbox.processed", "kept"), 1);
	}
	/* the same record goes with a valid call: the refusal was the arguments */
	ck_assert_int_eq(ts_query_int(conn, "SELECT inbox.purge(60000, 0, 10)"), 1);
	PQfinish(conn);
}
END_TEST

START_TEST(test_record_kept_while_its_message_is_young)
{
	char db[TS_CONNINFO_MAX], url[256], log[256], detail[512];
	ts_db_create("retclock", "inbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	ts_ipc_url("retclock", url, sizeof(url));
	pid_t pid = consumer(db, url, log, NULL);
	struct ts_consumer_conn c;
	ts_consumer_open(&c, url);

	struct ob_wire_msg m = ts_consumer_msg(1, "t", "ahead", "{\"n\": 1}");
	m.created_at_us += SKEW_S * US_PER_S;
	ck_assert_int_eq(ts_consumer_call1(&c, m, detail, sizeof(detail)), OB_WIRE_APPLIED);
	pass_time(conn, "ahead");
	m.created_at_us -= PASSED_S * US_PER_S;
	purge_pass(conn, log);
	int64_t kept = rows(conn, "inbox.processed", "ahead");
	int st = ts_consumer_call1(&c, m, detail, sizeof(detail));
	int64_t effects = rows(conn, "inbox.notifications", "ahead");
	ck_assert_msg(effects == 1 && st == OB_WIRE_DUPLICATE, "the redelivery of a message the"
	    " consumer applied %d s ago by its database's clock, whose created_at (a producer"
	    " clock %d s ahead) is still %d s in the future, --dedup-retention 60 s: its record"
	    " %s, the redelivery answered %d (%s), %lld effect rows (log %s)", PASSED_S, SKEW_S,
	    SKEW_S - PASSED_S, kept ? "was kept" : "was purged", st, detail, (long long)effects,
	    log);

	/* Older than the retention by the database's clock: purged, and its
	 * redelivery refused, never applied. */
	struct ob_wire_msg old = ts_consumer_msg(2, "t", "old", "{}");
	ck_assert_int_eq(ts_consumer_call1(&c, old, NULL, 0), OB_WIRE_APPLIED);
	ts_exec(conn, "UPDATE inbox.processed SET processed_at = " OLD_SQL ", created_at = "
	    OLD_SQL " WHERE idempotency_key = 'old'");
	old.created_at_us -= 3 * 3600 * US_PER_S;
	purge_pass(conn, log);
	ck_assert_int_eq(rows(conn, "inbox.processed", "old"), 0);
	ck_assert_int_eq(ts_consumer_call1(&c, old, detail, sizeof(detail)), OB_WIRE_REJECT);
	ck_assert_msg(strstr(detail, "older than the dedup retention") != NULL, "%s", detail);
	ck_assert_int_eq(rows(conn, "inbox.notifications", "old"), 1);

	ts_consumer_close(&c);
	ts_stop(pid, SIGTERM);
	PQfinish(conn);
}
END_TEST

START_TEST(test_webhook_claim_kept_while_its_message_is_young)
{
	char db[TS_CONNINFO_MAX], url[256], hook[256], log[256], detail[512];
	ts_db_create("retclock_wh", "inbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	struct wt_target *target = wt_start(hook, sizeof(hook));
	ck_assert_ptr_nonnull(target);
	ts_ipc_url("retclock_wh", url, sizeof(url));
	const char *extra[] = { "--handler", "webhook", "--webhook-url", hook, NULL };
	pid_t pid = consumer(db, url, log, extra);
	struct ts_consumer_conn c;
	ts_consumer_open(&c, url);

	struct ob_wire_msg m = ts_consumer_msg(1, "t", "ahead", "{\"n\": 1}");
	m.created_at_us += SKEW_S * US_PER_S;
	ck_assert_int_eq(ts_consumer_call1(&c, m, detail, sizeof(detail)), OB_WIRE_APPLIED);
	pass_time(conn, "ahead");
	m.created_at_us -= PASSED_S * US_PER_S;
	purge_pass(conn, log);
	int64_t claims = rows(conn, "inbox.webhook_calls", "ahead");
	int st = ts_consumer_call1(&c, m, detail, sizeof(detail));
	ck_assert_msg(wt_requests(target, "ahead") == 1 && st == OB_WIRE_DUPLICATE, "the"
	    " redelivery of a webhook message called %d s ago by the inbox database's clock,"
	    " whose created_at (a producer clock %d s ahead) is still %d s in the future,"
	    " --dedup-retention 60 s: its claim %s, the redelivery answered %d (%s), the target"
	    " was called %d times (log %s)", PASSED_S, SKEW_S, SKEW_S - PASSED_S,
	    claims ? "was kept" : "was purged", st, detail, wt_requests(target, "ahead"), log);

	ts_consumer_close(&c);
	ts_stop(pid, SIGTERM);
	wt_stop(target);
	PQfinish(conn);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("retention_clock");
	TCase *tc = tcase_create("retention_clock");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_purge_refuses_bad_arguments);
	tcase_add_test(tc, test_record_kept_while_its_message_is_young);
	tcase_add_test(tc, test_webhook_claim_kept_while_its_message_is_young);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
