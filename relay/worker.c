/*
 * worker.c - one relay worker process: claim batches, deliver them, record
 * each batch's outcome as soon as its frame is back, until told to stop.
 *
 * Up to --max-inflight batches are out at once, each in a pipeline slot
 * (slot.h: its state machine, which does no I/O; this file does the I/O
 * its actions ask for), each one frame on its own nng context. The loop
 * claims while it has room, records whatever frame
 * finished, and otherwise waits on two things at once: the deliverer's
 * wakeup pipe (a frame finished) and the PostgreSQL socket (an enqueue
 * notification), or the poll interval. Claims are pipelined behind frames
 * in flight, and a frame to a slow or dead destination never delays the
 * outcome of another.
 *
 * Owns one PostgreSQL connection (claims, outcome writes, LISTEN and, in
 * worker 0, housekeeping) and one deliverer. Never sleeps a message: a
 * retry is written as a due time. A lost connection is re-opened with
 * backoff (db_session.c); what was claimed and not recorded comes back
 * when its lease expires. The relay's fault points (die after claim, die
 * after send, stall after claim) fire here, from counters shared by the
 * whole tree. The jobs around the pipeline have files of their own:
 * counting (tally.c), worker 0's maintenance (housekeeping.c) and report
 * (stats_report.c), the standby gate (standby_gate.c), the retry decision
 * (retry_policy.c, applied by slot.c).
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
#include "db_session.h"
#include "deliver.h"
#include "dest.h"
#include "housekeeping.h"
#include "outbox/backoff.h"
#include "outbox/buf.h"
#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/log.h"
#include "outbox/pg.h"
#include "outbox/sig.h"
#include "record.h"
#include "relay.h"
#include "retry_policy.h"
#include "route_tls.h"
#include "slot.h"
#include "standby_gate.h"
#include "stats_report.h"
#include "tally.h"
#include "worker.h"

#define PROGRESS_EVERY_MS 10000
/* Of --shutdown-grace, kept at least this long (a busy database) for
 * recording the frames cut at shutdown and exiting. */
#define SHUTDOWN_RECORD_MS 1000
/* A claim that said nothing more is claimable (outbox.more_claimable) cannot
 * see an enqueue that looked for a waiting worker just before this worker's
 * announcement committed and committed itself after the claim began: that
 * one notifies no one. One more claim this long after (longer than such a
 * commit, its WAL flush included, normally takes) finds it, instead of the
 * --poll-ms wait; at any steady rate over 1 / RELOOK_MS news comes first. */
#define RELOOK_MS 20
#define FENCED_IDS_LOGGED 20   /* ids listed on a relay.record.fenced_out line */

struct worker {
	const struct relay_config *cfg;
	int index;
	volatile sig_atomic_t *stop;
	struct relay_shared *shared;
	char owner[128];
	struct relay_db_session db;
	bool protocol_refused;  /* the schema does not serve us: exit */
	struct relay_deliverer deliverer;
	struct relay_slots slots;        /* the pipeline slots (slot.h) */
	struct relay_record_mode record_mode;
	struct ob_buf inc, exc;  /* the claim's topic arrays */
	bool retries_first;      /* alternates, so neither starves the other */
	bool claim_dry;          /* the last claim found nothing: wait for news */
	bool expect_dry;         /* the next claim likely ends in a wait: announce first */
	bool record_freed;       /* a record may have made work claimable */
	uint64_t rng;
	int64_t announced_until_ms; /* announce_waiting's row stands until then */
	int64_t relook_at_ms;       /* claim once more then (RELOOK_MS); 0: no */
	struct relay_housekeeping housekeeping; /* worker 0 */
	struct relay_stats_report report;       /* worker 0 */
	struct relay_tally tally;
	struct relay_worker_live *live;  /* this worker's row of the shared state, or NULL */
	struct relay_gate gate;          /* --standby-gate */
	int64_t budget_log_next_ms;      /* relay.retry_budget.spent: not before */
	uint64_t budget_unlogged;        /* refusals since its last line */
};

#define COUNT(w, field, n) RELAY_TALLY_ADD(&(w)->tally, field, n)
#define METRIC(w, field) RELAY_TALLY_METRIC(&(w)->tally, field)

static void
add_inflight(struct worker *w, int64_t n)
{
	if (w->live != NULL)
		atomic_fetch_add(&w->live->inflight, n);
}

/* Sleep up to ms, waking early when asked to stop. */
static void
nap(struct worker *w, int64_t ms)
{
	int64_t end = ob_mono_ms() + ms, left;
	while (!*w->stop && (left = end - ob_mono_ms()) > 0) {
		struct timespec ts = { 0, (left < 20 ? left : 20) * 1000000L };
		nanosleep(&ts, NULL);
	}
}

