/*
 * retry_policy.h - what becomes of a message whose attempt failed: due
 * again after a Full Jitter backoff, or dead (--max-attempts, --max-age, a
 * consumer's Retry-After that would reach past --max-age); and of the
 * whole batch of a frame that failed (relay_retry_failed_batch).
 *
 * Only an attempt that reached a consumer can make a message dead (DESIGN
 * S4): one that reached none (refund_attempt) gets a backoff however old
 * the message is and however many attempts it had, so an outage never
 * ends a message. Pure: the caller gives the clock and the random state,
 * so the relay's workers and the protocol checker (tests/check, which
 * asserts S4 against it at ages past --max-age) run the same decision.
 */
#ifndef RELAY_RETRY_POLICY_H
#define RELAY_RETRY_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include "outbox/wire.h"
#include "record.h"

struct relay_retry_limits {
	uint32_t max_attempts;   /* --max-attempts */
	int64_t max_age_ms;      /* --max-age, counted from the enqueue */
	int64_t backoff_base_ms; /* --backoff-base-ms */
	int64_t backoff_cap_ms;  /* --backoff-cap-ms */
};

/* The attempts of m that reached a consumer, after outcome o. */
uint32_t relay_counted_attempts(const struct ob_wire_msg *m, const struct relay_outcome *o);

/* m's age in ms at now_us (Unix microseconds). */
int64_t relay_msg_age_ms(const struct ob_wire_msg *m, int64_t now_us);

/* Decide o, a RETRY of m at now_us: it becomes DEAD with an error that
 * names the limit and keeps the last error, or stays RETRY with delay_ms
 * set (at least o->retry_after_ms). *rng: the caller's xorshift state. */
void relay_retry_decide(const struct relay_retry_limits *l, const struct ob_wire_msg *m,
    int64_t now_us, uint64_t *rng, struct relay_outcome *o);

/* A failed frame's outcomes, in out (b->n of them; relay_frame_finish made
 * each sent message a RETRY). skip[i]: message i was decided at send
 * time (may be NULL when the frame was not sent); reached: the frame went
 * out on a connection. *rng: the caller's xorshift state.
 *
 * A frame that never reached a connection (none came up in time, the send
 * failed, it could not be prepared) was seen by no consumer: its whole
 * batch goes back, stream or retry batch alike, one write, attempt
 * refunded, due after a Full Jitter backoff of the attempts that did reach
 * one. Messages decided at send time (too large, no route) are decided
 * again when it is sent. Nothing of it can be dead: an outage of any
 * length leaves every message pending with the attempts it had. (A retry
 * batch decided message by message would keep the claim's attempt in each
 * retry row: an outage long enough made them dead by --max-attempts.)
 *
 * A frame that went out on a connection and got no reply (or one that does
 * not decode) may have been applied: the attempt counts. A stream batch
 * goes back whole (one row write, attempt kept) unless a message of it has
 * used up its attempts or its age; then, and for a retry batch, each
 * message is decided on its own (a retry row each, or a dead letter). */
void relay_retry_failed_batch(const struct relay_retry_limits *l, const struct relay_batch *b,
    const bool *skip, bool reached, int64_t now_us, uint64_t *rng, struct relay_outcome *out);

#endif
