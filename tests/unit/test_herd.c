/*
 * test_herd.c - outbox-herd (tools/herd/): the six backoff strategies stay
 * within their formulas, the event queue orders by time then push order,
 * a run is a function of its seed, and the simulation reaches the
 * conclusions of "Exponential Backoff And Jitter" (AWS Architecture Blog,
 * 2015) for the fixed seed: not its numbers, which depend on the
 * generator. Then the program itself: the same seed prints the same bytes,
 * one strategy's row is the same alone as in the full table, and every bad
 * flag is one line on stderr and exit 2.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <jansson.h>

#include "evqueue.h"
#include "jitter.h"
#include "outbox/err.h"
#include "sim.h"
#include "testsupport.h"

/* The article's parameters, and the program's defaults. */
static const struct ob_jitter_range RANGE = { 5, 2000 };
#define DELAY_MEAN_MS 10.0
#define DELAY_SD_MS 2.0
#define SEED 1
/* Runs per cell for the conclusions: the program averages 100; with 30
 * every conclusion below also held for seeds 1..30 (and with as few as 3
 * runs), so the margins are not luck of the fixed seed. */
#define CONCLUSION_RUNS 30
/* At 10 clients the strategies' calls lie in a narrow band: the article's
 * own table has 51 / 38 = 1.34 between the most and the fewest; ours is
 * 1.31..1.40 over seeds 1..30. 1.6 leaves margin and still fails if a
 * strategy goes wrong (no backoff at 50 clients is 2.1 x Full Jitter). */
#define BAND_10_CLIENTS 1.6
#define PROGRAM_OUT_MAX 16384
#define PROGRAM_WAIT_MS 20000

/* ---- strategies --------------------------------------------------------- */

START_TEST(test_ceiling)
{
	/* attempt 1 = the first retry: 2 x base, as the blog's simulator */
	ck_assert_double_eq(ob_jitter_ceiling(&RANGE, 0), 5);
	ck_assert_double_eq(ob_jitter_ceiling(&RANGE, 1), 10);
	ck_assert_double_eq(ob_jitter_ceiling(&RANGE, 8), 1280);
	ck_assert_double_eq(ob_jitter_ceiling(&RANGE, 9), 2000);
	ck_assert_double_eq(ob_jitter_ceiling(&RANGE, UINT32_MAX), 2000);
	/* a base above the cap: the cap */
	struct ob_jitter_range high = { 500, 300 };
	ck_assert_double_eq(ob_jitter_ceiling(&high, 0), 300);
	/* no base or no cap: no sleep */
	struct ob_jitter_range zero = { 0, 300 }, nocap = { 5, 0 }, nan_base = { NAN, 300 };
	ck_assert_double_eq(ob_jitter_ceiling(&zero, 3), 0);
	ck_assert_double_eq(ob_jitter_ceiling(&nocap, 3), 0);
	ck_assert_double_eq(ob_jitter_ceiling(&nan_base, 3), 0);
	ck_assert_double_eq(ob_jitter_decorrelated(&zero, 3, 100, &(uint64_t){ 1 }), 0);
}
END_TEST

START_TEST(test_strategy_bounds)
{
	uint64_t rng = 7;
	for (uint32_t attempt = 1; attempt < 40; attempt++) {
		double v = ob_jitter_ceiling(&RANGE, attempt);
		for (int i = 0; i < 200; i++) {
			ck_assert_double_eq(ob_jitter_none(&RANGE, attempt, 0, &rng), 0);
			ck_assert_double_eq(ob_jitter_expo(&RANGE, attempt, 0, &rng), v);
			double s = ob_jitter_expo_10pct(&RANGE, attempt, 0, &rng);
			ck_assert(s >= 0.9 * v && s < 1.1 * v);
			s = ob_jitter_equal(&RANGE, attempt, 0, &rng);
			ck_assert(s >= v / 2 && s < v);
			s = ob_jitter_full(&RANGE, attempt, 0, &rng);
			ck_assert(s >= 0 && s < v);
		}
	}
	/* Decorrelated: [base, 3 x previous), never above the cap; before the
	 * first retry the previous sleep counts as the base */
	double prev = 0;
	for (uint32_t attempt = 1; attempt < 200; attempt++) {
		double s = ob_jitter_decorrelated(&RANGE, attempt, prev, &rng);
		double hi = 3 * (prev > RANGE.base_ms ? prev : RANGE.base_ms);
		ck_assert(s >= RANGE.base_ms);
		ck_assert(s <= RANGE.cap_ms);
		ck_assert(s < hi || s == RANGE.cap_ms);
		prev = s;
	}
	/* it climbs to the cap and stays near it within a few dozen retries */
	ck_assert(prev > RANGE.cap_ms / 3);
}
END_TEST

