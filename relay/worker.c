/*
 * worker.c - one relay worker: claim -> deliver -> record, forever.
 *
 * Owns one PostgreSQL connection (claims, outcome writes, LISTEN) and one
 * deliverer. Never sleeps a message: a retry is written as the record's due
 * time. A lost database connection is re-opened with backoff; whatever was
 * claimed and not recorded comes back when its lease expires.
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
#include "outbox/err.h"
#include "outbox/log.h"
#include "outbox/pg.h"
#include "record.h"
#include "relay.h"

#define RECONNECT_MIN_MS 100
#define RECONNECT_MAX_MS 5000
#define PROGRESS_EVERY_MS 10000

struct worker {
	const struct relay_config *cfg;
	volatile sig_atomic_t *stop;
	char owner[128];
	PGconn *conn;
	struct relay_deliverer deliverer;
	struct relay_outcome *outcomes;
	uint32_t claim_max;
	uint64_t rng;
	int64_t reconnect_ms;
	/* totals, for the progress line */
	uint64_t claimed, delivered, retried, dead, fenced_out;
};

static int64_t
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sleep up to ms, waking early when asked to stop. */
static void
nap(struct worker *w, int64_t ms)
{
	int64_t end = now_ms() + ms;
	while (!*w->stop && now_ms() < end) {
		struct timespec ts = { 0, 20 * 1000000L };
		nanosleep(&ts, NULL);
	}
}

static bool
connect_db(struct worker *w)
{
	char err[1024], q[1100];
	if (w->conn != NULL) {
		PQfinish(w->conn);
		w->conn = NULL;
	}
	if (ob_pg_connect(w->cfg->db, "outbox-relay", &w->conn, err, sizeof(err)) != OB_OK ||
	    ob_pg_exec(w->conn, "LISTEN outbox_enqueued", "listen", err, sizeof(err)) != OB_OK) {
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
	ob_info("relay.db.connected", "owner=%s", w->owner);
	return true;
}

/* Wait for an enqueue notification, or the poll interval (which also picks
 * up retries coming due and leases expiring). */
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

/* Turn a RETRY into a backoff, or into a dead letter once the message has
 * used up its attempts or its age. */
static void
finish_retry(struct worker *w, const struct ob_wire_msg *m, struct relay_outcome *o)
{
	const struct relay_config *c = w->cfg;
	uint32_t attempts = m->attempt - (o->refund_attempt ? 1 : 0);
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

/* One claim -> deliver -> record round. Returns the number claimed, or -1
 * when the database failed. */
static int
round_once(struct worker *w)
{
	char err[1024], q[1100];
	struct relay_claim claim;
	if (relay_claim_batch(w->conn, w->owner, w->cfg->lease_ms, w->claim_max, &claim,
	        err, sizeof(err)) != OB_OK) {
		ob_warn("relay.claim.failed", "err=%s", ob_log_q(err, q, sizeof(q)));
		return -1;
	}
	uint32_t n = claim.n;
	if (n == 0) {
		relay_claim_fini(&claim);
		return 0;
	}
	w->claimed += n;
	relay_deliver(&w->deliverer, claim.msgs, n, w->outcomes);
	for (uint32_t i = 0; i < n; i++) {
		struct relay_outcome *o = &w->outcomes[i];
		if (o->kind == RELAY_OUT_RETRY)
			finish_retry(w, &claim.msgs[i], o);
		switch (o->kind) {
		case RELAY_OUT_DELIVERED: w->delivered++; break;
		case RELAY_OUT_DEAD:
			w->dead++;
			ob_warn("relay.message.dead", "id=%" PRIu64 " attempt=%u err=%s",
			    o->id, claim.msgs[i].attempt, ob_log_q(o->error, q, sizeof(q)));
			break;
		default: w->retried++; break;
		}
	}
	uint32_t written = 0, fenced = 0;
	int rc = relay_record_outcomes(w->conn, w->outcomes, n, !w->cfg->no_fencing,
	    &written, &fenced, err, sizeof(err));
	if (rc != OB_OK) {
		/* The leases will expire and the messages be delivered again:
		 * at-least-once, and the consumer deduplicates. */
		ob_warn("relay.record.failed", "messages=%u err=%s", n, ob_log_q(err, q, sizeof(q)));
		relay_claim_fini(&claim);
		return -1;
	}
	if (fenced > 0) {
		w->fenced_out += fenced;
		ob_warn("relay.record.fenced_out", "messages=%u fenced_out=%u", n, fenced);
	}
	ob_debug("relay.round", "claimed=%u written=%u", n, written);
	relay_claim_fini(&claim);
	return (int)n;
}

int
relay_worker_run(const struct relay_config *cfg, int worker_index,
    volatile sig_atomic_t *stop)
{
	struct worker w;
	memset(&w, 0, sizeof(w));
	w.cfg = cfg;
	w.stop = stop;
	w.rng = ob_rand_seed();
	w.reconnect_ms = RECONNECT_MIN_MS;
	w.claim_max = (uint32_t)(cfg->batch * cfg->max_inflight);
	char host[64] = "localhost";
	gethostname(host, sizeof(host) - 1);
	snprintf(w.owner, sizeof(w.owner), "%s:%d:%d", host, (int)getpid(), worker_index);

	char err[1024];
	int code = 1;
	w.deliverer.limits.max_payload = (uint32_t)cfg->max_payload;
	w.deliverer.limits.max_batch = (uint32_t)cfg->batch;
	w.deliverer.timeout_ms = cfg->delivery_timeout_ms;
	w.deliverer.max_inflight = (uint32_t)cfg->max_inflight;
	w.outcomes = calloc(w.claim_max, sizeof(*w.outcomes));
	if (w.outcomes == NULL ||
	    relay_routes_parse(&w.deliverer, cfg->routes.items, cfg->routes.n, err,
	        sizeof(err)) != OB_OK ||
	    relay_deliverer_open(&w.deliverer, err, sizeof(err)) != OB_OK) {
		ob_error("relay.worker.start_failed", "err=%s", err);
		goto out;
	}
	ob_info("relay.worker.started", "owner=%s claim_max=%u lease_ms=%" PRId64
	    " fencing=%s", w.owner, w.claim_max, cfg->lease_ms,
	    cfg->no_fencing ? "OFF(broken-mode)" : "on");

	int64_t next_progress = now_ms() + PROGRESS_EVERY_MS;
	while (!*stop) {
		if (ob_pg_broken(w.conn) && !connect_db(&w))
			continue;
		int n = round_once(&w);
		if (n < 0) {
			if (!ob_pg_broken(w.conn))
				nap(&w, cfg->poll_ms);
		} else if ((uint32_t)n < w.claim_max) {
			wait_for_work(&w);
		}
		if (now_ms() >= next_progress) {
			next_progress = now_ms() + PROGRESS_EVERY_MS;
			ob_info("relay.progress", "claimed=%" PRIu64 " delivered=%" PRIu64
			    " retried=%" PRIu64 " dead=%" PRIu64 " fenced_out=%" PRIu64,
			    w.claimed, w.delivered, w.retried, w.dead, w.fenced_out);
		}
	}
	ob_info("relay.worker.stopped", "claimed=%" PRIu64 " delivered=%" PRIu64
	    " retried=%" PRIu64 " dead=%" PRIu64 " fenced_out=%" PRIu64,
	    w.claimed, w.delivered, w.retried, w.dead, w.fenced_out);
	code = 0;
out:
	if (w.conn != NULL)
		PQfinish(w.conn);
	relay_deliverer_close(&w.deliverer);
	free(w.outcomes);
	return code;
}
