/*
 * backoff.h - exponential backoff with Full Jitter.
 *
 * sleep = random(0, min(cap, base * 2^attempt)). The result is stored as a
 * record's due time by the relay, never slept by a worker.
 */
#ifndef OUTBOX_BACKOFF_H
#define OUTBOX_BACKOFF_H

#include <stdint.h>

/* Full Jitter delay in ms for the given attempt (1-based: attempt 1 draws
 * from [0, min(cap, base*2)]). *rng is the caller's xorshift state (any
 * non-zero seed). Never overflows: the exponent is capped. */
int64_t ob_backoff_full_jitter(int64_t base_ms, int64_t cap_ms, uint32_t attempt,
    uint64_t *rng);

/* The ceiling min(cap, base * 2^attempt) without jitter. */
int64_t ob_backoff_ceiling(int64_t base_ms, int64_t cap_ms, uint32_t attempt);

/*
 * A retry loop's wait: Full Jitter over a ceiling doubling from base_ms to
 * cap_ms with each consecutive failure. Every loop in the programs that
 * tries a shared resource again (a database reconnect, a consumer
 * thread's reconnect, a listener, a restarted worker) waits with one, so
 * peers that failed at the same moment do not try again at the same
 * moment (docs/retries.md: a herd without jitter makes about twice the
 * calls at 50 or 100 clients, and takes several times as long). Each
 * instance has its own generator, seeded by ob_rand_seed and its address:
 * two threads or processes draw different waits.
 */
struct ob_backoff {
	int64_t base_ms, cap_ms;
	uint32_t failures; /* consecutive failures drawn for; 0 after a success */
	uint64_t rng;
};

/* base_ms 1.., cap_ms >= base_ms. */
void ob_backoff_init(struct ob_backoff *b, int64_t base_ms, int64_t cap_ms);

/* One more failure: the wait before the next attempt, uniform in
 * [0, min(cap, base * 2^failures)] (the first: up to 2 * base). */
int64_t ob_backoff_next(struct ob_backoff *b);

/* A success: the next failure starts from base again. */
void ob_backoff_reset(struct ob_backoff *b);

/* A server's "not before" (Retry-After) honoured without a herd: when
 * floor_ms is longer than wait_ms (the caller's own jittered wait), the
 * wait is floor_ms plus up to floor_ms / OB_RETRY_AFTER_SPREAD at random,
 * so the clients one answer told the same number do not all come back in
 * the same millisecond; else wait_ms. */
#define OB_RETRY_AFTER_SPREAD 4
int64_t ob_backoff_at_least(int64_t wait_ms, int64_t floor_ms, uint64_t *rng);

/* The whole seconds of a Retry-After a server sends, spread: min_s, or
 * up to min_s / 2 (at least 1) more, at random (this thread's generator).
 * HTTP has no finer unit, so without it every client told "1" comes back
 * in the same second. min_s >= 1. */
int64_t ob_retry_after_spread_s(int64_t min_s);

/* Next value of a xorshift64* generator; seeds 0 are replaced. */
uint64_t ob_rand_next(uint64_t *state);

/* A seed from time, pid and address entropy. */
uint64_t ob_rand_seed(void);

#endif
