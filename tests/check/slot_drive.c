/*
 * slot_drive.c - outbox-check --drive slots: the relay's own pipeline
 * slots (relay/slot.h) driven through a simulated transport, against the
 * real SQL.
 *
 * One simulated worker with 2..4 slots claims and records through the
 * relay's own calls (relay_claim_batch and relay_record_batch: outbox.claim
 * and outbox.record on a real PostgreSQL, as the relay's login role) and
 * feeds every event to relay_slot_step, doing what its actions say, as
 * relay/worker.c does. The transport is played here, the way deliver.c
 * plays it for the worker: a message over --max-payload is decided at send
 * time (dead, skipped, its outcome written into the slot's outcomes then),
 * and each frame is, by the seed, answered, lost before the consumer, sent
 * with its reply lost, answered twice, or refused at send; replies come in
 * any order (late), after their frame timed out, or twice. The worker also
 * dies between send and record (its leases then run out and a new life of
 * it takes the batches over), or stops (every slot gets the shutdown
 * event), and some claims wait at the standby gate. The consumer applies a
 * message once and answers duplicate after that.
 *
 * What must hold, checked after every outcome write and at the end:
 *   D1 a message the outbox says delivered was applied by the consumer;
 *   D2 a dead letter is a message over --max-payload, with that error, or
 *      one whose batch lost its holder batch_split_after() times;
 *   D3 an event that does not fit its slot's state (a reply to a frame
 *      that timed out, a second reply) is refused and changes nothing, and
 *      every event that fits is taken;
 *   D4 after a fair drain (no faults) every message is delivered or dead;
 *   D5 the outcomes a slot records are its batch's: outbox.record takes
 *      them (a release is all of a batch or none).
 * Slots that share their outcomes (the defect test_relay_skipped found in
 * the relay, issue 29: a message skipped at send time was recorded with
 * another frame's outcome) break D1, D2 or D5: tests/check.cmake builds the
 * checker with that defect put back into relay/slot.c and run.sh expects
 * this driver to find it.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "claim.h"
#include "outbox/clock.h"
#include "outbox/err.h"
#include "record.h"
#include "retry_policy.h"
#include "slot.h"
#include "slot_drive.h"

#define SD_SLOTS_MAX 4
#define SD_MSGS_MAX 32
#define SD_MAX_PAYLOAD 100   /* the simulated --max-payload, in bytes */
#define SD_REPLIES_MAX 64
#define SD_LEASE_MS 3600000  /* runs out only when the worker dies */
#define SD_DRAIN_TURNS 200
#define SD_TRACE_MAX 40      /* the last steps, printed with a violation */

/* What becomes of a frame that went out. */
enum fate { FATE_ANSWERED, FATE_LOST, FATE_REPLY_LOST, FATE_TWICE, FATE_REFUSED, FATE_COUNT };
static const char *const fate_names[] = { "answered", "lost", "reply lost", "answered twice",
	"refused" };

struct sd_msg {
	int64_t id;
	bool big;            /* over SD_MAX_PAYLOAD: dead at send time */
	bool applied;        /* the consumer applied it */
	int takeovers;       /* claims that took its batch over */
};

/* A slot's frame, as the transport sees it. */
struct sd_frame {
	unsigned serial;     /* which frame of its slot: a reply names it */
	bool reached;        /* went out on a connection */
	bool skip[CHK_BATCH_MAX];
};

struct sd_reply {
	int slot;
	unsigned serial;
};

struct sd_run {
	struct chk_db *db;
	PGconn *relay;       /* the relay's login role */
	uint64_t seed;
	struct chk_rng rng;
	bool fair;           /* the drain: every frame answered */
	struct relay_slots slots;
	struct sd_frame frame[SD_SLOTS_MAX];
	struct sd_reply reply[SD_REPLIES_MAX];
	int nreplies;
	struct sd_msg msg[SD_MSGS_MAX];
	int nmsgs, nbig;
	uint32_t batch;
	char owner[64];      /* the worker's current life */
	int lives;
	uint64_t policy_rng;
	int step_no;
	bool violated, failed;
	char why[CHK_WHY_MAX];
	char trace[SD_TRACE_MAX][200];
	int ntrace;
	int refused, deaths, stops, gate_waits, records;
};

