/*
 * test_breaker.c - the per-destination circuit breaker: opens after the
 * threshold of consecutive failures, lets one probe through per interval
 * while open, closes on a success, and a success resets the count.
 */
#include <check.h>

#include "breaker.h"
#include "testsupport.h"

START_TEST(test_opens_after_threshold)
{
	struct relay_breaker b = { 0 };
	ck_assert_int_eq(relay_breaker_ask(&b, 0), RELAY_BREAKER_SEND);
	ck_assert(!relay_breaker_result(&b, false, 0, 3, 1000));
	ck_assert(!relay_breaker_result(&b, false, 0, 3, 1000));
	ck_assert_int_eq(b.state, RELAY_BREAKER_CLOSED);
	ck_assert(relay_breaker_result(&b, false, 100, 3, 1000));
	ck_assert_int_eq(b.state, RELAY_BREAKER_OPEN);
	ck_assert_str_eq(relay_breaker_state_name(b.state), "open");
	ck_assert_int_eq(relay_breaker_ask(&b, 500), RELAY_BREAKER_HOLD);
	ck_assert_int_eq(relay_breaker_ask(&b, 1099), RELAY_BREAKER_HOLD);
}
END_TEST

START_TEST(test_probe_unused_waits_an_interval)
{
	struct relay_breaker b = { 0 };
	relay_breaker_result(&b, false, 0, 1, 1000);
	ck_assert_int_eq(relay_breaker_ask(&b, 1000), RELAY_BREAKER_PROBE);
	/* nothing to probe with at 1200: the next probe after another interval */
	relay_breaker_probe_unused(&b, 1200, 1000);
	ck_assert_int_eq(b.state, RELAY_BREAKER_OPEN);
	ck_assert_int_eq(relay_breaker_ask(&b, 2199), RELAY_BREAKER_HOLD);
	ck_assert_int_eq(relay_breaker_ask(&b, 2200), RELAY_BREAKER_PROBE);
}
END_TEST

START_TEST(test_probe_inconclusive_keeps_state)
{
	struct relay_breaker b = { 0 };
	relay_breaker_result(&b, false, 0, 1, 1000);
	ck_assert_int_eq(relay_breaker_ask(&b, 1000), RELAY_BREAKER_PROBE);
	ck_assert_int_eq(relay_breaker_ask(&b, 1000), RELAY_BREAKER_HOLD);
	/* a reply that does not decode: still open, the probe may go again */
	relay_breaker_probe_inconclusive(&b);
	ck_assert_int_eq(b.state, RELAY_BREAKER_OPEN);
	ck_assert_uint_eq(b.failures, 1);
	ck_assert_int_eq(relay_breaker_ask(&b, 1000), RELAY_BREAKER_PROBE);
}
END_TEST

START_TEST(test_success_resets_count)
{
	struct relay_breaker b = { 0 };
	relay_breaker_result(&b, false, 0, 3, 1000);
	relay_breaker_result(&b, false, 0, 3, 1000);
	ck_assert(!relay_breaker_result(&b, true, 0, 3, 1000)); /* no state change */
	ck_assert_uint_eq(b.failures, 0);
	relay_breaker_result(&b, false, 0, 3, 1000);
	relay_breaker_result(&b, false, 0, 3, 1000);
	ck_assert_int_eq(b.state, RELAY_BREAKER_CLOSED);
}
END_TEST

START_TEST(test_one_probe_per_interval)
{
	struct relay_breaker b = { 0 };
	relay_breaker_result(&b, false, 0, 1, 1000);
	ck_assert_int_eq(b.state, RELAY_BREAKER_OPEN);
	ck_assert_int_eq(relay_breaker_ask(&b, 1000), RELAY_BREAKER_PROBE);
	/* The probe is out: everything else is held. */
	ck_assert_int_eq(relay_breaker_ask(&b, 1000), RELAY_BREAKER_HOLD);
	ck_assert_int_eq(relay_breaker_ask(&b, 5000), RELAY_BREAKER_HOLD);
	/* The probe fails: another full interval. */
	ck_assert(!relay_breaker_result(&b, false, 1300, 1, 1000));
	ck_assert_int_eq(relay_breaker_ask(&b, 2299), RELAY_BREAKER_HOLD);
	ck_assert_int_eq(relay_breaker_ask(&b, 2300), RELAY_BREAKER_PROBE);
	/* The probe succeeds: closed, everything flows. */
	ck_assert(relay_breaker_result(&b, true, 2400, 1, 1000));
	ck_assert_int_eq(b.state, RELAY_BREAKER_CLOSED);
	ck_assert_str_eq(relay_breaker_state_name(b.state), "closed");
	ck_assert_int_eq(relay_breaker_ask(&b, 2400), RELAY_BREAKER_SEND);
	ck_assert_int_eq(relay_breaker_ask(&b, 2400), RELAY_BREAKER_SEND);
}
END_TEST

static Suite *
breaker_suite(void)
{
	Suite *s = suite_create("breaker");
	TCase *tc = tcase_create("breaker");
	tcase_add_test(tc, test_opens_after_threshold);
	tcase_add_test(tc, test_success_resets_count);
	tcase_add_test(tc, test_one_probe_per_interval);
	tcase_add_test(tc, test_probe_unused_waits_an_interval);
	tcase_add_test(tc, test_probe_inconclusive_keeps_state);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return ts_run_suite(breaker_suite());
}
