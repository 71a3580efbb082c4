/*
 * test_chaos.c - exactly-once under random crashes (issue 3, item 11).
 *
 * A private PostgreSQL (scripts/pg-tmp.sh in this test's temp dir: the test
 * restarts it, so it must never be the shared fixture), a producer
 * database and a consumer database on it, 2 relay processes x 4 workers and
 * one consumer. 20,000 messages are enqueued live, 50 per transaction
 * (half of them under 97 ordering keys, whose order is checked too),
 * with every fifth transaction rolled back (5,000 keys that must never be
 * delivered); the relays start on a backlog of 6,000 and the rest arrives
 * live. Meanwhile the test kill -9s random relay workers and the
 * consumer (restarting the consumer), SIGSTOPs a worker that holds claims
 * (its pid is in the batch's owner) past its lease and SIGCONTs it, and restarts PostgreSQL once. At the end: every committed key
 * has exactly one effect, nothing is dead-lettered, nothing is pending, no
 * rolled-back key was delivered.
 *
 * The same chaos with the consumer's dedup switched off (--no-dedup, a
 * shorter round) MUST produce duplicates: that shows the test can fail.
 */
#include <dirent.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "outbox/migrate.h"
#include "testsupport.h"
#include "ts_consumer.h"
#include "ts_relay.h"

#define TXN_SIZE 50
#define ROLLBACK_EVERY 5        /* every 5th transaction is rolled back */
#define RELAYS 2
#define WORKERS_PER_RELAY 4
#define LEASE_MS 3000
#define DELIVERY_TIMEOUT_MS 1000
#define STOP_MS (LEASE_MS + 2000)  /* SIGSTOP a worker this long: past its lease */
#define CONSUMER_DOWN_MS 300
#define ENQUEUE_PAUSE_MS 25     /* between transactions: enqueues stay live */
#define DRAIN_TIMEOUT_MS (240 * 1000)
#define MAX_PIDS 64
#define ORDERING_KEYS_SQL "97"  /* ordering keys the even messages spread over */

struct pg {
	char dir[300];
	char server[TS_CONNINFO_MAX - 64];
	char producer[TS_CONNINFO_MAX];
	char consumer[TS_CONNINFO_MAX];
};

static struct pg *atexit_pg;

static void
pg_script(const char *cmd, const char *dir, char *out, size_t outlen)
{
	char script[512], buf[4096];
	const char *src = getenv("OUTBOX_SOURCE_DIR");
	snprintf(script, sizeof(script), "%s/scripts/pg-tmp.sh", src ? src : ".");
	char *argv[] = { script, (char *)cmd, (char *)dir, NULL };
	int code = ts_run(argv, NULL, buf, sizeof(buf), 120000);
	ck_assert_msg(code == 0, "pg-tmp.sh %s %s exited %d: %s", cmd, dir, code, buf);
	if (out != NULL) {
		char *line = strstr(buf, "host=");
		ck_assert_msg(line != NULL, "no conninfo from pg-tmp.sh: %s", buf);
		line[strcspn(line, "\n")] = '\0';
		snprintf(out, outlen, "%s", line);
	}
}

static void
stop_pg_at_exit(void)
{
	if (atexit_pg == NULL || atexit_pg->dir[0] == '\0')
		return;
	char cmd[700];
	const char *src = getenv("OUTBOX_SOURCE_DIR");
	snprintf(cmd, sizeof(cmd), "'%s/scripts/pg-tmp.sh' stop '%s' >/dev/null 2>&1",
	    src ? src : ".", atexit_pg->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "test_chaos: could not stop %s\n", atexit_pg->dir);
	atexit_pg->dir[0] = '\0';
}

