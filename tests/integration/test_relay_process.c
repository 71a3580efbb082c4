/*
 * test_relay_process.c - the relay's process model against a real
 * PostgreSQL: bad configuration exits 2 with one line; the supervisor forks
 * N workers and restarts one that is killed; SIGTERM releases claims that
 * were never sent (fenced write, attempt refunded) and exits 0; in-flight
 * frames are cut within the grace; a stuck worker is SIGKILLed at the
 * deadline or on a second signal; a fault armed once fires once in the
 * whole process tree; a stalled worker is fenced out and says so.
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

/* The pid of the worker with this index, from its last relay.worker.forked line. */
static pid_t
worker_pid(const char *log, int index)
{
	char needle[64];
	snprintf(needle, sizeof(needle), "relay.worker.forked worker=%d ", index);
	/* The worker's own "started" line can be in the log before the
	 * supervisor's "forked" line: wait for the latter. A pid of 0 would
	 * make kill(0, SIGSTOP) stop this test's whole process group. */
	ck_assert_int_ge(ts_log_wait(log, needle, 1, 20000), 1);
	char *text = ts_read_file(log);
	const char *p = text, *last = NULL;
	while (p != NULL && (p = strstr(p, needle)) != NULL)
		last = p++;
	pid_t pid = 0;
	if (last != NULL && (last = strstr(last, " pid=")) != NULL)
		pid = (pid_t)strtol(last + 5, NULL, 10);
	free(text);
	ck_assert_int_gt(pid, 0);
	return pid;
}

