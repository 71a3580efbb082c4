/*
 * test_retry_policy.c - the retry-or-dead decision of a failed attempt
 * (relay/retry_policy.h): an attempt that reached no consumer is never
 * dead, at any age or attempt count; one that reached a consumer is dead
 * at --max-attempts, past --max-age, or when the consumer's Retry-After
 * would reach past --max-age; otherwise a Full Jitter backoff no shorter
 * than the Retry-After.
 */
#include <string.h>

#include <check.h>

#include "retry_policy.h"
#include "testsupport.h"

#define DAY_US (INT64_C(86400) * 1000000)
#define NOW_US (INT64_C(1800000000) * 1000000)

static const struct relay_retry_limits LIMITS = { 3, 86400000, 100, 5000 };

/* A failed attempt of a message enqueued age_us before NOW_US. */
static struct relay_outcome
decide(uint32_t attempt, int64_t age_us, bool reached, int64_t retry_after_ms)
{
	struct ob_wire_msg m;
	memset(&m, 0, sizeof(m));
	m.id = 7;
	m.attempt = attempt;
	m.created_at_us = NOW_US - age_us;
	struct relay_outcome o;
	memset(&o, 0, sizeof(o));
	o.id = 7;
	o.kind = RELAY_OUT_RETRY;
	o.refund_attempt = !reached;
	o.retry_after_ms = retry_after_ms;
	snprintf(o.error, sizeof(o.error), "send: Timed out");
	uint64_t rng = 42;
	relay_retry_decide(&LIMITS, &m, NOW_US, &rng, &o);
	return o;
}

START_TEST(test_unreached_never_dead)
{
	/* an outage of a year, the attempts far past the limit */
	for (uint32_t attempt = 1; attempt < 100; attempt += 7) {
		struct relay_outcome o = decide(attempt, 365 * DAY_US, false, 0);
		ck_assert_int_eq(o.kind, RELAY_OUT_RETRY);
		ck_assert_int_le(o.delay_ms, 5000);
		ck_assert_str_eq(o.error, "send: Timed out");
	}
	ck_assert_int_eq(decide(1, 2 * DAY_US, false, 3600000).kind, RELAY_OUT_RETRY);
}
END_TEST

START_TEST(test_reached_dead_by_attempts_or_age)
{
	struct relay_outcome o = decide(3, 1000000, true, 0);
	ck_assert_int_eq(o.kind, RELAY_OUT_DEAD);
	ck_assert_str_eq(o.error, "max attempts (3) reached; last error: send: Timed out");
	o = decide(1, DAY_US + 1000000, true, 0);
	ck_assert_int_eq(o.kind, RELAY_OUT_DEAD);
	ck_assert_str_eq(o.error, "max age (86400000 ms) reached; last error: send: Timed out");
	o = decide(2, DAY_US - 1000000, true, 0);
	ck_assert_int_eq(o.kind, RELAY_OUT_RETRY);
	/* attempt 2 draws from [0, min(5000, 100 * 2^2)] */
	ck_assert_int_ge(o.delay_ms, 0);
	ck_assert_int_le(o.delay_ms, 400);
}
END_TEST

START_TEST(test_retry_after)
{
	/* a Retry-After within the age: the delay is at least it */
	struct relay_outcome o = decide(1, 1000000, true, 60000);
	ck_assert_int_eq(o.kind, RELAY_OUT_RETRY);
	ck_assert_int_ge(o.delay_ms, 60000);
	/* one that would reach past --max-age: dead now, as the age would be */
	o = decide(1, DAY_US - 1000000, true, 60000);
	ck_assert_int_eq(o.kind, RELAY_OUT_DEAD);
	ck_assert_msg(strstr(o.error, "would pass before the Retry-After (60000 ms)") != NULL,
	    "%s", o.error);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("retry_policy");
	TCase *tc = tcase_create("decide");
	tcase_add_test(tc, test_unreached_never_dead);
	tcase_add_test(tc, test_reached_dead_by_attempts_or_age);
	tcase_add_test(tc, test_retry_after);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
