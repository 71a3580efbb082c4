/*
 * test_e2e.c - the foundation's end-to-end proof against a real PostgreSQL
 * and real nng sockets: committed records are delivered and applied exactly
 * once, rolled-back ones never; enqueue and migrations are idempotent.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "enqueue.h"
#include "outbox/err.h"
#include "outbox/migrate.h"
#include "testsupport.h"
#include "ts_consumer.h"
#include "ts_relay.h"

#define COMMITTED 1000
#define ROLLED_BACK 100

static void
enqueue_in_tx(PGconn *conn, const char *key, bool commit)
{
	struct bug_report r = { "Crash on save", "editor", "1. open 2. save", "high" };
	int64_t rid, mid;
	char err[512];
	ts_exec(conn, "BEGIN");
	ck_assert_msg(producer_insert_report(conn, &r, key, &rid, &mid, err, sizeof(err)) == OB_OK,
	    "%s", err);
	ts_exec(conn, commit ? "COMMIT" : "ROLLBACK");
}

START_TEST(test_deliver_exactly_once)
{
	char db[TS_CONNINFO_MAX], url[256], key[64];
	ts_db_create("e2e", "all", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	for (int i = 0; i < COMMITTED + ROLLED_BACK; i++) {
		bool commit = i % 11 != 10; /* every 11th is rolled back: 100 of 1100 */
		snprintf(key, sizeof(key), "%s-%d", commit ? "ok" : "rb", i);
		enqueue_in_tx(conn, key, commit);
	}
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.messages"), COMMITTED);

	ts_ipc_url("consumer", url, sizeof(url));
	char route[300];
	snprintf(route, sizeof(route), "*=%s", url);
	const char *relay_extra[] = { "--poll-ms", "100", NULL };
	pid_t cpid = ts_consumer_spawn(NULL, db, url, NULL);
	pid_t rpid = ts_relay_spawn(NULL, db, route, relay_extra);

	int64_t delivered = ts_wait_value(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'", COMMITTED, 60000);
	ts_stop(rpid, SIGTERM);
	ts_stop(cpid, SIGTERM);
	ck_assert_int_eq(delivered, COMMITTED);

	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.notifications"), COMMITTED);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(DISTINCT idempotency_key) FROM inbox.notifications"), COMMITTED);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM inbox.notifications WHERE idempotency_key LIKE 'rb-%'"), 0);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status <> 'delivered'"), 0);
	/* What the consumer received is what was enqueued: key, topic, payload, id. */
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages m JOIN inbox.notifications n"
	    "  ON n.idempotency_key = m.idempotency_key AND n.topic = m.topic"
	    " AND n.payload = m.payload AND n.message_id = m.id"), COMMITTED);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM inbox.processed"), COMMITTED);
	PQfinish(conn);
}
END_TEST

/* The error of a call, or "" when it succeeded. */
static char *
exec_error(PGconn *conn, const char *sql, char *sqlstate, size_t len)
{
	static char msg[1024];
	PGresult *r = PQexec(conn, sql);
	msg[0] = '\0';
	sqlstate[0] = '\0';
	if (PQresultStatus(r) == PGRES_FATAL_ERROR) {
		snprintf(msg, sizeof(msg), "%s", PQresultErrorMessage(r));
		const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
		snprintf(sqlstate, len, "%s", st ? st : "");
	}
	PQclear(r);
	return msg;
}

