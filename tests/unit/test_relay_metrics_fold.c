/*
 * test_relay_metrics_fold.c - the relay's metrics bookkeeping without
 * processes: the supervisor's fold of the workers' live rows (in flight,
 * ready, the breaker rule), a dead worker's row cleared, the per-topic
 * handle cache past its size, a registry that overflows with topics, and
 * the destination limit.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "metrics.h"
#include "outbox/err.h"
#include "testsupport.h"

static struct relay_worker_live live[3];

static struct relay_metrics
setup(int ndests)
{
	static char urls[RELAY_METRICS_MAX_DESTS + 8][32];
	static const char *ptrs[RELAY_METRICS_MAX_DESTS + 8];
	for (int i = 0; i < ndests; i++) {
		snprintf(urls[i], sizeof(urls[i]), "tcp://h:%d", 1000 + i);
		ptrs[i] = urls[i];
	}
	struct relay_metrics rm;
	ck_assert_int_eq(relay_metrics_init(&rm, ptrs, ndests), OB_OK);
	memset(live, 0, sizeof(live));
	return rm;
}

START_TEST(test_fold_inflight_ready)
{
	struct relay_metrics rm = setup(1);
	relay_metrics_fold(&rm, live, 3);
	ck_assert(ob_metric_value(rm.inflight) == 0);
	ck_assert(!ob_metrics_ready(rm.reg));
	atomic_store(&live[0].inflight, 3);
	atomic_store(&live[2].inflight, 4);
	atomic_store(&live[2].connected, 1);
	relay_metrics_fold(&rm, live, 3);
	ck_assert(ob_metric_value(rm.inflight) == 7);
	ck_assert(ob_metrics_ready(rm.reg));
	/* Worker 2 dies mid-flight: its claims leave the gauge, and it no
	 * longer makes the relay ready. */
	relay_metrics_worker_gone(&live[2]);
	relay_metrics_fold(&rm, live, 3);
	ck_assert(ob_metric_value(rm.inflight) == 3);
	ck_assert(!ob_metrics_ready(rm.reg));
	relay_metrics_fini(&rm);
}
END_TEST

START_TEST(test_fold_breaker_rule)
{
	struct relay_metrics rm = setup(2);
	ck_assert_int_eq(rm.ndests, 2);
	struct relay_breaker_live *a = &live[0].breakers[1], *b = &live[1].breakers[1];
	/* Worker 0 opens on a failure at t=100: open. */
	atomic_store(&a->open, 1);
	atomic_store(&a->fail_ms, 100);
	relay_metrics_fold(&rm, live, 3);
	ck_assert(ob_metric_value(rm.breaker_open[1]) == 1);
	ck_assert(ob_metric_value(rm.breaker_open[0]) == 0);
	/* Worker 1 gets a reply at t=200: closed, though worker 0's idle
	 * breaker is still open. */
	atomic_store(&b->ok_ms, 200);
	relay_metrics_fold(&rm, live, 3);
	ck_assert(ob_metric_value(rm.breaker_open[1]) == 0);
	/* Worker 0's probe fails at t=300: open again. */
	atomic_store(&a->fail_ms, 300);
	relay_metrics_fold(&rm, live, 3);
	ck_assert(ob_metric_value(rm.breaker_open[1]) == 1);
	/* Worker 0 dies: nothing open any more. */
	relay_metrics_worker_gone(&live[0]);
	relay_metrics_fold(&rm, live, 3);
	ck_assert(ob_metric_value(rm.breaker_open[1]) == 0);
	relay_metrics_fini(&rm);
}
END_TEST

START_TEST(test_topic_cache_and_overflow)
{
	struct relay_metrics rm = setup(1);
	static struct relay_topic_cache cache;
	memset(&cache, 0, sizeof(cache));
	/* More topics than the cache holds: evicted ones come back to the
	 * same series. */
	char t[32];
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < OB_TOPIC_CACHE * 2; i++) {
			snprintf(t, sizeof(t), "topic-%d", i);
			ob_metric_inc(relay_metrics_topic(&rm, &cache, t, strlen(t))->delivered);
		}
	snprintf(t, sizeof(t), "topic-%d", 3);
	struct relay_topic_metrics *e = relay_metrics_topic(&rm, &cache, t, strlen(t));
	ck_assert(ob_metric_value(e->delivered) == 2);
	ck_assert_uint_eq(ob_metrics_dropped(rm.reg), 0);
	/* Far more topics than the registry holds: dropped and counted,
	 * never a crash; the static series keep working. */
	for (int i = 0; i < RELAY_METRICS_CAPACITY; i++) {
		snprintf(t, sizeof(t), "many-%d", i);
		struct relay_topic_metrics *m = relay_metrics_topic(&rm, &cache, t, strlen(t));
		ob_metric_inc(m->delivered);
		ob_metric_inc(m->dead);
	}
	ck_assert_uint_gt(ob_metrics_dropped(rm.reg), 0);
	ob_metric_inc(rm.claimed);
	ck_assert(ob_metric_value(rm.claimed) == 1);
	relay_metrics_fini(&rm);
}
END_TEST

START_TEST(test_destination_limit)
{
	struct relay_metrics rm = setup(RELAY_METRICS_MAX_DESTS + 5);
	ck_assert_int_eq(rm.ndests, RELAY_METRICS_MAX_DESTS);
	ck_assert_ptr_nonnull(rm.breaker_open[RELAY_METRICS_MAX_DESTS - 1]);
	relay_metrics_fini(&rm);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("relay_metrics_fold");
	TCase *tc = tcase_create("fold");
	tcase_add_test(tc, test_fold_inflight_ready);
	tcase_add_test(tc, test_fold_breaker_rule);
	tcase_add_test(tc, test_topic_cache_and_overflow);
	tcase_add_test(tc, test_destination_limit);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
