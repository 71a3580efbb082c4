/*
 * test_restore.c - a dump of the outbox restored into a cluster whose
 * transaction counter is behind the old one's, for real (issue 29, defect
 * 5): the old cluster A advanced with pg_resetwal -x (ts_pgserver.h,
 * scripts/pg-tmp.sh's OUTBOX_PG_NEXT_XID), pg_dump of its outbox database,
 * pg_restore into a fresh cluster B, the real relay and consumer on both
 * sides of it. At dump time some messages are delivered, some applied by
 * the consumer but never recorded (a relay worker killed after the reply),
 * some held by batches of a relay that died (claimed, never sent) and some
 * never read; more are enqueued on B before and after the relay starts.
 * The consumer's inbox lives on the shared fixture server, so its dedup
 * records span the restore. What a user checks: every message applied
 * exactly once, each ordering key in its order, housekeeping's log line,
 * nothing left. The SQL-level twin is test_streams'
 * test_restore_into_a_younger_cluster (tests/data/sql/simulate_restore.sql).
 * Both servers are the test's own, stopped by a teardown that runs after a
 * failure too, and so are the programs it started.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testsupport.h"
#include "ts_consumer.h"
#include "ts_pgserver.h"
#include "ts_relay.h"

#define T_SEC 1000
#define TOPIC "restore"
/* where cluster A's transaction counter starts: far beyond a fresh one's */
#define XID_A UINT64_C(100000000)

/* Made by main (the parent process), so that its teardown finds them
 * after a failed test: the two servers' directories, and a file of the
 * pids of the programs the test started (one a line). */
static char base[64], dir_a[128], dir_b[128], pids_path[128];

/* Every key enqueued, comma-separated (the test's process only). */
static char want_keys[4096];

/* Remember pid for the teardown. */
static void
track(pid_t pid)
{
	FILE *f = fopen(pids_path, "a");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "%d\n", (int)pid);
	fclose(f);
}

/* SIGTERM, wait for exit 0 (a relay's or a consumer's orderly stop). */
static void
stop_ok(pid_t pid, const char *what, const char *log)
{
	kill(pid, SIGTERM);
	int code = ts_wait_exit(pid, 30 * T_SEC);
	if (code < 0)
		ts_stop(pid, SIGKILL);
	ck_assert_msg(code == 0, "%s exited %d; log %s", what, code, log);
}

/* One transaction on c: `unordered` messages <set>-u-1.. without an
 * ordering key, then one message <set>-k<k> of each ordering key k<k>,
 * k = keys_from..keys_to (each its key's next number; none when keys_to <
 * keys_from). Each key is added to want_keys. */
static void
enqueue_set(PGconn *c, const char *set, int unordered, int keys_from, int keys_to)
{
	char key[64], okey[16], payload[64];
	ts_exec(c, "BEGIN");
	for (int i = 1; i <= unordered + keys_to - keys_from + 1; i++) {
		bool ordered = i > unordered;
		int k = keys_from + i - unordered - 1;
		if (ordered) {
			snprintf(key, sizeof(key), "%s-k%d", set, k);
			snprintf(okey, sizeof(okey), "k%d", k);
		} else {
			snprintf(key, sizeof(key), "%s-u-%d", set, i);
		}
		snprintf(payload, sizeof(payload), "{\"set\": \"%s\", \"i\": %d}", set, i);
		const char *params[] = { TOPIC, key, payload, ordered ? okey : NULL };
		PGresult *r = PQexecParams(c, "SELECT outbox.enqueue($1, $2, $3::jsonb, $4)", 4, NULL,
		    params, NULL, NULL, 0);
		ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "enqueue %s: %s", key,
		    PQresultErrorMessage(r));
		PQclear(r);
		size_t used = strlen(want_keys);
		ck_assert_uint_lt(used + strlen(key) + 2, sizeof(want_keys));
		snprintf(want_keys + used, sizeof(want_keys) - used, "%s%s", used ? "," : "", key);
	}
	ts_exec(c, "COMMIT");
}