START_TEST(test_enqueue_idempotent)
{
	char db[TS_CONNINFO_MAX], state[8];
	ts_db_create("enq", "outbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	int64_t a = ts_query_int(conn, "SELECT outbox.enqueue('t', 'same-key', '{\"n\":1,\"m\":2}')");
	/* The same payload, as jsonb: key order and whitespace do not count. */
	int64_t b = ts_query_int(conn,
	    "SELECT outbox.enqueue('t', 'same-key', '{ \"m\": 2, \"n\": 1 }')");
	ck_assert_int_eq(a, b);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.messages"), 1);
	/* Another payload under the key: refused, OB002, naming key and topic. */
	char *err = exec_error(conn, "SELECT outbox.enqueue('t', 'same-key', '{\"n\":2}')",
	    state, sizeof(state));
	ck_assert_str_eq(state, "OB002");
	ck_assert_msg(strstr(err, "outbox.enqueue: idempotency key \"same-key\" of topic \"t\""
	                          " was already used with another payload") != NULL, "%s", err);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.messages"), 1);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT (payload->>'n')::int FROM outbox.messages"), 1);
	/* It aborts the caller's transaction: its business row goes too. */
	ts_exec(conn, "CREATE TABLE orders (id int)");
	ts_exec(conn, "BEGIN");
	ts_exec(conn, "INSERT INTO orders VALUES (1)");
	exec_error(conn, "SELECT outbox.enqueue('t', 'same-key', '{\"n\":3}')", state,
	    sizeof(state));
	ck_assert_str_eq(state, "OB002");
	ts_exec(conn, "ROLLBACK");
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM orders"), 0);
	/* The same key on another topic is another message. */
	int64_t c = ts_query_int(conn, "SELECT outbox.enqueue('u', 'same-key', '{}')");
	ck_assert_int_ne(a, c);
	PQfinish(conn);
}
END_TEST

/* Two transactions enqueue one key with different payloads at once: the
 * second waits for the first (the key's unique index), then is refused. */
START_TEST(test_enqueue_concurrent_other_payload)
{
	char db[TS_CONNINFO_MAX], state[8];
	ts_db_create("enqc", "outbox", db, sizeof(db));
	PGconn *first = ts_connect(db), *second = ts_connect(db), *watch = ts_connect(db);
	ts_exec(first, "BEGIN");
	int64_t id = ts_query_int(first, "SELECT outbox.enqueue('t', 'k', '{\"v\":\"first\"}')");
	ts_exec(second, "SET application_name = 'second'");
	ck_assert_int_eq(PQsendQuery(second, "SELECT outbox.enqueue('t', 'k', '{\"v\":\"second\"}')"),
	    1);
	ck_assert_int_eq(ts_wait_value(watch, "SELECT count(*) FROM pg_stat_activity"
	    " WHERE application_name = 'second' AND wait_event_type = 'Lock'", 1, 30000), 1);
	ts_exec(first, "COMMIT");
	PGresult *r = PQgetResult(second);
	ck_assert_int_eq(PQresultStatus(r), PGRES_FATAL_ERROR);
	snprintf(state, sizeof(state), "%s", PQresultErrorField(r, PG_DIAG_SQLSTATE));
	ck_assert_str_eq(state, "OB002");
	PQclear(r);
	while ((r = PQgetResult(second)) != NULL)
		PQclear(r);
	ck_assert_int_eq(ts_query_int(watch, "SELECT count(*) FROM outbox.events"), 1);
	ck_assert_int_eq(ts_query_int(watch, "SELECT id FROM outbox.events"
	    " WHERE payload->>'v' = 'first'"), id);
	PQfinish(first);
	PQfinish(second);
	PQfinish(watch);
}
END_TEST

START_TEST(test_enqueue_bad_input_changes_nothing)
{
	char db[TS_CONNINFO_MAX];
	ts_db_create("enqbad", "outbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	const char *bad[] = {
		"SELECT outbox.enqueue('t', '', '{}')",
		"SELECT outbox.enqueue('t', repeat('k', 256), '{}')",
		"SELECT outbox.enqueue('', 'k', '{}')",
		"SELECT outbox.enqueue('t', 'k', NULL)",
		"SELECT outbox.enqueue('t', 'k', '{}', '')",
		"SELECT outbox.enqueue('t', 'k', jsonb_build_object('x', repeat('a', 1048577)))",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		PGresult *r = PQexec(conn, bad[i]);
		ck_assert_msg(PQresultStatus(r) == PGRES_FATAL_ERROR, "accepted: %s", bad[i]);
		ck_assert_msg(strstr(PQresultErrorMessage(r), "outbox.enqueue") != NULL,
		    "unclear error for %s: %s", bad[i], PQresultErrorMessage(r));
		PQclear(r);
	}
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.messages"), 0);
	/* 255 bytes is the largest key that is accepted. */
	ck_assert_int_gt(ts_query_int(conn, "SELECT outbox.enqueue('t', repeat('k', 255), '{}')"), 0);
	PQfinish(conn);
}
END_TEST