/* (Re)connect. false when there is no connection (after the backoff's
 * wait) or the schema refused us. */
static bool
connect_db(struct worker *w)
{
	w->announced_until_ms = 0; /* announce again on the new connection */
	int64_t wait_ms = 0;
	int rc = relay_db_session_open(&w->db, &wait_ms);
	if (rc == OB_EPROTO)
		w->protocol_refused = true;
	else if (rc != OB_OK)
		nap(w, wait_ms);
	else
		relay_gate_forget(&w->gate);
	return rc == OB_OK;
}

/* The notifications that came in: true when one is for this worker. The
 * enqueue trigger wakes one waiting worker, named in the payload
 * (sql/outbox/functions/notify_enqueued.sql); an empty payload is for every worker
 * (outboxctl dead requeue, and schemas before 013). A notification for
 * another worker is no news here. */
static bool
drain_notifies(struct worker *w)
{
	PGnotify *note;
	bool mine = false;
	while ((note = PQnotifies(w->db.conn)) != NULL) {
		if (note->extra[0] == '\0' || strcmp(note->extra, w->owner) == 0)
			mine = true;
		PQfreemem(note);
	}
	if (mine)
		w->announced_until_ms = 0; /* the enqueue that notified took it */
	return mine;
}

/* What ended a wait. */
enum wait_end {
	WAIT_TIMEOUT, /* nothing came */
	WAIT_FRAME,   /* a frame finished */
	WAIT_NEWS,    /* a notification for this worker, a signal, a lost connection */
};

/* Wait up to ms for a finished frame, a notification for this worker, a
 * lost connection or a stop. */
