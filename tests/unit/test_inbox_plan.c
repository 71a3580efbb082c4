/*
 * test_inbox_plan.c - the consumer's decisions made before any transaction
 * (consumer/inbox_plan.c): a message older than the dedup retention is
 * rejected with its reason and needs no database; every other one is left
 * to apply, with its result reset; the broken no-dedup mode rejects none
 * (it keeps no dedup records, so no retention applies); retention 0 keeps
 * everything.
 */
#include <check.h>
#include <string.h>

#include "inbox.h"
#include "outbox/err.h"
#include "testsupport.h"

#define NOW_US 1800000000000000LL /* a fixed now */
#define MIN_US (60LL * 1000000)

static struct ob_wire_msg
msg(uint64_t id, int64_t age_us)
{
	struct ob_wire_msg m;
	memset(&m, 0, sizeof(m));
	m.id = id;
	m.created_at_us = NOW_US - age_us;
	m.topic = "t";
	m.topic_len = 1;
	m.key = "k";
	m.key_len = 1;
	return m;
}

START_TEST(test_plan_table)
{
	static const struct {
		bool dedup;
		int64_t retention_ms;
		int64_t age_us;
		bool rejected;
	} cases[] = {
		{ true, 3600000, 0, false },
		{ true, 3600000, 59 * MIN_US, false },
		{ true, 3600000, 60 * MIN_US, false },     /* exactly the retention: kept */
		{ true, 3600000, 60 * MIN_US + 1, true },  /* one microsecond older: rejected */
		{ true, 3600000, 10000 * MIN_US, true },
		{ true, 0, 10000 * MIN_US, false },        /* retention 0: never */
		{ false, 3600000, 10000 * MIN_US, false }, /* no dedup: nothing to be too old for */
		{ true, 3600000, -5 * MIN_US, false },     /* from the future (clock skew): kept */
	};
	struct inbox_batch b;
	ck_assert_int_eq(inbox_batch_init(&b, 4), OB_OK);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct inbox_options opt = { cases[i].dedup, NULL, NULL, cases[i].retention_ms, 0, NULL };
		struct ob_wire_msg m[2] = { msg(10, 0), msg(11, cases[i].age_us) };
		struct ob_wire_request req = { 2, m, OB_WIRE_VERSION, NULL, 0 };
		uint32_t left = inbox_plan(&opt, &req, NOW_US, &b);
		ck_assert_msg(left == (cases[i].rejected ? 1u : 2u), "case %zu: %u left", i, left);
		ck_assert(!b.done[0]);
		ck_assert_int_eq(b.results[0].status, OB_WIRE_RETRY); /* until applied */
		ck_assert_uint_eq(b.results[1].id, 11);
		ck_assert_msg(b.done[1] == cases[i].rejected, "case %zu", i);
		if (cases[i].rejected) {
			ck_assert_int_eq(b.results[1].status, OB_WIRE_REJECT);
			ck_assert_int_eq(b.why[1], INBOX_WHY_TOO_OLD);
			ck_assert_str_eq(b.results[1].detail, INBOX_REASON_TOO_OLD);
			ck_assert_uint_eq(b.results[1].detail_len, strlen(INBOX_REASON_TOO_OLD));
		} else {
			ck_assert_int_eq(b.why[1], INBOX_WHY_NONE);
			ck_assert_uint_eq(b.results[1].detail_len, 0);
		}
	}
	inbox_batch_fini(&b);
}
END_TEST

/* A batch scratch reused: a message rejected in one batch is not still
 * marked in the next. */
START_TEST(test_plan_resets)
{
	struct inbox_batch b;
	ck_assert_int_eq(inbox_batch_init(&b, 2), OB_OK);
	struct inbox_options opt = { true, NULL, NULL, 1000, 0, NULL };
	struct ob_wire_msg old[1] = { msg(1, 10000 * MIN_US) };
	struct ob_wire_request r1 = { 1, old, OB_WIRE_VERSION, NULL, 0 };
	ck_assert_uint_eq(inbox_plan(&opt, &r1, NOW_US, &b), 0);
	struct ob_wire_msg young[1] = { msg(2, 0) };
	struct ob_wire_request r2 = { 1, young, OB_WIRE_VERSION, NULL, 0 };
	ck_assert_uint_eq(inbox_plan(&opt, &r2, NOW_US, &b), 1);
	ck_assert(!b.done[0]);
	ck_assert_int_eq(b.why[0], INBOX_WHY_NONE);
	ck_assert_str_eq(b.details[0], "");
	inbox_batch_fini(&b);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("inbox_plan");
	TCase *tc = tcase_create("plan");
	tcase_add_test(tc, test_plan_table);
	tcase_add_test(tc, test_plan_resets);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