/* The text of the first row's first column of sql ("" when no row), with
 * $1 = param when param is not NULL; malloc'ed, free(). */
static char *
query_text(PGconn *c, const char *sql, const char *param)
{
	const char *params[] = { param };
	PGresult *r = PQexecParams(c, sql, param != NULL, NULL, params, NULL, NULL, 0);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQresultErrorMessage(r));
	char *v = strdup(PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "");
	PQclear(r);
	return v;
}

/* Run a program of the build (argv[0] under OUTBOX_BIN_DIR, or a path);
 * asserts exit 0; its output into out. */
static void
run_ok(char *const argv[], char *out, size_t outlen)
{
	int code = ts_run(argv, NULL, out, outlen, 120 * T_SEC);
	ck_assert_msg(code == 0, "%s exited %d: %s", argv[0], code, out);
}

START_TEST(test_restore_into_a_younger_cluster_for_real)
{
	char conn_a[TS_CONNINFO_MAX], conn_b[TS_CONNINFO_MAX], db_a[TS_CONNINFO_MAX],
	    db_b[TS_CONNINFO_MAX], scratch[TS_CONNINFO_MAX], inbox[TS_CONNINFO_MAX];
	char url[256], route[300], clog[256], rlog[256], source[128], dump[256], out[8192];
	const char *pg_dump = getenv("OUTBOX_PG_DUMP");
	ck_assert_msg(pg_dump != NULL, "OUTBOX_PG_DUMP is not set: no pg_dump was found when"
	    " the build was configured (install postgresql-15)");
	/* its pg_restore beside it */
	char pg_restore[512];
	const char *slash = strrchr(pg_dump, '/');
	snprintf(pg_restore, sizeof(pg_restore), "%.*spg_restore",
	    slash != NULL ? (int)(slash - pg_dump + 1) : 0, pg_dump);

	/* Cluster A, its counter at XID_A; the consumer's inbox on the fixture
	 * server, one consumer for the whole test */
	ts_pgserver_start_at_xid(dir_a, XID_A, conn_a, sizeof(conn_a));
	ts_pgserver_db_create(conn_a, "outbox", "outbox", db_a, sizeof(db_a));
	PGconn *a = ts_connect(db_a);
	ck_assert_int_ge(ts_query_int(a, "SELECT pg_current_xact_id()::text::bigint"),
	    (int64_t)XID_A);
	ts_db_create("restore_inbox", "inbox", inbox, sizeof(inbox));
	PGconn *in = ts_connect(inbox);
	ts_ipc_url("consumer", url, sizeof(url));
	snprintf(route, sizeof(route), "*=%s", url);
	pid_t cpid = ts_consumer_spawn(clog, inbox, url, NULL);
	track(cpid);

	/* 1. delivered on A: 8 unordered, keys k1..k4 three each */
	enqueue_set(a, "first", 8, 1, 4);
	enqueue_set(a, "first2", 0, 1, 4);
	enqueue_set(a, "first3", 0, 1, 4);
	const char *relay_a[] = { "--poll-ms", "100", "--workers", "2", NULL };
	pid_t rpid = ts_relay_spawn(rlog, db_a, route, relay_a);
	track(rpid);
	ck_assert_int_eq(ts_wait_value(a, "SELECT count(*) FROM outbox.messages"
	    " WHERE status = 'delivered'", 20, 60 * T_SEC), 20);
	/* the relay's derived source (system identifier and database name):
	 * B's relays send the same, so the consumer knows their messages */
	ts_log_wait_field(rlog, "relay.source", "source", source, sizeof(source), 10 * T_SEC);
	stop_ok(rpid, "relay on A", rlog);

	/* 2. applied by the consumer, never recorded: the worker holding their
	 * batch is killed after the reply (the batch's lease outlives the test) */
	enqueue_set(a, "sent", 4, 1, 0);
	const char *relay_a_dies[] = { "--poll-ms", "100", "--lease-ms", "600000",
		"--fault-die-after-send", "1", NULL };
	rpid = ts_relay_spawn(rlog, db_a, route, relay_a_dies);
	track(rpid);
	ck_assert_int_eq(ts_log_wait(rlog, "fault.fired", 1, 60 * T_SEC), 1);
	/* its supervisor saw it die and started another (which finds nothing
	 * to claim): a stop now is an orderly one */
	ck_assert_int_eq(ts_log_wait(rlog, "event=relay.worker.started", 2, 60 * T_SEC), 2);
	stop_ok(rpid, "relay on A (worker killed after a reply)", rlog);
	ck_assert_int_eq(ts_query_int(in, "SELECT count(*) FROM inbox.notifications"
	    " WHERE idempotency_key LIKE 'sent-%'"), 4);
	ck_assert_int_eq(ts_query_int(a, "SELECT count(*) FROM outbox.batches WHERE state = 'leased'"
	    " AND size = 4"), 1);

	/* 3. in flight: claimed by a relay of the old cluster that died (every
	 * stream with new messages, one claim each, as a relay of the
	 * schema's protocol calls it), never sent */
	enqueue_set(a, "open", 3, 1, 4);
	int proto = (int)ts_query_int(a, "SELECT max_version FROM outbox.protocols"
	    " WHERE component = 'relay'");
	char sql[256];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM outbox.claim(%d, 'old-relay', 600000, 5,"
	    " NULL, NULL, true, false)", proto);
	/* until two claims in a row take nothing (a stream without a row yet
	 * is looked for by the claim after one that found nothing) */
	int64_t claimed = 0, got;
	for (int i = 0, idle = 0; i < 30 && idle < 2; i++) {
		got = ts_query_int(a, sql);
		claimed += got;
		idle = got > 0 ? 0 : idle + 1;
	}
	ck_assert_int_eq(claimed, 7);
	int64_t open_batches = ts_query_int(a, "SELECT count(*) FROM outbox.batches"
	    " WHERE state = 'leased'");

	/* 4. never read: and a key the old cluster never saw (k5) */
	enqueue_set(a, "unread", 3, 1, 5);

	/* pg_dump, the old cluster gone */
	snprintf(dump, sizeof(dump), "%s/outbox.dump", base);
	char *dump_argv[] = { (char *)pg_dump, "-Fc", "-f", dump, "-d", db_a, NULL };
	run_ok(dump_argv, out, sizeof(out));
	PQfinish(a);
	ts_pgserver_stop_quiet(dir_a);

	/* A fresh cluster B: the group roles (a migrated scratch database
	 * makes them: roles belong to the cluster), the restore, migrate */
	ts_pgserver_start(dir_b, conn_b, sizeof(conn_b));
	ts_pgserver_db_create(conn_b, "scratch", "outbox", scratch, sizeof(scratch));
	ts_pgserver_db_create(conn_b, "outbox", NULL, db_b, sizeof(db_b));
	char *restore_argv[] = { pg_restore, "--exit-on-error", "-d", db_b, dump, NULL };
	run_ok(restore_argv, out, sizeof(out));
	char *migrate_argv[] = { "outboxctl", "migrate", "--db", db_b, "--schema", "outbox", NULL };
	run_ok(migrate_argv, out, sizeof(out));
	ck_assert_msg(strstr(out, "migrate: 0 migrations applied, 0 schema files re-applied"
	    " (already up to date)") != NULL, "%s", out);
	PGconn *b = ts_connect(db_b);
	/* B's counter is behind: the streams' snapshots lie beyond it */
	ck_assert_int_lt(ts_query_int(b, "SELECT pg_current_xact_id()::text::bigint"),
	    (int64_t)XID_A);
	ck_assert_int_gt(ts_query_int(b, "SELECT count(*) FROM outbox.streams"
	    " WHERE pg_snapshot_xmax(snap_lo) > pg_snapshot_xmax(pg_current_snapshot())"), 0);

	int restored_slot = (int)ts_query_int(b, "SELECT slot FROM outbox.slots"
	    " WHERE state = 'current'");

	/* 5. enqueued on B after the restore: a new key too (k6) */
	enqueue_set(b, "new", 3, 1, 6);

	/* The relay on B: housekeeping every second (its first pass at start
	 * adopts the restore), a short retention so that slots are switched
	 * and truncated meanwhile, the old relays' source */
	const char *relay_b[] = { "--poll-ms", "100", "--workers", "2", "--purge-interval", "1s",
		"--retention", "2s", "--source", source, NULL };
	rpid = ts_relay_spawn(rlog, db_b, route, relay_b);
	track(rpid);
	ts_log_wait(rlog, "relay.housekeep.restore_adopted", 1, 30 * T_SEC);
	/* 6. enqueued after the adoption */
	enqueue_set(b, "late", 2, 1, 1);
	enqueue_set(b, "late6", 0, 6, 6);

	/* Every message applied: the ones that never arrive named */
	int total = 1;
	for (const char *p = want_keys; *p; p++)
		total += *p == ',';
	ck_assert_int_eq(total, 52);
	int64_t arrived = ts_wait_value(in, "SELECT count(DISTINCT idempotency_key)"
	    " FROM inbox.notifications WHERE topic = '" TOPIC "'", total, 120 * T_SEC);
	char *missing = query_text(in, "SELECT coalesce(string_agg(k, ',' ORDER BY k), '')"
	    " FROM unnest(string_to_array($1, ',')) k WHERE NOT EXISTS (SELECT 1"
	    " FROM inbox.notifications n WHERE n.topic = '" TOPIC "' AND n.idempotency_key = k)",
	    want_keys);
	if (arrived != total || missing[0] != '\0') {
		/* what B's outbox says of them */
		char *why = query_text(b, "SELECT string_agg(k || ' (' || coalesce((SELECT m.status"
		    " FROM outbox.messages m WHERE m.topic = '" TOPIC "' AND m.idempotency_key = k),"
		    " 'gone from outbox.events') || ')', ', ' ORDER BY k)"
		    " FROM unnest(string_to_array($1, ',')) k", missing);
		ck_abort_msg("%" PRId64 " of %d messages applied; never arrived: %s; in B's outbox: %s;"
		    " relay log %s", arrived, total, missing, why, rlog);
	}
	free(missing);
	ck_assert_int_eq(ts_wait_value(b, "SELECT outbox.backlog_empty()::int", 1, 60 * T_SEC), 1);
	/* the slot that holds the restored log is truncated like any other
	 * once it is done (the outbox keeps rotating) */
	char truncated[64];
	snprintf(truncated, sizeof(truncated), "event=relay.housekeep.done truncated_slot=%d ",
	    restored_slot);
	ck_assert_msg(ts_log_wait(rlog, truncated, 1, 60 * T_SEC) == 1,
	    "slot %d not truncated; relay log %s", restored_slot, rlog);
	stop_ok(rpid, "relay on B", rlog);
	stop_ok(cpid, "consumer", clog);
	ts_write_file(pids_path, "");

	/* exactly once each, and nothing else */
	char *twice = query_text(in, "SELECT coalesce(string_agg(idempotency_key || ' x'"
	    " || n, ','), '') FROM (SELECT idempotency_key, count(*) n FROM inbox.notifications"
	    " GROUP BY 1 HAVING count(*) > 1) x", NULL);
	ck_assert_msg(twice[0] == '\0', "applied more than once: %s", twice);
	free(twice);
	ck_assert_int_eq(ts_query_int(in, "SELECT count(*) FROM inbox.notifications"), total);
	/* per ordering key, applied in its order: 1, 2, 3, ... */
	char *order = query_text(in, "SELECT coalesce(string_agg(ordering_key || ':' || seqs, ' '"
	    " ORDER BY ordering_key), '') FROM (SELECT ordering_key, string_agg(ordering_seq::text,"
	    " ',' ORDER BY id) seqs, bool_and(ordering_seq = rn) in_order FROM (SELECT id,"
	    " ordering_key, ordering_seq, row_number() OVER (PARTITION BY ordering_key ORDER BY id)"
	    " rn FROM inbox.notifications WHERE ordering_key IS NOT NULL) y GROUP BY 1) x"
	    " WHERE NOT in_order", NULL);
	ck_assert_msg(order[0] == '\0', "applied out of key order: %s", order);
	free(order);
	ck_assert_int_eq(ts_query_int(in, "SELECT count(DISTINCT ordering_key)"
	    " FROM inbox.notifications WHERE ordering_key IS NOT NULL"), 6);
	/* the sent batch was delivered again and answered duplicate (the
	 * source kept): the consumer says so */
	ck_assert_int_ge(ts_log_last_value(clog, "consumer.stopped", "duplicate"), 4);

	/* housekeeping adopted it once and read again what no consumer was
	 * known to have: sent 4, open 7, unread 8, new 9 */
	ck_assert_int_eq(ts_log_count(rlog, "relay.housekeep.restore_adopted"), 1);
	ck_assert_int_eq(ts_log_last_value(rlog, "relay.housekeep.restore_adopted", "read_again"),
	    28);
	/* the old cluster's open batches were closed (a late write of theirs is
	 * fenced out), and nothing is left */
	ck_assert_int_eq(ts_query_int(b, "SELECT count(*) FROM outbox.batches"
	    " WHERE last_error LIKE 'closed when the outbox was restored%'"), open_batches);
	ck_assert_int_eq(ts_query_int(b, "SELECT outbox.restored()::int"), 0);
	ck_assert_int_eq(ts_query_int(b, "SELECT outbox.backlog_empty()::int"), 1);
	ck_assert_int_eq(ts_query_int(b, "SELECT count(*) FROM outbox.messages"
	    " WHERE status <> 'delivered'"), 0);
	ck_assert_int_eq(ts_query_int(b, "SELECT count(*) FROM outbox.dead"), 0);
	PQfinish(b);
	PQfinish(in);
	ts_pgserver_stop_quiet(dir_b);
}
END_TEST