static enum wait_end
wait_for(struct worker *w, int64_t ms)
{
	int wfd = relay_deliverer_wake_fd(&w->deliverer);
	int pfd = w->db.conn != NULL ? PQsocket(w->db.conn) : -1;
	/* A notification that came in with the last query's result is in
	 * libpq's buffer already: the socket will not say so. */
	if (pfd >= 0 && drain_notifies(w))
		return WAIT_NEWS;
	int64_t end = ob_mono_ms() + ms;
	for (;;) {
		int64_t left = end - ob_mono_ms();
		if (left <= 0)
			return WAIT_TIMEOUT;
		if (*w->stop)
			return WAIT_NEWS;
		fd_set rfds;
		FD_ZERO(&rfds);
		FD_SET(wfd, &rfds);
		if (pfd >= 0)
			FD_SET(pfd, &rfds);
		struct timeval tv = { left / 1000, (left % 1000) * 1000 };
		int n = select((wfd > pfd ? wfd : pfd) + 1, &rfds, NULL, NULL, &tv);
		if (n < 0)
			return WAIT_NEWS; /* a signal: let the loop look at the stop flag */
		if (n == 0)
			return WAIT_TIMEOUT;
		if (FD_ISSET(wfd, &rfds)) {
			relay_deliverer_drain_wake(&w->deliverer);
			return WAIT_FRAME;
		}
		if (PQconsumeInput(w->db.conn) != 1 || drain_notifies(w))
			return WAIT_NEWS; /* or a broken connection for the loop to see */
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
	PGresult *res = PQexecParams(w->db.conn, "SELECT outbox.relay_waiting($1, $2::bigint)",
	    2, NULL, params, NULL, NULL, 0);
	if (ob_pg_check(res, PGRES_TUPLES_OK, "announce waiting", err, sizeof(err)) != OB_OK)
		ob_warn("relay.wait.announce_failed", "err=%s", ob_log_q(err, q, sizeof(q)));
	else /* it stands for poll_ms in the database's clock: trust half */
		w->announced_until_ms = ob_mono_ms() + w->cfg->poll_ms / 2;
	PQclear(res);
}

/* Feed ev to slot s: what to do next. An event that does not fit the
 * slot's state is a bug in this file: the worker aborts (the supervisor
 * restarts it; its batches come back when their leases end). */
static enum relay_slot_action
step(struct worker *w, struct relay_slot *s, const struct relay_slot_event *ev)
{
	enum relay_slot_action act;
	enum relay_slot_state from = s->state;
	if (relay_slot_step(&w->slots, s, ev, &act) != OB_OK) {
		ob_error("relay.slot.bad_event", "owner=%s state=%s event=%s", w->owner,
		    relay_slot_state_name(from), relay_slot_event_name(ev->kind));
		abort();
	}
	return act;
}

/* The retry policy's side of an event: --max-attempts, --max-age and the
 * backoff, a message's age counted from its enqueue, in Unix time. */
static struct relay_slot_event
policy_event(struct worker *w, enum relay_slot_event_kind kind,
    const struct relay_retry_limits *l)
{
	struct relay_slot_event ev = { .kind = kind, .limits = l, .now_us = ob_wall_us(),
		.rng = &w->rng };
	return ev;
}

static struct relay_retry_limits
retry_limits(const struct relay_config *c)
{
	struct relay_retry_limits l = { (uint32_t)c->max_attempts, c->max_age_ms,
		c->backoff_base_ms, c->backoff_cap_ms };
	return l;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* One line per batch refused by the fence, with its first ids, sorted. */
static void
log_fenced(struct worker *w, const struct relay_batch *b)
{
	uint64_t ids[FENCED_IDS_LOGGED];
	uint32_t shown = b->n < FENCED_IDS_LOGGED ? b->n : FENCED_IDS_LOGGED;
	for (uint32_t i = 0; i < shown; i++)
		ids[i] = b->msgs[i].id;
	qsort(ids, shown, sizeof(ids[0]), cmp_u64);
	struct ob_buf list = OB_BUF_INIT;
	for (uint32_t i = 0; i < shown; i++)
		ob_buf_printf(&list, "%s%" PRIu64, i ? "," : "", ids[i]);
	ob_warn("relay.record.fenced_out", "owner=%s batch=%" PRIu64 " fence=%" PRIu64
	    " messages=%u fenced_out=%u ids=%s%s", w->owner, b->id, b->fence, b->n, b->n,
	    list.data != NULL ? list.data : "-", b->n > shown ? ",..." : "");
	ob_buf_fini(&list);
}

/* The slot's batch is over here: recorded (RELAY_SLOT_EV_RECORDED), or
 * abandoned to its lease (RELAY_SLOT_EV_DROPPED). */
static void
free_slot(struct worker *w, struct relay_slot *s, enum relay_slot_event_kind why)
{
	add_inflight(w, -(int64_t)s->f.batch.n);
	relay_batch_fini(&s->f.batch);
	struct relay_slot_event ev = { .kind = why };
	step(w, s, &ev);
}

/* Whether recording b may have made work claimable that was not before:
 * a lane freed for a key's next message, a retry or a released batch due,
 * a retry batch's rows handed back. A stream batch of lane 0 delivered
 * whole frees nothing: no claim needs to follow it. */
static bool
record_may_free(const struct relay_batch *b, const struct relay_outcome *o)
{
	if (b->kind != RELAY_BATCH_STREAM)
		return true;
	for (uint32_t i = 0; i < b->n; i++)
		if (b->msgs[i].ordering_key != NULL || o[i].kind != RELAY_OUT_DELIVERED)
			return true;
	return false;
}

/* Write the outcomes of a slot's batch (in s->outcomes, decided) and free
 * the slot. false when the database failed (the lease will expire: the
 * batch comes back and is delivered again; the consumer deduplicates). */
static bool
record_slot(struct worker *w, struct relay_slot *s)
{
	char err[1024], q[1100];
	const struct relay_batch *b = &s->f.batch;
	bool written = false;
	int64_t t_record = ob_mono_us();
	int rc = relay_record_batch(w->db.conn, b, s->outcomes, &w->record_mode, &written, err,
	    sizeof(err));
	ob_debug("relay.batch", "batch=%" PRIu64 " kind=%c messages=%u claim_us=%" PRId64
	    " out_us=%" PRId64 " record_us=%" PRId64 " written=%d", b->id, (char)b->kind, b->n,
	    s->t_claimed_us - s->t_claim_us, t_record - s->t_claimed_us, ob_mono_us() - t_record,
	    written);
	if (rc == OB_EPROTO) {
		ob_error("relay.protocol.refused", "owner=%s protocol=%d err=%s", w->owner,
		    RELAY_PROTOCOL, ob_log_q(err, q, sizeof(q)));
		w->protocol_refused = true;
	} else if (rc != OB_OK) {
		ob_warn("relay.record.failed", "batch=%" PRIu64 " messages=%u err=%s", b->id, b->n,
		    ob_log_q(err, q, sizeof(q)));
	} else if (!written) {
		COUNT(w, fenced_out, b->n);
		ob_metric_add(METRIC(w, fenced_out), b->n);
		log_fenced(w, b);
	} else {
		relay_tally_recorded(&w->tally, b, s->outcomes);
	}
	if (!written || record_may_free(b, s->outcomes))
		w->record_freed = true;
	free_slot(w, s, RELAY_SLOT_EV_RECORDED);
	return rc == OB_OK;
}

/* Carry out a slot's next action (slot.h). false when the database
 * failed. */
static bool act_on(struct worker *w, struct relay_slot *s, enum relay_slot_action act);

/* A retry the destination's budget refused: one warn line at once, then at
 * most one per RELAY_BUDGET_LOG_EVERY_MS carrying the count. */
static void
budget_spent_log(struct worker *w, const struct relay_frame *f)
{
	int64_t now = ob_mono_ms();
	w->budget_unlogged++;
	if (now < w->budget_log_next_ms)
		return;
	w->budget_log_next_ms = now + RELAY_BUDGET_LOG_EVERY_MS;
	char q[600];
	ob_warn("relay.retry_budget.spent", "owner=%s dest=%s refused=%" PRIu64 " slow_ms=%" PRId64
	    " hint=\"retries to this destination failed until its budget ran out: they wait the"
	    " slow rate until deliveries succeed again\"", w->owner,
	    ob_log_q(f->dest >= 0 ? w->deliverer.table.dest[f->dest].url : "?", q, sizeof(q)),
	    w->budget_unlogged, w->cfg->retry_budget_slow_ms);
	w->budget_unlogged = 0;
}

/* A finished frame: its outcomes, the die-after-send fault, the record. */
static bool
collect_slot(struct worker *w, struct relay_slot *s)
{
	struct relay_frame *f = &s->f;
	bool sent = f->sent;
	uint64_t failed_before = w->deliverer.frames_failed;
	uint64_t spent_before = w->deliverer.budget_spent;
	enum relay_frame_result res = relay_frame_finish(&w->deliverer, f, s->outcomes);
	COUNT(w, frames_failed, w->deliverer.frames_failed - failed_before);
	ob_metric_add(METRIC(w, frames_failed), w->deliverer.frames_failed - failed_before);
	if (w->deliverer.budget_spent > spent_before) {
		COUNT(w, budget_spent, w->deliverer.budget_spent - spent_before);
		ob_metric_add(METRIC(w, budget_spent), w->deliverer.budget_spent - spent_before);
		budget_spent_log(w, f);
	}
	struct relay_retry_limits l = retry_limits(w->cfg);
	struct relay_slot_event ev = policy_event(w, res == RELAY_FRAME_FAILED ? RELAY_SLOT_EV_FAILED
	    : res == RELAY_FRAME_REPLIED ? RELAY_SLOT_EV_REPLIED : RELAY_SLOT_EV_NOT_SENT, &l);
	ev.reached = f->reached;
	ev.skip = f->skip;
	enum relay_slot_action act = step(w, s, &ev);
	struct relay_shared *sh = w->shared;
	if (sh != NULL && sent && res == RELAY_FRAME_REPLIED && ob_fault_fire(&sh->die_after_send))
		ob_fault_die("relay.after_send");
	return act_on(w, s, act);
}

/* Record every slot whose frame is back. false when the database failed. */
static bool
collect_done(struct worker *w)
{
	bool ok = true;
	for (uint32_t i = 0; i < w->slots.n && ok; i++) {
		struct relay_slot *s = &w->slots.slot[i];
		if (s->state == RELAY_SLOT_OUT && relay_frame_done(&w->deliverer, &s->f))
			ok = collect_slot(w, s);
	}
	return ok;
}

/* Send the frame of the batch in s (claimed, past the gate). A frame that
 * finished at once (held, no route) is recorded now. */
static bool
send_slot(struct worker *w, struct relay_slot *s)
{
	uint64_t sent_before = w->deliverer.frames_sent;
	struct relay_slot_event ev = { .kind = RELAY_SLOT_EV_SENT };
	ev.in_flight = relay_frame_send(&w->deliverer, &s->f, s->probe_dest, s->outcomes);
	COUNT(w, frames_sent, w->deliverer.frames_sent - sent_before);
	ob_metric_add(METRIC(w, frames_sent), w->deliverer.frames_sent - sent_before);
	return act_on(w, s, step(w, s, &ev));
}

static bool
act_on(struct worker *w, struct relay_slot *s, enum relay_slot_action act)
{
	switch (act) {
	case RELAY_SLOT_ACT_SEND:
		return send_slot(w, s);
	case RELAY_SLOT_ACT_FINISH:
		return collect_slot(w, s);
	case RELAY_SLOT_ACT_RECORD:
		return record_slot(w, s);
	case RELAY_SLOT_ACT_CANCEL:
		relay_frame_cancel(&s->f);
		return true;
	case RELAY_SLOT_ACT_NONE:
		return true;
	}
	return true;
}

/* --standby-gate: send the gated batches the standbys have reached (one
 * pg_stat_replication query for all of them), hand back those that waited
 * past --standby-gate-timeout. The worker goes on meanwhile: frames out
 * are collected, claims pipelined. false when the database failed. */
static bool
open_gated(struct worker *w)
{
	if (w->slots.gated == 0)
		return true;
	uint64_t timeouts = w->gate.timeouts;
	int rc = relay_gate_poll_logged(&w->gate, w->db.conn, w->owner);
	int64_t now = ob_mono_ms();
	bool ok = true;
	for (uint32_t i = 0; i < w->slots.n && ok; i++) {
		struct relay_slot *s = &w->slots.slot[i];
		struct relay_slot_event ev = { .kind = RELAY_SLOT_EV_GATE_OPEN };
		if (s->state != RELAY_SLOT_GATED)
			continue;
		switch (relay_gate_step(&w->gate, rc, s->f.batch.lsn, s->gate_until_ms, now,
		    *w->stop)) {
		case RELAY_GATE_STEP_SEND:
			ok = act_on(w, s, step(w, s, &ev));
			break;
		case RELAY_GATE_STEP_BACK:
			if (rc == OB_OK)
				relay_gate_timed_out(&w->gate, s->f.batch.lsn, now - (s->gate_until_ms -
				    w->gate.timeout_ms));
			ev.kind = RELAY_SLOT_EV_GATE_BACK; /* its attempt refunded, due at once */
			ok = act_on(w, s, step(w, s, &ev));
			break;
		case RELAY_GATE_STEP_WAIT:
			break;
		}
	}
	ob_metric_add(METRIC(w, standby_gate_timeouts), w->gate.timeouts - timeouts);
	if (rc == OB_EPROTO)
		nap(w, 100); /* a missing grant: do not claim and hand back in a tight loop */
	return ok && rc != OB_EDB;
}

/* Start the batch claimed into s: the claim faults, the standby gate, then
 * the frame. A frame that finished at once (held, no route) is recorded
 * now. */
static bool
start_slot(struct worker *w, struct relay_slot *s, int probe_dest)
{
	struct relay_batch *b = &s->f.batch;
	COUNT(w, claimed, b->n);
	ob_metric_add(METRIC(w, claimed), b->n);
	if (b->takeover)
		ob_metric_add(METRIC(w, takeovers), b->n);
	add_inflight(w, b->n);
	struct relay_shared *sh = w->shared;
	if (sh != NULL && ob_fault_fire(&sh->die_after_claim))
		ob_fault_die("relay.after_claim");
	if (sh != NULL && ob_fault_fire(&sh->stall_after_claim)) {
		ob_warn("relay.fault.stall", "owner=%s batch=%" PRIu64 " messages=%u first_id=%" PRIu64
		    " fence=%" PRIu64 " stall_ms=%" PRId64 " lease_ms=%" PRId64, w->owner, b->id, b->n,
		    b->msgs[0].id, b->fence, w->cfg->fault_stall_ms, w->cfg->lease_ms);
		nap(w, w->cfg->fault_stall_ms);
		ob_warn("relay.fault.stall_over", "owner=%s batch=%" PRIu64 " messages=%u", w->owner,
		    b->id, b->n);
	}
	struct relay_slot_event ev = { .kind = RELAY_SLOT_EV_START, .probe_dest = probe_dest };
	ev.stopping = *w->stop;
	/* not known to be on the standbys yet: it waits at the gate (open_gated) */
	ev.gate_wait = !ev.stopping && relay_gate_must_wait(&w->gate, b->lsn, ob_mono_ms(),
	    &ev.gate_until_ms);
	enum relay_slot_action act = step(w, s, &ev);
	if (s->state == RELAY_SLOT_GATED)
		ob_metric_add(METRIC(w, standby_gate_waits), 1);
	return act_on(w, s, act);
}

/* One claim into s. Returns 1 when a batch was claimed, 0 when there was
 * nothing, -1 when the database failed. */
static int
claim_into(struct worker *w, struct relay_slot *s, const struct relay_topics *topics,
    uint32_t max)
{
	char err[1024], q[1100];
	struct relay_slot_event ev = { .kind = RELAY_SLOT_EV_CLAIMED };
	ev.t_claim_us = ob_mono_us();
	int rc = relay_claim_batch(w->db.conn, w->owner, w->cfg->lease_ms, max, w->cfg->batch_bytes,
	    topics, w->retries_first, !w->cfg->no_ordering, w->record_mode.skip_dead_heads,
	    w->gate.mode != RELAY_GATE_NONE, &s->f.batch, err, sizeof(err));
	ev.t_claimed_us = ob_mono_us();
	w->retries_first = !w->retries_first;
	if (rc == OB_EPROTO) {
		ob_error("relay.protocol.refused", "owner=%s protocol=%d err=%s", w->owner,
		    RELAY_PROTOCOL, ob_log_q(err, q, sizeof(q)));
		w->protocol_refused = true;
		return -1;
	}
	if (rc != OB_OK) {
		ob_warn("relay.claim.failed", "err=%s", ob_log_q(err, q, sizeof(q)));
		return -1;
	}
	if (s->f.batch.n == 0) {
		relay_batch_fini(&s->f.batch);
		return 0;
	}
	step(w, s, &ev);
	return 1;
}

/* Claim and start batches while there is room: a due breaker probe first
 * (one message of a route that is down), then the topics that may be sent
 * to now. false when the database failed. */
static bool
fill(struct worker *w)
{
	while (!*w->stop && !w->claim_dry && w->slots.used < w->slots.n) {
		struct relay_slot *s = relay_slots_free_one(&w->slots);
		struct relay_topics topics;
		int dest = -1;
		if (relay_probe_due(&w->deliverer.table, &w->inc, &w->exc, &topics, &dest)) {
			int got = claim_into(w, s, &topics, 1);
			if (got < 0) {
				relay_probe_unused(&w->deliverer.table, dest);
				return false;
			}
			if (got == 0) {
				relay_probe_unused(&w->deliverer.table, dest);
			} else {
				if (!start_slot(w, s, dest))
					return false;
				continue;
			}
		}
		if (relay_topics_now(&w->deliverer.table, &w->inc, &w->exc, &topics) != OB_OK)
			return true;
		if (strcmp(topics.include, "{}") == 0 && !topics.others) {
			w->claim_dry = true; /* every route is down */
			return true;
		}
		/* A claim that likely finds nothing is the last before a wait:
		 * announce first (see announce_waiting), so that it need not be
		 * made twice, once before and once after the announcement. */
		if (w->expect_dry && ob_mono_ms() >= w->announced_until_ms)
			announce_waiting(w);
		int got = claim_into(w, s, &topics, (uint32_t)w->cfg->batch);
		if (got < 0)
			return false;
		if (got == 0) {
			w->claim_dry = true;
			return true;
		}
		/* The claim says whether another would find anything now
		 * (outbox.more_claimable). When not, what comes next is news:
		 * wait for it (turn) rather than claim to find nothing. */
		bool more = s->f.batch.more;
		w->expect_dry = !more;
		if (!start_slot(w, s, -1))
			return false;
		if (!more) {
			w->claim_dry = true;
			w->relook_at_ms = ob_mono_ms() + RELOOK_MS;
		}
	}
	return true;
}

/* Stopping: no new claims; frames out get the shutdown cut, the grace
 * less the time kept for recording them and exiting (a quarter of it, at
 * least SHUTDOWN_RECORD_MS, at most half), then are cancelled and recorded
 * as failed. */
static void
drain_inflight(struct worker *w)
{
	int64_t grace = w->cfg->shutdown_grace_ms;
	int64_t keep = grace / 4 > SHUTDOWN_RECORD_MS ? grace / 4 : SHUTDOWN_RECORD_MS;
	if (keep > grace / 2)
		keep = grace / 2;
	int64_t cut = ob_mono_ms() + grace - keep;
	bool cancelled = false;
	/* batches still at the standby gate were never sent: hand them back */
	struct relay_slot_event shutdown = { .kind = RELAY_SLOT_EV_SHUTDOWN };
	for (uint32_t i = 0; i < w->slots.n && w->slots.gated > 0; i++) {
		struct relay_slot *s = &w->slots.slot[i];
		if (s->state == RELAY_SLOT_GATED && !act_on(w, s, step(w, s, &shutdown)))
			break;
	}
	while (w->slots.used > 0) {
		if (!ob_pg_broken(w->db.conn) && !collect_done(w))
			break;
		if (w->slots.used == 0)
			break;
		if (ob_pg_broken(w->db.conn))
			break;
		if (!cancelled && ob_mono_ms() >= cut) {
			for (uint32_t i = 0; i < w->slots.n; i++) {
				struct relay_slot *s = &w->slots.slot[i];
				if (s->state == RELAY_SLOT_OUT)
					act_on(w, s, step(w, s, &shutdown)); /* cancel */
			}
			cancelled = true;
		}
		wait_for(w, 50);
	}
	/* what could not be recorded comes back when its lease expires */
	for (uint32_t i = 0; i < w->slots.n; i++) {
		struct relay_slot *s = &w->slots.slot[i];
		if (s->state != RELAY_SLOT_FREE) {
			relay_frame_cancel(&s->f);
			free_slot(w, s, RELAY_SLOT_EV_DROPPED);
		}
	}
}

/* A lost connection: the frames out can no longer be recorded. Their
 * leases expire and the batches are delivered again. */
static void
drop_inflight(struct worker *w)
{
	for (uint32_t i = 0; i < w->slots.n; i++) {
		struct relay_slot *s = &w->slots.slot[i];
		if (s->state == RELAY_SLOT_FREE)
			continue;
		relay_frame_cancel(&s->f);
		while (s->state == RELAY_SLOT_OUT && !relay_frame_done(&w->deliverer, &s->f))
			wait_for(w, 20);
		relay_frame_finish(&w->deliverer, &s->f, s->outcomes);
		free_slot(w, s, RELAY_SLOT_EV_DROPPED);
	}
}

/* --linger-ms after news: more messages commit meanwhile, and the claim
 * takes them as one batch. News and finished frames during it are taken
 * as they come (a frame is recorded in the next turn). */
static void
linger(struct worker *w)
{
	int64_t until = ob_mono_ms() + w->cfg->linger_ms, left;
	/* a lost connection ends it: its socket stays readable, and the
	 * loop is for the reconnect to handle */
	while (!*w->stop && !ob_pg_broken(w->db.conn) && (left = until - ob_mono_ms()) > 0)
		wait_for(w, left);
}

/* One turn of the loop: claim what fits, record what is back, wait. */
static void
turn(struct worker *w)
{
	if (!fill(w) || !open_gated(w))
		return;
	uint32_t out = w->slots.used;
	w->record_freed = false;
	if (!collect_done(w))
		return;
	if (w->slots.used < out) {
		/* A batch came back. Its record may have freed its lane (the next
		 * message of a key) or let a retry come due: then claim again now
		 * rather than after a wait. A window that was full has room. */
		if (w->record_freed)
			w->claim_dry = false;
		return;
	}
	if (w->claim_dry) {
		/* Nothing to claim. Before waiting, announce it (unless the last
		 * announcement still stands) and claim once more (see
		 * announce_waiting): an enqueue in between notifies. With frames
		 * out too: a worker whose frames wait on a slow destination must
		 * still hear of new messages for the others. */
		if (ob_mono_ms() >= w->announced_until_ms) {
			announce_waiting(w);
			w->claim_dry = false;
			if (!fill(w) || !w->claim_dry)
				return;
		}
		/* News or the poll may bring work; after a plain timeout the
		 * poll's claim likely finds nothing. A finished frame is for the
		 * next turn's record to judge (record_may_free). */
		int64_t ms = w->slots.gated > 0 ? w->gate.poll_ms : w->cfg->poll_ms;
		if (w->relook_at_ms > 0) {
			int64_t left = w->relook_at_ms - ob_mono_ms();
			if (left < ms)
				ms = left > 0 ? left : 0;
		}
		enum wait_end why = wait_for(w, ms);
		if (why == WAIT_NEWS && w->cfg->linger_ms > 0)
			linger(w);
		if (why != WAIT_FRAME && w->slots.gated == 0) {
			/* The claim that news, the look again or the poll brings
			 * likely takes what there is and ends in a wait: announce
			 * before it (unless the announcement stands). */
			w->claim_dry = false;
			w->expect_dry = true;
			w->relook_at_ms = 0;
		}
	} else if (w->slots.used > 0) {
		wait_for(w, w->slots.gated > 0 ? w->gate.poll_ms : 50);
	}
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
	w.housekeeping.next_purge_ms = ob_mono_ms();
	ob_buf_init(&w.inc);
	ob_buf_init(&w.exc);
	w.tally.all = shared != NULL ? &shared->totals : NULL;
	if (shared != NULL && worker_index >= 0 && worker_index < RELAY_MAX_WORKERS) {
		w.tally.metrics = &shared->metrics;
		w.live = &shared->live[worker_index];
		w.deliverer.frame_seconds = shared->metrics.delivery_seconds;
		for (int k = 0; k < OB_BUS_REFUSED_COUNT; k++)
			w.deliverer.table.handshake_refused[k] = shared->metrics.handshake_refused[k];
		for (int k = 0; k < 2; k++)
			w.deliverer.table.tls_reload[k] = shared->metrics.tls_reload[k];
		w.deliverer.table.breakers = w.live->breakers;
		w.deliverer.table.breakers_n = shared->metrics.ndests;
	}
	char host[64] = "localhost";
	gethostname(host, sizeof(host) - 1);
	snprintf(w.owner, sizeof(w.owner), "%s:%d:%d", host, (int)getpid(), worker_index);
	relay_db_session_init(&w.db, cfg, w.owner, w.live != NULL ? &w.live->connected : NULL);
	relay_stats_report_init(&w.report, cfg, w.tally.metrics);
	w.report.next_ms = ob_mono_ms();

	char err[1024];
	int code = 1;
	w.deliverer.limits.max_payload = (uint32_t)cfg->max_payload;
	w.deliverer.limits.max_batch = (uint32_t)cfg->batch;
	w.deliverer.source = cfg->source_id;
	w.deliverer.timeout_ms = cfg->delivery_timeout_ms;
	w.deliverer.table.tls = relay_tls_files(cfg);
	w.deliverer.table.window_max = (uint32_t)cfg->max_inflight;
	w.deliverer.table.breaker_threshold = (uint32_t)cfg->breaker_threshold;
	w.deliverer.table.breaker_probe_ms = cfg->breaker_probe_ms;
	w.deliverer.table.retry_budget = strcmp(cfg->retry_budget, "off") != 0;
	w.deliverer.table.budget_slow_ms = cfg->retry_budget_slow_ms;
	w.deliverer.table.unrouted_dead = cfg->unrouted != NULL &&
	    strcmp(cfg->unrouted, "dead-letter") == 0;
	if (relay_gate_init(&w.gate, cfg->standby_gate, cfg->standby_names.items,
	    cfg->standby_names.n, cfg->standby_gate_timeout_ms, cfg->standby_poll_ms, err,
	    sizeof(err)) != OB_OK) {
		ob_error("relay.worker.start_failed", "err=%s", err);
		goto out;
	}
	bool oom = relay_slots_init(&w.slots, (uint32_t)cfg->max_inflight, (uint32_t)cfg->batch)
	    != OB_OK;
	if (oom || relay_deliverer_init(&w.deliverer, cfg->route_table) != OB_OK) {
		snprintf(err, sizeof(err), "out of memory");
		ob_error("relay.worker.start_failed", "err=%s", err);
		goto out;
	}
	if (relay_deliverer_open(&w.deliverer, err, sizeof(err)) != OB_OK) {
		ob_error("relay.worker.start_failed", "err=%s", err);
		goto out;
	}
	for (uint32_t i = 0; i < w.slots.n; i++) {
		if (relay_frame_init(&w.deliverer, &w.slots.slot[i].f) != OB_OK) {
			ob_error("relay.worker.start_failed", "err=%s", "out of memory (frames)");
			goto out;
		}
	}
	ob_info("relay.worker.started", "worker=%d owner=%s batch=%" PRId64 " max_inflight=%u"
	    " lease_ms=%" PRId64 " fencing=%s ordering=%s on_dead_head=%s standby_gate=%s%s%s",
	    worker_index, w.owner, cfg->batch, w.slots.n, cfg->lease_ms,
	    cfg->no_fencing ? "OFF(broken-mode)" : "on",
	    cfg->no_ordering ? "OFF(broken-mode)" : "on", cfg->on_dead_head,
	    cfg->standby_gate != NULL ? cfg->standby_gate : "none",
	    w.gate.mode != RELAY_GATE_NONE ? " standbys=" : "",
	    w.gate.mode != RELAY_GATE_NONE ? w.gate.names : "");

	int64_t next_progress = ob_mono_ms() + PROGRESS_EVERY_MS;
	unsigned reloads = ob_sig_reloads();
	while (!*stop && !w.protocol_refused) {
		if (ob_sig_reloads() != reloads) { /* SIGHUP, forwarded by the supervisor */
			reloads = ob_sig_reloads();
			(void)ob_reload_run(cfg->reload);
			/* the certificates too (same paths, new contents), for new dials */
			relay_tls_reload(&w.deliverer.table, worker_index);
		}
		if (ob_pg_broken(w.db.conn)) {
			if (w.db.conn != NULL) {
				relay_db_session_lost(&w.db);
				drop_inflight(&w);
			}
			if (!connect_db(&w))
				continue;
		}
		if (worker_index == 0) {
			relay_housekeeping_purge(&w.housekeeping, w.db.conn, cfg, &w.tally);
			relay_stats_report_run(&w.report, w.db.conn);
			relay_housekeeping_discover(&w.housekeeping, w.db.conn, cfg);
		}
		turn(&w);
		if (ob_mono_ms() >= next_progress) {
			next_progress = ob_mono_ms() + PROGRESS_EVERY_MS;
			relay_tally_log_progress(&w.tally, "relay.progress");
		}
	}
	drain_inflight(&w);
	relay_tally_log_progress(&w.tally, "relay.worker.stopped");
	char prefix[64];
	snprintf(prefix, sizeof(prefix), "worker=%d ", worker_index);
	relay_totals_log("relay.worker.totals", prefix, &w.tally.mine);
	code = w.protocol_refused ? RELAY_EXIT_PROTOCOL : 0;
out:
	relay_db_session_close(&w.db);
	for (uint32_t i = 0; i < w.slots.n; i++)
		relay_frame_fini(&w.slots.slot[i].f);
	relay_deliverer_close(&w.deliverer);
	relay_slots_fini(&w.slots);
	ob_buf_fini(&w.inc);
	ob_buf_fini(&w.exc);
	return code;
}
