/*
 * test_retry_after.c - a downstream's Retry-After honoured end to end
 * (issue 16, part 5): real relay -> real consumer (--handler webhook) ->
 * the test's downstream (tests/support/webhook_target.c), and the wire's
 * version rule between a new relay and an old consumer.
 *
 * The downstream answers 429 to a message's first attempt. Without
 * Retry-After (shown first: the comparison that makes the test able to
 * fail) the second attempt comes after the relay's short backoff; with
 * "Retry-After: 3" no sooner than 3 s after the first, and with an
 * HTTP-date no sooner than that date; the same key on both attempts, one
 * effect. A Retry-After that would reach past --max-age dead-letters at
 * once; one within it still counts the attempt against --max-attempts.
 * A consumer that speaks only wire version 1 refuses the relay's version
 * 2 requests: one clear log line naming it and the upgrade order, the
 * messages retried (transient) and delivered once it answers.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/supplemental/util/platform.h>

#include "outbox/wire.h"
#include "testsupport.h"
#include "ts_consumer.h"
#include "ts_relay.h"
#include "webhook_target.h"

#define T_SEC 1000
/* The relay's backoff here: short, so that a retry without Retry-After
 * comes far sooner than the 3 s a Retry-After asks for. */
#define BACKOFF_BASE "50ms"
#define BACKOFF_CAP "200ms"

struct chain {
	char db[TS_CONNINFO_MAX], url[256], route[300], hook[256], clog[256], rlog[256];
	PGconn *conn;
	struct wt_target *target;
	pid_t consumer, relay;
};

static void
chain_start(struct chain *c)
{
	ts_db_create("retry_after", "all", c->db, sizeof(c->db));
	c->conn = ts_connect(c->db);
	c->target = wt_start(c->hook, sizeof(c->hook));
	ck_assert_ptr_nonnull(c->target);
	ts_ipc_url("retry_after", c->url, sizeof(c->url));
	snprintf(c->route, sizeof(c->route), "*=%s", c->url);
	const char *cextra[] = { "--handler", "webhook", "--webhook-url", c->hook, NULL };
	c->consumer = ts_consumer_spawn(c->clog, c->db, c->url, cextra);
	const char *rextra[] = { "--poll-ms", "100", "--backoff-base-ms", BACKOFF_BASE,
		"--backoff-cap-ms", BACKOFF_CAP, "--no-source", NULL }; /* the key alone downstream */
	c->relay = ts_relay_spawn(c->rlog, c->db, c->route, rextra);
}

static void
chain_stop(struct chain *c)
{
	ts_stop(c->relay, SIGTERM);
	ts_stop(c->consumer, SIGTERM);
	wt_stop(c->target);
	PQfinish(c->conn);
}

/* Enqueue key, the downstream failing its first request with 429 and ra
 * (NULL: no header); wait until it is delivered. Returns the arrival times
 * of its two requests (asserting there were two, the same key, one
 * effect). */
static void
deliver_after_429(struct chain *c, const char *key, const char *ra, int64_t t[2])
{
	char sql[256];
	wt_fail_next_retry_after(c->target, 1, 429, ra);
	snprintf(sql, sizeof(sql), "SELECT outbox.enqueue('notify', '%s', '{}')", key);
	ts_query_int(c->conn, sql);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM outbox.messages WHERE idempotency_key ="
	    " '%s' AND status = 'delivered'", key);
	ck_assert_msg(ts_wait_value(c->conn, sql, 1, 60 * T_SEC) == 1, "%s not delivered (logs %s,"
	    " %s)", key, c->clog, c->rlog);
	int64_t times[WT_TIMES];
	ck_assert_int_eq(wt_request_times(c->target, key, times, WT_TIMES), 2);
	ck_assert_int_eq(wt_effects(c->target, key), 1);
	t[0] = times[0];
	t[1] = times[1];
}

