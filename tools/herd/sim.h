/*
 * sim.h - the thundering-herd simulation: N clients update one row under
 * optimistic concurrency, and each retries with a backoff strategy
 * (jitter.h) after a write that lost.
 *
 * The model is that of the simulator behind "Exponential Backoff And
 * Jitter" (Marc Brooker, AWS Architecture Blog, 2015): the server holds a
 * row with a version; a client reads the version, then writes with it; a
 * write whose version is no longer the row's fails, and that client sleeps
 * its backoff and starts again from the read. Every message (request or
 * reply) takes |N(mean, sd)| ms one way. The server answers at once and
 * never overloads. A run ends when every client has written once; it
 * counts the writes ("calls") and the time of the last client's success.
 *
 * Deterministic: the same parameters and seed give the same result.
 * No I/O, no global state; allocates only within a call.
 */
#ifndef OUTBOX_HERD_SIM_H
#define OUTBOX_HERD_SIM_H

#include <stdint.h>

#include "jitter.h"

struct herd_params {
	enum ob_jitter_kind strategy;
	struct ob_jitter_range range; /* base and cap of the backoff, ms */
	double delay_mean_ms;         /* one-way network delay |N(mean, sd)| */
	double delay_sd_ms;
	uint32_t clients;             /* >= 1 */
};

/* One run. */
struct herd_run_result {
	uint64_t calls;  /* write requests the server received */
	uint64_t failed; /* of which lost to a newer version */
	double ms;       /* when the last client's successful write was answered */
};

/* The average of several runs. */
struct herd_cell {
	uint32_t runs;
	double calls;
	double failed;
	double ms;
};

/* Run the simulation once with a generator seeded by seed. OB_OK, or
 * OB_EINVAL (no clients, a negative delay, an unknown strategy) or
 * OB_ENOMEM; *out is written only on OB_OK. */
int herd_run(const struct herd_params *p, uint64_t seed, struct herd_run_result *out);

/* The seed of run number run (0-based) of a table seeded by seed with
 * this many clients. Every strategy's run gets the same one, so they meet
 * the same first network delays. */
uint64_t herd_run_seed(uint64_t seed, uint32_t clients, uint32_t run);

/* runs runs (>= 1) of herd_run, seeded by herd_run_seed(seed, p->clients,
 * 0..runs-1), averaged into *out. Errors as herd_run. */
int herd_cell_run(const struct herd_params *p, uint64_t seed, uint32_t runs,
    struct herd_cell *out);

/* A one-way network delay: |N(mean, sd)| ms drawn from *rng (Box-Muller). */
double herd_net_delay(double mean_ms, double sd_ms, uint64_t *rng);

#endif
