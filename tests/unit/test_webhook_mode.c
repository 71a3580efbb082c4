/*
 * test_webhook_mode.c - the webhook's per-route mode (consumer/
 * webhook_mode.h): --webhook-at-most-once patterns (repeatable and
 * comma-separated, fnmatch), their limits, each refused with one line and
 * nothing kept; which failed calls count as an unknown outcome, libcurl's
 * codes in those terms, and which header values may be sent.
 */
#include <stdio.h>
#include <string.h>

#include <curl/curl.h>

#include "outbox/err.h"
#include "testsupport.h"
#include "webhook_mode.h"

static struct webhook_mode m; /* 16 KiB: not on Check's stack */

START_TEST(test_patterns_match)
{
	char err[256];
	char *items[] = { "notify.*", "pager.urgent,sms" };
	ck_assert_int_eq(webhook_mode_parse(items, 2, &m, err, sizeof(err)), OB_OK);
	ck_assert_int_eq(m.n, 3);
	ck_assert(webhook_mode_at_most_once(&m, "notify.sms"));
	ck_assert(webhook_mode_at_most_once(&m, "pager.urgent"));
	ck_assert(webhook_mode_at_most_once(&m, "sms"));
	ck_assert(!webhook_mode_at_most_once(&m, "report.created"));
	ck_assert(!webhook_mode_at_most_once(&m, "pager.low"));
	ck_assert(!webhook_mode_at_most_once(&m, "xnotify.sms"));
	/* none: at-least-once for every topic */
	ck_assert_int_eq(webhook_mode_parse(NULL, 0, &m, err, sizeof(err)), OB_OK);
	ck_assert_int_eq(m.n, 0);
	ck_assert(!webhook_mode_at_most_once(&m, "notify.sms"));
}
END_TEST

START_TEST(test_bad_patterns_refused)
{
	char err[256], big[WEBHOOK_AMO_PATTERN_MAX + 2], many[WEBHOOK_AMO_PATTERNS_MAX * 3 + 8];
	char *keep[] = { "kept" };
	ck_assert_int_eq(webhook_mode_parse(keep, 1, &m, err, sizeof(err)), OB_OK);
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	size_t len = 0;
	for (int i = 0; i <= WEBHOOK_AMO_PATTERNS_MAX; i++)
		len += (size_t)snprintf(many + len, sizeof(many) - len, "%sp", i ? "," : "");
	static const struct {
		const char *item, *want;
	} cases[] = {
		{ "", "an empty topic pattern" },
		{ "a,,b", "an empty topic pattern" },
		{ "a,", "an empty topic pattern" },
		{ "bad\tpattern", "a control character" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *items[] = { (char *)cases[i].item };
		ck_assert_int_eq(webhook_mode_parse(items, 1, &m, err, sizeof(err)), OB_EINVAL);
		ck_assert_msg(strstr(err, cases[i].want) != NULL, "case %zu: %s", i, err);
		ck_assert_msg(strncmp(err, "--webhook-at-most-once: ", 24) == 0, "%s", err);
	}
	char *items[] = { big };
	ck_assert_int_eq(webhook_mode_parse(items, 1, &m, err, sizeof(err)), OB_EINVAL);
	ck_assert_msg(strstr(err, "at most 255") != NULL, "%s", err);
	big[sizeof(big) - 2] = '\0'; /* exactly the limit */
	char *fits[] = { big };
	char *lots[] = { many };
	ck_assert_int_eq(webhook_mode_parse(lots, 1, &m, err, sizeof(err)), OB_EINVAL);
	ck_assert_msg(strstr(err, "more than 64 patterns") != NULL, "%s", err);
	/* refused: what was there before is kept */
	ck_assert_int_eq(m.n, 1);
	ck_assert_str_eq(m.pat[0], "kept");
	ck_assert_int_eq(webhook_mode_parse(fits, 1, &m, err, sizeof(err)), OB_OK);
	ck_assert_int_eq(m.n, 1);
}
END_TEST

START_TEST(test_outcome_unknown)
{
	/* not sent (refused, DNS, the proxy, a connect that timed out):
	 * certainly not reached */
	ck_assert(!webhook_outcome_unknown(WEBHOOK_HTTP_FAILED, false));
	ck_assert(!webhook_outcome_unknown(WEBHOOK_HTTP_TIMEOUT, false));
	/* a refused TLS handshake sends nothing */
	ck_assert(!webhook_outcome_unknown(WEBHOOK_HTTP_TLS, false));
	/* sent, then lost: may have reached it */
	ck_assert(webhook_outcome_unknown(WEBHOOK_HTTP_TIMEOUT, true));
	ck_assert(webhook_outcome_unknown(WEBHOOK_HTTP_FAILED, true));
	ck_assert(webhook_outcome_unknown(WEBHOOK_HTTP_TLS, true));
	/* answered: known, whatever the status */
	ck_assert(!webhook_outcome_unknown(WEBHOOK_HTTP_ANSWERED, true));
}
END_TEST

/* libcurl's result codes in the transport's terms. */
START_TEST(test_outcome_of)
{
	ck_assert_int_eq(webhook_http_outcome_of(CURLE_OK), WEBHOOK_HTTP_ANSWERED);
	ck_assert_int_eq(webhook_http_outcome_of(CURLE_OPERATION_TIMEDOUT), WEBHOOK_HTTP_TIMEOUT);
	static const CURLcode tls[] = { CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION,
		CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE,
		CURLE_SSL_ISSUER_ERROR, CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_PINNEDPUBKEYNOTMATCH };
	for (size_t i = 0; i < sizeof tls / sizeof tls[0]; i++)
		ck_assert_int_eq(webhook_http_outcome_of(tls[i]), WEBHOOK_HTTP_TLS);
	static const CURLcode failed[] = { CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST,
		CURLE_COULDNT_RESOLVE_PROXY, CURLE_GOT_NOTHING, CURLE_RECV_ERROR, CURLE_SEND_ERROR,
		CURLE_ABORTED_BY_CALLBACK, CURLE_WRITE_ERROR };
	for (size_t i = 0; i < sizeof failed / sizeof failed[0]; i++)
		ck_assert_int_eq(webhook_http_outcome_of(failed[i]), WEBHOOK_HTTP_FAILED);
}
END_TEST

/* Header values: no control characters (a CR or LF would start another
 * header), anything else passes. */
START_TEST(test_header_safe)
{
	ck_assert(webhook_http_header_safe("order-1 \xc3\xa9", 10));
	ck_assert(webhook_http_header_safe("", 0));
	ck_assert(!webhook_http_header_safe("a\r\nX-Evil: 1", 13));
	ck_assert(!webhook_http_header_safe("a\tb", 3));
	ck_assert(!webhook_http_header_safe("a\x7f", 2));
	ck_assert(!webhook_http_header_safe("a\0b", 3));
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("webhook_mode");
	TCase *tc = tcase_create("webhook_mode");
	tcase_add_test(tc, test_patterns_match);
	tcase_add_test(tc, test_bad_patterns_refused);
	tcase_add_test(tc, test_outcome_unknown);
	tcase_add_test(tc, test_outcome_of);
	tcase_add_test(tc, test_header_safe);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
