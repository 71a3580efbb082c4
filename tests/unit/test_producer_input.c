/*
 * test_producer_input.c - what the producer API accepts before anything is
 * stored: the Idempotency-Key header (bare or quoted, printable ASCII,
 * 1..255 bytes), its stored form under a token's scope, the report body
 * (every field checked and named), the canonical fingerprint input, and
 * the client's derived keys; the body of POST /v1/messages, its outbox
 * key per scope, a token's topic patterns.
 */
#include <stdio.h>
#include <string.h>

#include "auth.h"
#include "client.h"
#include "message_input.h"
#include "outbox/err.h"
#include "report_input.h"
#include "testsupport.h"

START_TEST(test_key_header)
{
	static const struct {
		const char *in, *want; /* want NULL = refused */
	} cases[] = {
		{ "abc", "abc" },
		{ "8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324" },
		{ "\"quoted key\"", "quoted key" },
		{ "\"a\\\"b\\\\c\"", "a\"b\\c" },
		{ "run-1:toolu_01", "run-1:toolu_01" },
		{ "", NULL },
		{ "\"\"", NULL },
		{ "\"unterminated", NULL },
		{ "\"bad\\escape\"", NULL },
		{ "\"x\"trailing", NULL },
		{ "a\tb", NULL },
		{ "a\x01" "b", NULL },
		{ "caf\xc3\xa9", NULL },
	};
	char out[PRODUCER_KEY_MAX + 1], err[256];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = report_parse_key(cases[i].in, out, sizeof(out), err, sizeof(err));
		if (cases[i].want == NULL) {
			ck_assert_msg(rc == OB_EINVAL, "case %zu accepted", i);
		} else {
			ck_assert_msg(rc == OB_OK, "case %zu: %s", i, err);
			ck_assert_str_eq(out, cases[i].want);
		}
	}
	char longkey[PRODUCER_KEY_MAX + 2];
	memset(longkey, 'k', sizeof(longkey) - 1);
	longkey[PRODUCER_KEY_MAX] = '\0';
	ck_assert_int_eq(report_parse_key(longkey, out, sizeof(out), err, sizeof(err)), OB_OK);
	longkey[PRODUCER_KEY_MAX] = 'k';
	longkey[PRODUCER_KEY_MAX + 1] = '\0';
	ck_assert_int_eq(report_parse_key(longkey, out, sizeof(out), err, sizeof(err)), OB_EINVAL);
	ck_assert(strstr(err, "256 bytes") != NULL);
}
END_TEST

/* The default scope stores a key as sent; a named scope as SCOPE 0x1f KEY,
 * a byte no client key can hold, so no two (scope, key) pairs meet; the
 * scope's name counts against the 255 bytes. */
START_TEST(test_scoped_key)
{
	char out[PRODUCER_KEY_MAX + 1], err[256], key[PRODUCER_KEY_MAX + 1];
	ck_assert_int_eq(report_scoped_key(NULL, "k1", out, sizeof(out), err, sizeof(err)), OB_OK);
	ck_assert_str_eq(out, "k1");
	ck_assert_int_eq(report_scoped_key("", "k1", out, sizeof(out), err, sizeof(err)), OB_OK);
	ck_assert_str_eq(out, "k1");
	ck_assert_int_eq(report_scoped_key("alpha", "k1", out, sizeof(out), err, sizeof(err)),
	    OB_OK);
	ck_assert_str_eq(out, "alpha\x1f" "k1");
	/* The stored form is no client's key: refused as a header. */
	char stored[PRODUCER_KEY_MAX + 1];
	ck_assert_int_eq(report_parse_key(out, stored, sizeof(stored), err, sizeof(err)),
	    OB_EINVAL);
	/* "a" + "b:c" and "a:b" + "c" must differ whatever the separator looks like. */
	ck_assert_int_eq(report_scoped_key("a", "b-c", out, sizeof(out), err, sizeof(err)), OB_OK);
	ck_assert_int_eq(report_scoped_key("a-b", "c", stored, sizeof(stored), err, sizeof(err)),
	    OB_OK);
	ck_assert_str_ne(out, stored);

	memset(key, 'k', PRODUCER_KEY_MAX - 6);
	key[PRODUCER_KEY_MAX - 6] = '\0'; /* 249 = 255 - strlen("alpha") - 1 */
	ck_assert_int_eq(report_scoped_key("alpha", key, out, sizeof(out), err, sizeof(err)),
	    OB_OK);
	ck_assert_uint_eq(strlen(out), PRODUCER_KEY_MAX);
	strcat(key, "k");
	ck_assert_int_eq(report_scoped_key("alpha", key, out, sizeof(out), err, sizeof(err)),
	    OB_EINVAL);
	ck_assert_msg(strstr(err, "250 bytes") != NULL && strstr(err, "maximum is 249") != NULL,
	    "%s", err);
	memset(key, 'k', PRODUCER_KEY_MAX);
	key[PRODUCER_KEY_MAX] = '\0';
	ck_assert_int_eq(report_scoped_key("", key, out, sizeof(out), err, sizeof(err)), OB_OK);
}
END_TEST

