/*
 * test_relay_delivery.c - the relay's delivery rules against a real
 * PostgreSQL and real nng sockets, with fake consumers served by this test
 * process: a reply that does not decode is a transient failure, never a
 * success; reject dead-letters at once with the reason; --max-attempts
 * dead-letters with the last error; a topic with no route waits; a topic
 * routed to two consumers keeps flowing when one goes away; an outage
 * opens the circuit breaker, burns no attempts and sends a bounded number
 * of frames; a lost LISTEN connection
 * comes back; --linger-ms gathers a trickle into one batch; housekeeping truncates a slot only when all of it is done.
 */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/nng.h>

#include "outbox/buf.h"
#include "outbox/err.h"
#include "outbox/wire.h"
#include "testsupport.h"
#include "ts_relay.h"

#define T_SEC 1000

struct relay_run {
	pid_t pid;
	char log[256];
};

/* Start outbox-relay for db with route spec(s) and extra flags (NULL-ended). */
static void
relay_start(struct relay_run *r, const char *db, const char *const *routes,
    const char *const *extra)
{
	const char *more[32], *args[64];
	size_t k = 0;
	for (int i = 1; routes[i] != NULL; i++) {
		ck_assert_uint_lt(k, 30);
		more[k++] = "--route";
		more[k++] = routes[i];
	}
	more[k] = NULL;
	r->pid = ts_relay_spawn(r->log, db, routes[0], ts_args_cat(args, 64, more, extra));
}

static int
relay_stop(struct relay_run *r)
{
	kill(r->pid, SIGTERM);
	int code = ts_wait_exit(r->pid, 20 * T_SEC);
	if (code < 0)
		ts_stop(r->pid, SIGKILL);
	return code;
}

START_TEST(test_garbage_reply_is_transient)
{
	char db[TS_CONNINFO_MAX], url[256], route[300];
	ts_db_create("rgarbage", "outbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	struct ts_fake_consumer fc;
	ts_fake_consumer_routed(&fc, "garbage", "*", TS_FAKE_GARBAGE, url,
	    sizeof(url), route, sizeof(route));
	ts_enqueue_n(conn, "t", "g", 3);
	struct relay_run r;
	const char *routes[] = { route, NULL };
	const char *extra[] = { "--poll-ms", "100", "--backoff-base-ms", "10",
		"--backoff-cap-ms", "50", "--max-attempts", "1000", NULL };
	relay_start(&r, db, routes, extra);
	/* Several rounds of garbage: still pending, attempts counted, error kept. */
	ck_assert_int_ge(ts_wait_value(conn,
	    "SELECT count(*) FROM outbox.messages WHERE attempts >= 3", 3, 30 * T_SEC), 3);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status <> 'pending'"), 0);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE last_error LIKE 'bad reply from consumer ipc://%'"), 3);
	ck_assert_int_ge(ts_log_count(r.log, "relay.deliver.bad_reply dest=ipc://"), 1);
	/* The same consumer starts answering properly: delivered. */
	atomic_store(&fc.mode, TS_FAKE_APPLIED);
	ck_assert_int_eq(ts_wait_value(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'", 3, 30 * T_SEC), 3);
	ck_assert_int_eq(relay_stop(&r), 0);
	ts_fake_consumer_stop(&fc);
	PQfinish(conn);
}
END_TEST

START_TEST(test_reject_and_max_attempts)
{
	char db[TS_CONNINFO_MAX], url1[256], url2[256], r1[300], r2[300];
	ts_db_create("rreject", "outbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	ts_ipc_url("rej", url1, sizeof(url1));
	ts_ipc_url("retry", url2, sizeof(url2));
	snprintf(r1, sizeof(r1), "rej=%s", url1);
	snprintf(r2, sizeof(r2), "busy=%s", url2);
	struct ts_fake_consumer rej, busy;
	ts_fake_consumer_start(&rej, url1, TS_FAKE_REJECT);
	ts_fake_consumer_start(&busy, url2, TS_FAKE_RETRY);
	ts_enqueue_n(conn, "rej", "r", 4);
	ts_enqueue_n(conn, "busy", "b", 4);
	ts_enqueue_n(conn, "nowhere", "n", 2); /* no route, no default route: waits */
	struct relay_run r;
	const char *routes[] = { r1, r2, NULL };
	const char *extra[] = { "--poll-ms", "50", "--backoff-base-ms", "5",
		"--backoff-cap-ms", "20", "--max-attempts", "3", NULL };
	relay_start(&r, db, routes, extra);
	ck_assert_int_eq(ts_wait_value(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'dead'", 8, 30 * T_SEC), 8);
	/* reject: dead at the first attempt, with the consumer's reason. */
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE topic = 'rej' AND attempts = 1"
	    " AND last_error = 'rejected by consumer: no such project'"), 4);
	/* retry: dead after exactly --max-attempts, last error kept. */
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE topic = 'busy' AND attempts = 3"
	    " AND last_error LIKE 'max attempts (3) reached; last error: consumer asked to retry: busy, try later'"), 4);
	ck_assert_int_eq(atomic_load(&busy.messages), 12);
	/* no route: never claimed, pending, no attempt (--unrouted wait, the
	 * default; --unrouted dead-letter: test_relay_outage) */
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE topic = 'nowhere'"
	    " AND status = 'pending' AND attempts = 0"), 2);
	ck_assert_int_eq(relay_stop(&r), 0);
	ck_assert_int_eq(ts_log_last_value(r.log, "relay.totals", "dead"), 8);
	ts_fake_consumer_stop(&rej);
	ts_fake_consumer_stop(&busy);
	PQfinish(conn);
}
END_TEST

