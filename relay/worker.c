/*
 * worker.c - one relay worker process: claim -> deliver -> record, until
 * told to stop.
 *
 * Owns one PostgreSQL connection (claims, outcome writes, LISTEN and, in
 * worker 0, housekeeping) and one deliverer. Never sleeps a message: a
 * retry is written as the record's due time. A lost database connection is
 * re-opened with backoff; whatever was claimed and not recorded comes back
 * when its lease expires. The relay's fault points (die after claim, die
 * after send, stall after claim) fire here, from counters shared by the
 * whole process tree.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include "claim.h"
#include "deliver.h"
#include "outbox/backoff.h"
#include "outbox/buf.h"
#include "outbox/err.h"
#include "outbox/log.h"
#include "outbox/pg.h"
#include "purge.h"
#include "record.h"
#include "relay.h"
#include "stats.h"

#define RECONNECT_MIN_MS 100
#define RECONNECT_MAX_MS 5000
#define PROGRESS_EVERY_MS 10000
#define FENCED_IDS_LOGGED 20   /* ids listed on a relay.record.fenced_out line */

struct worker {
	const struct relay_config *cfg;
	int index;
	volatile sig_atomic_t *stop;
	struct relay_shared *shared;
	char owner[128];
	PGconn *conn;
	bool had_conn;          /* a connection was up: a loss is logged once */
	struct relay_deliverer deliverer;
	struct relay_outcome *outcomes;
	struct relay_record_mode record_mode;
	uint32_t claim_max;
	uint64_t rng;
	int64_t reconnect_ms;
	int64_t next_purge_ms;
	int64_t next_stats_ms;
	struct relay_totals totals;  /* this process's; shared->totals has all */
	struct relay_metrics *metrics;   /* NULL without shared state */
	struct relay_worker_live *live;  /* this worker slot's row, or NULL */
	struct relay_topic_cache topics;
	uint64_t *fenced_ids;            /* claim_max: ids an outcome write skipped */
	struct relay_claim chained;      /* next messages of keys this worker just
	                                  * recorded, claimed for it: the next round */
	int64_t fresh_claim_due_ms;      /* see FRESH_CLAIM_SKIP_MS */
};

/* Of a round's claim_max, at most this share is chained messages, so a
 * worker always claims other keys and unordered messages too. */
#define CHAIN_SHARE_NUM 3
#define CHAIN_SHARE_DEN 4

/* A worker busy with chained messages whose last fresh claim found nothing
 * (one hot key, say) claims afresh only this often: an empty claim is a
 * round trip in every round otherwise (0.7 of 5.5 ms per message of one
 * hot key). New work waits at most this long for such a worker; idle
 * workers are woken by the enqueue as usual. */
#define FRESH_CLAIM_SKIP_MS 20

#define COUNT(w, field, n)                                              \
	do {                                                            \
		atomic_fetch_add(&(w)->totals.field, (uint64_t)(n));    \
		if ((w)->shared != NULL)                                \
			atomic_fetch_add(&(w)->shared->totals.field, (uint64_t)(n)); \
	} while (0)

/* A metric of the shared registry (no-op without one). */
#define METRIC(w, field) ((w)->metrics != NULL ? (w)->metrics->field : NULL)

static void
set_connected(struct worker *w, bool up)
{
	if (w->live != NULL)
		atomic_store(&w->live->connected, up ? 1 : 0);
}

static void
add_inflight(struct worker *w, int64_t n)
{
	if (w->live != NULL)
		atomic_fetch_add(&w->live->inflight, n);
}

static int64_t
now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t
now_ms(void)
{
	return now_us() / 1000;
}

/* Sleep up to ms, waking early when asked to stop. */
static void
nap(struct worker *w, int64_t ms)
{
	int64_t end = now_ms() + ms, left;
	while (!*w->stop && (left = end - now_ms()) > 0) {
		struct timespec ts = { 0, (left < 20 ? left : 20) * 1000000L };
		nanosleep(&ts, NULL);
	}
}

