/*
 * test_backoff.c - Full Jitter backoff: the ceiling doubles from the base
 * and stops at the cap, draws stay in [0, ceiling], huge attempt numbers
 * never overflow, and the draws are spread roughly uniformly; a retry
 * loop's state (struct ob_backoff), a Retry-After honoured as a spread
 * floor, and the spread whole seconds a server sends.
 */
#include <check.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>

#include "outbox/backoff.h"
#include "testsupport.h"

START_TEST(test_ceiling_doubles_then_caps)
{
	ck_assert_int_eq(ob_backoff_ceiling(100, 30000, 0), 100);
	ck_assert_int_eq(ob_backoff_ceiling(100, 30000, 1), 200);
	ck_assert_int_eq(ob_backoff_ceiling(100, 30000, 2), 400);
	ck_assert_int_eq(ob_backoff_ceiling(100, 30000, 8), 25600);
	ck_assert_int_eq(ob_backoff_ceiling(100, 30000, 9), 30000);
	ck_assert_int_eq(ob_backoff_ceiling(100, 30000, 10), 30000);
	/* base above cap: the cap wins. */
	ck_assert_int_eq(ob_backoff_ceiling(500, 300, 0), 300);
	/* nonsense input: no delay rather than a negative one. */
	ck_assert_int_eq(ob_backoff_ceiling(0, 300, 3), 0);
	ck_assert_int_eq(ob_backoff_ceiling(100, 0, 3), 0);
	ck_assert_int_eq(ob_backoff_ceiling(-5, 300, 3), 0);
}
END_TEST

START_TEST(test_no_overflow_at_huge_attempts)
{
	const int64_t cap = INT64_MAX / 2;
	ck_assert_int_eq(ob_backoff_ceiling(1, cap, UINT32_MAX), cap);
	ck_assert_int_eq(ob_backoff_ceiling(INT64_MAX / 3, INT64_MAX, 1000), INT64_MAX);
	ck_assert_int_eq(ob_backoff_ceiling(100, 86400000, UINT32_MAX), 86400000);
	uint64_t rng = 42;
	for (int i = 0; i < 1000; i++) {
		int64_t d = ob_backoff_full_jitter(100, 86400000, UINT32_MAX - (uint32_t)i, &rng);
		ck_assert_int_ge(d, 0);
		ck_assert_int_le(d, 86400000);
	}
	int64_t d = ob_backoff_full_jitter(1, INT64_MAX, UINT32_MAX, &rng);
	ck_assert_int_ge(d, 0);
}
END_TEST

START_TEST(test_jitter_bounds)
{
	uint64_t rng = ob_rand_seed();
	for (uint32_t attempt = 0; attempt < 40; attempt++) {
		int64_t ceil = ob_backoff_ceiling(100, 30000, attempt);
		for (int i = 0; i < 500; i++) {
			int64_t d = ob_backoff_full_jitter(100, 30000, attempt, &rng);
			ck_assert_int_ge(d, 0);
			ck_assert_int_le(d, ceil);
		}
	}
	ck_assert_int_eq(ob_backoff_full_jitter(0, 0, 5, &rng), 0);
}
END_TEST

START_TEST(test_jitter_roughly_uniform)
{
	/* 100,000 draws from [0, 999] into 10 buckets: each within 10% of
	 * 10,000 (a fair generator is off by ~1% here); mean near 499.5. */
	uint64_t rng = 12345;
	int buckets[10] = { 0 };
	double sum = 0;
	const int draws = 100000;
	for (int i = 0; i < draws; i++) {
		int64_t d = ob_backoff_full_jitter(999, 999, 0, &rng);
		ck_assert_int_le(d, 999);
		buckets[d / 100]++;
		sum += (double)d;
	}
	for (int b = 0; b < 10; b++)
		ck_assert_msg(buckets[b] > 9000 && buckets[b] < 11000, "bucket %d has %d", b,
		    buckets[b]);
	double mean = sum / draws;
	ck_assert_msg(mean > 490 && mean < 510, "mean %f", mean);
	/* Both ends are reachable. */
	int lo = 0, hi = 0;
	for (int i = 0; i < 10000; i++) {
		int64_t d = ob_backoff_full_jitter(3, 3, 0, &rng);
		lo += d == 0;
		hi += d == 3;
	}
	ck_assert_int_gt(lo, 0);
	ck_assert_int_gt(hi, 0);
}
END_TEST

