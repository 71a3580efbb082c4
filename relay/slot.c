/*
 * slot.c - the pipeline slots' state machine (slot.h): which event fits
 * which state, what the worker does next, and the outcomes decided on the
 * way (the retry policy's, and "released" for a batch that goes back
 * unsent).
 *
 * Every change of a slot's fields goes through slot_enter, and only
 * relay_slot_step calls it; relay_slots_init and relay_slots_fini make and
 * unmake the slots (scripts/check-slot-writers.sh holds this). Nothing
 * here does I/O: the worker claims, sends and records as the actions say,
 * and the protocol checker feeds the same events from a simulated
 * transport.
 */
#include <stdlib.h>
#include <string.h>

#include "outbox/err.h"
#include "slot.h"

static const char *const state_names[] = {
	[RELAY_SLOT_FREE] = "free", [RELAY_SLOT_CLAIMED] = "claimed",
	[RELAY_SLOT_GATED] = "gated", [RELAY_SLOT_OUT] = "out", [RELAY_SLOT_DECIDED] = "decided",
};

static const char *const event_names[] = {
	[RELAY_SLOT_EV_CLAIMED] = "claimed", [RELAY_SLOT_EV_START] = "start",
	[RELAY_SLOT_EV_GATE_OPEN] = "gate_open", [RELAY_SLOT_EV_GATE_BACK] = "gate_back",
	[RELAY_SLOT_EV_SENT] = "sent", [RELAY_SLOT_EV_REPLIED] = "replied",
	[RELAY_SLOT_EV_NOT_SENT] = "not_sent", [RELAY_SLOT_EV_FAILED] = "failed",
	[RELAY_SLOT_EV_SHUTDOWN] = "shutdown", [RELAY_SLOT_EV_RECORDED] = "recorded",
	[RELAY_SLOT_EV_DROPPED] = "dropped",
};

const char *
relay_slot_state_name(enum relay_slot_state s)
{
	return (unsigned)s < sizeof(state_names) / sizeof(state_names[0]) ? state_names[s] : "?";
}

const char *
relay_slot_event_name(enum relay_slot_event_kind k)
{
	return (unsigned)k < sizeof(event_names) / sizeof(event_names[0]) ? event_names[k] : "?";
}

int
relay_slots_init(struct relay_slots *p, uint32_t n, uint32_t batch_max)
{
	memset(p, 0, sizeof(*p));
	p->slot = calloc(n > 0 ? n : 1, sizeof(*p->slot));
	p->store = calloc((size_t)(n > 0 ? n : 1) * (batch_max > 0 ? batch_max : 1),
	    sizeof(*p->store));
	if (p->slot == NULL || p->store == NULL) {
		relay_slots_fini(p);
		return OB_ENOMEM;
	}
	p->n = n;
	for (uint32_t i = 0; i < n; i++) {
		p->slot[i].probe_dest = -1;
		/* each slot its own part of the block: never another slot's */
		p->slot[i].outcomes = p->store + (size_t)i * batch_max;
	}
	return OB_OK;
}

void
relay_slots_fini(struct relay_slots *p)
{
	free(p->slot);
	free(p->store);
	memset(p, 0, sizeof(*p));
}

struct relay_slot *
relay_slots_free_one(struct relay_slots *p)
{
	for (uint32_t i = 0; i < p->n; i++)
		if (p->slot[i].state == RELAY_SLOT_FREE)
			return &p->slot[i];
	return NULL;
}

/* The one place a slot's fields change: to its new state, with what that
 * state keeps from the event, and the counts of p. */
static void
slot_enter(struct relay_slots *p, struct relay_slot *s, enum relay_slot_state to,
    const struct relay_slot_event *ev)
{
	enum relay_slot_state from = s->state;
	if (from == RELAY_SLOT_FREE && to != RELAY_SLOT_FREE)
		p->used++;
	else if (from != RELAY_SLOT_FREE && to == RELAY_SLOT_FREE)
		p->used--;
	if (from == RELAY_SLOT_GATED && to != RELAY_SLOT_GATED)
		p->gated--;
	else if (from != RELAY_SLOT_GATED && to == RELAY_SLOT_GATED)
		p->gated++;
	switch (ev->kind) {
	case RELAY_SLOT_EV_CLAIMED:
		s->t_claim_us = ev->t_claim_us;
		s->t_claimed_us = ev->t_claimed_us;
		s->probe_dest = -1;
		break;
	case RELAY_SLOT_EV_START:
		s->probe_dest = ev->probe_dest;
		s->gate_until_ms = ev->gate_until_ms;
		break;
	default:
		break;
	}
	if (to == RELAY_SLOT_FREE) {
		s->probe_dest = -1;
		s->gate_until_ms = 0;
	}
	s->state = to;
}

/* Every message of the batch back, unsent: shutdown, the standby gate's
 * timeout, a stop during a stall. Attempt refunded, due at once (another
 * worker may take it). */
static void
release_all(const struct relay_batch *b, struct relay_outcome *out)
{
	for (uint32_t i = 0; i < b->n; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		out[i].id = b->msgs[i].id;
		out[i].kind = RELAY_OUT_RELEASE;
		out[i].refund_attempt = true;
	}
}

/* A frame that finished with its outcomes written (replied, or not sent):
 * each RETRY becomes a backoff or a dead letter (retry_policy.h). */