START_TEST(test_body_fields)
{
	static const struct {
		const char *body, *field; /* field NULL = accepted */
	} cases[] = {
		{ "{\"title\":\"t\",\"module\":\"m\",\"severity\":\"low\"}", NULL },
		{ "{\"title\":\"t\",\"module\":\"m\",\"severity\":\"critical\",\"steps\":\"\"}", NULL },
		{ "{\"module\":\"m\",\"severity\":\"low\"}", "'title'" },
		{ "{\"title\":\"t\",\"severity\":\"low\"}", "'module'" },
		{ "{\"title\":\"t\",\"module\":\"m\"}", "'severity'" },
		{ "{\"title\":5,\"module\":\"m\",\"severity\":\"low\"}", "'title'" },
		{ "{\"title\":\"t\",\"module\":\"m\",\"severity\":\"urgent\"}", "'severity'" },
		{ "{\"title\":\"t\",\"module\":\"m\",\"severity\":\"low\",\"steps\":[1]}", "'steps'" },
		{ "{\"title\":\"\",\"module\":\"m\",\"severity\":\"low\"}", "'title'" },
		{ "{\"title\":\"t\",\"module\":\"m\",\"severity\":\"low\",\"titel\":\"x\"}", "'titel'" },
		{ "{\"title\":\"t\",\"title\":\"u\",\"module\":\"m\",\"severity\":\"low\"}", "JSON" },
		{ "[1,2]", "object" },
		{ "{\"title\":", "JSON" },
		{ "", "JSON" },
	};
	char err[256];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct report_input in;
		int rc = report_parse_body(cases[i].body, strlen(cases[i].body), &in, err, sizeof(err));
		if (cases[i].field == NULL) {
			ck_assert_msg(rc == OB_OK, "case %zu: %s", i, err);
			report_input_fini(&in);
		} else {
			ck_assert_msg(rc == OB_EINVAL, "case %zu accepted", i);
			ck_assert_msg(strstr(err, cases[i].field) != NULL, "case %zu: '%s' lacks %s", i,
			    err, cases[i].field);
		}
	}
}
END_TEST

START_TEST(test_body_limits_count_characters)
{
	/* 200 two-byte characters are a valid title; 201 are not. */
	char body[1024], title[512];
	char err[256];
	struct report_input in;
	for (int n = 200; n <= 201; n++) {
		title[0] = '\0';
		for (int i = 0; i < n; i++)
			strcat(title, "\xc3\xa9");
		snprintf(body, sizeof(body), "{\"title\":\"%s\",\"module\":\"m\",\"severity\":\"low\"}",
		    title);
		int rc = report_parse_body(body, strlen(body), &in, err, sizeof(err));
		ck_assert_int_eq(rc, n == 200 ? OB_OK : OB_EINVAL);
		if (rc == OB_OK)
			report_input_fini(&in);
	}
}
END_TEST

START_TEST(test_canonical_fingerprint)
{
	const char *a = "{\"title\":\"t\",\"module\":\"m\",\"severity\":\"low\"}";
	const char *b = " { \"severity\" : \"low\",\n \"module\":\"m\", \"title\":\"t\" } ";
	const char *c = "{\"title\":\"T\",\"module\":\"m\",\"severity\":\"low\"}";
	struct report_input ia, ib, ic;
	char err[256];
	ck_assert_int_eq(report_parse_body(a, strlen(a), &ia, err, sizeof(err)), OB_OK);
	ck_assert_int_eq(report_parse_body(b, strlen(b), &ib, err, sizeof(err)), OB_OK);
	ck_assert_int_eq(report_parse_body(c, strlen(c), &ic, err, sizeof(err)), OB_OK);
	ck_assert_str_eq(ia.canonical, ib.canonical);
	ck_assert_str_ne(ia.canonical, ic.canonical);
	ck_assert_str_eq(ia.canonical, "{\"module\":\"m\",\"severity\":\"low\",\"title\":\"t\"}");
	report_input_fini(&ia);
	report_input_fini(&ib);
	report_input_fini(&ic);
}
END_TEST