START_TEST(test_rng)
{
	uint64_t a = 0, b = 0;
	/* A zero state is replaced, not stuck at zero. */
	ck_assert_uint_ne(ob_rand_next(&a), 0);
	ck_assert_uint_ne(a, 0);
	ob_rand_next(&b);
	ck_assert_uint_eq(a, b); /* deterministic from the same seed */
	ck_assert_uint_ne(ob_rand_seed(), 0);
}
END_TEST

/* A retry loop's state: the ceiling doubles per failure to the cap, a
 * success starts again from base, and two loops (threads, processes)
 * draw different waits: no lockstep. */
START_TEST(test_loop_state)
{
	struct ob_backoff a, b;
	ob_backoff_init(&a, 100, 1000);
	ob_backoff_init(&b, 100, 1000);
	int64_t ceil[] = { 200, 400, 800, 1000, 1000 };
	bool differ = false;
	for (int round = 0; round < 50; round++) {
		ob_backoff_reset(&a);
		ob_backoff_reset(&b);
		for (int i = 0; i < 5; i++) {
			int64_t wa = ob_backoff_next(&a), wb = ob_backoff_next(&b);
			ck_assert_int_ge(wa, 0);
			ck_assert_int_le(wa, ceil[i]);
			ck_assert_int_le(wb, ceil[i]);
			differ = differ || wa != wb;
		}
		ck_assert_uint_eq(a.failures, 5);
	}
	ck_assert_msg(differ, "two loops drew the same 250 waits: their generators are one");
}
END_TEST

/* A Retry-After is a floor, spread above it by up to a quarter; a longer
 * own wait stands. */
START_TEST(test_at_least)
{
	uint64_t rng = 7;
	ck_assert_int_eq(ob_backoff_at_least(900, 400, &rng), 900);
	int64_t lo = INT64_MAX, hi = 0;
	for (int i = 0; i < 2000; i++) {
		int64_t w = ob_backoff_at_least(10, 1000, &rng);
		ck_assert_int_ge(w, 1000);
		ck_assert_int_le(w, 1000 + 1000 / OB_RETRY_AFTER_SPREAD);
		lo = w < lo ? w : lo;
		hi = w > hi ? w : hi;
	}
	ck_assert_msg(hi - lo > 200, "the floor was not spread (%" PRId64 "..%" PRId64 ")", lo, hi);
	ck_assert_int_eq(ob_backoff_at_least(0, 0, &rng), 0);
}
END_TEST

/* The whole seconds a server sends: min, or up to half more (at least 1). */
START_TEST(test_retry_after_spread)
{
	int seen[4] = { 0 };
	for (int i = 0; i < 1000; i++) {
		int64_t s1 = ob_retry_after_spread_s(1);
		ck_assert(s1 == 1 || s1 == 2);
		seen[s1]++;
		int64_t s10 = ob_retry_after_spread_s(10);
		ck_assert(s10 >= 10 && s10 <= 15);
	}
	ck_assert_msg(seen[1] > 300 && seen[2] > 300, "1 s told %d times, 2 s %d", seen[1],
	    seen[2]);
}
END_TEST

static Suite *
backoff_suite(void)
{
	Suite *s = suite_create("backoff");
	TCase *tc = tcase_create("backoff");
	tcase_add_test(tc, test_ceiling_doubles_then_caps);
	tcase_add_test(tc, test_no_overflow_at_huge_attempts);
	tcase_add_test(tc, test_jitter_bounds);
	tcase_add_test(tc, test_jitter_roughly_uniform);
	tcase_add_test(tc, test_rng);
	tcase_add_test(tc, test_loop_state);
	tcase_add_test(tc, test_at_least);
	tcase_add_test(tc, test_retry_after_spread);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return ts_run_suite(backoff_suite());
}
