/*
 * matrix.c - one fault-matrix cell, run for real: a fresh database, ONE
 * enqueued message, outbox-consumer and outbox-relay with the row's mode
 * and the column's fault, and an explicit interleaving (see matrix.h).
 *
 * The interleavings, all driven by fault counters and fixed durations, never
 * by a sleep hoping for a race:
 *   consumer dies  the runner restarts it (without the fault) restart_ms
 *                  after it died; restart_ms exceeds the delivery timeout, so
 *                  the relay's request times out rather than being resent
 *                  on the new connection by nng's REQ.
 *   relay dies     relay A has the fault; when it fires the runner SIGKILLs
 *                  A's process group and starts relay B, which takes the
 *                  message over once A's lease has expired.
 *   relay stalls   relay A sleeps stall_ms after its claim, past the lease;
 *                  relay B takes over and settles the message; A wakes up,
 *                  sends, and writes its outcome, which the fence must
 *                  refuse.
 *   stall, stop    as above (stall 2 x stall_ms), but once B has settled the
 *                  message A's supervisor gets SIGTERM: A wakes, sends
 *                  nothing and releases its claim, a late write that the
 *                  fence must refuse (unfenced, it puts a delivered message
 *                  back to pending: a redelivery).
 * A cell is done when the record is delivered with no lease held, every
 * fault window has passed (a slow COMMIT, a stalled worker's late write),
 * and it stays so for settle_ms. The numbers are then read from the
 * database and from the relays' logs; nothing is inferred.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "matrix.h"
#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/migrate.h"
#include "outbox/pg.h"
#include "outbox/proc.h"

#define FM_POLL_MS 25
#define FM_LISTEN_WAIT_MS 20000
#define FM_RELAY_POLL_MS "100"
#define FM_BACKOFF_BASE_MS "50"
#define FM_BACKOFF_CAP_MS "200"
#define FM_STOP_GRACE_MS 8000
#define FM_MAX_CONSUMERS 8
/* After the fault window the late actor gets this long to finish its work
 * (a slow COMMIT, a stalled worker's send and outcome write). */
#define FM_WINDOW_MARGIN_MS 1500

const struct fm_fault fm_faults[] = {
	{ "none", "none", "no fault (baseline)", FM_SIDE_NONE, FM_KIND_NONE, NULL },
	{ "drop-reply", "drop-reply", "consumer drops its reply after COMMIT",
	    FM_SIDE_CONSUMER, FM_KIND_DROP, "--fault-drop-reply" },
	{ "die-before-commit", "die-pre-commit", "consumer dies before COMMIT",
	    FM_SIDE_CONSUMER, FM_KIND_DIES, "--fault-die-before-commit" },
	{ "die-after-commit", "die-post-commit",
	    "consumer dies after COMMIT, before replying", FM_SIDE_CONSUMER,
	    FM_KIND_DIES, "--fault-die-after-commit" },
	{ "slow", "slow", "consumer slow: sleeps past the delivery timeout before COMMIT",
	    FM_SIDE_CONSUMER, FM_KIND_SLOW, "--fault-slow" },
	{ "relay-die-after-claim", "relay-die-claim", "relay dies after claim, before send",
	    FM_SIDE_RELAY, FM_KIND_DIES, "--fault-die-after-claim" },
	{ "relay-die-after-send", "relay-die-send",
	    "relay dies after send, before recording the outcome", FM_SIDE_RELAY,
	    FM_KIND_DIES, "--fault-die-after-send" },
	{ "relay-stall", "relay-stall",
	    "relay stalls after claim past its lease; another takes over", FM_SIDE_RELAY,
	    FM_KIND_STALL, "--fault-stall-after-claim" },
	{ "relay-stall-release", "stall-release",
	    "relay stalls past its lease, another takes over, then the stalled one is"
	    " stopped: its late write releases its stale claim", FM_SIDE_RELAY,
	    FM_KIND_STALL_STOP, "--fault-stall-after-claim" },
};
const int fm_nfaults = (int)(sizeof(fm_faults) / sizeof(fm_faults[0]));