START_TEST(test_two_consumers_one_goes_away)
{
	char db[TS_CONNINFO_MAX], ua[256], ub[256], ra[300], rb[300];
	ts_db_create("rtwo", "outbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	ts_ipc_url("ca", ua, sizeof(ua));
	ts_ipc_url("cb", ub, sizeof(ub));
	snprintf(ra, sizeof(ra), "t=%s", ua);
	snprintf(rb, sizeof(rb), "t=%s", ub);
	struct ts_fake_consumer a, b;
	ts_fake_consumer_start(&a, ua, TS_FAKE_APPLIED);
	ts_fake_consumer_start(&b, ub, TS_FAKE_APPLIED);
	struct relay_run r;
	const char *routes[] = { ra, rb, NULL };
	const char *extra[] = { "--poll-ms", "100", "--batch", "10", "--max-inflight", "4",
		"--delivery-timeout-ms", "1s", "--lease-ms", "5s", NULL };
	relay_start(&r, db, routes, extra);
	ck_assert_int_eq(ts_log_wait(r.log, "relay.db.connected", 1, 20 * T_SEC), 1);
	usleep(300 * 1000); /* let both pipes come up */
	ts_enqueue_n(conn, "t", "first", 200);
	ck_assert_int_eq(ts_wait_value(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'", 200, 30 * T_SEC), 200);
	/* Spread over both. */
	ck_assert_uint_gt(atomic_load(&a.messages), 0);
	ck_assert_uint_gt(atomic_load(&b.messages), 0);
	ck_assert_uint_eq(atomic_load(&a.messages) + atomic_load(&b.messages), 200);

	/* B goes away; everything new flows to A, promptly. */
	ts_fake_consumer_stop(&b);
	uint64_t a_before = atomic_load(&a.messages);
	int64_t t0 = ts_now_ms();
	ts_enqueue_n(conn, "t", "second", 300);
	ck_assert_int_eq(ts_wait_value(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'", 500, 30 * T_SEC), 500);
	int64_t took = ts_now_ms() - t0;
	ck_assert_msg(took < 10 * T_SEC, "300 messages took %lld ms with one consumer down",
	    (long long)took);
	ck_assert_uint_eq(atomic_load(&a.messages) - a_before, 300);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'dead'"), 0);
	ck_assert_int_eq(relay_stop(&r), 0);
	ts_fake_consumer_stop(&a);
	PQfinish(conn);
}
END_TEST

START_TEST(test_outage_breaker_bounds_attempts)
{
	char db[TS_CONNINFO_MAX], url[256], route[300];
	ts_db_create("routage", "outbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	ts_ipc_url("down", url, sizeof(url));
	snprintf(route, sizeof(route), "*=%s", url);
	ts_enqueue_n(conn, "t", "o", 50);
	struct relay_run r;
	const char *routes[] = { route, NULL };
	const char *extra[] = { "--poll-ms", "100", "--batch", "10", "--max-inflight", "5",
		"--delivery-timeout-ms", "300ms", "--lease-ms", "2s", "--max-attempts", "3",
		"--backoff-base-ms", "10", "--backoff-cap-ms", "100",
		"--breaker-threshold", "3", "--breaker-probe-interval", "500ms", NULL };
	relay_start(&r, db, routes, extra);
	/* The consumer is down for 5 s. */
	ck_assert_int_eq(ts_log_wait(r.log, "relay.breaker.open", 1, 20 * T_SEC), 1);
	usleep(5000 * 1000);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'pending'"), 50);
	/* Attempts that never reached a consumer are refunded. */
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE attempts > 1"), 0);
	ck_assert_int_ge(ts_log_count(r.log, "relay.breaker.probe"), 2);

	struct ts_fake_consumer fc;
	ts_fake_consumer_start(&fc, url, TS_FAKE_APPLIED);
	ck_assert_int_eq(ts_wait_value(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'", 50, 30 * T_SEC), 50);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'dead'"), 0);
	ck_assert_int_ge(ts_log_count(r.log, "relay.breaker.closed"), 1);
	ck_assert_int_eq(relay_stop(&r), 0);
	/* Frames tried while down: the ones before the breaker opened (one
	 * wave: up to 5) plus about one probe per 500 ms for ~6 s. Without
	 * the breaker it is a wave of 5 every ~300 ms: ~100. */
	int64_t sent = ts_log_last_value(r.log, "relay.totals", "frames_sent");
	int64_t down = sent - (int64_t)atomic_load(&fc.frames);
	ck_assert_msg(down >= 3 && down <= 25, "frames sent while down: %lld (total %lld)",
	    (long long)down, (long long)sent);
	ts_fake_consumer_stop(&fc);
	PQfinish(conn);
}
END_TEST

START_TEST(test_listen_reconnects)
{
	char db[TS_CONNINFO_MAX], url[256], route[300];
	ts_db_create("rlisten", "outbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	struct ts_fake_consumer fc;
	ts_fake_consumer_routed(&fc, "listen", "*", TS_FAKE_APPLIED, url,
	    sizeof(url), route, sizeof(route));
	struct relay_run r;
	const char *routes[] = { route, NULL };
	/* Polling every 10 min: only a notification can wake the relay. */
	const char *extra[] = { "--poll-ms", "10m", NULL };
	relay_start(&r, db, routes, extra);
	ck_assert_int_eq(ts_log_wait(r.log, "relay.db.connected", 1, 20 * T_SEC), 1);
	usleep(300 * 1000);
	ts_enqueue_n(conn, "t", "before", 1);
	ck_assert_int_eq(ts_wait_value(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'", 1, 10 * T_SEC), 1);

	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
	    " WHERE application_name = 'outbox-relay' AND datname = current_database()"), 1);
	ck_assert_int_eq(ts_log_wait(r.log, "relay.db.lost", 1, 20 * T_SEC), 1);
	ck_assert_int_eq(ts_log_wait(r.log, "reconnect=1", 1, 20 * T_SEC), 1);
	usleep(300 * 1000);
	ts_enqueue_n(conn, "t", "after", 1);
	ck_assert_int_eq(ts_wait_value(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'", 2, 10 * T_SEC), 2);
	ck_assert_int_eq(relay_stop(&r), 0);
	ts_fake_consumer_stop(&fc);
	PQfinish(conn);
}
END_TEST

/* --linger-ms: a worker woken by a notification waits that long before it
 * claims, so a trickle of messages, each enqueued in its own transaction,
 * leaves in one batch. */
#define LINGER_TRICKLE 5
#define LINGER_QUIET_MS 300 /* of the 1 s linger: no claim yet */
START_TEST(test_linger_gathers_a_trickle)
{
	char db[TS_CONNINFO_MAX], url[256], route[300], sql[128];
	ts_db_create("rlinger", "outbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	struct ts_fake_consumer fc;
	ts_fake_consumer_routed(&fc, "linger", "*", TS_FAKE_APPLIED, url,
	    sizeof(url), route, sizeof(route));
	struct relay_run r;
	const char *routes[] = { route, NULL };
	/* a linger far longer than the trickle takes; only a notification
	 * can wake the relay */
	const char *extra[] = { "--poll-ms", "10m", "--linger-ms", "1s", NULL };
	relay_start(&r, db, routes, extra);
	ck_assert_int_eq(ts_wait_value(conn, "SELECT count(*) FROM outbox.relay_waiters", 1,
	    20 * T_SEC), 1);
	for (int i = 0; i < LINGER_TRICKLE; i++) {
		snprintf(sql, sizeof(sql), "SELECT outbox.enqueue('t', 'trickle-%d', '{}')", i);
		ts_exec(conn, sql);
		/* the first one woke it; its claim waits (at --linger-ms 0 a batch
		 * is there within this, and the test fails) */
		if (i == 0)
			ck_assert_int_eq(ts_wait_value(conn, "SELECT count(*) FROM outbox.batches", 1,
			    LINGER_QUIET_MS), 0);
	}
	ck_assert_int_eq(ts_wait_value(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'", LINGER_TRICKLE,
	    20 * T_SEC), LINGER_TRICKLE);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.batches"), 1);
	ck_assert_int_eq(relay_stop(&r), 0);
	ts_fake_consumer_stop(&fc);
	PQfinish(conn);
}
END_TEST

/* Housekeeping drops delivered messages a whole slot at a time: the slot
 * that took inserts is closed once current for retention / 8 (017), and
 * truncated once closed for the retention AND every message in it is done
 * (delivered or a dead letter, which has its own copy). A message still
 * pending holds its slot. The slots' ages are moved back instead of
 * waiting an hour. */
START_TEST(test_housekeeping_truncates_done_slots)
{
	char db[TS_CONNINFO_MAX], url[256], urlr[256], urlh[256], route[300], rroute[300],
	    hroute[300];
	ts_db_create("rpurge", "outbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	ts_ipc_url("purge", url, sizeof(url));
	ts_ipc_url("purgerej", urlr, sizeof(urlr));
	ts_ipc_url("purgeheld", urlh, sizeof(urlh));
	snprintf(route, sizeof(route), "*=%s", url);
	snprintf(rroute, sizeof(rroute), "rej=%s", urlr);
	snprintf(hroute, sizeof(hroute), "held=%s", urlh);
	struct ts_fake_consumer fc, rej, held;
	ts_fake_consumer_start(&fc, url, TS_FAKE_APPLIED);
	ts_fake_consumer_start(&rej, urlr, TS_FAKE_REJECT);
	ts_enqueue_n(conn, "t", "old", 95);
	ts_enqueue_n(conn, "rej", "dead", 3);
	ts_enqueue_n(conn, "held", "held", 1); /* its consumer is not up yet */
	struct relay_run r;
	const char *routes[] = { route, rroute, hroute, NULL };
	const char *extra[] = { "--workers", "3", "--retention", "1h", "--purge-interval",
		"200ms", "--poll-ms", "100", "--delivery-timeout-ms", "300ms", "--lease-ms", "2s",
		"--breaker-probe-interval", "300ms", NULL };
	relay_start(&r, db, routes, extra);
	ck_assert_int_eq(ts_wait_value(conn,
	    "SELECT count(*) FROM outbox.messages WHERE idempotency_key LIKE 'old-%'"
	    " AND status = 'delivered'", 95, 30 * T_SEC), 95);
	ck_assert_int_eq(ts_wait_value(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'dead'", 3, 30 * T_SEC), 3);

	/* Current for longer than the switch interval (retention / 8): switched. */
	ts_exec(conn, "UPDATE outbox.slots SET since = now() - interval '40 minutes'"
	    " WHERE state = 'current'");
	ck_assert_int_eq(ts_wait_value(conn,
	    "SELECT count(*) FROM outbox.slots WHERE state = 'closed'", 1, 30 * T_SEC), 1);
	ts_enqueue_n(conn, "t", "new", 5);
	ck_assert_int_eq(ts_wait_value(conn,
	    "SELECT count(*) FROM outbox.messages WHERE idempotency_key LIKE 'new-%'"
	    " AND status = 'delivered'", 5, 30 * T_SEC), 5);

	/* Closed for longer than the retention, but one message in it is
	 * still pending: kept, and the relay says why. */
	ts_exec(conn, "UPDATE outbox.slots SET since = now() - interval '2 hours'"
	    " WHERE state = 'closed'");
	ck_assert_int_ge(ts_log_wait(r.log, "relay.housekeep.waiting", 1, 20 * T_SEC), 1);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE idempotency_key LIKE 'old-%'"), 95);

	/* Its consumer comes up: delivered, and the slot goes. */
	ts_fake_consumer_start(&held, urlh, TS_FAKE_APPLIED);
	ck_assert_int_eq(ts_wait_value(conn,
	    "SELECT count(*) FROM outbox.messages WHERE idempotency_key LIKE 'old-%'", 0,
	    30 * T_SEC), 0);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE idempotency_key LIKE 'new-%'"), 5);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'dead'"), 3);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT (count(*) = outbox.event_slots() - 1)::int FROM outbox.slots WHERE state = 'empty'"),
	    1);
	ck_assert_int_eq(atomic_load(&held.messages), 1);
	ck_assert_int_eq(relay_stop(&r), 0);
	/* One process truncated the slot: its 99 messages. */
	ck_assert_int_eq(ts_log_last_value(r.log, "relay.totals", "purged"), 99);
	ck_assert_int_eq(ts_log_count(r.log, "relay.housekeep.done truncated_slot=0 purged=99"), 1);
	ts_fake_consumer_stop(&fc);
	ts_fake_consumer_stop(&rej);
	ts_fake_consumer_stop(&held);
	PQfinish(conn);
}
END_TEST

static Suite *
relay_delivery_suite(void)
{
	Suite *s = suite_create("relay_delivery");
	TCase *tc = tcase_create("delivery");
	tcase_set_timeout(tc, 150);
	tcase_add_test(tc, test_garbage_reply_is_transient);
	tcase_add_test(tc, test_reject_and_max_attempts);
	tcase_add_test(tc, test_two_consumers_one_goes_away);
	tcase_add_test(tc, test_outage_breaker_bounds_attempts);
	tcase_add_test(tc, test_listen_reconnects);
	tcase_add_test(tc, test_linger_gathers_a_trickle);
	tcase_add_test(tc, test_housekeeping_truncates_done_slots);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	int rc = ts_run_suite(relay_delivery_suite());
	nng_fini();
	return rc;
}
