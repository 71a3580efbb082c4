/*
 * webhook_mode.h - the webhook handler's per-route delivery mode: which
 * topics are called at most once (--webhook-at-most-once PATTERN), and
 * whether a failed call may have reached the downstream.
 *
 * Default, for every topic: at-least-once with the key. A call whose
 * outcome is unknown is sent again with the same Idempotency-Key, and a
 * downstream that deduplicates by it applies it once.
 *
 * At most once, for topics matching a pattern (fnmatch(3), as the
 * producer's token topics: `notify.sms`, `pager.*`), for downstreams that
 * ignore the key: a call whose outcome is unknown (it may have reached the
 * downstream: timed out or the connection lost after it was established,
 * or an earlier attempt's claim whose lease ran out) is PARKED (its claim
 * in inbox.webhook_calls gets state 'unknown', common/keyclaim.c) and
 * answered reject with WEBHOOK_PARKED_DETAIL, so the relay dead-letters it
 * and never sends it again by itself; a redelivery of a parked key (an
 * operator's requeue) is answered the same, without a call, until
 * `outboxctl webhook resolve` says sent (-> duplicate) or not sent (-> the
 * next delivery calls once more). A call that certainly did not reach it
 * (refused, no route, DNS, the proxy's refusal, a failed TLS handshake, an
 * HTTP answer other than 2xx) is retried as in the default mode. Such a
 * call goes out on a fresh connection, closed after: never one that may
 * have died idle, which libcurl would otherwise re-send on.
 */
#ifndef OUTBOX_CONSUMER_WEBHOOK_MODE_H
#define OUTBOX_CONSUMER_WEBHOOK_MODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "outbox/wire.h"
#include "webhook_http.h"

#define WEBHOOK_AMO_PATTERNS_MAX 64               /* patterns of --webhook-at-most-once */
#define WEBHOOK_AMO_PATTERN_MAX OB_WIRE_MAX_TOPIC /* bytes of one pattern */

/* The start of every answer about a parked call (docs/operations.md). */
#define WEBHOOK_PARKED_DETAIL "parked: outcome unknown (at-most-once), resolve with" \
	" outboxctl webhook resolve"

struct webhook_mode {
	int n;
	char pat[WEBHOOK_AMO_PATTERNS_MAX][WEBHOOK_AMO_PATTERN_MAX + 1];
};

/* Parse the flag's values (items[0..n), each one pattern or several
 * comma-separated) into *out. OB_OK, or OB_EINVAL with one line in err
 * (an empty pattern, one over WEBHOOK_AMO_PATTERN_MAX bytes or with a
 * control character, more than WEBHOOK_AMO_PATTERNS_MAX); *out is then
 * untouched. */
int webhook_mode_parse(char *const *items, size_t n, struct webhook_mode *out, char *err,
    size_t errlen);

/* Whether topic (NUL-terminated) is called at most once. */
bool webhook_mode_at_most_once(const struct webhook_mode *m, const char *topic);

/* Whether a call that ended with outcome may have reached the downstream:
 * it failed (no answer) after its request was sent (webhook_http.h: on an
 * established connection, past the proxy's tunnel and the TLS handshake).
 * A failure before that (refused, DNS, the proxy, a TLS handshake refused,
 * a connect that timed out) reached nothing. */
bool webhook_outcome_unknown(enum webhook_http_outcome outcome, bool sent);

#endif
