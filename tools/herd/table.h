/*
 * table.h - outbox-herd's output, for people (text) or programs (JSON):
 * the simulation's table of calls and ms per strategy per client count,
 * and the report of a run against the real system (--target).
 */
#ifndef OUTBOX_HERD_TABLE_H
#define OUTBOX_HERD_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "jitter.h"
#include "sim.h"
#include "target.h"

/* Everything printed; borrowed arrays. */
struct herd_table {
	uint64_t seed;
	uint32_t runs;
	struct ob_jitter_range range;
	double delay_mean_ms, delay_sd_ms;
	const uint32_t *clients; /* the columns */
	size_t nclients;
	const enum ob_jitter_kind *strategies; /* the rows */
	size_t nstrategies;
	const struct herd_cell *cells; /* row by row: cells[row * nclients + column] */
	/* NULL, or each cell's arrival histogram (sim.h), indexed as cells:
	 * JSON only (--histogram-bins) */
	const struct herd_histogram *histograms;
};

/* The table as text: two lines saying what was run, a header, one row per
 * strategy ("<label>  <calls> calls  <ms> ms" per column, averages rounded
 * to whole numbers). */
void herd_table_text(FILE *f, const struct herd_table *t);

/* The table as one JSON object: the parameters, then per strategy its
 * name, label and per client count the averages (2 decimals). With
 * histograms, each cell object also has
 *   "histogram": {"run": 0, "calls": C, "ms": T, "bin_ms": W,
 *                 "counts": [B integers]}
 * run 0 of the cell (seeded by herd_run_seed(seed, clients, 0)): C its
 * write requests, T its ms (2 decimals, as the cell's), and counts[i] the
 * writes that arrived at the server in [i x W, (i+1) x W) ms of simulated
 * time, W = floor(last arrival / B) + 1 whole ms; the counts sum to C.
 * With --runs 1 the cell's calls and ms are C and T. */
void herd_table_json(FILE *f, const struct herd_table *t);

/* A --target run: its parameters and result (borrowed). */
struct herd_target_report {
	const struct herd_target_params *params;
	const struct herd_target_result *result;
};

/* The report as text: two lines saying what was run, a header, the
 * strategy's row (requests, completed of clients, first 2xx, done and
 * recover ms; "-" for a time that never came), then its answers by kind. */
void herd_target_text(FILE *f, const struct herd_target_report *r);

/* The report as one JSON object: the parameters, then "strategies" with
 * the one strategy's counts and times (a time that never came is null). */
void herd_target_json(FILE *f, const struct herd_target_report *r);

#endif