START_TEST(test_strategy_pure)
{
	/* the same generator state gives the same sleep, and advances it */
	for (int k = 0; k < OB_JITTER_COUNT; k++) {
		const struct ob_jitter_strategy *s = &ob_jitter_strategies[k];
		uint64_t a = 99, b = 99;
		double x = s->sleep_ms(&RANGE, 4, 30, &a);
		double y = s->sleep_ms(&RANGE, 4, 30, &b);
		ck_assert_double_eq(x, y);
		ck_assert_uint_eq(a, b);
		ck_assert_int_eq(s->kind, k);
		ck_assert_ptr_eq(ob_jitter_find(s->name), s);
	}
	ck_assert_ptr_null(ob_jitter_find("all"));
	ck_assert_ptr_null(ob_jitter_find(""));
	/* the uniform draw stays in [0, 1) and covers it */
	uint64_t rng = 3;
	double lo = 1, hi = 0;
	for (int i = 0; i < 100000; i++) {
		double u = ob_jitter_uniform(&rng);
		ck_assert(u >= 0 && u < 1);
		lo = u < lo ? u : lo;
		hi = u > hi ? u : hi;
	}
	ck_assert(lo < 0.001 && hi > 0.999);
}
END_TEST

/* ---- event queue --------------------------------------------------------- */

START_TEST(test_evqueue_order)
{
	struct herd_evq q;
	ck_assert_int_eq(herd_evq_init(&q, 6), OB_OK);
	const double at[6] = { 5, 1, 3, 1, 5, 0 };
	for (uint32_t i = 0; i < 6; i++) {
		struct herd_event e = { .at_ms = at[i], .client = i };
		ck_assert(herd_evq_push(&q, &e));
	}
	struct herd_event extra = { .at_ms = 0 };
	ck_assert(!herd_evq_push(&q, &extra)); /* full */
	/* by time; equal times in push order */
	const uint32_t want[6] = { 5, 1, 3, 2, 0, 4 };
	struct herd_event e;
	for (int i = 0; i < 6; i++) {
		ck_assert(herd_evq_pop(&q, &e));
		ck_assert_uint_eq(e.client, want[i]);
	}
	ck_assert(!herd_evq_pop(&q, &e)); /* empty */
	herd_evq_clear(&q);
	ck_assert(herd_evq_push(&q, &extra));
	herd_evq_fini(&q);
}
END_TEST

/* ---- simulation ------------------------------------------------------------ */

static struct herd_params
params(enum ob_jitter_kind k, uint32_t clients)
{
	struct herd_params p = { .strategy = k, .range = RANGE, .delay_mean_ms = DELAY_MEAN_MS,
		.delay_sd_ms = DELAY_SD_MS, .clients = clients };
	return p;
}

START_TEST(test_net_delay)
{
	uint64_t rng = 11;
	double sum = 0, sq = 0;
	const int n = 100000;
	for (int i = 0; i < n; i++) {
		double d = herd_net_delay(DELAY_MEAN_MS, DELAY_SD_MS, &rng);
		ck_assert(d >= 0);
		sum += d;
		sq += d * d;
	}
	double mean = sum / n, sd = sqrt(sq / n - mean * mean);
	ck_assert_msg(fabs(mean - DELAY_MEAN_MS) < 0.05, "mean %f", mean);
	ck_assert_msg(fabs(sd - DELAY_SD_MS) < 0.05, "sd %f", sd);
	/* |N(0, sd)|: folded, never negative */
	for (int i = 0; i < 1000; i++)
		ck_assert(herd_net_delay(0, 5, &rng) >= 0);
}
END_TEST

