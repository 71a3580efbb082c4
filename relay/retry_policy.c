/*
 * retry_policy.c - the retry-or-dead decision of a failed attempt
 * (retry_policy.h).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>

#include "outbox/backoff.h"
#include "retry_policy.h"

uint32_t
relay_counted_attempts(const struct ob_wire_msg *m, const struct relay_outcome *o)
{
	return m->attempt - (o->refund_attempt && m->attempt > 0 ? 1 : 0);
}

int64_t
relay_msg_age_ms(const struct ob_wire_msg *m, int64_t now_us)
{
	return (now_us - m->created_at_us) / 1000;
}

void
relay_retry_decide(const struct relay_retry_limits *l, const struct ob_wire_msg *m,
    int64_t now_us, uint64_t *rng, struct relay_outcome *o)
{
	uint32_t attempts = relay_counted_attempts(m, o);
	int64_t age = relay_msg_age_ms(m, now_us);
	bool reached = !o->refund_attempt;
	char last[RELAY_ERROR_MAX];
	snprintf(last, sizeof(last), "%s", o->error);
	if (reached && attempts >= l->max_attempts) {
		o->kind = RELAY_OUT_DEAD;
		snprintf(o->error, sizeof(o->error), "max attempts (%u) reached; last error: %.180s",
		    attempts, last);
	} else if (reached && age > l->max_age_ms) {
		o->kind = RELAY_OUT_DEAD;
		snprintf(o->error, sizeof(o->error), "max age (%" PRId64 " ms) reached; last error:"
		    " %.180s", l->max_age_ms, last);
	} else if (reached && o->retry_after_ms > 0 && age + o->retry_after_ms > l->max_age_ms) {
		o->kind = RELAY_OUT_DEAD;
		snprintf(o->error, sizeof(o->error), "max age (%" PRId64 " ms) would pass before"
		    " the Retry-After (%" PRId64 " ms); last error: %.150s", l->max_age_ms,
		    o->retry_after_ms, last);
	} else {
		o->delay_ms = ob_backoff_full_jitter(l->backoff_base_ms, l->backoff_cap_ms, attempts,
		    rng);
		if (o->delay_ms < o->retry_after_ms)
			o->delay_ms = o->retry_after_ms;
	}
}
