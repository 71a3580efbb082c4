/*
 * test_relay_dbloss.c - PostgreSQL crashing under a running relay (an
 * immediate stop, then crash recovery): the workers reconnect with backoff,
 * the process does not exit, nothing is lost and no effect is applied
 * twice. The relay commits its claims and outcomes without waiting for the
 * WAL flush (--synchronous-commit off, the default), so the crash may undo
 * some of them: those messages are delivered again and the consumer, on
 * another server, answers duplicate.
 *
 * The relay's database runs on a PRIVATE throwaway server started by this
 * test (restarting the shared fixture server would disturb the tests that
 * run in parallel); the consumer's inbox lives on the fixture server, so
 * the consumer is untouched by the restart.
 */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nng/nng.h>

#include "outbox/buf.h"
#include "outbox/err.h"
#include "outbox/migrate.h"
#include "outbox/wire.h"
#include "testsupport.h"
#include "ts_consumer.h"
#include "ts_relay.h"

#define T_SEC 1000
#define BEFORE 600
#define AFTER 400

static void
pg_tmp(const char *cmd, const char *dir)
{
	char line[1024];
	snprintf(line, sizeof(line), "'%s/scripts/pg-tmp.sh' %s '%s' >'%s.out' 2>&1",
	    getenv("OUTBOX_SOURCE_DIR"), cmd, dir, dir);
	int rc = system(line);
	ck_assert_msg(rc == 0, "pg-tmp.sh %s %s failed (%d)", cmd, dir, rc);
}

static void
private_conninfo(const char *dir, char *out, size_t outlen)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/env", dir);
	char *env = ts_read_file(path);
	ck_assert(env != NULL);
	char *p = strstr(env, "OUTBOX_PG_CONNINFO='");
	ck_assert(p != NULL);
	p += strlen("OUTBOX_PG_CONNINFO='");
	*strchr(p, '\'') = '\0';
	snprintf(out, outlen, "%s", p);
	free(env);
}

START_TEST(test_postgres_crash)
{
	char dir[300], pdb[TS_CONNINFO_MAX], cdb[TS_CONNINFO_MAX], url[256], route[300];
	char rlog[256], clog[256], err[512];
	snprintf(dir, sizeof(dir), "%s/pg", ts_tmpdir());
	pg_tmp("start", dir);
	private_conninfo(dir, pdb, sizeof(pdb));
	PGconn *conn = ts_connect(pdb);
	struct ob_migrate_report applied;
	ck_assert_msg(ob_migrate(conn, &(struct ob_migrate_opts){ .set = "outbox" }, &applied, err, sizeof(err)) == 0, "%s", err);
	ts_db_create("rdbloss_inbox", "inbox", cdb, sizeof(cdb));
	PGconn *cconn = ts_connect(cdb);

	ts_ipc_url("dbloss", url, sizeof(url));
	snprintf(route, sizeof(route), "*=%s", url);
	const char *relay_extra[] = { "--workers", "2", "--poll-ms", "100", "--batch", "20",
		"--max-inflight", "2", "--delivery-timeout-ms", "2s", "--lease-ms", "4s", NULL };
	pid_t cpid = ts_consumer_spawn(clog, cdb, url, NULL);
	pid_t rpid = ts_relay_spawn(rlog, pdb, route, relay_extra);
	ts_enqueue_n(conn, "t", "before", BEFORE);
	/* Crash while deliveries are under way. */
	ts_wait_value(conn, "SELECT count(*) >= 100 FROM outbox.messages"
	    " WHERE status = 'delivered'", 1, 30 * T_SEC);
	PQfinish(conn);
	pg_tmp("crash", dir);
	ck_assert_int_ge(ts_log_wait(rlog, "relay.db.lost", 1, 20 * T_SEC), 1);
	ck_assert_int_ge(ts_log_wait(rlog, "reconnect=1", 2, 30 * T_SEC), 2);
	ck_assert_int_eq(ts_wait_exit(rpid, 0), -1); /* still running */

	conn = ts_connect(pdb);
	ts_enqueue_n(conn, "t", "after", AFTER);
	ck_assert_int_eq(ts_wait_value(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'",
	    BEFORE + AFTER, 90 * T_SEC), BEFORE + AFTER);
	/* Every message's effect exactly once. */
	ck_assert_int_eq(ts_query_int(cconn, "SELECT count(*) FROM inbox.notifications"),
	    BEFORE + AFTER);
	ck_assert_int_eq(ts_query_int(cconn,
	    "SELECT count(DISTINCT idempotency_key) FROM inbox.notifications"), BEFORE + AFTER);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status <> 'delivered'"), 0);
	ck_assert_int_eq(ts_wait_exit(rpid, 0), -1);
	kill(rpid, SIGTERM);
	ck_assert_int_eq(ts_wait_exit(rpid, 20 * T_SEC), 0);
	ts_stop(cpid, SIGTERM);
	PQfinish(conn);
	PQfinish(cconn);
	pg_tmp("stop", dir);
}
END_TEST

static Suite *
relay_dbloss_suite(void)
{
	Suite *s = suite_create("relay_dbloss");
	TCase *tc = tcase_create("dbloss");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_postgres_crash);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	int rc = ts_run_suite(relay_dbloss_suite());
	nng_fini();
	return rc;
}