START_TEST(test_run_deterministic)
{
	for (int k = 0; k < OB_JITTER_COUNT; k++) {
		struct herd_params p = params(k, 20);
		struct herd_run_result a, b, c;
		ck_assert_int_eq(herd_run(&p, 42, &a), OB_OK);
		ck_assert_int_eq(herd_run(&p, 42, &b), OB_OK);
		ck_assert_uint_eq(a.calls, b.calls);
		ck_assert_double_eq(a.ms, b.ms);
		/* every client writes once successfully; the rest lost */
		ck_assert_uint_ge(a.calls, 20);
		ck_assert_uint_eq(a.calls - a.failed, 20);
		ck_assert(a.ms > 0);
		/* another seed, another run (for the jittered ones at least) */
		ck_assert_int_eq(herd_run(&p, 43, &c), OB_OK);
		ck_assert(c.ms != a.ms);
	}
	/* one client never loses: one read, one write, four messages */
	struct herd_params one = params(OB_JITTER_FULL, 1);
	struct herd_run_result r;
	ck_assert_int_eq(herd_run(&one, 5, &r), OB_OK);
	ck_assert_uint_eq(r.calls, 1);
	ck_assert_uint_eq(r.failed, 0);
	/* no delay at all: every message at time 0, still ends, in order */
	struct herd_params instant = params(OB_JITTER_NONE, 10);
	instant.delay_mean_ms = instant.delay_sd_ms = 0;
	ck_assert_int_eq(herd_run(&instant, 5, &r), OB_OK);
	ck_assert_uint_eq(r.calls - r.failed, 10);
	ck_assert_double_eq(r.ms, 0);
}
END_TEST

START_TEST(test_run_errors)
{
	struct herd_run_result r = { .calls = 77 };
	struct herd_cell cell = { .runs = 77 };
	struct herd_params p = params(OB_JITTER_FULL, 0);
	ck_assert_int_eq(herd_run(&p, 1, &r), OB_EINVAL);
	p = params(OB_JITTER_COUNT, 5);
	ck_assert_int_eq(herd_run(&p, 1, &r), OB_EINVAL);
	p = params(OB_JITTER_FULL, 5);
	p.delay_sd_ms = -1;
	ck_assert_int_eq(herd_run(&p, 1, &r), OB_EINVAL);
	p.delay_sd_ms = NAN;
	ck_assert_int_eq(herd_run(&p, 1, &r), OB_EINVAL);
	ck_assert_uint_eq(r.calls, 77); /* untouched on error */
	p = params(OB_JITTER_FULL, 5);
	ck_assert_int_eq(herd_cell_run(&p, 1, 0, &cell), OB_EINVAL);
	ck_assert_uint_eq(cell.runs, 77);
	/* the seeds of a table's runs differ by run and by client count */
	ck_assert_uint_ne(herd_run_seed(1, 10, 0), herd_run_seed(1, 10, 1));
	ck_assert_uint_ne(herd_run_seed(1, 10, 0), herd_run_seed(1, 50, 0));
	ck_assert_uint_ne(herd_run_seed(1, 10, 0), herd_run_seed(2, 10, 0));
}
END_TEST

/* The table for the fixed seed: cells[strategy][column]. */
static const uint32_t COLUMNS[3] = { 10, 50, 100 };
static struct herd_cell cells[OB_JITTER_COUNT][3];

static void
run_table(void)
{
	for (int k = 0; k < OB_JITTER_COUNT; k++)
		for (int j = 0; j < 3; j++) {
			struct herd_params p = params(k, COLUMNS[j]);
			ck_assert_int_eq(herd_cell_run(&p, SEED, CONCLUSION_RUNS, &cells[k][j]),
			    OB_OK);
			ck_assert_uint_eq(cells[k][j].runs, CONCLUSION_RUNS);
		}
}

static const char *
label(int k)
{
	return ob_jitter_strategies[k].label;
}