const struct fm_mode fm_modes[] = {
	{ "no-dedup", "no dedup", true, false },
	{ "no-fencing", "dedup, no fencing", false, true },
	{ "full", "full", false, false },
};
const int fm_nmodes = (int)(sizeof(fm_modes) / sizeof(fm_modes[0]));

struct cell {
	const struct fm_env *env;
	const struct fm_mode *mode;
	const struct fm_fault *fault;
	char name[96];          /* mode.fault, for file names */
	char db[96];            /* database name */
	char conninfo[1200];
	char key[128];
	char url[620];
	char ipc_path[600];
	struct ob_proc consumer;
	char consumer_logs[FM_MAX_CONSUMERS][512];
	int nconsumers;
	struct ob_proc relay_a, relay_b;
	bool relay_b_started;
};

static void
ms_text(char *out, size_t len, int64_t ms)
{
	snprintf(out, len, "%" PRId64, ms);
}

static int
start_consumer(struct cell *c, bool with_fault, char *err, size_t errlen)
{
	const struct fm_env *e = c->env;
	struct ob_argv a;
	char num[32];
	if (c->nconsumers >= FM_MAX_CONSUMERS) {
		snprintf(err, errlen, "consumer restarted more than %d times", FM_MAX_CONSUMERS);
		return OB_EINVAL;
	}
	ob_argv_init(&a, "outbox-consumer");
	ob_argv_add2(&a, "--db", c->conninfo);
	ob_argv_add2(&a, "--listen", c->url);
	ob_argv_add2(&a, "--threads", "4");
	if (c->mode->no_dedup)
		ob_argv_add(&a, "--no-dedup");
	if (with_fault && c->fault->side == FM_SIDE_CONSUMER) {
		ob_argv_add2(&a, c->fault->flag, "1");
		if (c->fault->kind == FM_KIND_SLOW) {
			ms_text(num, sizeof(num), e->slow_ms);
			ob_argv_add2(&a, "--fault-slow-ms", num);
		}
	}
	char *log = c->consumer_logs[c->nconsumers];
	snprintf(log, 512, "%s/%s.consumer-%d.log", e->workdir, c->name, c->nconsumers + 1);
	int rc = ob_proc_start(&c->consumer, e->bindir, &a, log, err, errlen);
	if (rc == OB_OK)
		c->nconsumers++;
	return rc;
}

static int
start_relay(struct cell *c, struct ob_proc *p, const char *which, bool with_fault,
    char *err, size_t errlen)
{
	const struct fm_env *e = c->env;
	struct ob_argv a;
	char num[32], route[700], log[512];
	ob_argv_init(&a, "outbox-relay");
	ob_argv_add2(&a, "--db", c->conninfo);
	snprintf(route, sizeof(route), "*=%s", c->url);
	ob_argv_add2(&a, "--route", route);
	ms_text(num, sizeof(num), e->lease_ms);
	ob_argv_add2(&a, "--lease-ms", num);
	ms_text(num, sizeof(num), e->delivery_timeout_ms);
	ob_argv_add2(&a, "--delivery-timeout-ms", num);
	ob_argv_add2(&a, "--poll-ms", FM_RELAY_POLL_MS);
	ob_argv_add2(&a, "--backoff-base-ms", FM_BACKOFF_BASE_MS);
	ob_argv_add2(&a, "--backoff-cap-ms", FM_BACKOFF_CAP_MS);
	if (c->mode->no_fencing)
		ob_argv_add(&a, "--no-fencing");
	if (with_fault && c->fault->side == FM_SIDE_RELAY) {
		ob_argv_add2(&a, c->fault->flag, "1");
		if (c->fault->kind == FM_KIND_STALL || c->fault->kind == FM_KIND_STALL_STOP) {
			/* Stopped early on purpose in STALL_STOP: a longer stall
			 * leaves room for the takeover on a busy machine. */
			ms_text(num, sizeof(num), c->fault->kind == FM_KIND_STALL ? e->stall_ms
			                                                          : 2 * e->stall_ms);
			ob_argv_add2(&a, "--fault-stall-ms", num);
		}
	}
	snprintf(log, sizeof(log), "%s/%s.relay-%s.log", e->workdir, c->name, which);
	return ob_proc_start(p, e->bindir, &a, log, err, errlen);
}

