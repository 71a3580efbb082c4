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
 * No I/O, no global state; allocates only within a call (the arrival
 * times herd_run_record records are handed to its caller).
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

/* When each write request of one run arrived at the server: ms[i] is the
 * simulated time of the i-th write the server received (the instant it
 * compares versions), so n == the run's calls and ms[] never decreases. */
struct herd_arrivals {
	double *ms; /* owned: release with herd_arrivals_free */
	uint64_t n;
};

/* herd_run, and when arrivals is not NULL also the arrival times of the
 * run's write requests. The run itself (its draws, its result) is the same
 * with or without them. On OB_OK *out and *arrivals are written and the
 * caller owns arrivals->ms; on an error neither is written and nothing is
 * left allocated. */
int herd_run_record(const struct herd_params *p, uint64_t seed, struct herd_run_result *out,
    struct herd_arrivals *arrivals);

/* Release what herd_run_record allocated; a zeroed struct is fine. */
void herd_arrivals_free(struct herd_arrivals *a);

/* The seed of run number run (0-based) of a table seeded by seed with
 * this many clients. Every strategy's run gets the same one, so they meet
 * the same first network delays. */
uint64_t herd_run_seed(uint64_t seed, uint32_t clients, uint32_t run);

/*
 * The arrival histogram of one run (outbox-herd --histogram-bins B): the
 * run's write requests counted by when they arrived at the server, in B
 * bins of equal width W whole ms starting at time 0:
 *
 *   counts[i] = the writes that arrived in [i x W, (i+1) x W), i < B
 *   W = floor(last / B) + 1, last = the arrival time of the last write
 *
 * W is the smallest whole number of ms for which every arrival falls in
 * the B bins (B x W > last), and at least 1 (a run whose writes all
 * arrive at 0 has W = 1). The counts sum to the run's calls.
 */
#define HERD_HISTOGRAM_BINS_MAX 200

struct herd_histogram {
	uint32_t run;    /* which run of the cell: 0, the one seeded by
	                  * herd_run_seed(seed, clients, 0) */
	uint64_t calls;  /* that run's write requests (= the sum of counts) */
	double ms;       /* that run's ms, as herd_run_result.ms */
	uint64_t bin_ms; /* W */
	uint32_t bins;   /* B, 1..HERD_HISTOGRAM_BINS_MAX */
	uint64_t counts[HERD_HISTOGRAM_BINS_MAX]; /* counts[0..bins-1] */
};

/* Count n arrival times (ms, each finite and >= 0, in any order) into bins
 * bins as above: *bin_ms = W, counts[0..bins-1]. OB_OK, or OB_EINVAL
 * (bins outside 1..HERD_HISTOGRAM_BINS_MAX, a time negative or not
 * finite) with nothing written. Borrows at_ms; no allocation. */
int herd_histogram_bin(const double *at_ms, uint64_t n, uint32_t bins, uint64_t *bin_ms,
    uint64_t *counts);

/* runs runs (>= 1) of herd_run, seeded by herd_run_seed(seed, p->clients,
 * 0..runs-1), averaged into *out. With hist not NULL, run 0 is made with
 * herd_run_record instead (the same run) and its arrival histogram in
 * bins bins (1..HERD_HISTOGRAM_BINS_MAX) written to *hist; bins is unused
 * without hist. Errors as herd_run, and OB_EINVAL for runs 0 or bins out
 * of bounds; *out and *hist are written only on OB_OK. */
int herd_cell_run(const struct herd_params *p, uint64_t seed, uint32_t runs, uint32_t bins,
    struct herd_cell *out, struct herd_histogram *hist);

/* A one-way network delay: |N(mean, sd)| ms drawn from *rng (Box-Muller). */
double herd_net_delay(double mean_ms, double sd_ms, uint64_t *rng);

#endif