START_TEST(test_client_keys)
{
	char k1[256], k2[256], k3[256], err[256];
	struct client_opts o = { .title = "Crash on save", .module = "Editor",
		.key_source = CLIENT_KEY_CONTENT, .run = "run-42" };
	ck_assert_int_eq(client_derive_key(&o, k1, sizeof(k1), err, sizeof(err)), OB_OK);
	o.title = "  crash   ON save ";
	o.module = "editor";
	ck_assert_int_eq(client_derive_key(&o, k2, sizeof(k2), err, sizeof(err)), OB_OK);
	ck_assert_str_eq(k1, k2); /* normalized: same logical report */
	o.title = "Editor crashes when saving";
	ck_assert_int_eq(client_derive_key(&o, k3, sizeof(k3), err, sizeof(err)), OB_OK);
	ck_assert_str_ne(k1, k3); /* reworded: a different key (the article's last column) */
	o.run = NULL;
	ck_assert_int_eq(client_derive_key(&o, k3, sizeof(k3), err, sizeof(err)), OB_EINVAL);

	struct client_opts t = { .key_source = CLIENT_KEY_TOOL_CALL, .key = "run-42:toolu_01" };
	ck_assert_int_eq(client_derive_key(&t, k1, sizeof(k1), err, sizeof(err)), OB_OK);
	ck_assert_str_eq(k1, "run-42:toolu_01");
	t.key = "no-colon";
	ck_assert_int_eq(client_derive_key(&t, k1, sizeof(k1), err, sizeof(err)), OB_EINVAL);
	t.key = ":toolu_01";
	ck_assert_int_eq(client_derive_key(&t, k1, sizeof(k1), err, sizeof(err)), OB_EINVAL);
	struct client_opts f = { .key_source = CLIENT_KEY_FIXED, .key = "bad\tkey" };
	ck_assert_int_eq(client_derive_key(&f, k1, sizeof(k1), err, sizeof(err)), OB_EINVAL);
}
END_TEST

/* POST /v1/messages' body (message_input.h): the canonical fingerprint
 * does not depend on member order or a null ordering key; the outbox key
 * of each scope; the topic patterns of a token. */
START_TEST(test_message_input)
{
	struct message_input a, b;
	char err[256], k[256];
	const char *one = "{\"topic\":\"n.e\",\"payload\":{\"b\":1,\"a\":2}}";
	ck_assert_int_eq(message_parse_body(one, strlen(one), &a, err, sizeof(err)), OB_OK);
	const char *other = "{\"payload\":{\"a\":2,\"b\":1},\"ordering_key\":null,\"topic\":\"n.e\"}";
	ck_assert_int_eq(message_parse_body(other, strlen(other), &b, err, sizeof(err)), OB_OK);
	ck_assert_str_eq(a.canonical, b.canonical);
	ck_assert_str_eq(a.topic, "n.e");
	ck_assert_ptr_null(a.ordering_key);
	ck_assert_str_eq(a.payload, "{\"b\":1,\"a\":2}");
	message_input_fini(&a);
	message_input_fini(&b);
	static const char *const bad[] = { "", "[]", "{\"topic\":1,\"payload\":{}}",
		"{\"topic\":\"t\",\"payload\":1}", "{\"topic\":\"t\\u0001\",\"payload\":{}}",
		"{\"topic\":\"t\",\"payload\":{},\"x\":1}" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_msg(message_parse_body(bad[i], strlen(bad[i]), &a, err, sizeof(err)) ==
		    OB_EINVAL, "accepted %s", bad[i]);

	ck_assert_int_eq(message_outbox_key("", "k-1", k, sizeof(k), err, sizeof(err)), OB_OK);
	ck_assert_str_eq(k, "k-1");
	ck_assert_int_eq(message_outbox_key("alpha", "k-1", k, sizeof(k), err, sizeof(err)), OB_OK);
	ck_assert_str_eq(k, "~alpha/k-1");
	ck_assert_int_eq(message_outbox_key(NULL, "~x/k", k, sizeof(k), err, sizeof(err)), OB_EINVAL);
	char longkey[256];
	memset(longkey, 'k', 249);
	longkey[249] = '\0'; /* 2 + 5 + 249 = 256 > 255 */
	ck_assert_int_eq(message_outbox_key("alpha", longkey, k, sizeof(k), err, sizeof(err)),
	    OB_EINVAL);
	longkey[248] = '\0';
	ck_assert_int_eq(message_outbox_key("alpha", longkey, k, sizeof(k), err, sizeof(err)), OB_OK);

	ck_assert(producer_topic_allowed(NULL, "anything"));
	ck_assert(producer_topic_allowed("notify.*,alerts.pager", "notify.email"));
	ck_assert(producer_topic_allowed("notify.*,alerts.pager", "alerts.pager"));
	ck_assert(!producer_topic_allowed("notify.*,alerts.pager", "alerts.pager.x"));
	ck_assert(!producer_topic_allowed("notify.*,alerts.pager", "billing"));
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("producer_input");
	TCase *tc = tcase_create("input");
	tcase_add_test(tc, test_key_header);
	tcase_add_test(tc, test_scoped_key);
	tcase_add_test(tc, test_body_fields);
	tcase_add_test(tc, test_body_limits_count_characters);
	tcase_add_test(tc, test_canonical_fingerprint);
	tcase_add_test(tc, test_client_keys);
	tcase_add_test(tc, test_message_input);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
