/*
 * test_relay_outage.c - what a setting does to a message no consumer has
 * seen (issue 30, defects 1 and 2), against the real relay, a real
 * PostgreSQL and real sockets:
 *
 * - an outage longer than --max-age dead-letters nothing: a route to a
 *   TCP port that refuses, --max-age 2s, 20 messages, pending well past
 *   their age; a real consumer comes up on that port and each is applied
 *   exactly once;
 * - an outage does not count the attempts of retries either: messages a
 *   consumer answered retry, then an outage with many probes, then the
 *   consumer back: none dead, each delivered;
 * - the bounds still hold where a consumer was reached: a consumer that
 *   answers retry, and one that takes the frames and never answers, make
 *   their messages dead by --max-age;
 * - a topic no route matches waits: not claimed, shown in outboxctl
 *   status (unclaimed), in outbox_relay_unrouted_pending and in one
 *   relay.topic.unrouted line; delivered once routed; dead-lettered ("no
 *   route") only with --unrouted dead-letter. --only-routed still starts
 *   (an alias, deprecated), and not with --unrouted dead-letter.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <nng/nng.h>

#include "testsupport.h"
#include "ts_consumer.h"
#include "ts_relay.h"

#define T_SEC 1000
#define OUT_MAX 16384

static const char *const dead_sql =
    "SELECT count(*) FROM outbox.messages WHERE status = 'dead'";

/* For ms, poll that no message is dead (a bounded wait that asserts
 * something all along, not a sleep that a result depends on). */
static void
assert_none_dead_for(PGconn *conn, int ms, const char *log)
{
	int64_t end = ts_now_ms() + ms;
	do {
		int64_t dead = ts_query_int(conn, dead_sql);
		if (dead != 0) {
			PGresult *r = PQexec(conn, "SELECT last_error FROM outbox.messages"
			    " WHERE status = 'dead' ORDER BY id LIMIT 1");
			ck_abort_msg("%" PRId64 " messages dead during the outage, the first: %s"
			    " (relay log %s)", dead, PQntuples(r) ? PQgetvalue(r, 0, 0) : "?", log);
		}
		usleep(100 * 1000);
	} while (ts_now_ms() < end);
}

static void
relay_stop(pid_t pid)
{
	kill(pid, SIGTERM);
	int code = ts_wait_exit(pid, 20 * T_SEC);
	if (code < 0)
		ts_stop(pid, SIGKILL);
	ck_assert_int_eq(code, 0);
}

/* Defect 1: a route to a closed port and --max-age 2s: the messages stay
 * pending for as long as nothing reaches a consumer, then are delivered
 * and applied exactly once. */