static int
exec_sql(PGconn *conn, const char *sql, char *err, size_t errlen)
{
	return ob_pg_exec(conn, sql, sql, err, errlen);
}

/* Create the cell's database, migrate it, enqueue the one message. */
static int
setup_db(struct cell *c, PGconn **out, char *err, size_t errlen)
{
	PGconn *admin = NULL, *conn = NULL;
	char sql[512];
	int rc = ob_pg_connect(c->env->server, "outbox-fault-matrix", &admin, err, errlen);
	if (rc != OB_OK)
		return rc;
	snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s", c->db);
	if ((rc = exec_sql(admin, sql, err, errlen)) == OB_OK) {
		snprintf(sql, sizeof(sql), "CREATE DATABASE %s", c->db);
		rc = exec_sql(admin, sql, err, errlen);
	}
	PQfinish(admin);
	if (rc != OB_OK)
		return rc;
	struct ob_migrate_report applied;
	if ((rc = ob_pg_connect(c->conninfo, "outbox-fault-matrix", &conn, err, errlen)) != OB_OK)
		return rc;
	if ((rc = ob_migrate(conn, &(struct ob_migrate_opts){ .set = "all" }, &applied, err, errlen)) != OB_OK)
		goto fail;
	const char *params[3] = { c->key, c->mode->id, c->fault->id };
	PGresult *res = PQexecParams(conn,
	    "SELECT outbox.enqueue('report.created', $1,"
	    " jsonb_build_object('title', 'fault matrix', 'mode', $2::text, 'fault', $3::text))",
	    3, NULL, params, NULL, NULL, 0);
	rc = ob_pg_check(res, PGRES_TUPLES_OK, "enqueue", err, errlen);
	PQclear(res);
	if (rc != OB_OK)
		goto fail;
	*out = conn;
	return OB_OK;
fail:
	PQfinish(conn);
	return rc;
}

static void
drop_db(const struct cell *c)
{
	PGconn *admin = NULL;
	char sql[256], err[512];
	if (ob_pg_connect(c->env->server, "outbox-fault-matrix", &admin, err, sizeof(err)) != OB_OK)
		return;
	snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s WITH (FORCE)", c->db);
	PGresult *res = PQexec(admin, sql);
	PQclear(res);
	PQfinish(admin);
}

/* Settled: delivered, no lease held. -1 when the query failed. */
static int
settled(PGconn *conn, const char *key)
{
	const char *params[1] = { key };
	PGresult *res = PQexecParams(conn,
	    "SELECT status = 'delivered' AND lease_owner IS NULL FROM outbox.messages"
	    " WHERE idempotency_key = $1", 1, NULL, params, NULL, NULL, 0);
	int v = -1;
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
		v = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	return v;
}

static int
fired_count(const struct cell *c)
{
	int n = 0;
	for (int i = 0; i < c->nconsumers; i++)
		n += ob_log_count(c->consumer_logs[i], "fault.fired");
	n += ob_log_count(c->relay_a.log, "fault.fired");
	if (c->relay_b_started)
		n += ob_log_count(c->relay_b.log, "fault.fired");
	return n;
}

static void
kill_now(struct ob_proc *p)
{
	if (p->pid <= 0)
		return;
	ob_proc_signal(p, SIGKILL);
	while (ob_proc_alive(p))
		ob_sleep_ms(5);
}