/* The relay's retry policy, with limits no run reaches: a failed attempt
 * is always a retry, due at once. */
static const struct relay_retry_limits limits = { 1000000, INT64_C(1000) * 86400000, 0, 0 };
static const struct relay_record_mode record_mode = { .fencing = true, .skip_dead_heads = false };

static void
note(struct sd_run *run, const char *fmt, ...)
{
	char *line = run->trace[run->ntrace++ % SD_TRACE_MAX];
	int n = snprintf(line, 200, "  %4d ", run->step_no);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line + n, (size_t)(200 - n), fmt, ap);
	va_end(ap);
}

static void
violate(struct sd_run *run, const char *inv, const char *fmt, ...)
{
	if (run->violated || run->failed)
		return;
	run->violated = true;
	int n = snprintf(run->why, sizeof(run->why), "%s violated at step %d: ", inv, run->step_no);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(run->why + n, sizeof(run->why) - (size_t)n, fmt, ap);
	va_end(ap);
}

static void
fail(struct sd_run *run, const char *what, const char *err)
{
	if (!run->failed)
		snprintf(run->why, sizeof(run->why), "%s: %.900s", what, err);
	run->failed = true;
}

static struct sd_msg *
find(struct sd_run *run, uint64_t id)
{
	for (int i = 0; i < run->nmsgs; i++)
		if (run->msg[i].id == (int64_t)id)
			return &run->msg[i];
	return NULL;
}

static int
slot_index(struct sd_run *run, const struct relay_slot *s)
{
	return (int)(s - run->slots.slot);
}

/* Feed ev to s; an event that fits must be taken (D3). */
static bool
feed(struct sd_run *run, struct relay_slot *s, const struct relay_slot_event *ev,
    enum relay_slot_action *act)
{
	enum relay_slot_state from = s->state;
	if (relay_slot_step(&run->slots, s, ev, act) == OB_OK)
		return true;
	violate(run, "D3", "slot %d (%s) refused the event %s", slot_index(run, s),
	    relay_slot_state_name(from), relay_slot_event_name(ev->kind));
	return false;
}

static struct relay_slot_event
policy_event(struct sd_run *run, enum relay_slot_event_kind kind)
{
	struct relay_slot_event ev = { .kind = kind, .limits = &limits, .now_us = ob_wall_us(),
		.rng = &run->policy_rng };
	return ev;
}

/* The transport writes a sent message's outcome into the slot's outcomes,
 * as relay_frame_send and relay_frame_finish do. */
static void
set_outcome(struct relay_outcome *o, uint64_t id, enum relay_outcome_kind kind, const char *err,
    bool refund)
{
	memset(o, 0, sizeof(*o));
	o->id = id;
	o->kind = kind;
	o->refund_attempt = refund;
	snprintf(o->error, sizeof(o->error), "%s", err);
}

/* Dead as a poison message: its batch lost its holder batch_split_after()
 * times, the last of them taken over by the claim that dead-lettered it
 * (and so not seen here), as model.c's check_new_dead reads it. */
static bool
poison_dead(const struct sd_msg *m, const char *err)
{
	int n = 0;
	return sscanf(err, "taken over %d times without an outcome", &n) == 1 &&
	    n >= CHK_SPLIT_AFTER && m->takeovers > 0;
}

