/*
 * backoff.c - Full Jitter backoff, a retry loop's state around it, and the
 * small PRNG it draws from.
 */
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "outbox/backoff.h"

uint64_t
ob_rand_next(uint64_t *state)
{
	uint64_t x = *state ? *state : 0x9e3779b97f4a7c15ull;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545f4914f6cdd1dull;
}

uint64_t
ob_rand_seed(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t s = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
	    ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)&ts;
	return s ? s : 1;
}

int64_t
ob_backoff_ceiling(int64_t base_ms, int64_t cap_ms, uint32_t attempt)
{
	if (base_ms <= 0 || cap_ms <= 0)
		return 0;
	int64_t ceil = base_ms;
	for (uint32_t i = 0; i < attempt && ceil < cap_ms; i++)
		ceil = ceil > cap_ms / 2 ? cap_ms : ceil * 2;
	return ceil < cap_ms ? ceil : cap_ms;
}

int64_t
ob_backoff_full_jitter(int64_t base_ms, int64_t cap_ms, uint32_t attempt,
    uint64_t *rng)
{
	int64_t ceil = ob_backoff_ceiling(base_ms, cap_ms, attempt);
	if (ceil <= 0)
		return 0;
	/* ceil may be INT64_MAX: add the 1 in unsigned arithmetic. */
	return (int64_t)(ob_rand_next(rng) % ((uint64_t)ceil + 1));
}

void
ob_backoff_init(struct ob_backoff *b, int64_t base_ms, int64_t cap_ms)
{
	b->base_ms = base_ms;
	b->cap_ms = cap_ms;
	b->failures = 0;
	b->rng = ob_rand_seed() ^ ((uint64_t)(uintptr_t)b * 0x9e3779b97f4a7c15ull);
}

int64_t
ob_backoff_next(struct ob_backoff *b)
{
	if (b->failures < UINT32_MAX)
		b->failures++;
	return ob_backoff_full_jitter(b->base_ms, b->cap_ms, b->failures, &b->rng);
}

void
ob_backoff_reset(struct ob_backoff *b)
{
	b->failures = 0;
}

int64_t
ob_backoff_at_least(int64_t wait_ms, int64_t floor_ms, uint64_t *rng)
{
	if (floor_ms <= wait_ms)
		return wait_ms;
	uint64_t spread = (uint64_t)(floor_ms / OB_RETRY_AFTER_SPREAD);
	return floor_ms + (spread > 0 ? (int64_t)(ob_rand_next(rng) % (spread + 1)) : 0);
}

int64_t
ob_retry_after_spread_s(int64_t min_s)
{
	static _Thread_local uint64_t rng;
	if (rng == 0)
		rng = ob_rand_seed() ^ (uint64_t)(uintptr_t)&rng;
	int64_t spread = min_s / 2 > 1 ? min_s / 2 : 1;
	return min_s + (int64_t)(ob_rand_next(&rng) % ((uint64_t)spread + 1));
}
