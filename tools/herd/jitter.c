/*
 * jitter.c - the six retry-sleep strategies (jitter.h).
 *
 * Pure functions of their arguments: the only state is the generator the
 * caller hands in. Never allocates, never logs.
 */
#include <stddef.h>
#include <string.h>

#include "jitter.h"
#include "outbox/backoff.h"

/* The width of Codex's jitter around the exponential value: [0.9, 1.1). */
#define JITTER_10PCT_LOW 0.9
#define JITTER_10PCT_WIDTH 0.2
/* Decorrelated Jitter draws up to this multiple of the previous sleep. */
#define JITTER_DECORR_FACTOR 3.0

const struct ob_jitter_strategy ob_jitter_strategies[OB_JITTER_COUNT] = {
	[OB_JITTER_NONE] = { OB_JITTER_NONE, "none", "no backoff", ob_jitter_none },
	[OB_JITTER_EXPO] = { OB_JITTER_EXPO, "expo", "exp, no jitter", ob_jitter_expo },
	[OB_JITTER_EXPO_10PCT] = { OB_JITTER_EXPO_10PCT, "expo-10pct", "exp x [0.9,1.1)",
	    ob_jitter_expo_10pct },
	[OB_JITTER_EQUAL] = { OB_JITTER_EQUAL, "equal", "Equal Jitter", ob_jitter_equal },
	[OB_JITTER_FULL] = { OB_JITTER_FULL, "full", "Full Jitter", ob_jitter_full },
	[OB_JITTER_DECORRELATED] = { OB_JITTER_DECORRELATED, "decorrelated",
	    "Decorrelated Jitter", ob_jitter_decorrelated },
};

double
ob_jitter_uniform(uint64_t *rng)
{
	return (double)(ob_rand_next(rng) >> 11) * 0x1.0p-53;
}

double
ob_jitter_ceiling(const struct ob_jitter_range *r, uint32_t attempt)
{
	if (!(r->base_ms > 0) || !(r->cap_ms > 0))
		return 0;
	/* doubling stops at the cap: no overflow, at most log2(cap/base) steps */
	double v = r->base_ms;
	for (uint32_t i = 0; i < attempt && v < r->cap_ms; i++)
		v *= 2;
	return v < r->cap_ms ? v : r->cap_ms;
}

double
ob_jitter_none(const struct ob_jitter_range *r, uint32_t attempt, double prev_ms,
    uint64_t *rng)
{
	return 0;
}

double
ob_jitter_expo(const struct ob_jitter_range *r, uint32_t attempt, double prev_ms,
    uint64_t *rng)
{
	return ob_jitter_ceiling(r, attempt);
}

double
ob_jitter_expo_10pct(const struct ob_jitter_range *r, uint32_t attempt, double prev_ms,
    uint64_t *rng)
{
	double v = ob_jitter_ceiling(r, attempt);
	return v * (JITTER_10PCT_LOW + JITTER_10PCT_WIDTH * ob_jitter_uniform(rng));
}

double
ob_jitter_equal(const struct ob_jitter_range *r, uint32_t attempt, double prev_ms,
    uint64_t *rng)
{
	double v = ob_jitter_ceiling(r, attempt);
	return v / 2 + ob_jitter_uniform(rng) * (v / 2);
}

double
ob_jitter_full(const struct ob_jitter_range *r, uint32_t attempt, double prev_ms,
    uint64_t *rng)
{
	return ob_jitter_uniform(rng) * ob_jitter_ceiling(r, attempt);
}

double
ob_jitter_decorrelated(const struct ob_jitter_range *r, uint32_t attempt, double prev_ms,
    uint64_t *rng)
{
	if (!(r->base_ms > 0) || !(r->cap_ms > 0))
		return 0;
	/* before the first retry the previous sleep counts as the base */
	double prev = prev_ms > r->base_ms ? prev_ms : r->base_ms;
	double hi = prev * JITTER_DECORR_FACTOR;
	double s = r->base_ms + ob_jitter_uniform(rng) * (hi - r->base_ms);
	return s < r->cap_ms ? s : r->cap_ms;
}

const struct ob_jitter_strategy *
ob_jitter_find(const char *name)
{
	for (size_t i = 0; i < OB_JITTER_COUNT; i++)
		if (strcmp(ob_jitter_strategies[i].name, name) == 0)
			return &ob_jitter_strategies[i];
	return NULL;
}
