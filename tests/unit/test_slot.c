/*
 * test_slot.c - the relay's pipeline slot state machine (relay/slot.h),
 * driven event by event without a database or a socket: the actions it
 * asks for, the events it refuses (nothing changed), the outcomes it
 * decides, and that each slot's outcomes are its own (a message decided at
 * send time keeps its outcome whatever another slot's frame does: the
 * shared-outcomes defect).
 */
#include <string.h>

#include <check.h>

#include "outbox/err.h"
#include "slot.h"
#include "testsupport.h"

#define BATCH 4

static const struct relay_retry_limits LIMITS = { 3, 86400000, 100, 5000 };
static struct ob_wire_msg msgs[3][BATCH];
static uint64_t rng = 42;

/* Feed one event; assert it is taken and the action is want. */
static void
step(struct relay_slots *p, struct relay_slot *s, struct relay_slot_event ev,
    enum relay_slot_action want)
{
	enum relay_slot_action act;
	ev.limits = &LIMITS;
	ev.rng = &rng;
	ck_assert_int_eq(relay_slot_step(p, s, &ev, &act), OB_OK);
	ck_assert_msg(act == want, "event %s: action %d, expected %d",
	    relay_slot_event_name(ev.kind), act, want);
}

/* A batch of n messages (ids from first) in slot i of p, claimed. */
static struct relay_slot *
claimed(struct relay_slots *p, uint32_t i, uint64_t first, uint32_t n)
{
	struct relay_slot *s = &p->slot[i];
	for (uint32_t k = 0; k < n; k++) {
		memset(&msgs[i][k], 0, sizeof(msgs[i][k]));
		msgs[i][k].id = first + k;
		msgs[i][k].attempt = 1;
	}
	step(p, s, (struct relay_slot_event){ .kind = RELAY_SLOT_EV_CLAIMED },
	    RELAY_SLOT_ACT_NONE);
	/* what relay_claim_batch fills in through its pointer */
	s->f.batch.msgs = msgs[i];
	s->f.batch.n = n;
	s->f.batch.kind = RELAY_BATCH_STREAM;
	return s;
}

/* Started and sent: its frame in flight. */
static void
out_in_flight(struct relay_slots *p, struct relay_slot *s)
{
	step(p, s, (struct relay_slot_event){ .kind = RELAY_SLOT_EV_START, .probe_dest = -1 },
	    RELAY_SLOT_ACT_SEND);
	step(p, s, (struct relay_slot_event){ .kind = RELAY_SLOT_EV_SENT, .in_flight = true },
	    RELAY_SLOT_ACT_NONE);
}

START_TEST(test_reply_then_record)
{
	struct relay_slots p;
	ck_assert_int_eq(relay_slots_init(&p, 2, BATCH), OB_OK);
	struct relay_slot *s = claimed(&p, 0, 10, 2);
	ck_assert_int_eq(p.used, 1);
	ck_assert_str_eq(relay_slot_state_name(s->state), "claimed");
	out_in_flight(&p, s);
	ck_assert_str_eq(relay_slot_state_name(s->state), "out");
	/* the reply's outcomes, as relay_frame_finish writes them */
	s->outcomes[0] = (struct relay_outcome){ .id = 10, .kind = RELAY_OUT_DELIVERED };
	s->outcomes[1] = (struct relay_outcome){ .id = 11, .kind = RELAY_OUT_RETRY };
	step(&p, s, (struct relay_slot_event){ .kind = RELAY_SLOT_EV_REPLIED, .now_us = 1 },
	    RELAY_SLOT_ACT_RECORD);
	ck_assert_int_eq(s->outcomes[0].kind, RELAY_OUT_DELIVERED);
	ck_assert_int_eq(s->outcomes[1].kind, RELAY_OUT_RETRY); /* attempt 1 of 3: backoff */
	ck_assert_int_ge(s->outcomes[1].delay_ms, 0);
	step(&p, s, (struct relay_slot_event){ .kind = RELAY_SLOT_EV_RECORDED },
	    RELAY_SLOT_ACT_NONE);
	ck_assert_str_eq(relay_slot_state_name(s->state), "free");
	ck_assert_int_eq(p.used, 0);
	relay_slots_fini(&p);
}
END_TEST

/* An event that does not fit the slot's state is refused and changes
 * nothing: a reply for a frame that is not out, a second claim. */
START_TEST(test_refused_events_change_nothing)
{
	struct relay_slots p;
	ck_assert_int_eq(relay_slots_init(&p, 1, BATCH), OB_OK);
	struct relay_slot *s = &p.slot[0];
	enum relay_slot_action act = RELAY_SLOT_ACT_SEND;
	struct relay_slot_event reply = { .kind = RELAY_SLOT_EV_REPLIED, .limits = &LIMITS,
		.rng = &rng };
	ck_assert_int_eq(relay_slot_step(&p, s, &reply, &act), OB_EINVAL);
	ck_assert_int_eq(act, RELAY_SLOT_ACT_NONE);
	ck_assert_int_eq(s->state, RELAY_SLOT_FREE);
	claimed(&p, 0, 1, 1);
	struct relay_slot_event again = { .kind = RELAY_SLOT_EV_CLAIMED, .t_claim_us = 99 };
	ck_assert_int_eq(relay_slot_step(&p, s, &again, &act), OB_EINVAL);
	ck_assert_int_eq(s->state, RELAY_SLOT_CLAIMED);
	ck_assert_int_ne(s->t_claim_us, 99);
	ck_assert_int_eq(p.used, 1);
	struct relay_slot_event bogus = { .kind = (enum relay_slot_event_kind)1000 };
	ck_assert_int_eq(relay_slot_step(&p, s, &bogus, &act), OB_EINVAL);
	relay_slots_fini(&p);
}
END_TEST

