/*
 * retry_after.h - a downstream's Retry-After header (RFC 9110 10.2.3) as
 * a delay: what the webhook handler passes on to the relay with a RETRY.
 *
 * Two forms: delta-seconds ("120") and an HTTP-date in the IMF-fixdate
 * form ("Sun, 06 Nov 1994 08:49:37 GMT", read by strptime and timegm).
 * The obsolete RFC 850 and asctime forms are not read (garbage).
 */
#ifndef OUTBOX_CONSUMER_RETRY_AFTER_H
#define OUTBOX_CONSUMER_RETRY_AFTER_H

#include <stdint.h>

/* Ceiling of --webhook-max-retry-after: the wire carries the delay as a
 * u32 of ms (docs/protocol.md), 7 days fits with room. */
#define WEBHOOK_RETRY_AFTER_CEILING_MS (7LL * 86400 * 1000)

/* Parse value (NUL-terminated, borrowed; blanks around it allowed) against
 * now_s (Unix seconds). On OB_OK *ms is the delay in ms, at most cap_ms
 * (0 .. WEBHOOK_RETRY_AFTER_CEILING_MS): a date in the past, or now, is 0;
 * a number too large for any integer is cap_ms. OB_EINVAL when value is
 * neither form (or cap_ms is out of range); *ms is then untouched. Pure,
 * thread-safe. */
int webhook_retry_after_parse(const char *value, int64_t now_s, int64_t cap_ms,
    int64_t *ms);

#endif