START_TEST(test_conclusions)
{
	run_table();
	for (int j = 1; j < 3; j++) {
		uint32_t n = COLUMNS[j];
		const struct herd_cell *expo = &cells[OB_JITTER_EXPO][j];
		const struct herd_cell *full = &cells[OB_JITTER_FULL][j];
		/* "The no-jitter exponential backoff approach is the clear loser":
		 * the slowest of all, and more work than Full Jitter */
		for (int k = 0; k < OB_JITTER_COUNT; k++)
			if (k != OB_JITTER_EXPO)
				ck_assert_msg(expo->ms > cells[k][j].ms,
				    "%u clients: exp, no jitter %.0f ms is not slower than %s %.0f ms",
				    n, expo->ms, label(k), cells[k][j].ms);
		/* Full Jitter does less work than retrying at once, than no
		 * jitter and than a jitter of only 10 % */
		const int more[3] = { OB_JITTER_NONE, OB_JITTER_EXPO, OB_JITTER_EXPO_10PCT };
		for (int i = 0; i < 3; i++)
			ck_assert_msg(full->calls < cells[more[i]][j].calls,
			    "%u clients: Full Jitter %.1f calls, not fewer than %s %.1f", n,
			    full->calls, label(more[i]), cells[more[i]][j].calls);
	}
	/* with little contention the strategy hardly matters */
	double lo = cells[0][0].calls, hi = lo;
	for (int k = 1; k < OB_JITTER_COUNT; k++) {
		lo = cells[k][0].calls < lo ? cells[k][0].calls : lo;
		hi = cells[k][0].calls > hi ? cells[k][0].calls : hi;
	}
	ck_assert_msg(hi / lo <= BAND_10_CLIENTS, "10 clients: calls from %.1f to %.1f", lo, hi);
}
END_TEST

/* ---- the program ----------------------------------------------------------- */

/* Run outbox-herd with args (NULL-ended); its output (stdout and stderr)
 * into out. Returns the exit code. */
static int
herd(char *out, const char *a1, const char *a2, const char *a3, const char *a4,
    const char *a5, const char *a6)
{
	char *argv[] = { "outbox-herd", (char *)a1, (char *)a2, (char *)a3, (char *)a4,
		(char *)a5, (char *)a6, NULL };
	return ts_run(argv, NULL, out, PROGRAM_OUT_MAX, PROGRAM_WAIT_MS);
}

START_TEST(test_program_same_bytes)
{
	static char a[PROGRAM_OUT_MAX], b[PROGRAM_OUT_MAX], c[PROGRAM_OUT_MAX];
	ck_assert_int_eq(herd(a, "--runs", "10", NULL, NULL, NULL, NULL), 0);
	ck_assert_int_eq(herd(b, "--runs", "10", NULL, NULL, NULL, NULL), 0);
	ck_assert_str_eq(a, b);
	ck_assert_int_eq(herd(c, "--runs", "10", "--seed", "2", NULL, NULL), 0);
	ck_assert_str_ne(a, c);
	/* the table's shape: two lines of what ran, a blank, a header, six rows */
	ck_assert_ptr_nonnull(strstr(a, "each cell the mean of 10 runs, seed 1\n"));
	ck_assert_ptr_nonnull(strstr(a, "10 clients"));
	ck_assert_ptr_nonnull(strstr(a, "100 clients\n"));
	for (int k = 0; k < OB_JITTER_COUNT; k++)
		ck_assert_msg(strstr(a, label(k)) != NULL, "no row %s", label(k));
	int lines = 0;
	for (const char *p = a; *p; p++)
		lines += *p == '\n';
	ck_assert_int_eq(lines, 4 + OB_JITTER_COUNT);

	/* --json: the same numbers, and one strategy alone is the same as
	 * its row in the full table (each run's seed is the strategy's too) */
	ck_assert_int_eq(herd(a, "--json", "--runs", "10", "--clients", "10,50", NULL), 0);
	ck_assert_int_eq(herd(b, "--json", "--runs", "10", "--clients", "10,50", "--strategy=full"),
	    0);
	json_error_t err;
	json_t *all = json_loads(a, 0, &err), *one = json_loads(b, 0, &err);
	ck_assert_msg(all != NULL && one != NULL, "not JSON: %s", err.text);
	ck_assert_int_eq(json_integer_value(json_object_get(all, "seed")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(all, "runs")), 10);
	json_t *rows = json_object_get(all, "strategies");
	ck_assert_uint_eq(json_array_size(rows), OB_JITTER_COUNT);
	json_t *full = json_array_get(rows, OB_JITTER_FULL);
	ck_assert_str_eq(json_string_value(json_object_get(full, "name")), "full");
	json_t *alone = json_array_get(json_object_get(one, "strategies"), 0);
	ck_assert_uint_eq(json_array_size(json_object_get(one, "strategies")), 1);
	ck_assert(json_equal(full, alone));
	json_t *cell = json_array_get(json_object_get(full, "cells"), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(cell, "clients")), 50);
	/* every client writes once: calls = 50 + the lost writes */
	ck_assert(fabs(json_real_value(json_object_get(cell, "calls")) -
	    json_real_value(json_object_get(cell, "failed")) - 50) < 0.01);
	json_decref(all);
	json_decref(one);
}
END_TEST