static int
lines(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static void
expect_exit2(char *const argv[], const char *needle)
{
	char out[4096];
	int code = ts_run(argv, NULL, out, sizeof(out), 30 * T_SEC);
	ck_assert_msg(code == 2, "exit %d for %s: %s", code, needle, out);
	ck_assert_msg(strstr(out, needle) != NULL, "'%s' not in: %s", needle, out);
	ck_assert_msg(lines(out) == 1, "not one line: %s", out);
}

START_TEST(test_bad_config_exit_2)
{
	char db[TS_CONNINFO_MAX];
	ts_db_create("rbad", "outbox", db, sizeof(db));
	char *unknown[] = { "outbox-relay", "--db", db, "--route", "*=ipc:///tmp/x",
		"--bogus", NULL };
	expect_exit2(unknown, "--bogus");
	char *lease[] = { "outbox-relay", "--db", db, "--route", "*=ipc:///tmp/x",
		"--lease-ms", "2s", "--delivery-timeout-ms", "1500ms", NULL };
	expect_exit2(lease, "--lease-ms (2000) must exceed --delivery-timeout-ms (1500)");
	char *url[] = { "outbox-relay", "--db", db, "--route", "t=nope://where", NULL };
	expect_exit2(url, "nng cannot parse URL 'nope://where'");
	char *noeq[] = { "outbox-relay", "--db", db, "--route", "ipc:///tmp/x", NULL };
	expect_exit2(noeq, "expected TOPIC=URL");
	char *zero[] = { "outbox-relay", "--db", db, "--route", "*=ipc:///tmp/x",
		"--workers", "0", NULL };
	expect_exit2(zero, "--workers");
	char *many[] = { "outbox-relay", "--db", db, "--route", "*=ipc:///tmp/x",
		"--workers", "65", NULL };
	expect_exit2(many, "--workers");
	char *sync[] = { "outbox-relay", "--db", db, "--route", "*=ipc:///tmp/x",
		"--synchronous-commit", "maybe", NULL };
	expect_exit2(sync, "--synchronous-commit: 'maybe' is not one of on|off");
	char *stall[] = { "outbox-relay", "--db", db, "--route", "*=ipc:///tmp/x",
		"--fault-stall-after-claim", "1", NULL };
	expect_exit2(stall, "--fault-stall-ms");
	char *nodb[] = { "outbox-relay", "--db", "host=/nonexistent/sock port=1 dbname=x",
		"--route", "*=ipc:///tmp/x", NULL };
	expect_exit2(nodb, "connect to");
	char noschema[TS_CONNINFO_MAX];
	ts_db_create("rbad2", NULL, noschema, sizeof(noschema));
	char *empty[] = { "outbox-relay", "--db", noschema, "--route", "*=ipc:///tmp/x", NULL };
	expect_exit2(empty, "outboxctl migrate");
	/* The environment is read too, and checked the same way. */
	char out[16384]; /* --help is over 5 KB */
	char *env_argv[] = { "outbox-relay", "--db", db, "--route", "*=ipc:///tmp/x", NULL };
	char *env[] = { "OUTBOX_WORKERS=0", NULL };
	ck_assert_int_eq(ts_run(env_argv, env, out, sizeof(out), 30 * T_SEC), 2);
	ck_assert_msg(strstr(out, "OUTBOX_WORKERS") != NULL && lines(out) == 1, "%s", out);
	/* --help tells the truth about the new flags. */
	char *help[] = { "outbox-relay", "--help", NULL };
	ck_assert_int_eq(ts_run(help, NULL, out, sizeof(out), 30 * T_SEC), 0);
	ck_assert(strstr(out, "--shutdown-grace") != NULL);
	ck_assert(strstr(out, "OUTBOX_FAULT_STALL_MS") != NULL);
}
END_TEST

START_TEST(test_workers_restart)
{
	char db[TS_CONNINFO_MAX], url[256], route[300], log[256];
	ts_db_create("rsup", "outbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	struct ts_fake_consumer fc;
	ts_fake_consumer_routed(&fc, "sup", "*", TS_FAKE_APPLIED, url,
	    sizeof(url), route, sizeof(route));
	const char *extra[] = { "--workers", "3", "--poll-ms", "100", NULL };
	pid_t sup = ts_relay_spawn(log, db, route, extra);
	ck_assert_int_eq(ts_log_wait(log, "relay.worker.started", 3, 20 * T_SEC), 3);
	pid_t w1 = worker_pid(log, 1);
	ck_assert_int_gt(w1, 0);
	ck_assert_int_ne(w1, sup);
	/* Each worker has its own connection. */
	ck_assert_int_ge(ts_wait_value(conn, "SELECT count(*) FROM pg_stat_activity"
	    " WHERE application_name = 'outbox-relay' AND datname = current_database()",
	    3, 20 * T_SEC), 3);

	kill(w1, SIGKILL);
	ck_assert_int_eq(ts_log_wait(log, "relay.worker.exited worker=1 ", 1, 20 * T_SEC), 1);
	ck_assert_int_eq(ts_log_count(log, "status=signal:9 restart_in_ms="), 1);
	ck_assert_int_eq(ts_log_wait(log, "relay.worker.started", 4, 20 * T_SEC), 4);
	ck_assert_int_ne(worker_pid(log, 1), w1);

	ts_enqueue_n(conn, "t", "s", 100);
	ck_assert_int_eq(ts_wait_value(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'", 100, 30 * T_SEC), 100);
	kill(sup, SIGTERM);
	ck_assert_int_eq(ts_wait_exit(sup, 20 * T_SEC), 0);
	ck_assert_int_eq(ts_log_count(log, "relay.worker.totals worker="), 3);
	ck_assert_int_eq(ts_log_last_value(log, "relay.totals", "delivered"), 100);
	/* No worker outlives the supervisor. */
	ck_assert_int_eq(kill(worker_pid(log, 0), 0), -1);
	ts_fake_consumer_stop(&fc);
	PQfinish(conn);
}
END_TEST

START_TEST(test_shutdown_releases_unsent)
{
	char db[TS_CONNINFO_MAX], url[256], route[300], log[256];
	ts_db_create("rrel", "outbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	struct ts_fake_consumer fc;
	ts_fake_consumer_routed(&fc, "rel", "*", TS_FAKE_APPLIED, url,
	    sizeof(url), route, sizeof(route));
	ts_enqueue_n(conn, "t", "u", 5);
	const char *extra[] = { "--fault-stall-after-claim", "1", "--fault-stall-ms", "60s",
		"--lease-ms", "120s", NULL };
	pid_t sup = ts_relay_spawn(log, db, route, extra);
	ck_assert_int_eq(ts_log_wait(log, "relay.fault.stall ", 1, 20 * T_SEC), 1);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE lease_owner IS NOT NULL AND attempts = 1"), 5);
	int64_t t0 = ts_now_ms();
	kill(sup, SIGTERM);
	ck_assert_int_eq(ts_wait_exit(sup, 20 * T_SEC), 0);
	ck_assert_int_lt(ts_now_ms() - t0, 5 * T_SEC);
	/* Released: pending, unleased, due now, the attempt refunded; never sent. */
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'pending' AND lease_owner IS NULL"
	    " AND attempts = 0 AND available_at <= now()"), 5);
	ck_assert_uint_eq(atomic_load(&fc.frames), 0);
	ck_assert_int_eq(ts_log_last_value(log, "relay.totals", "released"), 5);
	ts_fake_consumer_stop(&fc);
	PQfinish(conn);
}
END_TEST

START_TEST(test_shutdown_cuts_inflight_within_grace)
{
	char db[TS_CONNINFO_MAX], url[256], route[300], log[256];
	ts_db_create("rcut", "outbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	struct ts_fake_consumer fc;
	ts_fake_consumer_routed(&fc, "cut", "*", TS_FAKE_SILENT, url,
	    sizeof(url), route, sizeof(route));
	ts_enqueue_n(conn, "t", "c", 3);
	const char *extra[] = { "--delivery-timeout-ms", "60s", "--lease-ms", "70s",
		"--shutdown-grace", "2s", NULL };
	pid_t sup = ts_relay_spawn(log, db, route, extra);
	int64_t end = ts_now_ms() + 20 * T_SEC;
	while (atomic_load(&fc.frames) == 0 && ts_now_ms() < end)
		usleep(20 * 1000);
	ck_assert_uint_eq(atomic_load(&fc.frames), 1);
	int64_t t0 = ts_now_ms();
	kill(sup, SIGTERM);
	ck_assert_int_eq(ts_wait_exit(sup, 20 * T_SEC), 0);
	int64_t took = ts_now_ms() - t0;
	ck_assert_msg(took >= 1000 && took < 4000, "shutdown took %lld ms", (long long)took);
	/* Sent but unanswered: a retry (the consumer may have applied it), the
	 * attempt counted, the lease given up. */
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'pending' AND lease_owner IS NULL"
	    " AND attempts = 1 AND last_error LIKE 'no reply from%'"), 3);
	ts_fake_consumer_stop(&fc);
	PQfinish(conn);
}
END_TEST

START_TEST(test_stuck_worker_killed)
{
	char db[TS_CONNINFO_MAX], route[300], log[256], log2[256];
	ts_db_create("rkill", "outbox", db, sizeof(db));
	snprintf(route, sizeof(route), "*=ipc://%s/none.ipc", ts_tmpdir());
	/* Deadline: a stopped worker cannot exit; SIGKILL after the grace. */
	const char *extra[] = { "--shutdown-grace", "1s", NULL };
	pid_t sup = ts_relay_spawn(log, db, route, extra);
	ck_assert_int_eq(ts_log_wait(log, "relay.worker.started", 1, 20 * T_SEC), 1);
	pid_t w = worker_pid(log, 0);
	kill(w, SIGSTOP);
	int64_t t0 = ts_now_ms();
	kill(sup, SIGTERM);
	ck_assert_int_eq(ts_wait_exit(sup, 20 * T_SEC), 1);
	ck_assert_int_lt(ts_now_ms() - t0, 5 * T_SEC);
	ck_assert_int_eq(ts_log_count(log, "relay.shutdown.kill workers=1 reason=grace_expired"), 1);

	/* Second signal: SIGKILL at once, long before a 60 s grace. */
	const char *extra2[] = { "--shutdown-grace", "60s", NULL };
	sup = ts_relay_spawn(log2, db, route, extra2);
	ck_assert_int_eq(ts_log_wait(log2, "relay.worker.started", 1, 20 * T_SEC), 1);
	w = worker_pid(log2, 0);
	kill(w, SIGSTOP);
	t0 = ts_now_ms();
	kill(sup, SIGTERM);
	ck_assert_int_eq(ts_log_wait(log2, "relay.shutdown.start", 1, 10 * T_SEC), 1);
	kill(sup, SIGINT);
	ck_assert_int_eq(ts_wait_exit(sup, 20 * T_SEC), 1);
	ck_assert_int_lt(ts_now_ms() - t0, 5 * T_SEC);
	ck_assert_int_eq(ts_log_count(log2, "reason=second_signal"), 1);
}
END_TEST

START_TEST(test_fault_fires_once_in_tree)
{
	char db[TS_CONNINFO_MAX], url[256], route[300], log[256];
	ts_db_create("rfault", "outbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	struct ts_fake_consumer fc;
	ts_fake_consumer_routed(&fc, "fault", "*", TS_FAKE_APPLIED, url,
	    sizeof(url), route, sizeof(route));
	/* A generous delivery deadline (3 s; the lease must exceed it by 1 s):
	 * under a loaded CI (Docker builds beside it) a 300 ms one let every
	 * round trip to the fake consumer time out and retry, and nothing was
	 * delivered in 30 s. The fault needs no deadline: its worker dies
	 * before it sends, and its claim comes back after the lease. */
	const char *extra[] = { "--workers", "2", "--poll-ms", "100",
		"--fault-die-after-claim", "1", "--delivery-timeout-ms", "3s",
		"--lease-ms", "4500ms", "--batch", "5", "--max-inflight", "1", NULL };
	pid_t sup = ts_relay_spawn(log, db, route, extra);
	ck_assert_int_eq(ts_log_wait(log, "relay.worker.started", 2, 20 * T_SEC), 2);
	ts_enqueue_n(conn, "t", "f", 40);
	ck_assert_int_eq(ts_wait_value(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'", 40, 60 * T_SEC), 40);
	/* The dead worker's claim came back after its lease: attempt 2. */
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE attempts = 2"), 5);
	kill(sup, SIGTERM);
	ck_assert_int_eq(ts_wait_exit(sup, 20 * T_SEC), 0);
	ck_assert_int_eq(ts_log_count(log, "fault.die "), 1);
	ck_assert_int_eq(ts_log_count(log, "status=signal:9 restart_in_ms="), 1);
	ck_assert_int_eq(ts_log_count(log, "relay.worker.started"), 3);
	ts_fake_consumer_stop(&fc);
	PQfinish(conn);
}
END_TEST

/* One claim takes 4 messages; its worker stalls 4 s past a 1.5 s lease, the
 * other worker takes the batch over and delivers it, then the stalled one
 * wakes and writes its outcome too. *taken: messages the takeover holds
 * (fence moved past the stalled claim's 1); returns how many outcome
 * writes were fenced out, as the relay's totals say. */
static int64_t
stalled_worker_run(bool fencing, int64_t *taken)
{
	char db[TS_CONNINFO_MAX], url[256], route[300], log[256];
	ts_db_create(fencing ? "rfence" : "rnofence", "outbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	ts_ipc_url(fencing ? "fence" : "nofence", url, sizeof(url));
	snprintf(route, sizeof(route), "*=%s", url);
	struct ts_fake_consumer fc;
	ts_fake_consumer_start(&fc, url, TS_FAKE_APPLIED);
	ts_enqueue_n(conn, "t", "s", 4);
	const char *extra[] = { "--workers", "2", "--poll-ms", "100",
		"--fault-stall-after-claim", "1", "--fault-stall-ms", "4s",
		"--delivery-timeout-ms", "300ms", "--lease-ms", "1500ms",
		"--batch", "10", "--max-inflight", "1", fencing ? NULL : "--no-fencing", NULL };
	pid_t sup = ts_relay_spawn(log, db, route, extra);
	ck_assert_int_eq(ts_wait_value(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'", 4, 30 * T_SEC), 4);
	/* The stalled worker wakes and sends its batch too (the messages taken
	 * over reach the consumer twice), then writes its outcome: refused, or
	 * (broken) not. */
	ck_assert_int_eq(ts_log_wait(log, "relay.fault.stall_over", 1, 20 * T_SEC), 1);
	if (fencing)
		ck_assert_int_eq(ts_log_wait(log, "relay.record.fenced_out", 1, 20 * T_SEC), 1);
	uint64_t sent_twice = 4 + (uint64_t)ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE fence > 1");
	int64_t end = ts_now_ms() + 20 * T_SEC;
	while (atomic_load(&fc.messages) < sent_twice && ts_now_ms() < end)
		usleep(20 * 1000);
	ck_assert_uint_ge(atomic_load(&fc.messages), sent_twice);
	kill(sup, SIGTERM);
	ck_assert_int_eq(ts_wait_exit(sup, 20 * T_SEC), 0);
	/* Normally all 4 are taken over; on a loaded machine the other worker
	 * may not have reached one of them before the stalled worker woke,
	 * which then still held it and rightly wrote it. */
	*taken = ts_query_int(conn, "SELECT count(*) FROM outbox.messages WHERE fence > 1");
	ck_assert_int_ge(*taken, 1);
	int64_t fenced = ts_log_last_value(log, "relay.totals", "fenced_out");
	if (fencing) {
		ck_assert_int_eq(ts_log_last_value(log, "relay.record.fenced_out", "fenced_out"), *taken);
		char ids[128];
		PGresult *res = PQexec(conn, "SELECT string_agg(id::text, ',' ORDER BY id)"
		    " FROM outbox.messages WHERE fence > 1");
		snprintf(ids, sizeof(ids), " ids=%s", PQgetvalue(res, 0, 0));
		PQclear(res);
		ck_assert_int_eq(ts_log_count(log, ids), 1);
		ck_assert_int_eq(ts_log_last_value(log, "relay.totals", "delivered"), 4);
	} else {
		/* both holders' outcomes landed: the taken-over messages count twice */
		ck_assert_int_eq(ts_log_count(log, "relay.record.fenced_out"), 0);
		ck_assert_int_eq(ts_log_last_value(log, "relay.totals", "delivered"), 4 + *taken);
	}
	/* The takeover's outcome is in the database: delivered, attempt 2, fence 2. */
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE attempts = 2 AND fence = 2"), *taken);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'"), 4);
	ts_fake_consumer_stop(&fc);
	PQfinish(conn);
	return fenced;
}

START_TEST(test_stalled_worker_fenced_out)
{
	int64_t taken;
	/* Broken first: --no-fencing lets the stale holder's outcome write land. */
	ck_assert_int_eq(stalled_worker_run(false, &taken), 0);
	/* Fenced: exactly the messages another worker took over are refused. */
	int64_t fenced = stalled_worker_run(true, &taken);
	ck_assert_int_eq(fenced, taken);
}
END_TEST

static Suite *
relay_process_suite(void)
{
	Suite *s = suite_create("relay_process");
	TCase *tc = tcase_create("process");
	tcase_set_timeout(tc, 150);
	tcase_add_test(tc, test_bad_config_exit_2);
	tcase_add_test(tc, test_workers_restart);
	tcase_add_test(tc, test_shutdown_releases_unsent);
	tcase_add_test(tc, test_shutdown_cuts_inflight_within_grace);
	tcase_add_test(tc, test_stuck_worker_killed);
	tcase_add_test(tc, test_fault_fires_once_in_tree);
	tcase_add_test(tc, test_stalled_worker_fenced_out);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	int rc = ts_run_suite(relay_process_suite());
	nng_fini();
	return rc;
}
