/*
 * slot.h - a worker's pipeline slots: the --max-inflight places of its
 * window of batches in flight, and the state machine of the batch in each.
 *
 * Words: a "pipeline slot" (struct relay_slot) is one place in one worker's
 * window; it has nothing to do with outbox.events' slots, the partitions
 * of the log that housekeeping switches and truncates (sql/outbox/). Here,
 * and in the relay's prose, "slot" alone means the pipeline slot.
 *
 * A slot owns the batch claimed into it, its frame (deliver.h) and its
 * outcomes: --batch of them, its own and never shared with another slot,
 * because a message skipped at send time (too large, no route) has its
 * outcome written then and it must survive the other slots' sends and
 * finishes until this slot's batch is recorded.
 *
 * A slot's state changes in one place, relay_slot_step, which does no
 * I/O: no socket, no nng, no libpq. Events come in (claimed, started,
 * sent, replied, failed, shutdown, recorded, dropped) and an action comes
 * out (send the frame, finish it, record the outcomes, cancel the frame),
 * which the worker performs (worker.c). The protocol checker drives the
 * same machine through a simulated transport (tests/check/slot_drive.c).
 * scripts/check-slot-writers.sh fails when any other function writes a
 * slot's fields. Not thread-safe: a worker's loop is its only user.
 */
#ifndef OUTBOX_RELAY_SLOT_H
#define OUTBOX_RELAY_SLOT_H

#include <stdbool.h>
#include <stdint.h>

#include "claim.h"
#include "deliver.h"
#include "record.h"
#include "retry_policy.h"

enum relay_slot_state {
	RELAY_SLOT_FREE,     /* no batch */
	RELAY_SLOT_CLAIMED,  /* a batch claimed into it, its frame not out */
	RELAY_SLOT_GATED,    /* waiting for the standbys (--standby-gate) */
	RELAY_SLOT_OUT,      /* its frame sent (or finished at once, to be finished) */
	RELAY_SLOT_DECIDED,  /* every outcome decided: to be recorded */
};

enum relay_slot_event_kind {
	RELAY_SLOT_EV_CLAIMED,   /* FREE: a batch is in it now (t_claim_us, t_claimed_us) */
	RELAY_SLOT_EV_START,     /* CLAIMED, after the claim's faults (stopping, gate_wait,
	                          * gate_until_ms, probe_dest) */
	RELAY_SLOT_EV_GATE_OPEN, /* GATED: the standbys have its claim */
	RELAY_SLOT_EV_GATE_BACK, /* GATED: waited too long, or stopping: hand it back */
	RELAY_SLOT_EV_SENT,      /* CLAIMED: the frame was handed over (in_flight), or
	                          * finished at once (held, nothing sendable) */
	RELAY_SLOT_EV_REPLIED,   /* OUT: a reply, one outcome per sent message in outcomes */
	RELAY_SLOT_EV_NOT_SENT,  /* OUT: finished without being sent (outcomes written) */
	RELAY_SLOT_EV_FAILED,    /* OUT: send failed, timed out, or a reply that does not
	                          * match (reached, skip) */
	RELAY_SLOT_EV_SHUTDOWN,  /* any: the worker is stopping */
	RELAY_SLOT_EV_RECORDED,  /* DECIDED: the outcome write is over (written or not) */
	RELAY_SLOT_EV_DROPPED,   /* any: abandoned unrecorded (lost connection, exit): its
	                          * lease brings the batch back */
};

/* What the worker does next for the slot. */
enum relay_slot_action {
	RELAY_SLOT_ACT_NONE,    /* nothing: wait for the next event */
	RELAY_SLOT_ACT_SEND,    /* send its frame (to probe_dest when >= 0) */
	RELAY_SLOT_ACT_FINISH,  /* its frame is over: finish it (relay_frame_finish) */
	RELAY_SLOT_ACT_RECORD,  /* write its outcomes (relay_record_batch) */
	RELAY_SLOT_ACT_CANCEL,  /* cancel its frame; it finishes as failed */
};

/* One event. The fields an event kind does not name are not read. */
struct relay_slot_event {
	enum relay_slot_event_kind kind;
	int64_t t_claim_us, t_claimed_us;  /* CLAIMED: when the claim started, returned */
	bool stopping;                     /* START: the worker was told to stop */
	bool gate_wait;                    /* START: the standby gate holds it ... */
	int64_t gate_until_ms;             /* ... until then, then it goes back */
	int probe_dest;                    /* START: the breaker's probe destination, or -1 */
	bool in_flight;                    /* SENT: false = finished at once */
	bool reached;                      /* FAILED: the frame went out on a connection */
	const bool *skip;                  /* FAILED: messages decided at send (may be NULL) */
	/* REPLIED, NOT_SENT, FAILED: the retry policy's limits, clock (Unix
	 * microseconds) and random state, borrowed */
	const struct relay_retry_limits *limits;
	int64_t now_us;
	uint64_t *rng;
};

/* One pipeline slot. Read its fields; change them only through
 * relay_slot_step. */
struct relay_slot {
	enum relay_slot_state state;
	int probe_dest;          /* the destination its frame goes to as a probe, or -1 */
	int64_t gate_until_ms;   /* GATED: after this it goes back unsent */
	int64_t t_claim_us;      /* when the claim call started and returned */
	int64_t t_claimed_us;
	struct relay_frame f;    /* its frame; f.batch is the batch claimed into it */
	struct relay_outcome *outcomes; /* its own, --batch of them */
};

/* A worker's slots. */
struct relay_slots {
	struct relay_slot *slot; /* n of them */
	uint32_t n;
	uint32_t used;           /* not FREE */
	uint32_t gated;          /* GATED */
	struct relay_outcome *store; /* every slot's outcomes, one block */
};

/* n free slots, each with outcomes for batches of up to batch_max
 * messages (their frames zeroed: the caller gives each its aio,
 * relay_frame_init). OB_OK or OB_ENOMEM (nothing to release). */
int relay_slots_init(struct relay_slots *p, uint32_t n, uint32_t batch_max);

/* Free the slots and their outcomes; the frames must be finied first
 * (relay_frame_fini). Safe on a zeroed or half-made p. */
void relay_slots_fini(struct relay_slots *p);

/* Feed event ev to slot s of p: its state changes as the event says (the
 * outcomes decided where the event decides them: the retry policy on a
 * reply's and a failed frame's, every message released when it goes back
 * unsent), and *act says what the worker does next. OB_OK; OB_EINVAL when
 * the event does not fit the slot's state (a reply for a frame that is no
 * longer out, a second claim into a used slot): nothing changed, *act is
 * NONE. Pure: no I/O. */
int relay_slot_step(struct relay_slots *p, struct relay_slot *s,
    const struct relay_slot_event *ev, enum relay_slot_action *act);

/* A free slot of p, or NULL when all are used. */
struct relay_slot *relay_slots_free_one(struct relay_slots *p);

/* "free", "claimed", ... and "claimed", "start", ... for logs. */
const char *relay_slot_state_name(enum relay_slot_state s);
const char *relay_slot_event_name(enum relay_slot_event_kind k);

#endif
