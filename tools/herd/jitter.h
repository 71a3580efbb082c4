/*
 * jitter.h - retry sleeps: the six backoff strategies compared by
 * outbox-herd, one pure function each.
 *
 * Each strategy turns (base, cap, the retry's number, the previous sleep,
 * a generator) into the next sleep in milliseconds. Nothing is kept
 * between calls but what the caller passes back in: the generator's state
 * and, for Decorrelated Jitter, the previous sleep. The formulas are those
 * of "Exponential Backoff And Jitter" (Marc Brooker, AWS Architecture
 * Blog, 2015), with v = min(cap, base * 2^attempt):
 *
 *   none          0 (retry at once)
 *   expo          v
 *   expo-10pct    v * uniform[0.9, 1.1) (so up to 1.1 * cap)
 *   equal         v/2 + uniform[0, v/2)
 *   full          uniform[0, v)
 *   decorrelated  min(cap, uniform[base, 3 * previous sleep))
 *
 * Nothing here depends on the simulation: the file is written to move to
 * common/ as it is, for the programs' own reconnect loops.
 */
#ifndef OUTBOX_HERD_JITTER_H
#define OUTBOX_HERD_JITTER_H

#include <stdint.h>

enum ob_jitter_kind {
	OB_JITTER_NONE,
	OB_JITTER_EXPO,
	OB_JITTER_EXPO_10PCT,
	OB_JITTER_EQUAL,
	OB_JITTER_FULL,
	OB_JITTER_DECORRELATED,
	OB_JITTER_COUNT
};

/* The first sleep's scale and the largest sleep, in ms. A base or cap that
 * is not above 0 makes every sleep 0. */
struct ob_jitter_range {
	double base_ms;
	double cap_ms;
};

/* A strategy: the sleep before retry number attempt (1 = the first retry,
 * as in the blog's simulator: its v is 2 * base). prev_ms is the sleep the
 * previous call returned (0 before the first retry); only Decorrelated
 * Jitter reads it. Draws from *rng (ob_rand_next's xorshift state) when it
 * jitters; never allocates, never fails. Returns a sleep in [0, 1.1 * cap]. */
typedef double (*ob_jitter_fn)(const struct ob_jitter_range *r, uint32_t attempt, double prev_ms,
    uint64_t *rng);

double ob_jitter_none(const struct ob_jitter_range *r, uint32_t attempt, double prev_ms,
    uint64_t *rng);
double ob_jitter_expo(const struct ob_jitter_range *r, uint32_t attempt, double prev_ms,
    uint64_t *rng);
double ob_jitter_expo_10pct(const struct ob_jitter_range *r, uint32_t attempt, double prev_ms,
    uint64_t *rng);
double ob_jitter_equal(const struct ob_jitter_range *r, uint32_t attempt, double prev_ms,
    uint64_t *rng);
double ob_jitter_full(const struct ob_jitter_range *r, uint32_t attempt, double prev_ms,
    uint64_t *rng);
double ob_jitter_decorrelated(const struct ob_jitter_range *r, uint32_t attempt, double prev_ms,
    uint64_t *rng);

/* min(cap, base * 2^attempt), without overflow at any attempt. */
double ob_jitter_ceiling(const struct ob_jitter_range *r, uint32_t attempt);

/* A uniform draw in [0, 1) from *rng (53 bits of ob_rand_next). */
double ob_jitter_uniform(uint64_t *rng);

/* A strategy's names and function. */
struct ob_jitter_strategy {
	enum ob_jitter_kind kind;
	const char *name;  /* a flag's value: "full" */
	const char *label; /* a table's row: "Full Jitter" */
	ob_jitter_fn sleep_ms;
};

/* The strategies, indexed by enum ob_jitter_kind. */
extern const struct ob_jitter_strategy ob_jitter_strategies[OB_JITTER_COUNT];

/* The strategy named name, or NULL. */
const struct ob_jitter_strategy *ob_jitter_find(const char *name);

#endif