/* Read the outcome from the database and the logs. */
static int
measure(struct cell *c, PGconn *conn, struct fm_result *res, char *err, size_t errlen)
{
	const char *params[1] = { c->key };
	PGresult *r = PQexecParams(conn,
	    "SELECT (SELECT count(*) FROM inbox.notifications WHERE idempotency_key = $1),"
	    " status, attempts, fence FROM outbox.messages WHERE idempotency_key = $1",
	    1, NULL, params, NULL, NULL, 0);
	int rc = ob_pg_check(r, PGRES_TUPLES_OK, "measure", err, errlen);
	if (rc == OB_OK && PQntuples(r) != 1) {
		snprintf(err, errlen, "measure: the message is missing");
		rc = OB_EDB;
	}
	if (rc == OB_OK) {
		res->effects = ob_pg_int64(r, 0, 0);
		snprintf(res->status, sizeof(res->status), "%s", PQgetvalue(r, 0, 1));
		res->attempts = ob_pg_int64(r, 0, 2);
		res->fence = ob_pg_int64(r, 0, 3);
	}
	PQclear(r);
	res->fenced_out = ob_log_sum(c->relay_a.log, "relay.record.fenced_out", "fenced_out");
	if (c->relay_b_started)
		res->fenced_out += ob_log_sum(c->relay_b.log, "relay.record.fenced_out",
		    "fenced_out");
	res->fired = fired_count(c);
	for (int i = 0; i < c->nconsumers; i++)
		res->dup_replies += ob_log_sum(c->consumer_logs[i], "consumer.stopped", "duplicate");
	return rc;
}