/* What the outbox says of this run's messages: D1, D2, and at the end D4. */
static void
check_messages(struct sd_run *run, bool at_end)
{
	if (run->nmsgs == 0)
		return;
	char sql[256];
	snprintf(sql, sizeof(sql), "SELECT id, status, coalesce(last_error, '') FROM outbox.messages"
	    " WHERE id BETWEEN %" PRId64 " AND %" PRId64 " ORDER BY id", run->msg[0].id,
	    run->msg[run->nmsgs - 1].id);
	PGresult *r = PQexec(run->db->mon, sql);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		fail(run, "read outbox.messages", PQresultErrorMessage(r));
		PQclear(r);
		return;
	}
	for (int i = 0; i < PQntuples(r); i++) {
		struct sd_msg *m = find(run, strtoull(PQgetvalue(r, i, 0), NULL, 10));
		const char *status = PQgetvalue(r, i, 1), *err = PQgetvalue(r, i, 2);
		if (m == NULL)
			continue;
		if (strcmp(status, "delivered") == 0 && !m->applied)
			violate(run, "D1", "message %" PRId64 "%s is delivered in the outbox but the"
			    " consumer never applied it", m->id, m->big ? " (over --max-payload)" : "");
		else if (strcmp(status, "dead") == 0 &&
		    !(m->big && strstr(err, "payload larger than --max-payload") != NULL) &&
		    !poison_dead(m, err))
			violate(run, "D2", "message %" PRId64 "%s is dead: %s", m->id,
			    m->big ? " (over --max-payload)" : "", err);
		else if (at_end && strcmp(status, "pending") == 0)
			violate(run, "D4", "message %" PRId64 " is still pending after the drain", m->id);
	}
	PQclear(r);
}

static void act_on(struct sd_run *run, struct relay_slot *s, enum relay_slot_action act);

/* A frame is over without a usable reply: it timed out (reached) or its
 * send failed (not reached); every sent message a RETRY, as
 * relay_frame_finish writes them. */
static void
frame_failed(struct sd_run *run, struct relay_slot *s)
{
	struct sd_frame *fr = &run->frame[slot_index(run, s)];
	struct relay_outcome *out = s->outcomes;
	const struct relay_batch *b = &s->f.batch;
	for (uint32_t i = 0; i < b->n; i++)
		if (!fr->skip[i])
			set_outcome(&out[i], b->msgs[i].id, RELAY_OUT_RETRY, fr->reached
			    ? "no reply from sim://consumer: Timed out"
			    : "send to sim://consumer: Connection refused", !fr->reached);
	note(run, "slot %d: frame %u failed (%s)", slot_index(run, s), fr->serial,
	    fr->reached ? "timed out" : "send failed");
	struct relay_slot_event ev = policy_event(run, RELAY_SLOT_EV_FAILED);
	ev.reached = fr->reached;
	ev.skip = fr->skip;
	enum relay_slot_action act;
	if (feed(run, s, &ev, &act))
		act_on(run, s, act);
}

/* Send s's frame: the messages over --max-payload decided now, the rest
 * to the consumer, with the seed's fate. */
static void
send_frame(struct sd_run *run, struct relay_slot *s)
{
	int k = slot_index(run, s);
	struct sd_frame *fr = &run->frame[k];
	const struct relay_batch *b = &s->f.batch;
	struct relay_outcome *out = s->outcomes;
	uint32_t nsent = 0;
	fr->serial++;
	for (uint32_t i = 0; i < b->n; i++) {
		fr->skip[i] = b->msgs[i].payload_len > SD_MAX_PAYLOAD;
		if (fr->skip[i])
			set_outcome(&out[i], b->msgs[i].id, RELAY_OUT_DEAD,
			    "payload larger than --max-payload", false);
		else
			nsent++;
	}
	enum fate f = FATE_ANSWERED;
	if (!run->fair && chk_below(&run->rng, 2) == 1)
		f = (enum fate)(1 + chk_below(&run->rng, FATE_COUNT - 1));
	fr->reached = nsent > 0 && f != FATE_REFUSED;
	char ids[128] = "";
	size_t used = 0;
	for (uint32_t i = 0; i < b->n && used < sizeof(ids); i++) {
		struct sd_msg *m = find(run, b->msgs[i].id);
		used += (size_t)snprintf(ids + used, sizeof(ids) - used, " %" PRIu64 "%s",
		    b->msgs[i].id, fr->skip[i] ? "(skipped)" : "");
		if (m != NULL && !fr->skip[i] && nsent > 0 && (f == FATE_ANSWERED ||
		    f == FATE_REPLY_LOST || f == FATE_TWICE))
			m->applied = true;
	}
	for (int copies = f == FATE_TWICE ? 2 : f == FATE_ANSWERED ? 1 : 0;
	    nsent > 0 && copies > 0 && run->nreplies < SD_REPLIES_MAX; copies--)
		run->reply[run->nreplies++] = (struct sd_reply){ k, fr->serial };
	note(run, "slot %d: frame %u of batch %" PRIu64 ":%s -> %s", k, fr->serial, b->id, ids,
	    nsent > 0 ? fate_names[f] : "nothing to send");
	struct relay_slot_event ev = { .kind = RELAY_SLOT_EV_SENT, .in_flight = nsent > 0 };
	enum relay_slot_action act;
	if (feed(run, s, &ev, &act))
		act_on(run, s, act);
}