static bool
connect_db(struct worker *w)
{
	char err[1024], q[1100], sync[64];
	if (w->conn != NULL) {
		PQfinish(w->conn);
		w->conn = NULL;
	}
	set_connected(w, false);
	/* --synchronous-commit off (the default): the next round does not wait
	 * for the WAL flush of the last one. A claim or outcome lost in a crash
	 * was written on a connection that died with it, so no stale fence can
	 * be used afterwards; the message is delivered again and the consumer's
	 * durable dedup record answers duplicate (docs/relay.md). */
	snprintf(sync, sizeof(sync), "SET synchronous_commit = %s", w->cfg->synchronous_commit);
	if (ob_pg_connect(w->cfg->db, "outbox-relay", &w->conn, err, sizeof(err)) != OB_OK ||
	    ob_pg_exec(w->conn, "LISTEN outbox_enqueued", "listen", err, sizeof(err)) != OB_OK ||
	    /* A backlog enqueued faster than autovacuum analyses looks tiny to
	     * the planner, which then bitmap-scans and sorts the whole backlog
	     * for every claim (5x slower measured) instead of walking
	     * messages_claimable in order and stopping at the LIMIT. Every
	     * relay query is an index walk; bitmap scans never help here. */
	    ob_pg_exec(w->conn, "SET enable_bitmapscan = off", "session settings", err,
	        sizeof(err)) != OB_OK ||
	    ob_pg_exec(w->conn, sync, "session settings", err, sizeof(err)) != OB_OK) {
		ob_warn("relay.db.connect_failed", "retry_in_ms=%" PRId64 " err=%s",
		    w->reconnect_ms, ob_log_q(err, q, sizeof(q)));
		if (w->conn != NULL) {
			PQfinish(w->conn);
			w->conn = NULL;
		}
		nap(w, w->reconnect_ms);
		w->reconnect_ms = w->reconnect_ms * 2 > RECONNECT_MAX_MS ? RECONNECT_MAX_MS
		                                                         : w->reconnect_ms * 2;
		return false;
	}
	w->reconnect_ms = RECONNECT_MIN_MS;
	set_connected(w, true);
	ob_info("relay.db.connected", "owner=%s listen=outbox_enqueued%s", w->owner,
	    w->had_conn ? " reconnect=1" : "");
	w->had_conn = true;
	return true;
}

/* Wait for an enqueue notification, or the poll interval (which also picks
 * up retries coming due and leases expiring). A signal cuts it short. */
static void
wait_for_work(struct worker *w)
{
	int fd = PQsocket(w->conn);
	if (fd < 0) {
		nap(w, w->cfg->poll_ms);
		return;
	}
	fd_set rfds;
	FD_ZERO(&rfds);
	FD_SET(fd, &rfds);
	struct timeval tv = { w->cfg->poll_ms / 1000, (w->cfg->poll_ms % 1000) * 1000 };
	if (select(fd + 1, &rfds, NULL, NULL, &tv) > 0 && PQconsumeInput(w->conn)) {
		PGnotify *n;
		while ((n = PQnotifies(w->conn)) != NULL)
			PQfreemem(n);
	}
}

/* Announce that this worker is about to wait (sql/outbox/006_wakeup.sql):
 * enqueues notify only while a worker is waiting. */
static void
announce_waiting(struct worker *w)
{
	char ms[24], err[512], q[600];
	snprintf(ms, sizeof(ms), "%" PRId64, w->cfg->poll_ms);
	const char *params[2] = { w->owner, ms };
	PGresult *res = PQexecParams(w->conn, "SELECT outbox.relay_waiting($1, $2::bigint)",
	    2, NULL, params, NULL, NULL, 0);
	if (ob_pg_check(res, PGRES_TUPLES_OK, "announce waiting", err, sizeof(err)) != OB_OK)
		ob_warn("relay.wait.announce_failed", "err=%s", ob_log_q(err, q, sizeof(q)));
	PQclear(res);
}

/* Turn a RETRY into a backoff, or into a dead letter once the message has
 * used up its attempts or its age. Attempts that never reached a consumer
 * are refunded and do not count. */
