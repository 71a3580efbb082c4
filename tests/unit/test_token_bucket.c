/*
 * test_token_bucket.c - the token bucket (outbox/token_bucket.h): taken
 * only when it holds the cost, put back up to its capacity, refilled by
 * time when it has a rate, exact under threads; and the retry budget made
 * of one: 100 retries from a full bucket, 50 after timeouts, a success
 * putting back its retries' cost or 1.
 */
#include <pthread.h>
#include <stdbool.h>
#include <unistd.h>

#include <check.h>

#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/token_bucket.h"
#include "testsupport.h"

START_TEST(test_take_and_put)
{
	struct ob_token_bucket b;
	ck_assert_int_eq(ob_token_bucket_init(&b, 10, 0), OB_OK);
	ck_assert(ob_token_bucket_take(&b, 4));
	ck_assert(ob_token_bucket_take(&b, 6));
	ck_assert(!ob_token_bucket_take(&b, 1)); /* empty: refused, nothing taken */
	ck_assert_double_eq(ob_token_bucket_level(&b), 0);
	ob_token_bucket_put(&b, 3);
	ck_assert(!ob_token_bucket_take(&b, 4));
	ck_assert_double_eq(ob_token_bucket_level(&b), 3);
	ob_token_bucket_put(&b, 100); /* never above the capacity */
	ck_assert_double_eq(ob_token_bucket_level(&b), 10);
	ob_token_bucket_fini(&b);
}
END_TEST

START_TEST(test_refill_by_time)
{
	struct ob_token_bucket b;
	ck_assert_int_eq(ob_token_bucket_init(&b, 5, 100), OB_OK); /* 100 a second */
	ck_assert(ob_token_bucket_take(&b, 5));
	ck_assert(!ob_token_bucket_take(&b, 5));
	int64_t end = ob_mono_ms() + 5000;
	while (!ob_token_bucket_take(&b, 5))
		ck_assert_msg(ob_mono_ms() < end, "no refill in 5 s at 100 tokens a second");
	ob_token_bucket_fini(&b);
}
END_TEST

static struct ob_token_bucket shared;
static int granted[8];

static void *
taker(void *arg)
{
	int *n = arg;
	while (ob_token_bucket_take(&shared, 1))
		(*n)++;
	return NULL;
}

/* Eight threads emptying one bucket take exactly its capacity. */
START_TEST(test_threads_take_exactly_the_capacity)
{
	ck_assert_int_eq(ob_token_bucket_init(&shared, 100000, 0), OB_OK);
	pthread_t t[8];
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, taker, &granted[i]), 0);
	int sum = 0;
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		sum += granted[i];
	}
	ck_assert_int_eq(sum, 100000);
	ob_token_bucket_fini(&shared);
}
END_TEST

START_TEST(test_retry_budget)
{
	struct ob_token_bucket b;
	double cost;
	ck_assert_int_eq(ob_token_bucket_init(&b, OB_RETRY_BUDGET_CAPACITY, 0), OB_OK);
	int retries = 0;
	while (ob_retry_budget_take(&b, false, &cost))
		retries++;
	ck_assert_int_eq(retries, OB_RETRY_BUDGET_CAPACITY / OB_RETRY_BUDGET_COST); /* 100 */
	ck_assert_double_eq(cost, OB_RETRY_BUDGET_COST);
	/* a success after no retry puts back 1; after a retry, its cost */
	ob_retry_budget_success(&b, 0);
	ck_assert_double_eq(ob_token_bucket_level(&b), OB_RETRY_BUDGET_SUCCESS_REFILL);
	ob_retry_budget_success(&b, OB_RETRY_BUDGET_TIMEOUT_COST);
	ck_assert_double_eq(ob_token_bucket_level(&b), 11);
	ck_assert(ob_retry_budget_take(&b, true, &cost));
	ck_assert_double_eq(cost, OB_RETRY_BUDGET_TIMEOUT_COST);
	ck_assert(!ob_retry_budget_take(&b, false, &cost)); /* 1 left */
	ob_token_bucket_fini(&b);
	/* after timeouts: half as many */
	ck_assert_int_eq(ob_token_bucket_init(&b, OB_RETRY_BUDGET_CAPACITY, 0), OB_OK);
	for (retries = 0; ob_retry_budget_take(&b, true, &cost); retries++)
		;
	ck_assert_int_eq(retries, OB_RETRY_BUDGET_CAPACITY / OB_RETRY_BUDGET_TIMEOUT_COST);
	ob_token_bucket_fini(&b);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("token_bucket");
	TCase *tc = tcase_create("token_bucket");
	tcase_add_test(tc, test_take_and_put);
	tcase_add_test(tc, test_refill_by_time);
	tcase_add_test(tc, test_threads_take_exactly_the_capacity);
	tcase_add_test(tc, test_retry_budget);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