START_TEST(test_producer_enqueue_command)
{
	char db[TS_CONNINFO_MAX], out[4096];
	ts_db_create("enqcmd", "outbox", db, sizeof(db));
	char *ok[] = { "outbox-producer", "enqueue", "--db", db, "--title", "T", "--key", "k1", NULL };
	ck_assert_int_eq(ts_run(ok, NULL, out, sizeof(out), 20000), 0);
	ck_assert_msg(strstr(out, "key=k1") && strstr(out, "enqueued=1"), "%s", out);
	/* An invalid severity is refused before anything is opened. */
	char *bad[] = { "outbox-producer", "enqueue", "--db", db, "--severity", "urgent", NULL };
	ck_assert_int_eq(ts_run(bad, NULL, out, sizeof(out), 20000), 2);
	ck_assert_msg(strstr(out, "--severity") != NULL, "%s", out);
	/* A title the table refuses rolls back the report AND the outbox record. */
	char *empty[] = { "outbox-producer", "enqueue", "--db", db, "--title", "", NULL };
	ck_assert_int_eq(ts_run(empty, NULL, out, sizeof(out), 20000), 2);
	PGconn *conn = ts_connect(db);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM app.bug_reports"), 1);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.messages"), 1);
	PQfinish(conn);
}
END_TEST

/* How many migrations the binaries carry (sql/ embedded at build time). */
static int
migrations_total(void)
{
	int n = 0; /* outbox and inbox: the demo's only with --demo */
	for (const struct ob_migration *m = ob_migrations; m->set != NULL; m++)
		n += strcmp(m->set, "demo") != 0;
	return n;
}

START_TEST(test_migrate_twice_and_concurrently)
{
	char db[TS_CONNINFO_MAX], out[2048], want[64];
	ts_db_create("mig", NULL, db, sizeof(db));
	char *argv[] = { "outboxctl", "migrate", "--db", db, NULL };
	ck_assert_int_eq(ts_run(argv, NULL, out, sizeof(out), 30000), 0);
	snprintf(want, sizeof(want), "%d migrations applied", migrations_total());
	ck_assert_msg(strstr(out, want) != NULL, "want '%s': %s", want, out);
	ck_assert_int_eq(ts_run(argv, NULL, out, sizeof(out), 30000), 0);
	ck_assert_msg(strstr(out, "0 migrations applied") != NULL, "%s", out);

	/* Four concurrent runs on a fresh database leave one copy. */
	char db2[TS_CONNINFO_MAX];
	ts_db_create("migc", NULL, db2, sizeof(db2));
	char *argv2[] = { "outboxctl", "migrate", "--db", db2, NULL };
	pid_t pids[4];
	for (int i = 0; i < 4; i++)
		pids[i] = ts_spawn(argv2, NULL, NULL);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(ts_wait_exit(pids[i], 30000), 0);
	PGconn *conn = ts_connect(db2);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT (SELECT count(*) FROM outbox.schema_migrations)"
	    " + (SELECT count(*) FROM inbox.schema_migrations)"), migrations_total());
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM pg_proc WHERE proname = 'enqueue'"), 1);
	PQfinish(conn);

	char *bad[] = { "outboxctl", "migrate", "--db", db, "--schema", "nope", NULL };
	ck_assert_int_eq(ts_run(bad, NULL, out, sizeof(out), 30000), 2);
	ck_assert_msg(strstr(out, "--schema") != NULL, "%s", out);
}
END_TEST

static Suite *
e2e_suite(void)
{
	Suite *s = suite_create("e2e");
	TCase *tc = tcase_create("foundation");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_deliver_exactly_once);
	tcase_add_test(tc, test_enqueue_idempotent);
	tcase_add_test(tc, test_enqueue_concurrent_other_payload);
	tcase_add_test(tc, test_enqueue_bad_input_changes_nothing);
	tcase_add_test(tc, test_producer_enqueue_command);
	tcase_add_test(tc, test_migrate_twice_and_concurrently);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return ts_run_suite(e2e_suite());
}
