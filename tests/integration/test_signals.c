/*
 * test_signals.c - the signal layer (common/sig.c, common/reload.c) in every
 * long-running program, run for real: SIGHUP re-reads the --config file and
 * leaves the program (and every relay worker and the relay's metrics
 * process) running, with one *.reload line from each process; a reload
 * that does not parse keeps the old level and says why; two SIGTERMs end a
 * stop that hangs (a consumer asleep in a slow handler, a producer request
 * waiting on a lock) at once. Before this layer SIGHUP killed the relay and
 * the consumer (exit 129) and the consumer and producer waited for a
 * second SIGTERM in vain.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>

#include "outbox/buf.h"
#include "outbox/err.h"
#include "outbox/sig.h"
#include "outbox/wire.h"
#include "testsupport.h"
#include "ts_consumer.h"

#define T_SEC 1000

static void
write_config(const char *path, const char *level)
{
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "# written by test_signals\nOUTBOX_LOG_LEVEL=%s\n", level);
	fclose(f);
}

static void
config_path(const char *who, char *out, size_t len)
{
	snprintf(out, len, "%s/%s-%d.conf", ts_tmpdir(), who, (int)getpid());
}

static bool
alive(pid_t pid)
{
	return ts_wait_exit(pid, 0) == -1;
}

/* SIGHUP three times: to debug, a bad level (kept), back to info; each
 * time `processes` lines of the event, and pid still running. */
static void
reload_rounds(pid_t pid, const char *log, const char *conf, const char *prog, int processes)
{
	char ev[64], bad[64];
	snprintf(ev, sizeof(ev), "%s.reload log_level=", prog);
	snprintf(bad, sizeof(bad), "%s.reload_failed", prog);

	write_config(conf, "debug");
	kill(pid, SIGHUP);
	ck_assert_int_eq(ts_log_wait(log, "reload log_level=debug was=info", processes,
	    20 * T_SEC), processes);
	ck_assert_msg(alive(pid), "%s exited on SIGHUP", prog);

	write_config(conf, "loud");
	kill(pid, SIGHUP);
	ck_assert_int_eq(ts_log_wait(log, bad, processes, 20 * T_SEC), processes);
	ck_assert_int_eq(ts_log_count(log, "not one of debug|info|warn|error\" log_level=debug"
	    " kept=1"), processes);
	ck_assert(alive(pid));

	/* was=debug: the bad reload kept the level */
	write_config(conf, "info");
	kill(pid, SIGHUP);
	ck_assert_int_eq(ts_log_wait(log, "reload log_level=info was=debug", processes,
	    20 * T_SEC), processes);
	ck_assert_int_eq(ts_log_count(log, ev), 2 * processes);
	ck_assert(alive(pid));
}

/* pid's graceful stop hangs: SIGTERM (it logs stopping and waits), then a
 * second one, which ends it at once. */
static void
second_stop_exits(pid_t pid, const char *log, const char *stopping)
{
	kill(pid, SIGTERM);
	ck_assert_int_eq(ts_log_wait(log, stopping, 1, 10 * T_SEC), 1);
	ck_assert_int_eq(ts_wait_exit(pid, 500), -1); /* the graceful stop waits */
	int64_t t0 = ts_now_ms();
	kill(pid, SIGTERM);
	ck_assert_int_eq(ts_wait_exit(pid, 10 * T_SEC), OB_SIG_EXIT_SECOND);
	ck_assert_int_lt(ts_now_ms() - t0, 5 * T_SEC);
	ck_assert_int_eq(ts_log_count(log, "a second stop signal: exiting now"), 1);
}

START_TEST(test_relay_reloads)
{
	char db[TS_CONNINFO_MAX], route[300], log[256], conf[300];
	ts_db_create("sig_relay", "outbox", db, sizeof(db));
	snprintf(route, sizeof(route), "*=ipc://%s/none.ipc", ts_tmpdir());
	config_path("relay", conf, sizeof(conf));
	write_config(conf, "info");
	/* the file named by the variable (the producer's by the flag) */
	char env[320];
	snprintf(env, sizeof(env), "OUTBOX_CONFIG=%s", conf);
	char *const extra_env[] = { env, NULL };
	char *argv[] = { "outbox-relay", "--db", db, "--route", route, "--workers", "2",
		"--metrics", "127.0.0.1:0", NULL };
	pid_t sup = ts_spawn(argv, extra_env, log);
	ck_assert_int_eq(ts_log_wait(log, "relay.worker.started", 2, 30 * T_SEC), 2);
	ck_assert_int_eq(ts_log_wait(log, "relay.metrics.listening", 1, 30 * T_SEC), 1);
	/* the supervisor, two workers and the metrics process */
	reload_rounds(sup, log, conf, "relay", 4);
	ck_assert_int_eq(ts_log_count(log, "relay.worker.exited"), 0);
	ck_assert_int_eq(ts_log_count(log, "relay.metrics.exited"), 0);
	kill(sup, SIGTERM);
	ck_assert_int_eq(ts_wait_exit(sup, 30 * T_SEC), 0);
}
END_TEST

