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

/* Next value of a xorshift64* generator; seeds 0 are replaced. */
uint64_t ob_rand_next(uint64_t *state);

/* A seed from time, pid and address entropy. */
uint64_t ob_rand_seed(void);

#endif
