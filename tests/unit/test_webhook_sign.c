/*
 * test_webhook_sign.c - the webhook's signatures (consumer/webhook_sign.h):
 * HMAC-SHA256 over "<t>." + body against values computed independently
 * (Python's hmac module), one v1 per secret in the file, and the secret
 * file's rules (bad lines name the file and line, never the secret).
 */
#include <stdio.h>
#include <string.h>

#include "outbox/err.h"
#include "testsupport.h"
#include "webhook_sign.h"

/* python3 -c 'import hmac,hashlib; print(hmac.new(K, b"1700000000.{\"a\":1}",
 * hashlib.sha256).hexdigest())' */
#define HMAC_TEST "ba8ec7f38c4e076a99176a1bf98ae9f2f3f4e18412b46a5913ddcf5685932c6a"
#define HMAC_OTHER "8158ebbfe157973e7eee0a3ff15e6cde397801e98b9911ead6e8593d85708de6"
#define HMAC_EMPTY "ae8ad61e53b52018fdfbf1d009d8dc108412eafa1ac6b03bbbd4afb4b12a3c4e"

START_TEST(test_hmac_matches_an_independent_one)
{
	char hex[65];
	ck_assert_int_eq(webhook_hmac_hex("whsec-test-0123456789", 21, 1700000000, "{\"a\":1}", 7,
	    hex), OB_OK);
	ck_assert_str_eq(hex, HMAC_TEST);
	ck_assert_int_eq(webhook_hmac_hex("whsec-test-0123456789", 21, 1700000000, "", 0, hex),
	    OB_OK);
	ck_assert_str_eq(hex, HMAC_EMPTY);
}
END_TEST

START_TEST(test_header_one_v1_per_secret)
{
	char path[300], err[256], sig[WEBHOOK_SIGNATURE_MAX];
	snprintf(path, sizeof(path), "%s/secrets", ts_tmpdir());
	ts_write_file(path, "# old, then new\nwhsec-test-0123456789\n\nwhsec-other-012345678\n");
	struct webhook_secrets *s = NULL;
	ck_assert_int_eq(webhook_secrets_load(path, &s, err, sizeof(err)), OB_OK);
	ck_assert_int_eq(webhook_secrets_count(s), 2);
	ck_assert_int_eq(webhook_sign(s, 1700000000, "{\"a\":1}", 7, sig, sizeof(sig)), OB_OK);
	ck_assert_str_eq(sig, "t=1700000000,v1=" HMAC_TEST ",v1=" HMAC_OTHER);
	webhook_secrets_free(s);
}
END_TEST

START_TEST(test_bad_secret_files)
{
	char path[300], err[256], longline[400];
	snprintf(path, sizeof(path), "%s/bad-secrets", ts_tmpdir());
	memset(longline, 'x', 300);
	snprintf(longline + 300, sizeof(longline) - 300, "\n");
	const struct {
		const char *text, *says;
	} bad[] = {
		{ "short-secret\n", "line 1: a secret is 16..256" },
		{ "whsec-has a space-0123\n", "line 1: a secret is" },
		{ "# nothing\n\n", "no secret in it" },
		{ "whsec-a-0123456789ab\nwhsec-b-0123456789ab\nwhsec-c-0123456789ab\n"
		  "whsec-d-0123456789ab\nwhsec-e-0123456789ab\n", "line 5: more than 4 secrets" },
		{ longline, "line 1: longer than 256" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct webhook_secrets *s = NULL;
		ts_write_file(path, bad[i].text);
		ck_assert_int_eq(webhook_secrets_load(path, &s, err, sizeof(err)), OB_EINVAL);
		ck_assert_ptr_null(s);
		ck_assert_msg(strstr(err, bad[i].says) != NULL && strstr(err, path) != NULL,
		    "case %zu: %s", i, err);
		ck_assert_msg(strstr(err, "whsec") == NULL && strstr(err, "short-secret") == NULL,
		    "case %zu printed a secret: %s", i, err);
	}
	struct webhook_secrets *s = NULL;
	ck_assert_int_eq(webhook_secrets_load("/nonexistent/secrets", &s, err, sizeof(err)),
	    OB_EINVAL);
	ck_assert(strstr(err, "/nonexistent/secrets") != NULL);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("webhook_sign");
	TCase *tc = tcase_create("sign");
	tcase_add_test(tc, test_hmac_matches_an_independent_one);
	tcase_add_test(tc, test_header_one_v1_per_secret);
	tcase_add_test(tc, test_bad_secret_files);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
