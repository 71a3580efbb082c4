/*
 * test_reconnect_spread.c - no lockstep after a PostgreSQL restart: the
 * relay's workers and the consumer's threads lose their connections in
 * the same instant (the server is killed), fail to reconnect a few times
 * each while it is down, and come back when it is started again. With the
 * jittered backoff (outbox/backoff.h) their reconnects spread over the
 * backoff window; waiting a fixed or doubling time without jitter, they
 * would come back together, each retry a small herd (docs/retries.md).
 *
 * Read from the programs' own log lines (relay.db.connected reconnect=1,
 * consumer.db.reconnected): the times of the WORKERS reconnects span at
 * least SPREAD_MIN_MS. With a backoff window of 800 ms or more when the
 * server returns (each has failed at least FAILURES_BEFORE_RESUME times),
 * eight draws fall within SPREAD_MIN_MS of each other with a probability
 * under 1e-5; without jitter they fall within a few milliseconds.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>
#include <libpq-fe.h>

#include "testsupport.h"
#include "ts_consumer.h"
#include "ts_pgserver.h"
#include "ts_relay.h"

#define WORKERS 8               /* relay workers, and consumer threads */
#define FAILURES_BEFORE_RESUME 3 /* per worker: the window is then >= 800 ms */
#define SPREAD_MIN_MS 100

static char pg_dir[400];

static void
setup(void)
{
	snprintf(pg_dir, sizeof(pg_dir), "%s/pg-spread-%d", ts_tmpdir(), (int)getpid());
}

static void
teardown(void)
{
	ts_pgserver_stop_quiet(pg_dir);
}

/* Milliseconds of the day of a log line's leading UTC time
 * ("2026-12-05T00:45:12.123Z ..."), -1 when it has none. */
static int64_t
line_ms(const char *line)
{
	int h, m, s, ms;
	if (strlen(line) < 24 || line[10] != 'T' ||
	    sscanf(line + 11, "%2d:%2d:%2d.%3d", &h, &m, &s, &ms) != 4)
		return -1;
	return ((int64_t)h * 3600 + m * 60 + s) * 1000 + ms;
}

/* The times of the lines of log holding every needle (NULL-ended), into
 * t (room for max); their number. */
static int
times_of(const char *log, const char *const *needles, int64_t *t, int max)
{
	char *text = ts_read_file(log);
	if (text == NULL) /* not made yet: the program has just been started */
		return 0;
	int n = 0;
	for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
		bool all = true;
		for (int i = 0; needles[i] != NULL && all; i++)
			all = strstr(line, needles[i]) != NULL;
		if (all && n < max && (t[n] = line_ms(line)) >= 0)
			n++;
	}
	free(text);
	return n;
}

/* Wait until log has at least want lines holding every needle. */
static void
wait_lines(const char *log, const char *const *needles, int want, int timeout_ms)
{
	int64_t t[512], end = ts_now_ms() + timeout_ms;
	int n;
	while ((n = times_of(log, needles, t, 512)) < want) {
		ck_assert_msg(ts_now_ms() < end, "%s: %d of %d lines with %s in %d ms", log, n, want,
		    needles[0], timeout_ms);
		usleep(20 * 1000);
	}
}

static int64_t
span_ms(const int64_t *t, int n)
{
	int64_t lo = t[0], hi = t[0];
	for (int i = 1; i < n; i++) {
		lo = t[i] < lo ? t[i] : lo;
		hi = t[i] > hi ? t[i] : hi;
	}
	return hi - lo;
}

START_TEST(test_reconnects_spread_after_a_restart)
{
	char server[TS_CONNINFO_MAX], outbox[TS_CONNINFO_MAX], inbox[TS_CONNINFO_MAX];
	char rlog[256], clog[256], url[200], route[300], workers[8];
	ts_pgserver_start(pg_dir, server, sizeof(server));
	ts_pgserver_db_create(server, "spread_out", "outbox", outbox, sizeof(outbox));
	ts_pgserver_db_create(server, "spread_in", "inbox", inbox, sizeof(inbox));
	ts_ipc_url("spread", url, sizeof(url));
	snprintf(route, sizeof(route), "*=%s", url);
	snprintf(workers, sizeof(workers), "%d", WORKERS);

	pid_t consumer = ts_consumer_spawn(clog, inbox, url,
	    (const char *const[]){ "--threads", workers, "--log-level", "debug", NULL });
	pid_t relay = ts_relay_spawn(rlog, outbox, route,
	    (const char *const[]){ "--workers", workers, NULL });
	wait_lines(rlog, (const char *const[]){ "event=relay.db.connected", NULL }, WORKERS,
	    30000);
	/* every thread connected (the consumer connects them all before it
	 * says it started) */
	wait_lines(clog, (const char *const[]){ "event=consumer.started", NULL }, 1, 30000);

	/* every connection breaks in the same instant */
	ts_pgserver_kill(pg_dir);
	wait_lines(rlog, (const char *const[]){ "event=relay.db.connect_failed", NULL },
	    WORKERS * FAILURES_BEFORE_RESUME, 60000);
	wait_lines(clog, (const char *const[]){ "event=consumer.db.reconnect_failed", NULL },
	    WORKERS * FAILURES_BEFORE_RESUME, 60000);
	ts_pgserver_resume(pg_dir);

	const char *const relay_back[] = { "event=relay.db.connected", "reconnect=1", NULL };
	const char *const consumer_back[] = { "event=consumer.db.reconnected", NULL };
	wait_lines(rlog, relay_back, WORKERS, 60000);
	wait_lines(clog, consumer_back, WORKERS, 60000);
	int64_t rt[64], ct[64];
	int rn = times_of(rlog, relay_back, rt, 64), cn = times_of(clog, consumer_back, ct, 64);
	int64_t rspan = span_ms(rt, rn), cspan = span_ms(ct, cn);
	fprintf(stderr, "test_reconnect_spread: %d relay workers came back over %" PRId64
	    " ms, %d consumer threads over %" PRId64 " ms\n", rn, rspan, cn, cspan);
	ck_assert_msg(rspan >= SPREAD_MIN_MS, "the relay's %d workers reconnected within %" PRId64
	    " ms of each other: in lockstep", rn, rspan);
	ck_assert_msg(cspan >= SPREAD_MIN_MS, "the consumer's %d threads reconnected within %"
	    PRId64 " ms of each other: in lockstep", cn, cspan);

	/* and they work: a message enqueued now is applied */
	PGconn *c = ts_connect(outbox), *in = ts_connect(inbox);
	ts_enqueue_one(c, "spread.after", "k-after", "{}");
	ck_assert_int_eq(ts_wait_value(in, "SELECT count(*) FROM inbox.notifications", 1, 60000),
	    1);
	PQfinish(c);
	PQfinish(in);
	ts_stop(relay, SIGTERM);
	ts_stop(consumer, SIGTERM);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("reconnect_spread");
	TCase *tc = tcase_create("reconnect_spread");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_reconnects_spread_after_a_restart);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
