/*
 * breaker.c - the per-destination circuit breaker (rule in breaker.h).
 *
 * Every state change goes through set_state; the caller logs transitions.
 * Nothing else writes a breaker's fields: the probe's reservation ends
 * through relay_breaker_result or the two probe_ functions.
 */
#include "breaker.h"

static void
set_state(struct relay_breaker *b, enum relay_breaker_state s, int64_t next_probe_ms)
{
	b->state = s;
	b->next_probe_ms = next_probe_ms;
	b->probing = false;
	if (s == RELAY_BREAKER_CLOSED)
		b->failures = 0;
}

enum relay_breaker_verdict
relay_breaker_ask(struct relay_breaker *b, int64_t now_ms)
{
	if (b->state == RELAY_BREAKER_CLOSED)
		return RELAY_BREAKER_SEND;
	if (b->probing || now_ms < b->next_probe_ms)
		return RELAY_BREAKER_HOLD;
	b->probing = true;
	return RELAY_BREAKER_PROBE;
}

bool
relay_breaker_result(struct relay_breaker *b, bool ok, int64_t now_ms,
    uint32_t threshold, int64_t probe_interval_ms)
{
	if (ok) {
		bool changed = b->state != RELAY_BREAKER_CLOSED;
		set_state(b, RELAY_BREAKER_CLOSED, 0);
		return changed;
	}
	if (b->failures < UINT32_MAX)
		b->failures++;
	if (b->state == RELAY_BREAKER_OPEN) {
		/* A failed probe (or a frame sent before it opened): wait
		 * another interval. */
		set_state(b, RELAY_BREAKER_OPEN, now_ms + probe_interval_ms);
		return false;
	}
	if (b->failures >= threshold) {
		set_state(b, RELAY_BREAKER_OPEN, now_ms + probe_interval_ms);
		return true;
	}
	return false;
}

void
relay_breaker_probe_unused(struct relay_breaker *b, int64_t now_ms, int64_t probe_interval_ms)
{
	b->probing = false;
	b->next_probe_ms = now_ms + probe_interval_ms;
}

void
relay_breaker_probe_inconclusive(struct relay_breaker *b)
{
	b->probing = false;
}

const char *
relay_breaker_state_name(enum relay_breaker_state s)
{
	return s == RELAY_BREAKER_OPEN ? "open" : "closed";
}