START_TEST(test_program_help_version)
{
	static char out[PROGRAM_OUT_MAX];
	ck_assert_int_eq(herd(out, "--help", NULL, NULL, NULL, NULL, NULL), 0);
	const char *flags[] = { "--clients", "--runs", "--seed", "--base-ms", "--cap-ms",
		"--delay-mean-ms", "--delay-sd-ms", "--strategy", "--json", "--version" };
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		ck_assert_msg(strstr(out, flags[i]) != NULL, "--help lacks %s", flags[i]);
	ck_assert_int_eq(herd(out, "--version", NULL, NULL, NULL, NULL, NULL), 0);
	ck_assert_msg(strncmp(out, "outbox-herd ", 12) == 0, "%s", out);
}
END_TEST

START_TEST(test_program_bad_flags)
{
	/* each bad input, and the start of the one line it must give */
	static const struct {
		const char *a[4];
		const char *said;
	} bad[] = {
		{ { "--clients", "0" }, "outbox-herd: --clients: 0 is outside 1..1000" },
		{ { "--clients", "1001" }, "outbox-herd: --clients: 1001 is outside" },
		{ { "--clients", "10,,50" }, "outbox-herd: --clients: an empty item" },
		{ { "--clients", "ten" }, "outbox-herd: --clients: 'ten' is not a number" },
		{ { "--clients", "-5" }, "outbox-herd: --clients: '-5' is not a number" },
		{ { "--clients", "10x" }, "outbox-herd: --clients: '10x' is not a number" },
		{ { "--clients", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17" },
		    "outbox-herd: --clients: more than 16" },
		{ { "--runs", "0" }, "outbox-herd: --runs" },
		{ { "--runs", "100001" }, "outbox-herd: --runs" },
		{ { "--runs" }, "outbox-herd: --runs: missing value" },
		{ { "--seed", "-1" }, "outbox-herd: --seed" },
		{ { "--seed", "x" }, "outbox-herd: --seed" },
		{ { "--base-ms", "0" }, "outbox-herd: --base-ms" },
		{ { "--cap-ms", "4", "--base-ms", "5" }, "outbox-herd: --cap-ms 4 is below --base-ms 5" },
		{ { "--delay-mean-ms", "-1" }, "outbox-herd: --delay-mean-ms" },
		{ { "--delay-sd-ms", "3600001" }, "outbox-herd: --delay-sd-ms" },
		{ { "--strategy", "jitter" }, "outbox-herd: --strategy" },
		{ { "--json=maybe" }, "outbox-herd: --json" },
		{ { "--herd" }, "outbox-herd: unknown option --herd" },
		{ { "100" }, "outbox-herd: unexpected argument '100'" },
	};
	static char out[PROGRAM_OUT_MAX];
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int code = herd(out, bad[i].a[0], bad[i].a[1], bad[i].a[2], bad[i].a[3], NULL,
		    NULL);
		ck_assert_msg(code == 2, "%s %s: exit %d", bad[i].a[0],
		    bad[i].a[1] ? bad[i].a[1] : "", code);
		ck_assert_msg(strncmp(out, bad[i].said, strlen(bad[i].said)) == 0,
		    "%s: said '%s'", bad[i].said, out);
		/* one line, and no table */
		char *nl = strchr(out, '\n');
		ck_assert_msg(nl != NULL && nl[1] == '\0', "more than one line: '%s'", out);
	}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("herd");
	TCase *tc = tcase_create("jitter");
	tcase_add_test(tc, test_ceiling);
	tcase_add_test(tc, test_strategy_bounds);
	tcase_add_test(tc, test_strategy_pure);
	suite_add_tcase(s, tc);
	tc = tcase_create("sim");
	tcase_add_test(tc, test_evqueue_order);
	tcase_add_test(tc, test_net_delay);
	tcase_add_test(tc, test_run_deterministic);
	tcase_add_test(tc, test_run_errors);
	tcase_add_test(tc, test_conclusions);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	tc = tcase_create("program");
	tcase_add_test(tc, test_program_same_bytes);
	tcase_add_test(tc, test_program_help_version);
	tcase_add_test(tc, test_program_bad_flags);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