static void
finish_retry(struct worker *w, const struct ob_wire_msg *m, struct relay_outcome *o)
{
	const struct relay_config *c = w->cfg;
	uint32_t attempts = m->attempt - (o->refund_attempt && m->attempt > 0 ? 1 : 0);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t age_ms = ((int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000 - m->created_at_us) / 1000;
	char last[RELAY_ERROR_MAX];
	snprintf(last, sizeof(last), "%s", o->error);
	if (attempts >= (uint32_t)c->max_attempts) {
		o->kind = RELAY_OUT_DEAD;
		snprintf(o->error, sizeof(o->error), "max attempts (%u) reached; last error: %.180s",
		    attempts, last);
	} else if (age_ms > c->max_age_ms) {
		o->kind = RELAY_OUT_DEAD;
		snprintf(o->error, sizeof(o->error), "max age (%" PRId64 " ms) reached; last error: %.180s",
		    c->max_age_ms, last);
	} else {
		o->delay_ms = ob_backoff_full_jitter(c->backoff_base_ms, c->backoff_cap_ms,
		    attempts, &w->rng);
	}
}

/* Give every claimed message back unsent: shutdown, or a stop during a
 * stall. Attempt refunded, due at once (another worker may take it). */
static void
release_all(struct worker *w, const struct relay_claim *claim)
{
	for (uint32_t i = 0; i < claim->n; i++) {
		struct relay_outcome *o = &w->outcomes[i];
		memset(o, 0, sizeof(*o));
		o->id = claim->msgs[i].id;
		o->fence = claim->msgs[i].fence;
		o->kind = RELAY_OUT_RELEASE;
		o->refund_attempt = true;
	}
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void
log_fenced(struct worker *w, uint32_t n, uint32_t fenced, uint64_t *ids,
    uint32_t nids)
{
	struct ob_buf b = OB_BUF_INIT;
	uint32_t shown = nids < FENCED_IDS_LOGGED ? nids : FENCED_IDS_LOGGED;
	for (uint32_t i = 0; i < shown; i++)
		ob_buf_printf(&b, "%s%" PRIu64, i ? "," : "", ids[i]);
	ob_warn("relay.record.fenced_out", "owner=%s messages=%u fenced_out=%u ids=%s%s",
	    w->owner, n, fenced, b.data != NULL ? b.data : "-",
	    fenced > shown ? ",..." : "");
	ob_buf_fini(&b);
}

/* Count the outcomes that were written (not fenced out: the worker that
 * took the claim over counts those) in the per-topic metrics. fenced_ids
 * holds nids sorted ids. */
static void
count_recorded(struct worker *w, const struct relay_claim *claim, uint32_t nids)
{
	if (w->metrics == NULL)
		return;
	for (uint32_t i = 0; i < claim->n; i++) {
		const struct relay_outcome *o = &w->outcomes[i];
		if (nids > 0 && bsearch(&o->id, w->fenced_ids, nids, sizeof(*w->fenced_ids),
		        cmp_u64) != NULL)
			continue;
		if (o->kind == RELAY_OUT_RELEASE) {
			ob_metric_inc(w->metrics->released);
			continue;
		}
		const struct ob_wire_msg *m = &claim->msgs[i];
		struct relay_topic_metrics *t = relay_metrics_topic(w->metrics, &w->topics,
		    m->topic, m->topic_len);
		ob_metric_inc(o->kind == RELAY_OUT_DELIVERED ? t->delivered
		    : o->kind == RELAY_OUT_DEAD ? t->dead : t->retried);
	}
}

/* This round's messages: those chained to this worker by the last outcome
 * write, then a fresh claim for the room left. OB_OK or OB_EDB (the
 * chained ones are dropped too: their leases expire, they come back). */
static int
claim_round(struct worker *w, struct relay_claim *claim)
{
	char err[1024], q[1100];
	struct relay_claim fresh;
	*claim = w->chained;
	memset(&w->chained, 0, sizeof(w->chained));
	if (claim->n > 0 && now_ms() < w->fresh_claim_due_ms)
		return OB_OK;
	int rc = relay_claim_batch(w->conn, w->owner, w->cfg->lease_ms, w->claim_max - claim->n,
	    !w->cfg->no_ordering, &fresh, err, sizeof(err));
	if (rc == OB_OK)
		w->fresh_claim_due_ms = fresh.n == 0 && claim->n > 0
		    ? now_ms() + FRESH_CLAIM_SKIP_MS : 0;
	if (rc == OB_OK && (rc = relay_claim_append(claim, &fresh)) != OB_OK) {
		snprintf(err, sizeof(err), "claim: out of memory");
		relay_claim_fini(&fresh);
	}
	if (rc != OB_OK) {
		ob_warn("relay.claim.failed", "chained=%u err=%s", claim->n,
		    ob_log_q(err, q, sizeof(q)));
		relay_claim_fini(claim);
	}
	return rc;
}

/* One claim -> deliver -> record round. Returns the number claimed, or -1
 * when the database failed. */
static int
round_once(struct worker *w)
{
	char err[1024], q[1100];
	struct relay_claim claim;
	int64_t t_claim = now_us();
	uint32_t chained = w->chained.n;
	if (claim_round(w, &claim) != OB_OK)
		return -1;
	uint32_t n = claim.n;
	if (n == 0) {
		relay_claim_fini(&claim);
		return 0;
	}
	COUNT(w, claimed, n);
	ob_metric_add(METRIC(w, claimed), n);
	ob_metric_add(METRIC(w, takeovers), claim.takeovers);
	add_inflight(w, n);
	struct relay_shared *sh = w->shared;
	if (sh != NULL && ob_fault_fire(&sh->die_after_claim))
		ob_fault_die("relay.after_claim");
	if (sh != NULL && ob_fault_fire(&sh->stall_after_claim)) {
		ob_warn("relay.fault.stall", "owner=%s messages=%u first_id=%" PRIu64
		    " fence=%" PRIu64 " stall_ms=%" PRId64 " lease_ms=%" PRId64, w->owner, n,
		    claim.msgs[0].id, claim.msgs[0].fence, w->cfg->fault_stall_ms,
		    w->cfg->lease_ms);
		nap(w, w->cfg->fault_stall_ms);
		ob_warn("relay.fault.stall_over", "owner=%s messages=%u", w->owner, n);
	}
	int64_t t_deliver = now_us();
	if (*w->stop) {
		release_all(w, &claim);
	} else {
		uint64_t sent_before = w->deliverer.frames_sent;
		uint64_t failed_before = w->deliverer.frames_failed;
		relay_deliver(&w->deliverer, claim.msgs, n, w->outcomes);
		COUNT(w, frames_sent, w->deliverer.frames_sent - sent_before);
		COUNT(w, frames_failed, w->deliverer.frames_failed - failed_before);
		ob_metric_add(METRIC(w, frames_sent), w->deliverer.frames_sent - sent_before);
		ob_metric_add(METRIC(w, frames_failed),
		    w->deliverer.frames_failed - failed_before);
		if (sh != NULL && w->deliverer.frames_sent > sent_before &&
		    ob_fault_fire(&sh->die_after_send))
			ob_fault_die("relay.after_send");
	}
	for (uint32_t i = 0; i < n; i++) {
		struct relay_outcome *o = &w->outcomes[i];
		if (o->kind == RELAY_OUT_RETRY)
			finish_retry(w, &claim.msgs[i], o);
		switch (o->kind) {
		case RELAY_OUT_DELIVERED: COUNT(w, delivered, 1); break;
		case RELAY_OUT_RELEASE: COUNT(w, released, 1); break;
		case RELAY_OUT_DEAD:
			COUNT(w, dead, 1);
			ob_warn("relay.message.dead", "id=%" PRIu64 " attempt=%u err=%s",
			    o->id, claim.msgs[i].attempt, ob_log_q(o->error, q, sizeof(q)));
			break;
		default: COUNT(w, retried, 1); break;
		}
	}
	int64_t t_record = now_us();
	/* Chain only while running: a stopping worker hands nothing on to
	 * itself. */
	struct relay_chain chain = { w->owner, w->cfg->lease_ms,
		w->claim_max / CHAIN_SHARE_DEN * CHAIN_SHARE_NUM };
	bool chaining = !w->cfg->no_ordering && !*w->stop && chain.max > 0;
	struct relay_record_result rec;
	int rc = relay_record_outcomes(w->conn, w->outcomes, n, &w->record_mode,
	    chaining ? &chain : NULL, w->fenced_ids, w->claim_max, &rec, err, sizeof(err));
	add_inflight(w, -(int64_t)n);
	if (rc != OB_OK) {
		/* The leases will expire and the messages be delivered again:
		 * at-least-once, and the consumer deduplicates. */
		ob_warn("relay.record.failed", "messages=%u err=%s", n, ob_log_q(err, q, sizeof(q)));
		relay_claim_fini(&claim);
		return -1;
	}
	w->chained = rec.chained;
	qsort(w->fenced_ids, rec.fenced_ids_n, sizeof(*w->fenced_ids), cmp_u64);
	if (rec.fenced_out > 0) {
		COUNT(w, fenced_out, rec.fenced_out);
		ob_metric_add(METRIC(w, fenced_out), rec.fenced_out);
		log_fenced(w, n, rec.fenced_out, w->fenced_ids, rec.fenced_ids_n);
	}
	count_recorded(w, &claim, rec.fenced_ids_n);
	ob_debug("relay.round", "claimed=%u chained=%u written=%u claim_us=%" PRId64
	    " deliver_us=%" PRId64 " record_us=%" PRId64 " next_chained=%u", n, chained,
	    rec.written, t_deliver - t_claim, t_record - t_deliver, now_us() - t_record,
	    w->chained.n);
	relay_claim_fini(&claim);
	return (int)n;
}

/* On the way out: give back the messages chained to this worker and not
 * yet sent, so another worker need not wait for their leases to expire. */
static void
release_chained(struct worker *w)
{
	char err[1024], q[1100];
	uint32_t n = w->chained.n;
	if (n == 0 || ob_pg_broken(w->conn)) {
		relay_claim_fini(&w->chained);
		return;
	}
	release_all(w, &w->chained);
	struct relay_record_result rec;
	if (relay_record_outcomes(w->conn, w->outcomes, n, &w->record_mode, NULL, NULL, 0,
	        &rec, err, sizeof(err)) != OB_OK)
		ob_warn("relay.record.failed", "messages=%u err=%s", n, ob_log_q(err, q, sizeof(q)));
	else
		ob_info("relay.chained.released", "owner=%s messages=%u", w->owner, rec.written);
	relay_claim_fini(&rec.chained);
	relay_claim_fini(&w->chained);
}

/* Worker 0's housekeeping, every --purge-interval. */
static void
maybe_purge(struct worker *w)
{
	const struct relay_config *c = w->cfg;
	if (w->index != 0 || c->retention_ms <= 0 || now_ms() < w->next_purge_ms)
		return;
	w->next_purge_ms = now_ms() + c->purge_interval_ms;
	char err[1024], q[1100];
	uint64_t purged = 0;
	bool skipped = false;
	int64_t t0 = now_ms();
	if (relay_purge_pass(w->conn, c->retention_ms, c->purge_batch, w->stop, &purged,
	        &skipped, err, sizeof(err)) != OB_OK) {
		ob_warn("relay.purge.failed", "err=%s", ob_log_q(err, q, sizeof(q)));
		return;
	}
	if (skipped) {
		ob_debug("relay.purge.skipped", "reason=%s", "another relay holds the purge lock");
		return;
	}
	if (purged > 0) {
		COUNT(w, purged, purged);
		ob_metric_add(METRIC(w, purged), purged);
		ob_info("relay.purge.done", "purged=%" PRIu64 " retention_ms=%" PRId64
		    " batch=%" PRId64 " ms=%" PRId64, purged, c->retention_ms, c->purge_batch,
		    now_ms() - t0);
	}
}

/* Worker 0, with --metrics: the database's gauges every --metrics-interval. */
static void
maybe_stats(struct worker *w)
{
	const struct relay_config *c = w->cfg;
	if (w->index != 0 || w->metrics == NULL || c->metrics == NULL ||
	    c->metrics[0] == '\0' || now_ms() < w->next_stats_ms)
		return;
	w->next_stats_ms = now_ms() + c->metrics_interval_ms;
	char err[1024], q[1100];
	struct relay_stats st;
	if (relay_stats_query(w->conn, &st, err, sizeof(err)) != OB_OK) {
		ob_warn("relay.metrics.stats_failed", "err=%s", ob_log_q(err, q, sizeof(q)));
		return;
	}
	ob_metric_set(w->metrics->pending, (double)st.pending);
	ob_metric_set(w->metrics->oldest_claimable, st.oldest_claimable_s);
	ob_metric_set(w->metrics->blocked_keys, (double)st.blocked_keys);
}

static void
log_progress(struct worker *w, const char *event)
{
	ob_info(event, "claimed=%" PRIu64 " delivered=%" PRIu64
	    " retried=%" PRIu64 " dead=%" PRIu64 " fenced_out=%" PRIu64,
	    atomic_load(&w->totals.claimed), atomic_load(&w->totals.delivered),
	    atomic_load(&w->totals.retried), atomic_load(&w->totals.dead),
	    atomic_load(&w->totals.fenced_out));
}

int
relay_worker_run(const struct relay_config *cfg, int worker_index,
    volatile sig_atomic_t *stop, struct relay_shared *shared)
{
	struct worker w;
	memset(&w, 0, sizeof(w));
	w.cfg = cfg;
	w.record_mode.fencing = !cfg->no_fencing;
	w.record_mode.skip_dead_heads = strcmp(cfg->on_dead_head, "skip") == 0;
	w.index = worker_index;
	w.stop = stop;
	w.shared = shared;
	w.rng = ob_rand_seed();
	w.reconnect_ms = RECONNECT_MIN_MS;
	w.claim_max = (uint32_t)(cfg->batch * cfg->max_inflight);
	w.next_purge_ms = now_ms();
	w.next_stats_ms = now_ms();
	if (shared != NULL && worker_index >= 0 && worker_index < RELAY_MAX_WORKERS) {
		w.metrics = &shared->metrics;
		w.live = &shared->live[worker_index];
		w.deliverer.frame_seconds = shared->metrics.delivery_seconds;
		w.deliverer.breakers = w.live->breakers;
		w.deliverer.breakers_n = shared->metrics.ndests;
	}
	char host[64] = "localhost";
	gethostname(host, sizeof(host) - 1);
	snprintf(w.owner, sizeof(w.owner), "%s:%d:%d", host, (int)getpid(), worker_index);

	char err[1024];
	int code = 1;
	w.deliverer.limits.max_payload = (uint32_t)cfg->max_payload;
	w.deliverer.limits.max_batch = (uint32_t)cfg->batch;
	w.deliverer.timeout_ms = cfg->delivery_timeout_ms;
	w.deliverer.max_inflight = (uint32_t)cfg->max_inflight;
	w.deliverer.breaker_threshold = (uint32_t)cfg->breaker_threshold;
	w.deliverer.breaker_probe_ms = cfg->breaker_probe_ms;
	w.deliverer.stop = stop;
	/* In-flight frames get three quarters of the grace after a stop; the
	 * rest is for writing their outcomes before the supervisor's SIGKILL. */
	w.deliverer.stop_cut_ms = cfg->shutdown_grace_ms - cfg->shutdown_grace_ms / 4;
	w.outcomes = calloc(w.claim_max, sizeof(*w.outcomes));
	w.fenced_ids = calloc(w.claim_max, sizeof(*w.fenced_ids));
	if (w.outcomes == NULL || w.fenced_ids == NULL ||
	    relay_routes_parse(&w.deliverer, cfg->routes.items, cfg->routes.n, err,
	        sizeof(err)) != OB_OK ||
	    relay_deliverer_open(&w.deliverer, err, sizeof(err)) != OB_OK) {
		ob_error("relay.worker.start_failed", "err=%s", err);
		goto out;
	}
	ob_info("relay.worker.started", "worker=%d owner=%s claim_max=%u lease_ms=%" PRId64
	    " fencing=%s ordering=%s on_dead_head=%s", worker_index, w.owner, w.claim_max,
	    cfg->lease_ms, cfg->no_fencing ? "OFF(broken-mode)" : "on",
	    cfg->no_ordering ? "OFF(broken-mode)" : "on", cfg->on_dead_head);

	int64_t next_progress = now_ms() + PROGRESS_EVERY_MS;
	while (!*stop) {
		if (ob_pg_broken(w.conn)) {
			if (w.conn != NULL) {
				char q[600];
				ob_warn("relay.db.lost", "owner=%s err=%s", w.owner,
				    ob_log_q(PQerrorMessage(w.conn), q, sizeof(q)));
				PQfinish(w.conn);
				w.conn = NULL;
			}
			if (!connect_db(&w))
				continue;
		}
		maybe_purge(&w);
		maybe_stats(&w);
		int n = round_once(&w);
		if (n < 0) {
			if (!ob_pg_broken(w.conn))
				nap(&w, cfg->poll_ms);
		} else if (n == 0 && !*stop) {
			/* Claim again at once after any work: recording a head may
			 * have made its key's next message claimable, and that
			 * hand-over sends no notification. Before waiting, announce
			 * it and claim once more (see announce_waiting). */
			announce_waiting(&w);
			if (round_once(&w) == 0 && !*stop)
				wait_for_work(&w);
		}
		if (now_ms() >= next_progress) {
			next_progress = now_ms() + PROGRESS_EVERY_MS;
			log_progress(&w, "relay.progress");
		}
	}
	release_chained(&w);
	log_progress(&w, "relay.worker.stopped");
	char prefix[64];
	snprintf(prefix, sizeof(prefix), "worker=%d ", worker_index);
	relay_totals_log("relay.worker.totals", prefix, &w.totals);
	code = 0;
out:
	if (w.conn != NULL)
		PQfinish(w.conn);
	set_connected(&w, false);
	relay_deliverer_close(&w.deliverer);
	free(w.outcomes);
	free(w.fenced_ids);
	return code;
}