static void
decide_retries(struct relay_slot *s, const struct relay_slot_event *ev)
{
	const struct relay_batch *b = &s->f.batch;
	for (uint32_t i = 0; i < b->n; i++)
		if (s->outcomes[i].kind == RELAY_OUT_RETRY)
			relay_retry_decide(ev->limits, &b->msgs[i], ev->now_us, ev->rng, &s->outcomes[i]);
}

/* The states each event fits. */
#define IN(st) (1u << (st))
static const unsigned fits[] = {
	[RELAY_SLOT_EV_CLAIMED] = IN(RELAY_SLOT_FREE),
	[RELAY_SLOT_EV_START] = IN(RELAY_SLOT_CLAIMED),
	[RELAY_SLOT_EV_GATE_OPEN] = IN(RELAY_SLOT_GATED),
	[RELAY_SLOT_EV_GATE_BACK] = IN(RELAY_SLOT_GATED),
	[RELAY_SLOT_EV_SENT] = IN(RELAY_SLOT_CLAIMED),
	[RELAY_SLOT_EV_REPLIED] = IN(RELAY_SLOT_OUT),
	[RELAY_SLOT_EV_NOT_SENT] = IN(RELAY_SLOT_OUT),
	[RELAY_SLOT_EV_FAILED] = IN(RELAY_SLOT_OUT),
	[RELAY_SLOT_EV_SHUTDOWN] = IN(RELAY_SLOT_FREE) | IN(RELAY_SLOT_CLAIMED) |
	    IN(RELAY_SLOT_GATED) | IN(RELAY_SLOT_OUT) | IN(RELAY_SLOT_DECIDED),
	[RELAY_SLOT_EV_RECORDED] = IN(RELAY_SLOT_DECIDED),
	[RELAY_SLOT_EV_DROPPED] = IN(RELAY_SLOT_CLAIMED) | IN(RELAY_SLOT_GATED) |
	    IN(RELAY_SLOT_OUT) | IN(RELAY_SLOT_DECIDED),
};

/* Its outcomes decided: to be recorded. */
static enum relay_slot_action
decided(struct relay_slots *p, struct relay_slot *s, const struct relay_slot_event *ev)
{
	slot_enter(p, s, RELAY_SLOT_DECIDED, ev);
	return RELAY_SLOT_ACT_RECORD;
}

/* Never sent: the whole batch goes back (release_all). */
static enum relay_slot_action
hand_back(struct relay_slots *p, struct relay_slot *s, const struct relay_slot_event *ev)
{
	release_all(&s->f.batch, s->outcomes);
	return decided(p, s, ev);
}

int
relay_slot_step(struct relay_slots *p, struct relay_slot *s, const struct relay_slot_event *ev,
    enum relay_slot_action *act)
{
	*act = RELAY_SLOT_ACT_NONE;
	if ((unsigned)ev->kind >= sizeof(fits) / sizeof(fits[0]) || !(fits[ev->kind] & IN(s->state)))
		return OB_EINVAL;
	switch (ev->kind) {
	case RELAY_SLOT_EV_CLAIMED:
		slot_enter(p, s, RELAY_SLOT_CLAIMED, ev);
		break;
	case RELAY_SLOT_EV_START:
		if (ev->stopping) {
			*act = hand_back(p, s, ev); /* never start a delivery after the stop */
		} else if (ev->gate_wait) {
			/* not known to be on the standbys yet: wait at the gate
			 * without holding up the rest of the pipeline */
			slot_enter(p, s, RELAY_SLOT_GATED, ev);
		} else {
			slot_enter(p, s, RELAY_SLOT_CLAIMED, ev);
			*act = RELAY_SLOT_ACT_SEND;
		}
		break;
	case RELAY_SLOT_EV_GATE_OPEN:
		slot_enter(p, s, RELAY_SLOT_CLAIMED, ev);
		*act = RELAY_SLOT_ACT_SEND;
		break;
	case RELAY_SLOT_EV_GATE_BACK:
		*act = hand_back(p, s, ev);
		break;
	case RELAY_SLOT_EV_SENT:
		slot_enter(p, s, RELAY_SLOT_OUT, ev);
		*act = ev->in_flight ? RELAY_SLOT_ACT_NONE : RELAY_SLOT_ACT_FINISH;
		break;
	case RELAY_SLOT_EV_REPLIED:
	case RELAY_SLOT_EV_NOT_SENT:
		decide_retries(s, ev);
		*act = decided(p, s, ev);
		break;
	case RELAY_SLOT_EV_FAILED:
		relay_retry_failed_batch(ev->limits, &s->f.batch, ev->skip, ev->reached, ev->now_us,
		    ev->rng, s->outcomes);
		*act = decided(p, s, ev);
		break;
	case RELAY_SLOT_EV_SHUTDOWN:
		if (s->state == RELAY_SLOT_CLAIMED || s->state == RELAY_SLOT_GATED)
			*act = hand_back(p, s, ev); /* never sent */
		else if (s->state == RELAY_SLOT_OUT)
			*act = RELAY_SLOT_ACT_CANCEL; /* it finishes as failed */
		else if (s->state == RELAY_SLOT_DECIDED)
			*act = RELAY_SLOT_ACT_RECORD;
		break;
	case RELAY_SLOT_EV_RECORDED:
	case RELAY_SLOT_EV_DROPPED:
		slot_enter(p, s, RELAY_SLOT_FREE, ev);
		break;
	}
	return OB_OK;
}