/* Start the private server; two databases, migrated. */
static void
pg_setup(struct pg *pg, const char *tag)
{
	snprintf(pg->dir, sizeof(pg->dir), "%s/pg-%s", ts_tmpdir(), tag);
	pg_script("start", pg->dir, pg->server, sizeof(pg->server));
	atexit_pg = pg;
	atexit(stop_pg_at_exit);
	PGconn *admin = ts_connect(pg->server);
	ts_exec(admin, "CREATE DATABASE chaos_producer");
	ts_exec(admin, "CREATE DATABASE chaos_consumer");
	PQfinish(admin);
	snprintf(pg->producer, sizeof(pg->producer), "%s dbname=chaos_producer", pg->server);
	snprintf(pg->consumer, sizeof(pg->consumer), "%s dbname=chaos_consumer", pg->server);
	char err[512];
	struct ob_migrate_report applied;
	PGconn *c = ts_connect(pg->producer);
	ck_assert_msg(ob_migrate(c, "outbox", &applied, err, sizeof(err)) == 0, "%s", err);
	PQfinish(c);
	c = ts_connect(pg->consumer);
	ck_assert_msg(ob_migrate(c, "inbox", &applied, err, sizeof(err)) == 0, "%s", err);
	PQfinish(c);
}

/* --- the live producer: a thread with its own connection ------------------ */

struct producer {
	const char *conninfo;
	int committed_txns;          /* transactions to commit */
	int pause_ms;                /* between transactions */
	pthread_t tid;
	atomic_int done;
	atomic_int committed;        /* messages committed */
	atomic_int rolled_back;      /* messages rolled back */
	atomic_int reconnects;
};

static bool
txn(PGconn *conn, const char *prefix, int first, bool commit)
{
	char a[16], b[16];
	snprintf(a, sizeof(a), "%d", first);
	snprintf(b, sizeof(b), "%d", first + TXN_SIZE - 1);
	const char *params[3] = { prefix, a, b };
	PGresult *r = PQexec(conn, "BEGIN");
	bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
	PQclear(r);
	if (!ok)
		return false;
	r = PQexecParams(conn,
	    "SELECT count(outbox.enqueue('report.created', $1 || g,"
	    " jsonb_build_object('n', g, 'title', 'chaos', 'pad', repeat('x', 120)),"
	    /* Half the messages share ORDERING_KEYS ordering keys: their
	     * effects must also come out in order per key. */
	    " CASE WHEN g % 2 = 0 THEN 'key-' || (g % " ORDERING_KEYS_SQL ") END))"
	    " FROM generate_series($2::int, $3::int) g", 3, NULL, params, NULL, NULL, 0);
	ok = PQresultStatus(r) == PGRES_TUPLES_OK;
	PQclear(r);
	r = PQexec(conn, ok && commit ? "COMMIT" : "ROLLBACK");
	/* A COMMIT that fails or whose answer is lost is retried: enqueue is
	 * idempotent per key, so a retry never makes a second record. */
	ok = ok && PQresultStatus(r) == PGRES_COMMAND_OK &&
	    (!commit || strcmp(PQcmdStatus(r), "COMMIT") == 0);
	PQclear(r);
	return ok || !commit;
}

static void *
produce(void *arg)
{
	struct producer *p = arg;
	PGconn *conn = NULL;
	int total = p->committed_txns + p->committed_txns / (ROLLBACK_EVERY - 1);
	int next_ok = 0, next_rb = 0;
	for (int t = 0; t < total; t++) {
		bool commit = t % ROLLBACK_EVERY != ROLLBACK_EVERY - 1;
		for (int tries = 0;; tries++) {
			if (conn == NULL || PQstatus(conn) != CONNECTION_OK) {
				if (conn != NULL)
					PQfinish(conn);
				conn = PQconnectdb(p->conninfo);
				if (PQstatus(conn) != CONNECTION_OK) {
					usleep(200 * 1000);
					continue;
				}
				atomic_fetch_add(&p->reconnects, 1);
			}
			if (txn(conn, commit ? "ok-" : "rb-", commit ? next_ok : next_rb, commit))
				break;
			usleep(100 * 1000);
		}
		if (commit) {
			next_ok += TXN_SIZE;
			atomic_fetch_add(&p->committed, TXN_SIZE);
		} else {
			next_rb += TXN_SIZE;
			atomic_fetch_add(&p->rolled_back, TXN_SIZE);
		}
		usleep((useconds_t)p->pause_ms * 1000);
	}
	PQfinish(conn);
	atomic_store(&p->done, 1);
	return NULL;
}

