/*
 * test_ticker.c - the periodic thread of common/ticker.c: a pass at once
 * and then every interval, a stop that interrupts the wait between passes
 * at once and waits for a pass in progress (which can see the stop coming
 * through ob_ticker_stopping), and stop on a ticker with no thread.
 */
#include <stdatomic.h>
#include <time.h>

#include <check.h>

#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/ticker.h"
#include "testsupport.h"

#define WAIT_MS 10000 /* generous: a loaded machine */

struct counter {
	atomic_int passes;
	struct ob_ticker *t;      /* for the pass that waits for the stop */
	atomic_bool in_long_pass;
	atomic_bool saw_stop;
};

static void
count(void *arg)
{
	struct counter *c = arg;
	atomic_fetch_add(&c->passes, 1);
}

/* The first pass waits for the stop to be asked for, as a long purge
 * checks between its batches. */
static void
long_pass(void *arg)
{
	struct counter *c = arg;
	atomic_fetch_add(&c->passes, 1);
	atomic_store(&c->in_long_pass, true);
	int64_t end = ob_mono_ms() + WAIT_MS;
	while (!ob_ticker_stopping(c->t) && ob_mono_ms() < end)
		ob_sleep_ms(1);
	atomic_store(&c->saw_stop, ob_ticker_stopping(c->t));
}

/* Wait until c has made at least n passes (or WAIT_MS). */
static int
wait_passes(struct counter *c, int n)
{
	int64_t end = ob_mono_ms() + WAIT_MS;
	while (atomic_load(&c->passes) < n && ob_mono_ms() < end)
		ob_sleep_ms(1);
	return atomic_load(&c->passes);
}

START_TEST(test_passes_at_once_then_every_interval)
{
	struct ob_ticker t = { 0 };
	struct counter c = { 0 };
	ck_assert_int_eq(ob_ticker_start(&t, 5, count, &c), OB_OK);
	ck_assert_int_ge(wait_passes(&c, 3), 3);
	ck_assert(ob_ticker_stop(&t));
	int after = atomic_load(&c.passes);
	ob_sleep_ms(30); /* six intervals: none may run after the stop */
	ck_assert_int_eq(atomic_load(&c.passes), after);
	ck_assert(!ob_ticker_stop(&t)); /* stopped already */
}
END_TEST

START_TEST(test_stop_interrupts_a_long_wait)
{
	struct ob_ticker t = { 0 };
	struct counter c = { 0 };
	ck_assert_int_eq(ob_ticker_start(&t, 3600000, count, &c), OB_OK);
	ck_assert_int_eq(wait_passes(&c, 1), 1);
	int64_t t0 = ob_mono_ms();
	ck_assert(ob_ticker_stop(&t));
	ck_assert_int_lt(ob_mono_ms() - t0, WAIT_MS / 2);
	ck_assert_int_eq(atomic_load(&c.passes), 1);
}
END_TEST

START_TEST(test_stop_waits_for_the_pass_in_progress)
{
	struct ob_ticker t = { 0 };
	struct counter c = { .t = &t };
	ck_assert_int_eq(ob_ticker_start(&t, 3600000, long_pass, &c), OB_OK);
	int64_t end = ob_mono_ms() + WAIT_MS;
	while (!atomic_load(&c.in_long_pass) && ob_mono_ms() < end)
		ob_sleep_ms(1);
	ck_assert(atomic_load(&c.in_long_pass));
	ck_assert(ob_ticker_stop(&t)); /* returns once the pass has ended */
	ck_assert(atomic_load(&c.saw_stop));
	ck_assert_int_eq(atomic_load(&c.passes), 1);
}
END_TEST

START_TEST(test_stop_without_a_thread)
{
	struct ob_ticker t = { 0 };
	ck_assert(!ob_ticker_stop(&t));
	ck_assert(!ob_ticker_stop(&t));
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("ticker");
	TCase *tc = tcase_create("ticker");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_passes_at_once_then_every_interval);
	tcase_add_test(tc, test_stop_interrupts_a_long_wait);
	tcase_add_test(tc, test_stop_waits_for_the_pass_in_progress);
	tcase_add_test(tc, test_stop_without_a_thread);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
