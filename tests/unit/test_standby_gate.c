/*
 * test_standby_gate.c - the standby gate's option checks and its reading
 * of pg_lsn text (relay/standby_gate.c). The gate against real standbys is
 * tests/failover/check_failover.sh.
 */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "outbox/err.h"
#include "standby_gate.h"
#include "testsupport.h"

START_TEST(test_parse_lsn)
{
	static const struct {
		const char *text;
		int rc;
		uint64_t want;
	} cases[] = {
		{ "0/0", OB_OK, 0 },
		{ "0/3000000", OB_OK, 0x3000000 },
		{ "16/B374D848", OB_OK, 0x16B374D848ULL },
		{ "FFFFFFFF/FFFFFFFF", OB_OK, UINT64_MAX },
		{ "", OB_EINVAL, 0 },
		{ "3000000", OB_EINVAL, 0 },
		{ "0/", OB_EINVAL, 0 },
		{ "/0", OB_EINVAL, 0 },
		{ "-1/0", OB_EINVAL, 0 },
		{ "0/-1", OB_EINVAL, 0 },
		{ "100000000/0", OB_EINVAL, 0 },
		{ "0/100000000", OB_EINVAL, 0 },
		{ "0/1x", OB_EINVAL, 0 },
		{ "G/0", OB_EINVAL, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t got = 7;
		int rc = relay_gate_parse_lsn(cases[i].text, &got);
		ck_assert_msg(rc == cases[i].rc, "'%s': rc %d", cases[i].text, rc);
		if (rc == OB_OK)
			ck_assert_msg(got == cases[i].want, "'%s': %llx", cases[i].text,
			    (unsigned long long)got);
		else
			ck_assert_msg(got == 7, "'%s': output written on error", cases[i].text);
	}
	ck_assert_int_eq(relay_gate_parse_lsn(NULL, &(uint64_t){ 0 }), OB_EINVAL);
}
END_TEST

START_TEST(test_init)
{
	struct relay_gate g;
	char err[512];
	char *one[] = { "standby1" };
	char *two[] = { "s1", "s2" };
	char *quote[] = { "s'1" };
	char *comma[] = { "a,b" };
	char *empty[] = { "" };
	char *longname[] = { "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" }; /* 64 */
	char *many[GATE_NAMES_MAX + 1];
	for (int i = 0; i <= GATE_NAMES_MAX; i++)
		many[i] = "s";

	ck_assert_int_eq(relay_gate_init(&g, "none", NULL, 0, 1000, 2, err, sizeof(err)), OB_OK);
	ck_assert_int_eq(g.mode, RELAY_GATE_NONE);
	ck_assert_int_eq(relay_gate_init(&g, "flush", one, 1, 1000, 2, err, sizeof(err)), OB_OK);
	ck_assert_int_eq(g.mode, RELAY_GATE_FLUSH);
	ck_assert_str_eq(g.names, "{standby1}");
	ck_assert_int_eq(relay_gate_init(&g, "replay", two, 2, 1000, 2, err, sizeof(err)), OB_OK);
	ck_assert_int_eq(g.mode, RELAY_GATE_REPLAY);
	ck_assert_str_eq(g.names, "{s1,s2}");

	ck_assert_int_eq(relay_gate_init(&g, "flush", NULL, 0, 1000, 2, err, sizeof(err)),
	    OB_EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "needs --standby-names"));
	ck_assert_int_eq(relay_gate_init(&g, "none", one, 1, 1000, 2, err, sizeof(err)),
	    OB_EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "needs --standby-gate"));
	char **bad[] = { quote, comma, empty, longname };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(relay_gate_init(&g, "flush", bad[i], 1, 1000, 2, err, sizeof(err)),
		    OB_EINVAL);
		ck_assert_ptr_nonnull(strstr(err, "is not a standby name"));
	}
	ck_assert_int_eq(relay_gate_init(&g, "flush", many, GATE_NAMES_MAX + 1, 1000, 2, err,
	    sizeof(err)), OB_EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "at most"));
	ck_assert_int_eq(relay_gate_init(&g, "flush", many, GATE_NAMES_MAX, 1000, 2, err,
	    sizeof(err)), OB_OK);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("standby_gate");
	TCase *tc = tcase_create("gate");
	tcase_add_test(tc, test_parse_lsn);
	tcase_add_test(tc, test_init);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
