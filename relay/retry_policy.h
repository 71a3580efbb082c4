/*
 * retry_policy.h - what becomes of a message whose attempt failed: due
 * again after a Full Jitter backoff, or dead (--max-attempts, --max-age, a
 * consumer's Retry-After that would reach past --max-age).
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

#endif