START_TEST(test_consumer_reloads_and_second_stop_exits)
{
	char db[TS_CONNINFO_MAX], url[256], log[256], conf[300];
	ts_db_create("sig_consumer", "inbox", db, sizeof(db));
	ts_ipc_url("sigc", url, sizeof(url));
	config_path("consumer", conf, sizeof(conf));
	write_config(conf, "info");
	/* the first message sleeps a minute in the handler */
	char env[320];
	snprintf(env, sizeof(env), "OUTBOX_CONFIG=%s", conf);
	char *const extra_env[] = { env, NULL };
	char *argv[] = { "outbox-consumer", "--db", db, "--listen", url,
		"--fault-slow", "1", "--fault-slow-ms", "60s", NULL };
	pid_t pid = ts_spawn(argv, extra_env, log);
	ck_assert_int_eq(ts_log_wait(log, "consumer.started", 1, 30 * T_SEC), 1);
	reload_rounds(pid, log, conf, "consumer", 1);

	struct ts_consumer_conn c;
	ts_consumer_open(&c, url);
	struct ob_wire_msg m = ts_consumer_msg(1, "t", "k-slow", "{}");
	ts_consumer_send(&c, &m, 1);
	ck_assert_int_eq(ts_log_wait(log, "fault=consumer.slow", 1, 30 * T_SEC), 1);
	second_stop_exits(pid, log, "consumer.stopping");
	ts_consumer_close(&c);
}
END_TEST

/* A POST in its own thread (it waits on the lock the test holds). */
struct poster {
	char url[300];
	struct ts_http_res res;
	pthread_t t;
};

static void *
poster_main(void *arg)
{
	struct poster *p = arg;
	static const char body[] = "{\"title\":\"t\",\"module\":\"m\",\"severity\":\"high\"}";
	const char *const headers[] = { "Idempotency-Key", "sig-1", "Content-Type",
		"application/json", NULL };
	struct ts_http_req q = { .method = "POST", .url = p->url, .headers = headers,
		.body = body, .body_len = sizeof(body) - 1, .timeout_ms = 30000 };
	ts_http(&q, &p->res);
	return NULL;
}

START_TEST(test_producer_reloads_and_second_stop_exits)
{
	char db[TS_CONNINFO_MAX], log[256], conf[300], ready[300];
	ts_db_create("sig_producer", "outbox", db, sizeof(db));
	config_path("producer", conf, sizeof(conf));
	write_config(conf, "info");
	snprintf(ready, sizeof(ready), "%s/producer-ready-%d", ts_tmpdir(), (int)getpid());
	char *argv[] = { "outbox-producer", "serve", "--db", db, "--http", "http://127.0.0.1:0",
		"--ready-file", ready, "--config", conf, NULL };
	pid_t pid = ts_spawn(argv, NULL, log);
	char *base = ts_wait_ready_file(ready, pid, log, 30 * T_SEC);
	reload_rounds(pid, log, conf, "producer", 1);

	/* a request that waits on a lock the test holds */
	PGconn *holder = ts_connect(db);
	ts_exec(holder, "BEGIN");
	ts_exec(holder, "LOCK TABLE app.bug_reports IN ACCESS EXCLUSIVE MODE");
	struct poster p;
	memset(&p, 0, sizeof(p));
	snprintf(p.url, sizeof(p.url), "%s/v1/reports", base);
	ck_assert_int_eq(pthread_create(&p.t, NULL, poster_main, &p), 0);
	PGconn *watch = ts_connect(db);
	ck_assert_int_eq(ts_wait_value(watch, "SELECT count(*) FROM pg_locks l"
	    " JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'bug_reports'"
	    " AND NOT l.granted", 1, 30 * T_SEC), 1);
	second_stop_exits(pid, log, "producer.stopping");
	ts_exec(holder, "ROLLBACK");
	pthread_join(p.t, NULL);
	free(p.res.body);
	PQfinish(watch);
	PQfinish(holder);
	free(base);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("signals");
	TCase *tc = tcase_create("signals");
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, test_relay_reloads);
	tcase_add_test(tc, test_consumer_reloads_and_second_stop_exits);
	tcase_add_test(tc, test_producer_reloads_and_second_stop_exits);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