/* Write s's outcomes (outbox.record), then what the outbox says. */
static void
record(struct sd_run *run, struct relay_slot *s)
{
	char err[1024];
	bool written = false;
	int rc = relay_record_batch(run->relay, &s->f.batch, s->outcomes, &record_mode, &written, err,
	    sizeof(err));
	note(run, "slot %d: record batch %" PRIu64 " -> %s", slot_index(run, s), s->f.batch.id,
	    rc != OB_OK ? err : written ? "written" : "fenced out");
	run->records++;
	if (rc == OB_EDB || rc == OB_EPROTO)
		fail(run, "outbox.record", err);
	else if (rc != OB_OK)
		violate(run, "D5", "slot %d's outcomes of batch %" PRIu64 " are not one batch's: %s",
		    slot_index(run, s), s->f.batch.id, err);
	check_messages(run, false);
	relay_batch_fini(&s->f.batch);
	struct relay_slot_event ev = { .kind = RELAY_SLOT_EV_RECORDED };
	enum relay_slot_action act;
	feed(run, s, &ev, &act);
}

static void
act_on(struct sd_run *run, struct relay_slot *s, enum relay_slot_action act)
{
	enum relay_slot_action next;
	struct relay_slot_event ev;
	switch (act) {
	case RELAY_SLOT_ACT_SEND:
		send_frame(run, s);
		break;
	case RELAY_SLOT_ACT_FINISH: /* nothing went out */
		ev = policy_event(run, RELAY_SLOT_EV_NOT_SENT);
		if (feed(run, s, &ev, &next))
			act_on(run, s, next);
		break;
	case RELAY_SLOT_ACT_RECORD:
		record(run, s);
		break;
	case RELAY_SLOT_ACT_CANCEL: /* cancelled, it finishes as failed */
		frame_failed(run, s);
		break;
	case RELAY_SLOT_ACT_NONE:
		break;
	}
}

/* Claim a batch into a free slot and start it. false when there was none. */
static bool
claim(struct sd_run *run)
{
	struct relay_slot *s = relay_slots_free_one(&run->slots);
	if (s == NULL)
		return false;
	char err[1024];
	const struct relay_topics all = { NULL, NULL, true };
	/* no byte budget: the model's claims draw theirs (model.c claim_budget) */
	int rc = relay_claim_batch(run->relay, run->owner, SD_LEASE_MS, run->batch, 0, &all,
	    chk_below(&run->rng, 2) == 1, true, false, false, &s->f.batch, err, sizeof(err));
	if (rc != OB_OK) {
		fail(run, "outbox.claim", err);
		return false;
	}
	const struct relay_batch *b = &s->f.batch;
	if (b->n == 0) {
		relay_batch_fini(&s->f.batch);
		return false;
	}
	for (uint32_t i = 0; i < b->n; i++) {
		struct sd_msg *m = find(run, b->msgs[i].id);
		if (m == NULL)
			violate(run, "claim", "claimed message %" PRIu64 ", not one of this run's",
			    b->msgs[i].id);
		else if (b->takeover)
			m->takeovers++;
	}
	note(run, "slot %d: %s claims batch %" PRIu64 " (%c, %u messages%s)", slot_index(run, s),
	    run->owner, b->id, (char)b->kind, b->n, b->takeover ? ", takeover" : "");
	struct relay_slot_event ev = { .kind = RELAY_SLOT_EV_CLAIMED, .probe_dest = -1 };
	enum relay_slot_action act;
	if (!feed(run, s, &ev, &act))
		return false;
	ev.kind = RELAY_SLOT_EV_START;
	ev.gate_wait = !run->fair && chk_below(&run->rng, 6) == 0;
	run->gate_waits += ev.gate_wait;
	if (feed(run, s, &ev, &act))
		act_on(run, s, act);
	return true;
}