/* Stop what a failed test left running: the programs it started (SIGKILL:
 * a relay's workers follow their supervisor), the two servers. */
static void
stop_all(void)
{
	char *pids = ts_read_file(pids_path);
	for (char *p = pids, *end; p != NULL && *p != '\0'; p = end) {
		long pid = strtol(p, &end, 10);
		if (end == p)
			break;
		char path[64], *cmd;
		snprintf(path, sizeof(path), "/proc/%ld/cmdline", pid);
		if (pid > 1 && (cmd = ts_read_file(path)) != NULL) {
			if (strstr(cmd, "outbox-") != NULL)
				kill((pid_t)pid, SIGKILL);
			free(cmd);
		}
	}
	free(pids);
	unlink(pids_path);
	ts_pgserver_stop_quiet(dir_a);
	ts_pgserver_stop_quiet(dir_b);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", base);
}

int
main(void)
{
	snprintf(base, sizeof(base), "/tmp/obrst.XXXXXX");
	if (mkdtemp(base) == NULL) {
		perror("mkdtemp");
		return EXIT_FAILURE;
	}
	snprintf(dir_a, sizeof(dir_a), "%s/a", base);
	snprintf(dir_b, sizeof(dir_b), "%s/b", base);
	snprintf(pids_path, sizeof(pids_path), "%s/pids", base);
	Suite *s = suite_create("restore");
	TCase *tc = tcase_create("restore");
	tcase_set_timeout(tc, 540);
	tcase_add_unchecked_fixture(tc, NULL, stop_all);
	tcase_add_test(tc, test_restore_into_a_younger_cluster_for_real);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