/* --- processes ------------------------------------------------------------ */

/* Children of parent, from /proc/<pid>/stat (field 4 is the ppid). */
static int
children_of(pid_t parent, pid_t *out, int max)
{
	DIR *d = opendir("/proc");
	int n = 0;
	struct dirent *e;
	while (d != NULL && (e = readdir(d)) != NULL && n < max) {
		char path[300];
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		char *st = ts_read_file(path);
		if (st == NULL)
			continue;
		char *rp = strrchr(st, ')');
		char state;
		int ppid;
		if (rp != NULL && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 &&
		    ppid == parent && state != 'Z')
			out[n++] = (pid_t)atoi(e->d_name);
		free(st);
	}
	if (d != NULL)
		closedir(d);
	return n;
}

struct run {
	struct pg *pg;
	bool dedup;
	char url[256];
	char route[300];
	pid_t consumer;
	pid_t relays[RELAYS];
	char relay_logs[RELAYS][256];
	int worker_kills, consumer_kills, stops, pg_restarts;
	unsigned seed;
};

static pid_t
start_consumer(struct run *r)
{
	/* The broken round's consumer also takes 300 ms per batch, so frames
	 * are still in flight when the blows land (the consumer is fast
	 * enough to drain the backlog before them otherwise). */
	const char *real[] = { "--threads", "4", NULL };
	const char *broken[] = { "--threads", "4", "--no-dedup", "--fault-slow", "1000000",
		"--fault-slow-ms", "300", NULL };
	return ts_consumer_spawn(NULL, r->pg->consumer, r->url, r->dedup ? real : broken);
}

static void
start_relays(struct run *r)
{
	char workers[16], lease[16], timeout[16];
	snprintf(workers, sizeof(workers), "%d", WORKERS_PER_RELAY);
	snprintf(lease, sizeof(lease), "%d", LEASE_MS);
	snprintf(timeout, sizeof(timeout), "%d", DELIVERY_TIMEOUT_MS);
	for (int i = 0; i < RELAYS; i++) {
		const char *extra[] = { "--workers", workers, "--lease-ms", lease,
			"--delivery-timeout-ms", timeout, "--poll-ms", "200", "--backoff-base-ms", "50",
			"--backoff-cap-ms", "1000", "--batch", "50", "--max-inflight", "4",
			"--shutdown-grace", "5s", NULL };
		r->relays[i] = ts_relay_spawn(r->relay_logs[i], r->pg->producer, r->route, extra);
	}
}

/* A random live worker of a random relay (0 when none is up right now). */
static pid_t
random_worker(struct run *r)
{
	pid_t kids[MAX_PIDS];
	for (int tries = 0; tries < 20; tries++) {
		int n = children_of(r->relays[rand_r(&r->seed) % RELAYS], kids, MAX_PIDS);
		if (n > 0)
			return kids[rand_r(&r->seed) % (unsigned)n];
		usleep(100 * 1000);
	}
	return 0;
}

static int64_t q(const char *conninfo, const char *sql);

/* A worker that holds live claims right now (its pid is in the batch's
 * owner, "host:pid:index"), so that stopping it is sure to strand claimed
 * messages; any worker when none is found within 2 s. */
static pid_t
lease_holder(struct run *r)
{
	pid_t kids[MAX_PIDS];
	for (int tries = 0; tries < 40; tries++) {
		pid_t pid = (pid_t)q(r->pg->producer,
		    "SELECT split_part(owner, ':', -2)::int FROM outbox.batches"
		    " WHERE state = 'leased' AND owner IS NOT NULL"
		    " AND lease_until > now() + interval '500 ms'"
		    " GROUP BY 1 ORDER BY sum(size) DESC LIMIT 1");
		for (int i = 0; pid > 0 && i < RELAYS; i++) {
			int n = children_of(r->relays[i], kids, MAX_PIDS);
			for (int k = 0; k < n; k++)
				if (kids[k] == pid)
					return pid;
		}
		usleep(50 * 1000);
	}
	return random_worker(r);
}