START_TEST(test_outage_longer_than_max_age)
{
	char odb[TS_CONNINFO_MAX], idb[TS_CONNINFO_MAX], url[256], route[300];
	char rlog[256], clog[256], ready[300];
	ts_db_create("outage_out", "outbox", odb, sizeof(odb));
	ts_db_create("outage_in", "inbox", idb, sizeof(idb));
	PGconn *out = ts_connect(odb), *in = ts_connect(idb);
	int port = 0;
	int refusing = ts_refusing_local(&port); /* nobody listens: connections refused */
	/* not inherited by the relay: closing it must free the port */
	ck_assert_int_eq(fcntl(refusing, F_SETFD, FD_CLOEXEC), 0);
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", port);
	snprintf(route, sizeof(route), "*=%s", url);
	int64_t t0 = ts_now_ms();
	ts_enqueue_n(out, "t", "o", 20);
	const char *extra[] = { "--max-age", "2s", "--poll-ms", "100", "--batch", "5",
		"--max-inflight", "4", "--delivery-timeout-ms", "500ms", "--lease-ms", "2s",
		"--backoff-base-ms", "10", "--backoff-cap-ms", "200", "--breaker-threshold", "2",
		"--breaker-probe-interval", "200ms", NULL };
	pid_t relay = ts_relay_spawn(rlog, odb, route, extra);
	ck_assert_int_eq(ts_log_wait(rlog, "relay.breaker.open", 1, 20 * T_SEC), 1);
	/* well past --max-age: 8 s after the enqueue, probes going all along */
	assert_none_dead_for(out, (int)(t0 + 8 * T_SEC - ts_now_ms()), rlog);
	ck_assert_int_ge(ts_log_count(rlog, "relay.breaker.probe"), 3);
	ck_assert_int_eq(ts_query_int(out,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'pending'"), 20);
	/* no attempt reached a consumer: none is counted */
	ck_assert_int_eq(ts_query_int(out,
	    "SELECT count(*) FROM outbox.messages WHERE attempts > 1"), 0);

	/* The consumer comes up on that port: each applied exactly once. */
	close(refusing);
	snprintf(ready, sizeof(ready), "%s/outage.ready", ts_tmpdir());
	const char *cextra[] = { "--ready-file", ready, NULL };
	pid_t consumer = ts_consumer_spawn(clog, idb, url, cextra);
	free(ts_wait_ready_file(ready, consumer, clog, 60 * T_SEC));
	ck_assert_int_eq(ts_wait_value(out,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'", 20, 60 * T_SEC), 20);
	ck_assert_int_eq(ts_query_int(out, dead_sql), 0);
	ck_assert_int_eq(ts_query_int(in, "SELECT count(*) FROM inbox.notifications"), 20);
	ck_assert_int_eq(ts_query_int(in,
	    "SELECT count(DISTINCT idempotency_key) FROM inbox.notifications"), 20);
	ck_assert_int_ge(ts_log_count(rlog, "relay.breaker.closed"), 1);
	relay_stop(relay);
	ts_stop(consumer, SIGTERM);
	PQfinish(out);
	PQfinish(in);
}
END_TEST

/* Retries through an outage: 10 messages answered retry once (a
 * Retry-After of 3 s keeps it to once), then the consumer is gone while
 * they come due again, with --max-attempts 3: the failed claims of the
 * retries reach no consumer and count nothing. */
START_TEST(test_outage_keeps_retry_attempts)
{
	char db[TS_CONNINFO_MAX], url[256], route[300], log[256];
	ts_db_create("outage_retry", "outbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	struct ts_fake_consumer fc;
	ts_fake_consumer_routed(&fc, "outage-retry", "*", TS_FAKE_RETRY, url, sizeof(url),
	    route, sizeof(route));
	atomic_store(&fc.retry_after_ms, 3000);
	ts_enqueue_n(conn, "t", "r", 10);
	const char *extra[] = { "--max-attempts", "3", "--poll-ms", "100",
		"--delivery-timeout-ms", "500ms", "--lease-ms", "2s", "--backoff-base-ms", "10",
		"--backoff-cap-ms", "100", "--breaker-threshold", "2",
		"--breaker-probe-interval", "100ms", NULL };
	pid_t relay = ts_relay_spawn(log, db, route, extra);
	ck_assert_int_eq(ts_wait_value(conn,
	    "SELECT count(*) FROM outbox.retries WHERE attempts = 1 AND batch_id IS NULL", 10,
	    30 * T_SEC), 10);
	ts_fake_consumer_stop(&fc);
	int64_t answered = (int64_t)atomic_load(&fc.messages);
	ck_assert_int_eq(answered, 10);
	/* they come due after 3 s, and are claimed and fail, for 7 s */
	ck_assert_int_eq(ts_log_wait(log, "relay.breaker.open", 1, 20 * T_SEC), 1);
	assert_none_dead_for(conn, 7 * T_SEC, log);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.retries WHERE batch_id IS NULL AND attempts > 1"), 0);

	ts_fake_consumer_start(&fc, url, TS_FAKE_APPLIED);
	ck_assert_int_eq(ts_wait_value(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'", 10, 30 * T_SEC), 10);
	ck_assert_int_eq(ts_query_int(conn, dead_sql), 0);
	ck_assert_int_eq(atomic_load(&fc.messages), 10);
	relay_stop(relay);
	ts_fake_consumer_stop(&fc);
	PQfinish(conn);
}
END_TEST

/* Where a consumer is reached, --max-age still ends a failing message:
 * answered retry, and taken but never answered. */
START_TEST(test_reached_consumer_dead_by_max_age)
{
	static const struct {
		enum ts_fake_mode mode;
		const char *error;
	} cases[] = {
		{ TS_FAKE_RETRY, "max age (2000 ms) reached; last error: consumer asked to retry:"
		    " busy, try later" },
		{ TS_FAKE_SILENT, "max age (2000 ms) reached; last error: no reply from ipc://%" },
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		char db[TS_CONNINFO_MAX], url[256], route[300], log[256], name[32], sql[400];
		snprintf(name, sizeof(name), "reached%zu", k);
		ts_db_create(name, "outbox", db, sizeof(db));
		PGconn *conn = ts_connect(db);
		struct ts_fake_consumer fc;
		ts_fake_consumer_routed(&fc, name, "*", cases[k].mode, url, sizeof(url), route,
		    sizeof(route));
		ts_enqueue_n(conn, "t", "a", 5);
		const char *extra[] = { "--max-age", "2s", "--max-attempts", "1000",
			"--poll-ms", "100", "--delivery-timeout-ms", "300ms", "--lease-ms", "2s",
			"--backoff-base-ms", "10", "--backoff-cap-ms", "100",
			"--breaker-probe-interval", "200ms", NULL };
		pid_t relay = ts_relay_spawn(log, db, route, extra);
		ck_assert_int_eq(ts_wait_value(conn, dead_sql, 5, 30 * T_SEC), 5);
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM outbox.messages WHERE status ="
		    " 'dead' AND attempts >= 1 AND last_error LIKE '%s'", cases[k].error);
		ck_assert_msg(ts_query_int(conn, sql) == 5, "case %zu: %s", k, cases[k].error);
		ck_assert_uint_ge(atomic_load(&fc.messages), 5);
		relay_stop(relay);
		ts_fake_consumer_stop(&fc);
		PQfinish(conn);
	}
}
END_TEST

/* outboxctl status --json (more args, NULL-ended; --db added): the topic's
 * object, or the total with topic NULL. Returns the parsed document. */
static json_t *
status_json(const char *db, char *out)
{
	char *argv[] = { "outboxctl", "status", "--json", "--db", (char *)db, NULL };
	ck_assert_msg(ts_run(argv, NULL, out, OUT_MAX, 30 * T_SEC) == 0, "%s", out);
	json_error_t e;
	json_t *j = json_loads(out, 0, &e);
	ck_assert_msg(j != NULL, "not JSON: %s", out);
	return j;
}

static int64_t
status_field(json_t *j, const char *topic, const char *field)
{
	json_t *o = NULL;
	if (topic == NULL) {
		o = json_object_get(j, "total");
	} else {
		size_t i;
		json_t *t;
		json_array_foreach(json_object_get(j, "topics"), i, t)
			if (strcmp(json_string_value(json_object_get(t, "topic")), topic) == 0)
				o = t;
	}
	ck_assert_msg(o != NULL, "no topic %s", topic ? topic : "(total)");
	json_t *v = json_object_get(o, field);
	ck_assert_msg(json_is_integer(v), "%s of %s is not an integer", field,
	    topic ? topic : "(total)");
	return json_integer_value(v);
}

/* Defect 2: a relay with a route for x1 only. y1 waits (not claimed),
 * shown in status, the metric and the log; delivered once routed; dead
 * with "no route" only under --unrouted dead-letter. */
START_TEST(test_unrouted_topics_wait)
{
	char db[TS_CONNINFO_MAX], url[256], route[300], yroute[300], log[256], log2[256],
	    log3[256];
	char *out = malloc(OUT_MAX);
	ts_db_create("unrouted", "outbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	struct ts_fake_consumer fc;
	ts_fake_consumer_routed(&fc, "unrouted", "x1", TS_FAKE_APPLIED, url, sizeof(url), route,
	    sizeof(route));
	ts_enqueue_n(conn, "x1", "x", 3);
	ts_enqueue_n(conn, "y1", "y", 7);
	const char *extra[] = { "--poll-ms", "100", "--metrics", "127.0.0.1:0",
		"--metrics-interval", "200ms", NULL };
	pid_t relay = ts_relay_spawn(log, db, route, extra);
	ck_assert_int_eq(ts_wait_value(conn, "SELECT count(*) FROM outbox.messages"
	    " WHERE topic = 'x1' AND status = 'delivered'", 3, 30 * T_SEC), 3);
	assert_none_dead_for(conn, 3 * T_SEC, log);
	/* never claimed: pending, no attempt */
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.messages"
	    " WHERE topic = 'y1' AND status = 'pending' AND attempts = 0"), 7);

	/* the metric: this relay's pending of topics it has no route for */
	int port = ts_log_wait_port(log, "relay.metrics.listening", 30 * T_SEC);
	ck_assert_int_eq(ts_wait_metric(port, "outbox_relay_unrouted_pending{topic=\"y1\"}", 7,
	    30 * T_SEC), 7);
	ck_assert(ts_metric(port, "outbox_relay_unrouted_pending{topic=\"x1\"}") == 0);

	/* Waiting for over a minute, and no relay claimed from it: status
	 * shows it unclaimed, and the relay logs it (once per interval) */
	json_t *j = status_json(db, out);
	ck_assert_int_eq(status_field(j, "y1", "unclaimed"), 0); /* not a minute yet */
	json_decref(j);
	ts_exec(conn, "UPDATE outbox.events SET created_at = now() - interval '2 minutes'"
	    " WHERE topic = 'y1'");
	j = status_json(db, out);
	ck_assert_int_eq(status_field(j, "y1", "pending"), 7);
	ck_assert_int_eq(status_field(j, "y1", "unclaimed"), 7);
	ck_assert_int_eq(status_field(j, "x1", "unclaimed"), 0);
	ck_assert_int_eq(status_field(j, NULL, "unclaimed"), 7);
	json_decref(j);
	char *argv[] = { "outboxctl", "status", "--topic", "y1", "--db", db, NULL };
	ck_assert_int_eq(ts_run(argv, NULL, out, OUT_MAX, 30 * T_SEC), 0);
	ck_assert_msg(strstr(out, "  RETRYING  UNCLAIMED\n") != NULL, "%s", out);
	ck_assert_int_eq(ts_log_wait(log, "relay.topic.unrouted topic=y1 pending=7", 1,
	    30 * T_SEC), 1);
	relay_stop(relay);
	ck_assert_int_eq(ts_log_count(log, "relay.topic.unrouted topic=y1"), 1);
	ck_assert_int_eq(ts_log_count(log, "relay.topic.unrouted topic=x1"), 0);

	/* A relay that routes y1 too: each delivered once, nothing dead. */
	snprintf(yroute, sizeof(yroute), "y1=%s", url);
	const char *extra2[] = { "--route", yroute, "--poll-ms", "100", NULL };
	uint64_t before = atomic_load(&fc.messages);
	relay = ts_relay_spawn(log2, db, route, extra2);
	ck_assert_int_eq(ts_wait_value(conn, "SELECT count(*) FROM outbox.messages"
	    " WHERE topic = 'y1' AND status = 'delivered'", 7, 30 * T_SEC), 7);
	ck_assert_uint_eq(atomic_load(&fc.messages) - before, 7);
	ck_assert_int_eq(ts_query_int(conn, dead_sql), 0);
	j = status_json(db, out);
	ck_assert_int_eq(status_field(j, NULL, "unclaimed"), 0);
	json_decref(j);
	relay_stop(relay);

	/* --unrouted dead-letter: the explicit choice, "no route". */
	ts_enqueue_n(conn, "z1", "z", 2);
	const char *extra3[] = { "--unrouted", "dead-letter", "--poll-ms", "100", NULL };
	relay = ts_relay_spawn(log3, db, route, extra3);
	ck_assert_int_eq(ts_wait_value(conn, "SELECT count(*) FROM outbox.messages"
	    " WHERE topic = 'z1' AND status = 'dead'"
	    " AND last_error = 'no route for topic ''z1'''", 2, 30 * T_SEC), 2);
	relay_stop(relay);
	ck_assert_int_eq(ts_log_count(log3, "relay.topic.unrouted"), 0);
	ts_fake_consumer_stop(&fc);
	PQfinish(conn);
	free(out);
}
END_TEST

/* --only-routed: still accepted (what it asked for is the default now),
 * with a deprecation line; not together with --unrouted dead-letter. */
START_TEST(test_only_routed_alias)
{
	char db[TS_CONNINFO_MAX], url[256], route[300], log[256], out[2048];
	ts_db_create("onlyalias", "outbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	struct ts_fake_consumer fc;
	ts_fake_consumer_routed(&fc, "onlyalias", "x1", TS_FAKE_APPLIED, url, sizeof(url), route,
	    sizeof(route));
	ts_enqueue_n(conn, "y1", "y", 1);
	ts_enqueue_n(conn, "x1", "x", 1);
	const char *extra[] = { "--only-routed", "--poll-ms", "100", NULL };
	pid_t relay = ts_relay_spawn(log, db, route, extra);
	ck_assert_int_eq(ts_wait_value(conn, "SELECT count(*) FROM outbox.messages"
	    " WHERE topic = 'x1' AND status = 'delivered'", 1, 30 * T_SEC), 1);
	ck_assert_int_eq(ts_log_count(log, "relay.config.deprecated flag=--only-routed"), 1);
	assert_none_dead_for(conn, 1 * T_SEC, log);
	relay_stop(relay);

	char *argv[] = { "outbox-relay", "--db", db, "--route", route, "--only-routed",
		"--unrouted", "dead-letter", NULL };
	ck_assert_int_eq(ts_run(argv, NULL, out, sizeof(out), 30 * T_SEC), 2);
	ck_assert_msg(strstr(out, "outbox-relay: --only-routed and --unrouted dead-letter")
	    == out, "%s", out);
	ts_fake_consumer_stop(&fc);
	PQfinish(conn);
}
END_TEST

static Suite *
relay_outage_suite(void)
{
	Suite *s = suite_create("relay_outage");
	TCase *tc = tcase_create("outage");
	tcase_set_timeout(tc, 150);
	tcase_add_test(tc, test_outage_longer_than_max_age);
	tcase_add_test(tc, test_outage_keeps_retry_attempts);
	tcase_add_test(tc, test_reached_consumer_dead_by_max_age);
	tcase_add_test(tc, test_unrouted_topics_wait);
	tcase_add_test(tc, test_only_routed_alias);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	int rc = ts_run_suite(relay_outage_suite());
	nng_fini();
	return rc;
}
