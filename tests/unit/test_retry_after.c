/*
 * test_retry_after.c - a downstream's Retry-After as a delay
 * (consumer/retry_after.c): delta-seconds, IMF-fixdate, the cap, dates in
 * the past, and garbage, table-driven from tests/data/retry-after/cases.txt.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/err.h"
#include "retry_after.h"
#include "testsupport.h"

START_TEST(test_cases)
{
	const char *dir = getenv("OUTBOX_TEST_DATA");
	char path[4096], line[512];
	int ncases = 0, ninvalid = 0;

	ck_assert_msg(dir != NULL, "OUTBOX_TEST_DATA not set");
	snprintf(path, sizeof(path), "%s/retry-after/cases.txt", dir);
	FILE *f = fopen(path, "r");
	ck_assert_msg(f != NULL, "cannot open %s", path);
	for (int lineno = 1; fgets(line, sizeof(line), f) != NULL; lineno++) {
		long long cap, now;
		char want[32];
		int off = 0;

		if (line[0] == '#' || line[0] == '\n')
			continue;
		line[strcspn(line, "\n")] = '\0';
		ck_assert_msg(sscanf(line, "%lld | %lld | %31s |%n", &cap, &now, want, &off) == 3 &&
		    off > 0, "line %d: bad case: %s", lineno, line);
		const char *value = line + off;
		if (value[0] == ' ') /* the one blank after '|' is the separator's */
			value++;
		if (strcmp(value, "<empty>") == 0)
			value = "";

		int64_t ms = -12345;
		int rc = webhook_retry_after_parse(value, now, cap, &ms);
		if (strcmp(want, "invalid") == 0) {
			ck_assert_msg(rc == OB_EINVAL, "line %d: \"%s\": got %s (%lld ms), want invalid",
			    lineno, value, ob_err_name(rc), (long long)ms);
			ck_assert_msg(ms == -12345, "line %d: *ms written on failure", lineno);
			ninvalid++;
		} else {
			ck_assert_msg(rc == OB_OK, "line %d: \"%s\": got %s, want %s ms", lineno, value,
			    ob_err_name(rc), want);
			ck_assert_msg(ms == atoll(want), "line %d: \"%s\": got %lld ms, want %s",
			    lineno, value, (long long)ms, want);
		}
		ncases++;
	}
	fclose(f);
	ck_assert_int_ge(ncases, 40);
	ck_assert_int_ge(ninvalid, 15);
}
END_TEST

START_TEST(test_bad_args)
{
	int64_t ms = 7;
	ck_assert_int_eq(webhook_retry_after_parse(NULL, 0, 1000, &ms), OB_EINVAL);
	ck_assert_int_eq(webhook_retry_after_parse("3", 0, 1000, NULL), OB_EINVAL);
	ck_assert_int_eq(ms, 7);
	/* a value longer than any date: still read as digits, refused as a date */
	char longv[300];
	memset(longv, '9', sizeof(longv) - 1);
	longv[sizeof(longv) - 1] = '\0';
	ck_assert_int_eq(webhook_retry_after_parse(longv, 0, 1000, &ms), OB_OK);
	ck_assert_int_eq(ms, 1000);
	longv[10] = 'x';
	ck_assert_int_eq(webhook_retry_after_parse(longv, 0, 1000, &ms), OB_EINVAL);
}
END_TEST

static Suite *
retry_after_suite(void)
{
	Suite *s = suite_create("retry_after");
	TCase *tc = tcase_create("retry_after");
	tcase_add_test(tc, test_cases);
	tcase_add_test(tc, test_bad_args);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return ts_run_suite(retry_after_suite());
}