START_TEST(test_retry_after_honoured)
{
	struct chain c;
	int64_t t[2];
	chain_start(&c);

	/* Without Retry-After: the relay's own backoff, well under 3 s. This
	 * is what every retry looked like before, header or not. */
	deliver_after_429(&c, "ra-none", NULL, t);
	ck_assert_msg(t[1] - t[0] < 3000, "no Retry-After: retried after %lld ms",
	    (long long)(t[1] - t[0]));

	/* Retry-After: 3 -> not before 3 s after the first attempt. */
	deliver_after_429(&c, "ra-seconds", "3", t);
	ck_assert_msg(t[1] - t[0] >= 3000, "Retry-After: 3, retried after %lld ms",
	    (long long)(t[1] - t[0]));

	/* An HTTP-date 6 s ahead of a whole second: not before that date
	 * (at least 5 s from now, whatever fraction of a second now is). */
	char date[64];
	struct tm tm;
	int64_t mono0 = (int64_t)nng_clock();
	time_t at = time(NULL) + 6;
	strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", gmtime_r(&at, &tm));
	deliver_after_429(&c, "ra-date", date, t);
	ck_assert_msg(t[1] - mono0 >= 5000 - 20, "Retry-After: %s, retried %lld ms after it was"
	    " set", date, (long long)(t[1] - mono0));
	ck_assert_msg(t[1] - t[0] >= 3000, "Retry-After: %s, retried after %lld ms", date,
	    (long long)(t[1] - t[0]));

	/* every attempt counted: two each, nothing dead */
	ck_assert_int_eq(ts_query_int(c.conn, "SELECT count(*) FROM outbox.messages"
	    " WHERE status = 'dead'"), 0);
	chain_stop(&c);
}
END_TEST

/* The relay's side with a fake consumer answering retry with a wish:
 * past --max-age it dead-letters at once (as max age would); within it,
 * the attempt still counts against --max-attempts. */
START_TEST(test_retry_after_bounded)
{
	char db[TS_CONNINFO_MAX], url[256], route[300], rlog[256];
	struct ts_fake_consumer fc;
	ts_db_create("retry_after_max", "outbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	ts_fake_consumer_routed(&fc, "ra_max", "*", TS_FAKE_RETRY, url, sizeof(url), route,
	    sizeof(route));
	atomic_store(&fc.retry_after_ms, 60000); /* a minute; max age is 20 s */
	const char *extra[] = { "--poll-ms", "100", "--max-age", "20s", "--max-attempts", "2",
		"--backoff-base-ms", BACKOFF_BASE, "--backoff-cap-ms", BACKOFF_CAP, NULL };
	pid_t rpid = ts_relay_spawn(rlog, db, route, extra);
	ts_query_int(conn, "SELECT outbox.enqueue('notify', 'ra-past-age', '{}')");
	ck_assert_int_eq(ts_wait_value(conn, "SELECT count(*) FROM outbox.messages"
	    " WHERE idempotency_key = 'ra-past-age' AND status = 'dead'", 1, 60 * T_SEC), 1);
	uint64_t sent = atomic_load(&fc.messages);
	ck_assert_uint_eq(sent, 1); /* one attempt, not a minute of them */
	PGresult *r = PQexec(conn, "SELECT last_error FROM outbox.messages"
	    " WHERE idempotency_key = 'ra-past-age'");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	ck_assert_msg(strstr(PQgetvalue(r, 0, 0), "max age") != NULL &&
	    strstr(PQgetvalue(r, 0, 0), "Retry-After") != NULL, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);

	/* 1.5 s: within the age; the second attempt no sooner, and the last */
	atomic_store(&fc.retry_after_ms, 1500);
	int64_t t0 = ts_now_ms();
	ts_query_int(conn, "SELECT outbox.enqueue('notify', 'ra-attempts', '{}')");
	ck_assert_int_eq(ts_wait_value(conn, "SELECT count(*) FROM outbox.messages"
	    " WHERE idempotency_key = 'ra-attempts' AND status = 'dead'", 1, 60 * T_SEC), 1);
	ck_assert_msg(ts_now_ms() - t0 >= 1500, "dead after %lld ms", (long long)(ts_now_ms() - t0));
	sent = atomic_load(&fc.messages);
	ck_assert_uint_eq(sent, 3); /* 1 + its 2 attempts */
	r = PQexec(conn, "SELECT last_error, attempts FROM outbox.messages"
	    " WHERE idempotency_key = 'ra-attempts'");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	ck_assert_msg(strstr(PQgetvalue(r, 0, 0), "max attempts (2)") != NULL, "%s",
	    PQgetvalue(r, 0, 0));
	PQclear(r);
	ts_stop(rpid, SIGTERM);
	ts_fake_consumer_stop(&fc);
	PQfinish(conn);
}
END_TEST