int
fm_run_cell(const struct fm_env *env, const struct fm_mode *mode,
    const struct fm_fault *fault, struct fm_result *res, char *err, size_t errlen)
{
	struct cell c;
	memset(&c, 0, sizeof(c));
	memset(res, 0, sizeof(*res));
	c.env = env;
	c.mode = mode;
	c.fault = fault;
	int64_t t0 = ob_mono_ms();
	snprintf(c.name, sizeof(c.name), "%s.%s", mode->id, fault->id);
	snprintf(c.db, sizeof(c.db), "fm_%d_%s_%s", (int)getpid(), mode->id, fault->id);
	for (char *p = c.db; *p; p++)
		if (*p == '-')
			*p = '_';
	snprintf(c.conninfo, sizeof(c.conninfo), "%s dbname=%s", env->server, c.db);
	snprintf(c.key, sizeof(c.key), "fm-%s-%s", mode->id, fault->id);
	snprintf(c.ipc_path, sizeof(c.ipc_path), "%s/%d%d.ipc", env->workdir,
	    (int)(mode - fm_modes), (int)(fault - fm_faults));
	snprintf(c.url, sizeof(c.url), "ipc://%s", c.ipc_path);
	unlink(c.ipc_path);

	PGconn *conn = NULL;
	int rc = setup_db(&c, &conn, err, errlen);
	if (rc != OB_OK)
		return rc;
	res->ran = true;

	/* The consumer listens before the relay starts: the first attempt
	 * reaches it (none is refunded as "never reached a consumer"). */
	if ((rc = start_consumer(&c, true, err, errlen)) != OB_OK)
		goto out;
	struct stat st;
	int64_t listen_end = ob_mono_ms() + FM_LISTEN_WAIT_MS;
	while (stat(c.ipc_path, &st) != 0) {
		if (ob_mono_ms() >= listen_end || !ob_proc_alive(&c.consumer)) {
			snprintf(err, errlen, "consumer did not start listening on %s (log %s)",
			    c.url, c.consumer_logs[0]);
			rc = OB_ETIMEDOUT;
			goto out;
		}
		ob_sleep_ms(10);
	}
	if ((rc = start_relay(&c, &c.relay_a, "a", true, err, errlen)) != OB_OK)
		goto out;

	int64_t deadline = t0 + env->cell_timeout_ms;
	int64_t consumer_dead_at = 0, fired_at = 0, stable_since = 0, a_gone_at = 0;
	bool a_stopped = false;
	for (;;) {
		int64_t now = ob_mono_ms();
		if (c.consumer.pid > 0 && !ob_proc_alive(&c.consumer))
			consumer_dead_at = now;
		if (c.consumer.pid == 0 && consumer_dead_at != 0 &&
		    now >= consumer_dead_at + env->restart_ms) {
			if ((rc = start_consumer(&c, false, err, errlen)) != OB_OK)
				goto out;
			res->consumer_restarts++;
			consumer_dead_at = 0;
		}
		if (fired_at == 0 && fault->side == FM_SIDE_CONSUMER &&
		    ob_log_count(c.consumer_logs[0], "fault.fired") > 0)
			fired_at = now;
		if (fault->side == FM_SIDE_RELAY && !c.relay_b_started &&
		    (ob_log_count(c.relay_a.log, "fault.fired") > 0 ||
		        !ob_proc_alive(&c.relay_a))) {
			fired_at = now;
			if (fault->kind == FM_KIND_DIES)
				kill_now(&c.relay_a); /* with any worker it forked */
			if ((rc = start_relay(&c, &c.relay_b, "b", false, err, errlen)) != OB_OK)
				goto out;
			c.relay_b_started = true;
			res->relay_takeovers++;
		}
		int64_t window_end = fired_at;
		if (fault->kind == FM_KIND_SLOW)
			window_end = fired_at + env->slow_ms + FM_WINDOW_MARGIN_MS;
		else if (fault->kind == FM_KIND_STALL)
			window_end = fired_at + env->stall_ms + env->delivery_timeout_ms +
			    FM_WINDOW_MARGIN_MS;
		bool fault_done = fault->side == FM_SIDE_NONE || fired_at != 0;
		if (fault->kind == FM_KIND_STALL_STOP) {
			/* Done only once A was stopped after B settled the message,
			 * and A has written its release and exited. */
			if (a_stopped && a_gone_at == 0 && !ob_proc_alive(&c.relay_a))
				a_gone_at = now;
			fault_done = fault_done && a_gone_at != 0;
			window_end = a_gone_at;
		}

		if (ob_pg_broken(conn)) {
			PQfinish(conn);
			conn = NULL;
			if ((rc = ob_pg_connect(c.conninfo, "outbox-fault-matrix", &conn, err,
			         errlen)) != OB_OK)
				goto out;
		}
		int done = settled(conn, c.key);
		if (fault->kind == FM_KIND_STALL_STOP && c.relay_b_started && !a_stopped &&
		    done == 1) {
			if (now >= fired_at + 2 * env->stall_ms) {
				snprintf(err, errlen, "relay B settled the message only after relay A's"
				    " stall ended: no stale release to test");
				rc = OB_ETIMEDOUT;
				goto out;
			}
			ob_proc_signal_leader(&c.relay_a, SIGTERM);
			a_stopped = true;
			done = 0;
		}
		if (fault_done && now >= window_end && done == 1) {
			if (stable_since == 0)
				stable_since = now;
			else if (now - stable_since >= env->settle_ms) {
				res->completed = true;
				break;
			}
		} else
			stable_since = 0;
		if (now >= deadline)
			break;
		ob_sleep_ms(FM_POLL_MS);
	}
	ob_proc_stop(&c.relay_a, FM_STOP_GRACE_MS);
	ob_proc_stop(&c.relay_b, FM_STOP_GRACE_MS);
	ob_proc_stop(&c.consumer, FM_STOP_GRACE_MS);
	rc = measure(&c, conn, res, err, errlen);
out:
	ob_proc_stop(&c.relay_a, 0);
	ob_proc_stop(&c.relay_b, 0);
	ob_proc_stop(&c.consumer, 0);
	PQfinish(conn);
	if (!env->keep)
		drop_db(&c);
	res->ms = ob_mono_ms() - t0;
	return rc;
}