/* Reply i arrives. */
static void
deliver_reply(struct sd_run *run, int i)
{
	struct sd_reply rp = run->reply[i];
	run->reply[i] = run->reply[--run->nreplies];
	struct relay_slot *s = &run->slots.slot[rp.slot];
	struct sd_frame *fr = &run->frame[rp.slot];
	enum relay_slot_action act;
	if (s->state == RELAY_SLOT_OUT && fr->serial != rp.serial) {
		/* the slot's next frame is out: nng's context of this one is closed */
		note(run, "slot %d: reply to frame %u dropped (frame %u out)", rp.slot, rp.serial,
		    fr->serial);
		return;
	}
	if (s->state != RELAY_SLOT_OUT) {
		/* too late (the frame timed out) or a second reply: refused, and
		 * nothing changes */
		enum relay_slot_state before = s->state;
		struct relay_slot_event ev = policy_event(run, RELAY_SLOT_EV_REPLIED);
		int rc = relay_slot_step(&run->slots, s, &ev, &act);
		note(run, "slot %d: late reply to frame %u, slot %s: %s", rp.slot, rp.serial,
		    relay_slot_state_name(before), rc == OB_OK ? "TAKEN" : "refused");
		if (rc != OB_EINVAL || s->state != before || act != RELAY_SLOT_ACT_NONE)
			violate(run, "D3", "slot %d (%s) took a reply to a frame that was over",
			    rp.slot, relay_slot_state_name(before));
		run->refused++;
		return;
	}
	const struct relay_batch *b = &s->f.batch;
	struct relay_outcome *out = s->outcomes;
	for (uint32_t k = 0; k < b->n; k++)
		if (!fr->skip[k])
			set_outcome(&out[k], b->msgs[k].id, RELAY_OUT_DELIVERED, "", false);
	note(run, "slot %d: reply to frame %u", rp.slot, rp.serial);
	struct relay_slot_event ev = policy_event(run, RELAY_SLOT_EV_REPLIED);
	if (feed(run, s, &ev, &act))
		act_on(run, s, act);
}

/* The replies in flight die with the worker's sockets. */
static void
forget_replies(struct sd_run *run)
{
	run->nreplies = 0;
}

static void
new_life(struct sd_run *run)
{
	snprintf(run->owner, sizeof(run->owner), "slotdrive:%" PRIu64 ":%d", run->seed,
	    ++run->lives);
}

/* The worker dies (between send and record): nothing of its slots is
 * recorded; their leases run out and its next life takes them over. */
static void
die(struct sd_run *run)
{
	enum relay_slot_action act;
	struct relay_slot_event ev = { .kind = RELAY_SLOT_EV_DROPPED };
	for (uint32_t i = 0; i < run->slots.n; i++) {
		struct relay_slot *s = &run->slots.slot[i];
		if (s->state == RELAY_SLOT_FREE)
			continue;
		relay_batch_fini(&s->f.batch);
		feed(run, s, &ev, &act);
	}
	forget_replies(run);
	PGresult *r = PQexec(run->db->mon, "UPDATE outbox.batches SET lease_until = now()"
	    " - interval '1 second' WHERE state = 'leased'");
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		fail(run, "expire the leases", PQresultErrorMessage(r));
	PQclear(r);
	note(run, "%s dies", run->owner);
	run->deaths++;
	new_life(run);
}

/* The worker stops: every slot gets the shutdown event (unsent batches
 * handed back, frames out cancelled), and starts again. */