static void
kill_worker(struct run *r)
{
	pid_t w = random_worker(r);
	ck_assert_msg(w > 0, "no relay worker found to kill");
	ck_assert_int_eq(kill(w, SIGKILL), 0);
	r->worker_kills++;
}

static void
kill_consumer(struct run *r)
{
	ts_stop(r->consumer, SIGKILL);
	usleep(CONSUMER_DOWN_MS * 1000);
	r->consumer = start_consumer(r);
	r->consumer_kills++;
}

static int64_t
q(const char *conninfo, const char *sql)
{
	/* A fresh connection per question: the server restarts under us. */
	for (int tries = 0; tries < 100; tries++) {
		PGconn *c = PQconnectdb(conninfo);
		if (PQstatus(c) == CONNECTION_OK) {
			PGresult *res = PQexec(c, sql);
			if (PQresultStatus(res) == PGRES_TUPLES_OK) {
				int64_t v = PQntuples(res) > 0 ? strtoll(PQgetvalue(res, 0, 0), NULL, 10)
				                               : 0;
				PQclear(res);
				PQfinish(c);
				return v;
			}
			PQclear(res);
		}
		PQfinish(c);
		usleep(200 * 1000);
	}
	ck_abort_msg("database unreachable for: %s", sql);
	return -1;
}

/* Sum of key=N over the lines of a log with event=<event>. */
static int64_t
log_sum(const char *path, const char *event, const char *key)
{
	char *text = ts_read_file(path), ev[128], k[64];
	int64_t total = 0;
	snprintf(ev, sizeof(ev), " event=%s ", event);
	snprintf(k, sizeof(k), " %s=", key);
	for (char *l = text; l != NULL && *l;) {
		char *nl = strchr(l, '\n');
		if (nl != NULL)
			*nl = '\0';
		char *f;
		if (strstr(l, ev) != NULL && (f = strstr(l, k)) != NULL)
			total += strtoll(f + strlen(k), NULL, 10);
		l = nl != NULL ? nl + 1 : NULL;
	}
	free(text);
	return total;
}

static void
stop_all(struct run *r)
{
	for (int i = 0; i < RELAYS; i++)
		ts_stop(r->relays[i], SIGTERM);
	ts_stop(r->consumer, SIGTERM);
}

/* The chaos schedule: ms after the start, one action each. */
enum action { KILL_WORKER, KILL_CONSUMER, STOP_WORKER, RESTART_PG };
struct event {
	int64_t at_ms;
	enum action what;
};

static const struct event real_schedule[] = {
	{ 400, STOP_WORKER }, { 600, KILL_WORKER }, { 900, KILL_CONSUMER },
	{ 1500, KILL_WORKER }, { 3000, KILL_CONSUMER },
	{ 6500, RESTART_PG }, { 9000, KILL_WORKER }, { 10500, KILL_CONSUMER },
	{ 12000, KILL_WORKER }, { 13500, KILL_CONSUMER }, { 15000, KILL_WORKER },
	{ 16500, KILL_WORKER },
};

/* The broken round: the same kinds of blows, denser, while a backlog is
 * being delivered (a worker killed with frames in flight leaves applied
 * messages unrecorded: they are delivered again). */
static const struct event broken_schedule[] = {
	{ 400, STOP_WORKER }, { 600, KILL_WORKER }, { 900, KILL_CONSUMER },
	{ 1200, KILL_WORKER }, { 1500, KILL_WORKER },
};

/* Run one round: live enqueues of committed_txns transactions, the chaos
 * schedule, then wait until every committed message is settled (or the
 * deadline). */
