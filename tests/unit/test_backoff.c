/*
 * test_backoff.c - Full Jitter backoff: the ceiling doubles from the base
 * and stops at the cap, draws stay in [0, ceiling], huge attempt numbers
 * never overflow, and the draws are spread roughly uniformly.
 */
#include <check.h>
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
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return ts_run_suite(backoff_suite());
}