/* Slot 0's first message is decided at send time (over --max-payload:
 * dead); slot 1's frame then fails without reaching a consumer, which
 * releases every message of its batch. Slot 0's decision stands. */
START_TEST(test_each_slot_keeps_its_own_outcomes)
{
	struct relay_slots p;
	ck_assert_int_eq(relay_slots_init(&p, 2, BATCH), OB_OK);
	struct relay_slot *a = claimed(&p, 0, 100, 2), *b = claimed(&p, 1, 200, 2);
	/* decided at send time, as deliver.c writes a skipped message's */
	a->outcomes[0] = (struct relay_outcome){ .id = 100, .kind = RELAY_OUT_DEAD };
	out_in_flight(&p, a);
	out_in_flight(&p, b);
	step(&p, b, (struct relay_slot_event){ .kind = RELAY_SLOT_EV_FAILED, .reached = false },
	    RELAY_SLOT_ACT_RECORD);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(b->outcomes[i].kind, RELAY_OUT_RELEASE);
		ck_assert(b->outcomes[i].refund_attempt);
		ck_assert_int_eq(b->outcomes[i].id, 200 + (uint64_t)i);
	}
	ck_assert_int_eq(a->outcomes[0].kind, RELAY_OUT_DEAD);
	ck_assert_int_eq(a->outcomes[0].id, 100);
	relay_slots_fini(&p);
}
END_TEST

/* Shutdown in each state: a batch never sent goes back whole (released,
 * attempt refunded), a frame out is cancelled (it finishes as failed), a
 * decided one is still recorded. */
START_TEST(test_shutdown_in_each_state)
{
	struct relay_slots p;
	ck_assert_int_eq(relay_slots_init(&p, 3, BATCH), OB_OK);
	struct relay_slot *never = claimed(&p, 0, 1, 2);
	step(&p, never, (struct relay_slot_event){ .kind = RELAY_SLOT_EV_SHUTDOWN },
	    RELAY_SLOT_ACT_RECORD);
	ck_assert_int_eq(never->outcomes[0].kind, RELAY_OUT_RELEASE);
	ck_assert(never->outcomes[1].refund_attempt);
	step(&p, never, (struct relay_slot_event){ .kind = RELAY_SLOT_EV_SHUTDOWN },
	    RELAY_SLOT_ACT_RECORD);

	struct relay_slot *out = claimed(&p, 1, 10, 1);
	out_in_flight(&p, out);
	step(&p, out, (struct relay_slot_event){ .kind = RELAY_SLOT_EV_SHUTDOWN },
	    RELAY_SLOT_ACT_CANCEL);
	ck_assert_int_eq(out->state, RELAY_SLOT_OUT);

	/* a stop seen at start: nothing is sent after the stop */
	struct relay_slot *late = claimed(&p, 2, 20, 1);
	step(&p, late, (struct relay_slot_event){ .kind = RELAY_SLOT_EV_START, .stopping = true,
	    .probe_dest = -1 }, RELAY_SLOT_ACT_RECORD);
	ck_assert_int_eq(late->outcomes[0].kind, RELAY_OUT_RELEASE);
	ck_assert(late->outcomes[0].refund_attempt);
	relay_slots_fini(&p);
}
END_TEST

/* The standby gate: a batch waits without holding the pipeline, then is
 * sent, or goes back whole when the standbys do not catch up. */
START_TEST(test_gate_wait_then_open_or_back)
{
	struct relay_slots p;
	ck_assert_int_eq(relay_slots_init(&p, 2, BATCH), OB_OK);
	struct relay_slot *s = claimed(&p, 0, 1, 2), *t = claimed(&p, 1, 5, 1);
	struct relay_slot_event gated = { .kind = RELAY_SLOT_EV_START, .gate_wait = true,
		.gate_until_ms = 1234, .probe_dest = -1 };
	step(&p, s, gated, RELAY_SLOT_ACT_NONE);
	step(&p, t, gated, RELAY_SLOT_ACT_NONE);
	ck_assert_int_eq(p.gated, 2);
	ck_assert_int_eq(s->gate_until_ms, 1234);
	step(&p, s, (struct relay_slot_event){ .kind = RELAY_SLOT_EV_GATE_OPEN },
	    RELAY_SLOT_ACT_SEND);
	step(&p, t, (struct relay_slot_event){ .kind = RELAY_SLOT_EV_GATE_BACK },
	    RELAY_SLOT_ACT_RECORD);
	ck_assert_int_eq(p.gated, 0);
	ck_assert_int_eq(t->outcomes[0].kind, RELAY_OUT_RELEASE);
	step(&p, t, (struct relay_slot_event){ .kind = RELAY_SLOT_EV_RECORDED },
	    RELAY_SLOT_ACT_NONE);
	ck_assert_int_eq(t->gate_until_ms, 0);
	step(&p, s, (struct relay_slot_event){ .kind = RELAY_SLOT_EV_DROPPED },
	    RELAY_SLOT_ACT_NONE);
	ck_assert_int_eq(p.used, 0);
	relay_slots_fini(&p);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("slot");
	TCase *tc = tcase_create("slot");
	tcase_add_test(tc, test_reply_then_record);
	tcase_add_test(tc, test_refused_events_change_nothing);
	tcase_add_test(tc, test_each_slot_keeps_its_own_outcomes);
	tcase_add_test(tc, test_shutdown_in_each_state);
	tcase_add_test(tc, test_gate_wait_then_open_or_back);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