static void
chaos_round(struct run *r, int committed_txns, int pause_ms, int backlog,
    const struct event *schedule, int nevents)
{
	r->seed = (unsigned)getpid();
	ts_ipc_url(r->dedup ? "chaos-c" : "chaos-nodedup-c", r->url, sizeof(r->url));
	snprintf(r->route, sizeof(r->route), "*=%s", r->url);
	r->consumer = start_consumer(r);

	struct producer p = { .conninfo = r->pg->producer, .committed_txns = committed_txns,
		.pause_ms = pause_ms };
	ck_assert_int_eq(pthread_create(&p.tid, NULL, produce, &p), 0);
	/* A backlog first, so that the first blows hit busy workers (holding
	 * claims, frames in flight); the rest is enqueued live. */
	while (atomic_load(&p.committed) < backlog && !atomic_load(&p.done))
		usleep(20 * 1000);
	start_relays(r);

	int64_t t0 = ts_now_ms(), cont_at = 0;
	pid_t stopped = 0;
	int next = 0;
	for (;;) {
		int64_t now = ts_now_ms() - t0;
		if (next < nevents && now >= schedule[next].at_ms) {
			switch (schedule[next].what) {
			case KILL_WORKER: kill_worker(r); break;
			case KILL_CONSUMER: kill_consumer(r); break;
			case STOP_WORKER:
				stopped = lease_holder(r);
				ck_assert(stopped > 0);
				ck_assert_int_eq(kill(stopped, SIGSTOP), 0);
				cont_at = now + STOP_MS;
				r->stops++;
				break;
			case RESTART_PG:
				pg_script("restart", r->pg->dir, NULL, 0);
				r->pg_restarts++;
				break;
			}
			fprintf(stderr, "test_chaos: t=%.1fs action %d done (committed so far %d)\n",
			    (double)now / 1000, (int)schedule[next].what, atomic_load(&p.committed));
			next++;
		}
		if (stopped > 0 && now >= cont_at) {
			kill(stopped, SIGCONT);
			stopped = 0;
		}
		/* drained: a few index probes per stream (a count over the view
		 * would scan every message 20 times a second) */
		if (next >= nevents && stopped == 0 && atomic_load(&p.done) &&
		    q(r->pg->producer, "SELECT outbox.backlog_empty()::int") == 1)
			break;
		if (now >= DRAIN_TIMEOUT_MS)
			break;
		usleep(50 * 1000);
	}
	pthread_join(p.tid, NULL);
	ck_assert_int_eq(atomic_load(&p.committed), committed_txns * TXN_SIZE);
	ck_assert_int_gt(atomic_load(&p.rolled_back), 0);
	stop_all(r);
	fprintf(stderr, "test_chaos: round (dedup=%d) done in %.1fs: %d worker kills, %d"
	    " consumer kills, %d stops, %d PostgreSQL restarts\n", r->dedup,
	    (double)(ts_now_ms() - t0) / 1000, r->worker_kills, r->consumer_kills, r->stops,
	    r->pg_restarts);
	int64_t fenced = 0;
	for (int i = 0; i < RELAYS; i++)
		fenced += log_sum(r->relay_logs[i], "relay.totals", "fenced_out");
	fprintf(stderr, "test_chaos: relays: fenced_out=%" PRId64 " (stale outcome writes"
	    " refused)\n", fenced);
}