static void
stop(struct sd_run *run)
{
	note(run, "%s stops", run->owner);
	struct relay_slot_event ev = { .kind = RELAY_SLOT_EV_SHUTDOWN };
	for (uint32_t i = 0; i < run->slots.n; i++) {
		struct relay_slot *s = &run->slots.slot[i];
		enum relay_slot_action act;
		if (s->state != RELAY_SLOT_FREE && feed(run, s, &ev, &act))
			act_on(run, s, act);
	}
	forget_replies(run);
	run->stops++;
	new_life(run);
}

/* The first slot in state st from a random start, or NULL. */
static struct relay_slot *
pick(struct sd_run *run, enum relay_slot_state st)
{
	uint32_t start = chk_below(&run->rng, run->slots.n);
	for (uint32_t k = 0; k < run->slots.n; k++) {
		struct relay_slot *s = &run->slots.slot[(start + k) % run->slots.n];
		if (s->state == st)
			return s;
	}
	return NULL;
}

/* One step of the seed's schedule. */
static void
random_step(struct sd_run *run)
{
	enum relay_slot_action act;
	struct relay_slot *s;
	switch (chk_below(&run->rng, 12)) {
	case 0: case 1: case 2:
		claim(run);
		break;
	case 3: case 4: case 5:
		if (run->nreplies > 0)
			deliver_reply(run, (int)chk_below(&run->rng, (uint32_t)run->nreplies));
		break;
	case 6:
		if ((s = pick(run, RELAY_SLOT_OUT)) != NULL)
			frame_failed(run, s);
		break;
	case 7: case 8:
		if ((s = pick(run, RELAY_SLOT_DECIDED)) != NULL)
			record(run, s);
		break;
	case 9:
		if ((s = pick(run, RELAY_SLOT_GATED)) != NULL) {
			struct relay_slot_event ev = { .kind = chk_below(&run->rng, 3) == 0
			    ? RELAY_SLOT_EV_GATE_BACK : RELAY_SLOT_EV_GATE_OPEN };
			note(run, "slot %d: %s", slot_index(run, s), relay_slot_event_name(ev.kind));
			if (feed(run, s, &ev, &act))
				act_on(run, s, act);
		}
		break;
	case 10:
		if (chk_below(&run->rng, 3) == 0 && (pick(run, RELAY_SLOT_OUT) != NULL ||
		    pick(run, RELAY_SLOT_DECIDED) != NULL))
			die(run);
		break;
	default:
		if (chk_below(&run->rng, 4) == 0 && run->slots.used > 0)
			stop(run);
		break;
	}
}

/* No faults: every frame answered, every reply in, everything recorded,
 * until a claim finds nothing and no slot is used. */
static void
drain(struct sd_run *run)
{
	run->fair = true;
	forget_replies(run);
	stop(run); /* what is out now goes back (or is recorded) */
	for (int turn = 0; turn < SD_DRAIN_TURNS && !run->violated && !run->failed; turn++) {
		bool claimed = false;
		while (!run->violated && !run->failed && claim(run))
			claimed = true;
		while (run->nreplies > 0 && !run->violated && !run->failed)
			deliver_reply(run, 0);
		struct relay_slot *s;
		while ((s = pick(run, RELAY_SLOT_DECIDED)) != NULL && !run->violated && !run->failed)
			record(run, s);
		if (!claimed && run->slots.used == 0)
			return;
	}
}

/* This seed's messages: nmsgs of them, about one in four over
 * --max-payload. */
static bool
enqueue(struct sd_run *run, int n)
{
	char sql[512], pad[201];
	memset(pad, 'x', 200);
	pad[200] = '\0';
	for (int i = 0; i < n; i++) {
		bool big = chk_below(&run->rng, 4) == 0;
		snprintf(sql, sizeof(sql), "SELECT outbox.enqueue('ta', 'sd%" PRIu64 "-%d', '{\"n\": %d%s%s%s}')",
		    run->seed, i, i, big ? ", \"pad\": \"" : "", big ? pad : "", big ? "\"" : "");
		PGresult *r = PQexec(run->db->mon, sql);
		if (PQresultStatus(r) != PGRES_TUPLES_OK) {
			fail(run, "outbox.enqueue", PQresultErrorMessage(r));
			PQclear(r);
			return false;
		}
		run->msg[run->nmsgs].id = atoll(PQgetvalue(r, 0, 0));
		run->msg[run->nmsgs++].big = big;
		run->nbig += big;
		PQclear(r);
	}
	return true;
}

