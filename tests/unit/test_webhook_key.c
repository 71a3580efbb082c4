/*
 * test_webhook_key.c - the webhook's key from (source, topic, key)
 * (common/webhook_key.c): the key alone for the source "", else
 * SOURCE/TOPIC/KEY with '%' and '/' of the topic escaped, so that no two
 * identities give one key; the longest identity fits OB_WEBHOOK_KEY_MAX.
 */
#include <string.h>

#include "testsupport.h"
#include "outbox/webhook_key.h"

static void
key_of(const char *source, const char *topic, const char *key, char *out)
{
	struct ob_wire_msg m = { 0 };
	m.source = source[0] ? source : NULL;
	m.source_len = (uint8_t)strlen(source);
	m.topic = topic;
	m.topic_len = (uint16_t)strlen(topic);
	m.key = key;
	m.key_len = (uint16_t)strlen(key);
	ob_webhook_key_of(&m, out);
}

START_TEST(test_forms)
{
	char k[OB_WEBHOOK_KEY_MAX], l[OB_WEBHOOK_KEY_MAX];
	key_of("", "orders", "order-42", k);
	ck_assert_str_eq(k, "order-42"); /* as before sources existed */
	key_of("shop-a", "orders", "order-42", k);
	ck_assert_str_eq(k, "shop-a/orders/order-42");
	key_of("shop-b", "orders", "order-42", l);
	ck_assert_str_ne(k, l);
	/* a '/' in the topic or the key cannot move the split */
	key_of("s", "a/b", "c", k);
	key_of("s", "a", "b/c", l);
	ck_assert_str_eq(k, "s/a%2Fb/c");
	ck_assert_str_eq(l, "s/a/b/c");
	key_of("s", "50%", "k", k);
	ck_assert_str_eq(k, "s/50%25/k");
	key_of("s", "a%2Fb", "c", l); /* the escape itself is escaped */
	ck_assert_str_eq(l, "s/a%252Fb/c");
}
END_TEST

START_TEST(test_longest_fits)
{
	char source[OB_WIRE_MAX_SOURCE + 1], topic[OB_WIRE_MAX_TOPIC + 1], key[OB_WIRE_MAX_KEY + 1];
	memset(source, 's', OB_WIRE_MAX_SOURCE);
	source[OB_WIRE_MAX_SOURCE] = '\0';
	memset(topic, '/', OB_WIRE_MAX_TOPIC);
	topic[OB_WIRE_MAX_TOPIC] = '\0';
	memset(key, 'k', OB_WIRE_MAX_KEY);
	key[OB_WIRE_MAX_KEY] = '\0';
	char out[OB_WEBHOOK_KEY_MAX + 1];
	out[OB_WEBHOOK_KEY_MAX] = 'X'; /* a canary one past the bound */
	key_of(source, topic, key, out);
	ck_assert_uint_eq(strlen(out), OB_WEBHOOK_KEY_MAX - 1);
	ck_assert_int_eq(out[OB_WEBHOOK_KEY_MAX], 'X');
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("webhook_key");
	TCase *tc = tcase_create("key");
	tcase_add_test(tc, test_forms);
	tcase_add_test(tc, test_longest_fits);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
