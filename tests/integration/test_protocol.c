/*
 * test_protocol.c - every program checks at start, and after reconnecting,
 * that the database schema serves the protocol version it speaks
 * (outbox.protocols / inbox.protocols), and refuses one that does not with
 * one line that says what to upgrade. A relay whose schema stops serving
 * it while it runs (a migration retired its protocol) stops cleanly, exit
 * 3, instead of restarting its workers into the same refusal. The schema
 * is made "newer" or "older" by editing its protocol table, as a migration
 * would.
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

static void
serve_only(PGconn *c, const char *schema, const char *component, int min, int max)
{
	char sql[256];
	snprintf(sql, sizeof(sql), "UPDATE %s.protocols SET min_version = %d, max_version = %d"
	    " WHERE component = '%s'", schema, min, max, component);
	ts_exec(c, sql);
}

static int
count_lines(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* Run argv to its exit; the exit code, its output in out. */
static int
run(char *const argv[], char *out, size_t len)
{
	return ts_run(argv, NULL, out, len, 30 * T_SEC);
}

START_TEST(test_relay_refuses_at_start)
{
	char db[TS_CONNINFO_MAX], out[4096];
	ts_db_create("proto_relay", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	char *argv[] = { "outbox-relay", "--db", db, "--route", "*=ipc:///tmp/x", NULL };
	/* a schema newer than this relay: upgrade the relay */
	serve_only(c, "outbox", "relay", 6, 6);
	ck_assert_int_eq(run(argv, out, sizeof(out)), 2);
	ck_assert_msg(strstr(out, "outbox schema serves relay protocol 6..6, this program speaks 5:"
	    " upgrade the program") != NULL, "%s", out);
	ck_assert_int_eq(count_lines(out), 1);
	/* older: run outboxctl migrate */
	serve_only(c, "outbox", "relay", 1, 2);
	ck_assert_int_eq(run(argv, out, sizeof(out)), 2);
	ck_assert_msg(strstr(out, "run outboxctl migrate") != NULL, "%s", out);
	/* a schema from before versions existed (no outbox.check_protocol) */
	ts_exec(c, "DROP FUNCTION outbox.check_protocol(text, integer)");
	ck_assert_int_eq(run(argv, out, sizeof(out)), 2);
	ck_assert_msg(strstr(out, "the outbox schema is older than this relay (protocol 5) needs:"
	    " run outboxctl migrate") != NULL, "%s", out);
	PQfinish(c);
}
END_TEST

/* Running, then retired by a "migration": the workers' next connection is
 * refused; the relay logs why and stops, exit 3, nothing restarted. */
START_TEST(test_relay_stops_when_retired)
{
	char db[TS_CONNINFO_MAX], url[256], route[300], log[256];
	ts_db_create("proto_retire", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	struct ts_fake_consumer fc;
	ts_fake_consumer_routed(&fc, "proto", "*", TS_FAKE_APPLIED, url,
	    sizeof(url), route, sizeof(route));
	const char *extra[] = { "--workers", "2", "--poll-ms", "100", NULL };
	pid_t sup = ts_relay_spawn(log, db, route, extra);
	ck_assert_int_eq(ts_log_wait(log, "relay.db.connected", 2, 20 * T_SEC), 2);
	ts_enqueue_n(c, "t", "p", 5);
	ck_assert_int_eq(ts_wait_value(c,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'", 5, 30 * T_SEC), 5);

	serve_only(c, "outbox", "relay", 6, 6);
	ck_assert_int_eq(ts_query_int(c,
	    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
	    " WHERE application_name = 'outbox-relay' AND datname = current_database()"), 2);
	ck_assert_int_eq(ts_wait_exit(sup, 30 * T_SEC), 3);
	ck_assert_int_ge(ts_log_count(log, "relay.protocol.refused"), 1);
	ck_assert_int_ge(ts_log_count(log, "upgrade the program"), 1);
	ck_assert_int_eq(ts_log_count(log, "relay.protocol.stop"), 1);
	ck_assert_int_eq(ts_log_count(log, "restart_in_ms="), 0);
	ts_fake_consumer_stop(&fc);
	PQfinish(c);
}
END_TEST

START_TEST(test_consumer_and_producer_refuse)
{
	char db[TS_CONNINFO_MAX], out[4096];
	ts_db_create("proto_cp", "all", db, sizeof(db));
	PGconn *c = ts_connect(db);
	char url[256];
	ts_ipc_url("protoc", url, sizeof(url));
	serve_only(c, "inbox", "consumer", 6, 6);
	char *consumer[] = { "outbox-consumer", "--db", db, "--listen", url, NULL };
	ck_assert_int_ne(run(consumer, out, sizeof(out)), 0);
	ck_assert_msg(strstr(out, "inbox schema serves consumer protocol 6..6, this program"
	    " speaks 5: upgrade the program") != NULL, "%s", out);
	ck_assert_int_eq(count_lines(out), 1);

	serve_only(c, "outbox", "producer", 4, 4);
	char *enq[] = { "outbox-producer", "enqueue", "--db", db, NULL };
	ck_assert_int_ne(run(enq, out, sizeof(out)), 0);
	ck_assert_msg(strstr(out, "outbox schema serves producer protocol 4..4") != NULL, "%s", out);
	char *serve[] = { "outbox-producer", "serve", "--db", db, "--http",
		"http://127.0.0.1:0", NULL };
	ck_assert_int_ne(run(serve, out, sizeof(out)), 0);
	ck_assert_msg(strstr(out, "outbox schema serves producer protocol 4..4") != NULL, "%s", out);
	/* A schema before 026 (producer 2: the keys of /v1/messages in
	 * app.message_keys) is too old for this build (producer 3). */
	serve_only(c, "outbox", "producer", 1, 2);
	ck_assert_int_ne(run(serve, out, sizeof(out)), 0);
	ck_assert_msg(strstr(out, "outbox schema serves producer protocol 1..2") != NULL, "%s", out);
	ck_assert_int_eq(count_lines(out), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.events"), 0);
	PQfinish(c);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("protocol");
	TCase *tc = tcase_create("protocol");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_relay_refuses_at_start);
	tcase_add_test(tc, test_relay_stops_when_retired);
	tcase_add_test(tc, test_consumer_and_producer_refuse);
	suite_add_tcase(s, tc);
	int rc = ts_run_suite(s);
	nng_fini();
	return rc;
}