/* One seed: 0, 1 (a violation) or 2 (the checker failed). */
static int
run_seed(struct chk_db *db, uint64_t seed, int steps, bool quiet)
{
	static struct sd_run run;
	memset(&run, 0, sizeof(run));
	run.db = db;
	run.seed = seed;
	run.rng.s = seed * 0x9e3779b97f4a7c15ULL | 1;
	run.policy_rng = seed | 1;
	uint32_t nslots = 2 + chk_below(&run.rng, SD_SLOTS_MAX - 1);
	run.batch = 2 + chk_below(&run.rng, CHK_BATCH_MAX - 1);
	new_life(&run);
	char ci[1200];
	snprintf(ci, sizeof(ci), "%s%s%s", db->conninfo, db->user[1][0] ? " user=" : "", db->user[1]);
	run.relay = PQconnectdb(ci);
	if (PQstatus(run.relay) != CONNECTION_OK) {
		fprintf(stderr, "outbox-check: --drive slots: connect as the relay: %s",
		    PQerrorMessage(run.relay));
		PQfinish(run.relay);
		return 2;
	}
	if (relay_slots_init(&run.slots, nslots, run.batch) != OB_OK) {
		PQfinish(run.relay);
		return 2;
	}
	if (enqueue(&run, 8 + (int)chk_below(&run.rng, SD_MSGS_MAX - 7))) {
		for (run.step_no = 0; run.step_no < steps && !run.violated && !run.failed; run.step_no++)
			random_step(&run);
		if (!run.violated && !run.failed)
			drain(&run);
		if (!run.violated && !run.failed)
			check_messages(&run, true);
	}
	for (uint32_t i = 0; i < run.slots.n; i++)
		if (run.slots.slot[i].state != RELAY_SLOT_FREE)
			relay_batch_fini(&run.slots.slot[i].f.batch);
	relay_slots_fini(&run.slots);
	PQfinish(run.relay);
	if (run.failed) {
		fprintf(stderr, "outbox-check: --drive slots: seed %" PRIu64 ": the checker failed: %s\n",
		    seed, run.why);
		return 2;
	}
	if (!quiet || run.violated)
		printf("outbox-check: --drive slots: seed %" PRIu64 " (slots %u, batch %u): %d messages"
		    " (%d over --max-payload), %d outcome writes, %d late or second replies refused,"
		    " %d deaths, %d stops, %d gate waits%s\n", seed, nslots, run.batch, run.nmsgs,
		    run.nbig, run.records, run.refused, run.deaths, run.stops, run.gate_waits,
		    run.violated ? " VIOLATION" : "");
	if (!run.violated)
		return 0;
	printf("outbox-check: --drive slots: seed %" PRIu64 ": %s\n", seed, run.why);
	printf("outbox-check: the last steps:\n");
	int first = run.ntrace > SD_TRACE_MAX ? run.ntrace - SD_TRACE_MAX : 0;
	for (int i = first; i < run.ntrace; i++)
		printf("%s\n", run.trace[i % SD_TRACE_MAX]);
	return 1;
}

int
chk_slot_drive(struct chk_db *db, uint64_t seed, int seeds, int steps, bool quiet)
{
	int64_t t0 = chk_now_ms();
	for (int i = 0; i < seeds; i++) {
		int rc = run_seed(db, seed + (uint64_t)i, steps, quiet);
		if (rc != 0)
			return rc;
	}
	printf("outbox-check: --drive slots: seeds %" PRIu64 "..%" PRIu64 ", %d steps each: no"
	    " violation in %.1f s\n", seed, seed + (uint64_t)seeds - 1, steps,
	    (double)(chk_now_ms() - t0) / 1000.0);
	return 0;
}
