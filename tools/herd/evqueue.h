/*
 * evqueue.h - the simulation's event queue: a binary heap of events
 * ordered by time, ties broken by the order they were pushed, so that a
 * run is the same for the same seed on any machine.
 */
#ifndef OUTBOX_HERD_EVQUEUE_H
#define OUTBOX_HERD_EVQUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What happens at an event's time (sim.c gives them their meaning). */
struct herd_event {
	double at_ms;    /* simulated time */
	uint64_t seq;    /* push order: the tie-break (set by herd_evq_push) */
	uint32_t client; /* the client the message is from or to */
	uint8_t kind;    /* sim.c's enum */
	uint64_t value;  /* a version, or 1/0 for a write's success */
};

struct herd_evq {
	struct herd_event *heap; /* owned */
	size_t n, cap;
	uint64_t next_seq;
};

/* An empty queue for up to cap events. OB_OK or OB_ENOMEM (q untouched).
 * Release with herd_evq_fini. */
int herd_evq_init(struct herd_evq *q, size_t cap);

void herd_evq_fini(struct herd_evq *q);

/* Empty the queue and restart the push order (keeps the memory). */
void herd_evq_clear(struct herd_evq *q);

/* Add a copy of e (its seq is set here). False when the queue is full. */
bool herd_evq_push(struct herd_evq *q, const struct herd_event *e);

/* Remove the earliest event into *out. False when the queue is empty. */
bool herd_evq_pop(struct herd_evq *q, struct herd_event *out);

#endif