START_TEST(test_chaos_exactly_once)
{
	static struct pg pg;
	struct run r = { .pg = &pg, .dedup = true };
	const int txns = 20000 / TXN_SIZE;
	pg_setup(&pg, "real");
	chaos_round(&r, txns, ENQUEUE_PAUSE_MS, 6000, real_schedule,
	    (int)(sizeof(real_schedule) / sizeof(real_schedule[0])));

	const int n = txns * TXN_SIZE;
	const char *P = pg.producer, *C = pg.consumer;
	/* Producer side: every committed record delivered; nothing dead,
	 * nothing pending; rolled-back enqueues left no record. */
	ck_assert_int_eq(q(P, "SELECT count(*) FROM outbox.messages"), n);
	ck_assert_int_eq(q(P, "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'"), n);
	ck_assert_int_eq(q(P, "SELECT count(*) FROM outbox.messages WHERE status = 'dead'"), 0);
	ck_assert_int_eq(q(P, "SELECT count(*) FROM outbox.messages WHERE status = 'pending'"), 0);
	ck_assert_int_eq(q(P, "SELECT count(*) FROM outbox.messages"
	    " WHERE idempotency_key NOT LIKE 'ok-%'"), 0);
	/* Consumer side: exactly one effect per committed key, none for a
	 * rolled-back key. */
	ck_assert_int_eq(q(C, "SELECT count(*) FROM inbox.notifications"), n);
	ck_assert_int_eq(q(C, "SELECT count(DISTINCT idempotency_key) FROM inbox.notifications"), n);
	ck_assert_int_eq(q(C, "SELECT count(*) FROM inbox.notifications"
	    " WHERE idempotency_key LIKE 'rb-%'"), 0);
	char sql[256];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM inbox.notifications"
	    " WHERE idempotency_key ~ '^ok-[0-9]+$'"
	    " AND substr(idempotency_key, 4)::int BETWEEN 0 AND %d", n - 1);
	ck_assert_int_eq(q(C, sql), n);
	ck_assert_int_eq(q(C, "SELECT count(*) FROM inbox.processed"), n);
	/* Per ordering key: every effect in sequence order, none missing. */
	ck_assert_int_eq(q(C, "SELECT count(DISTINCT ordering_key) FROM inbox.notifications"),
	    atoi(ORDERING_KEYS_SQL));
	ck_assert_int_eq(q(C, "SELECT count(*) FROM inbox.notifications WHERE ordering_key IS NOT NULL"),
	    n / 2);
	ck_assert_int_eq(q(C, "SELECT count(*) FROM (SELECT ordering_seq, lag(ordering_seq)"
	    " OVER (PARTITION BY ordering_key ORDER BY id) AS prev FROM inbox.notifications"
	    " WHERE ordering_key IS NOT NULL) x WHERE prev IS NOT NULL AND ordering_seq <= prev"), 0);
	/* The chaos really happened. */
	ck_assert_int_ge(r.worker_kills, 6);
	ck_assert_int_ge(r.consumer_kills, 4);
	ck_assert_int_eq(r.stops, 1);
	ck_assert_int_eq(r.pg_restarts, 1);
}
END_TEST

START_TEST(test_chaos_broken_mode_duplicates)
{
	static struct pg pg;
	struct run r = { .pg = &pg, .dedup = false };
	pg_setup(&pg, "broken");
	/* A shorter round: 4,000 messages enqueued fast, kills while the
	 * backlog drains. */
	chaos_round(&r, 4000 / TXN_SIZE, 0, 4000, broken_schedule,
	    (int)(sizeof(broken_schedule) / sizeof(broken_schedule[0])));
	int64_t rows = q(pg.consumer, "SELECT count(*) FROM inbox.notifications");
	int64_t keys = q(pg.consumer,
	    "SELECT count(DISTINCT idempotency_key) FROM inbox.notifications");
	fprintf(stderr, "test_chaos: broken mode (--no-dedup): %" PRId64 " effect rows for %"
	    PRId64 " keys\n", rows, keys);
	ck_assert_int_eq(keys, 4000);
	ck_assert_msg(rows > keys, "the same chaos without dedup produced no duplicate"
	    " (%" PRId64 " rows for %" PRId64 " keys): the chaos did not bite", rows, keys);
}
END_TEST

static Suite *
chaos_suite(void)
{
	Suite *s = suite_create("chaos");
	TCase *tc = tcase_create("chaos");
	tcase_set_timeout(tc, DRAIN_TIMEOUT_MS / 1000 + 120);
	tcase_add_test(tc, test_chaos_broken_mode_duplicates);
	tcase_add_test(tc, test_chaos_exactly_once);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return ts_run_suite(chaos_suite());
}