/* A new relay (requests of version 2) against a consumer that speaks only
 * version 1: refused with wire.version every time, one clear line naming
 * the destination and the upgrade order (not one per batch), the message
 * retried as a transient failure; once the consumer answers, delivered. */
START_TEST(test_old_consumer_logged_once)
{
	char db[TS_CONNINFO_MAX], url[256], route[300], rlog[256];
	struct ts_fake_consumer fc;
	ts_db_create("retry_after_v1", "outbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	ts_fake_consumer_routed(&fc, "ra_v1", "*", TS_FAKE_V1_ONLY, url, sizeof(url), route,
	    sizeof(route));
	const char *extra[] = { "--poll-ms", "100", "--backoff-base-ms", BACKOFF_BASE,
		"--backoff-cap-ms", BACKOFF_CAP, "--max-attempts", "1000", NULL };
	pid_t rpid = ts_relay_spawn(rlog, db, route, extra);
	ts_query_int(conn, "SELECT outbox.enqueue('notify', 'ra-old', '{}')");
	/* several refused frames */
	int64_t deadline = ts_now_ms() + 60 * T_SEC;
	while (atomic_load(&fc.frames) < 4 && ts_now_ms() < deadline)
		nng_msleep(20);
	uint64_t frames = atomic_load(&fc.frames);
	ck_assert_uint_ge(frames, 4);
	ck_assert_int_eq(ts_log_wait(rlog, "relay.deliver.consumer_too_old", 1, 10 * T_SEC), 1);
	char needle[400];
	snprintf(needle, sizeof(needle), "dest=%s", url);
	ts_assert_logged(rlog, needle);
	ts_assert_logged(rlog, "upgrade consumers before relays");
	ts_assert_logged(rlog, "consumer_wire_version=1");
	ck_assert_int_eq(ts_log_count(rlog, "relay.deliver.consumer_too_old"), 1);
	ck_assert_int_eq(ts_log_count(rlog, "relay.deliver.refused"), 0);
	/* transient: still pending, nothing dead */
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.messages"
	    " WHERE status = 'pending'"), 1);
	/* the consumer upgraded: delivered */
	atomic_store(&fc.mode, TS_FAKE_APPLIED);
	ck_assert_int_eq(ts_wait_value(conn, "SELECT count(*) FROM outbox.messages"
	    " WHERE status = 'delivered'", 1, 60 * T_SEC), 1);
	ck_assert_int_eq(ts_log_count(rlog, "relay.deliver.consumer_too_old"), 1);
	ts_stop(rpid, SIGTERM);
	ts_fake_consumer_stop(&fc);
	PQfinish(conn);
}
END_TEST

static Suite *
retry_after_suite(void)
{
	Suite *s = suite_create("retry_after_e2e");
	TCase *tc = tcase_create("retry_after_e2e");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_retry_after_honoured);
	tcase_add_test(tc, test_retry_after_bounded);
	tcase_add_test(tc, test_old_consumer_logged_once);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return ts_run_suite(retry_after_suite());
}
