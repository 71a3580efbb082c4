/*
 * breaker.h - a per-destination circuit breaker.
 *
 * The rule: after `threshold` consecutive transport failures (no live
 * connection, send failed, no reply within the delivery timeout) the
 * destination OPENS. While open, nothing is sent to it except one probe
 * frame per probe interval; a probe that gets any decodable reply CLOSES
 * it, a probe that fails keeps it open for another interval. Messages that
 * find their destination open are released back to pending without being
 * sent, their attempt refunded (see docs/relay.md). One breaker per
 * destination per worker process; not thread-safe (a worker's loop is its
 * only user).
 */
#ifndef OUTBOX_RELAY_BREAKER_H
#define OUTBOX_RELAY_BREAKER_H

#include <stdbool.h>
#include <stdint.h>

enum relay_breaker_state {
	RELAY_BREAKER_CLOSED,
	RELAY_BREAKER_OPEN,
};

struct relay_breaker {
	enum relay_breaker_state state;
	uint32_t failures;      /* consecutive transport failures */
	int64_t next_probe_ms;  /* OPEN: earliest time of the next probe */
	bool probing;           /* OPEN: a probe is out in the current wave */
};

enum relay_breaker_verdict {
	RELAY_BREAKER_SEND,     /* closed: send */
	RELAY_BREAKER_PROBE,    /* open, and this frame is the interval's probe */
	RELAY_BREAKER_HOLD,     /* open: do not send, release the message */
};

/* Decide for one frame at now_ms. A PROBE verdict reserves the probe: later
 * calls answer HOLD until relay_breaker_result. */
enum relay_breaker_verdict relay_breaker_ask(struct relay_breaker *b, int64_t now_ms);

/* Record a frame's result (ok = a decodable reply came back). Returns true
 * when the state changed (the caller logs it). */
bool relay_breaker_result(struct relay_breaker *b, bool ok, int64_t now_ms,
    uint32_t threshold, int64_t probe_interval_ms);

/* The probe a PROBE verdict reserved will not be sent (nothing to probe
 * with): the reservation ends, the next probe is due after another
 * interval from now_ms. */
void relay_breaker_probe_unused(struct relay_breaker *b, int64_t now_ms,
    int64_t probe_interval_ms);

/* The probe was sent and proved nothing either way (a reply that does not
 * decode reached a consumer: no transport failure, no success): the
 * reservation ends, the state and the next probe's time stay. */
void relay_breaker_probe_inconclusive(struct relay_breaker *b);

/* "closed" / "open". */
const char *relay_breaker_state_name(enum relay_breaker_state s);

#endif
