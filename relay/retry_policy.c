/*
 * retry_policy.c - the retry-or-dead decision of a failed attempt, message
 * by message or for a failed frame's batch (retry_policy.h).
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
		o->delay_ms = ob_backoff_at_least(ob_backoff_full_jitter(l->backoff_base_ms,
		    l->backoff_cap_ms, attempts, rng), o->retry_after_ms, rng);
		o->delay_ms = ob_backoff_at_least(o->delay_ms, o->min_delay_ms, rng);
	}
}

void
relay_retry_failed_batch(const struct relay_retry_limits *l, const struct relay_batch *b,
    const bool *skip, bool reached, int64_t now_us, uint64_t *rng, struct relay_outcome *out)
{
	if (!reached) {
		uint32_t first = 0; /* a sent message: its error is the batch's */
		while (first + 1 < b->n && skip != NULL && skip[first])
			first++;
		char why[RELAY_ERROR_MAX];
		snprintf(why, sizeof(why), "%s", out[first].error);
		struct relay_outcome o = out[first];
		o.refund_attempt = true;
		int64_t delay = ob_backoff_at_least(ob_backoff_full_jitter(l->backoff_base_ms,
		    l->backoff_cap_ms, relay_counted_attempts(&b->msgs[first], &o), rng),
		    o.min_delay_ms, rng);
		for (uint32_t i = 0; i < b->n; i++) {
			out[i].id = b->msgs[i].id;
			out[i].kind = RELAY_OUT_RELEASE;
			out[i].delay_ms = delay;
			out[i].refund_attempt = true;
			out[i].retry_after_ms = 0;
			snprintf(out[i].error, sizeof(out[i].error), "%s", why);
		}
		return;
	}
	bool each = b->kind == RELAY_BATCH_RETRY;
	for (uint32_t i = 0; i < b->n && !each; i++) {
		if (skip[i] || out[i].kind != RELAY_OUT_RETRY) {
			each = true; /* a message already decided (no route, too large) */
			continue;
		}
		each = relay_counted_attempts(&b->msgs[i], &out[i]) >= l->max_attempts ||
		    relay_msg_age_ms(&b->msgs[i], now_us) > l->max_age_ms;
	}
	if (each) {
		for (uint32_t i = 0; i < b->n; i++)
			if (out[i].kind == RELAY_OUT_RETRY)
				relay_retry_decide(l, &b->msgs[i], now_us, rng, &out[i]);
		return;
	}
	int64_t delay = ob_backoff_at_least(ob_backoff_full_jitter(l->backoff_base_ms,
	    l->backoff_cap_ms, relay_counted_attempts(&b->msgs[0], &out[0]), rng),
	    out[0].min_delay_ms, rng);
	for (uint32_t i = 0; i < b->n; i++) {
		out[i].kind = RELAY_OUT_RELEASE;
		out[i].delay_ms = delay;
	}
}
