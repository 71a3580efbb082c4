/*
 * test_buf.c - the growable byte buffer: appends, formatting, big-endian
 * integers, PostgreSQL array elements, and the two promises every caller
 * leans on: always NUL-terminated, unchanged on OB_ENOMEM.
 */
#include <stdint.h>
#include <string.h>

#include "outbox/buf.h"
#include "outbox/err.h"
#include "testsupport.h"

/* len bytes of data equal s, and data[len] is the terminating NUL. */
#define ck_assert_buf(b, s)                                              \
	do {                                                             \
		ck_assert_ptr_nonnull((b)->data);                        \
		ck_assert_uint_eq((b)->len, strlen(s));                  \
		ck_assert_mem_eq((b)->data, (s), strlen(s));             \
		ck_assert_int_eq((b)->data[(b)->len], '\0');             \
		ck_assert_uint_lt((b)->len, (b)->cap);                   \
	} while (0)

START_TEST(test_init_fini)
{
	struct ob_buf b = OB_BUF_INIT;

	ck_assert_ptr_null(b.data);
	ck_assert_uint_eq(b.len, 0);
	ob_buf_fini(&b); /* fini of a never-used buffer is fine */

	ob_buf_init(&b);
	ck_assert_ptr_null(b.data);
	ck_assert_int_eq(ob_buf_puts(&b, "x"), OB_OK);
	ob_buf_fini(&b);
	ck_assert_ptr_null(b.data);
	ck_assert_uint_eq(b.len, 0);
	ck_assert_uint_eq(b.cap, 0);

	/* reusable after fini */
	ck_assert_int_eq(ob_buf_puts(&b, "again"), OB_OK);
	ck_assert_buf(&b, "again");
	ob_buf_fini(&b);
}
END_TEST

START_TEST(test_append)
{
	struct ob_buf b = OB_BUF_INIT;
	char expect[5001];

	/* appending nothing still yields a valid empty C string */
	ck_assert_int_eq(ob_buf_append(&b, NULL, 0), OB_OK);
	ck_assert_buf(&b, "");

	/* grow well past the first allocation, one byte at a time */
	for (int i = 0; i < 5000; i++) {
		char c = (char)('a' + i % 26);

		expect[i] = c;
		ck_assert_int_eq(ob_buf_append(&b, &c, 1), OB_OK);
	}
	expect[5000] = '\0';
	ck_assert_buf(&b, expect);

	/* binary data with embedded NULs */
	ob_buf_reset(&b);
	ck_assert_int_eq(ob_buf_append(&b, "a\0b", 3), OB_OK);
	ck_assert_uint_eq(b.len, 3);
	ck_assert_mem_eq(b.data, "a\0b", 4);
	ob_buf_fini(&b);
}
END_TEST

START_TEST(test_puts)
{
	struct ob_buf b = OB_BUF_INIT;

	ck_assert_int_eq(ob_buf_puts(&b, "hello"), OB_OK);
	ck_assert_int_eq(ob_buf_puts(&b, ""), OB_OK);
	ck_assert_int_eq(ob_buf_puts(&b, ", world"), OB_OK);
	ck_assert_buf(&b, "hello, world");
	ob_buf_fini(&b);
}
END_TEST

START_TEST(test_reset)
{
	struct ob_buf b = OB_BUF_INIT;
	char *data;
	size_t cap;

	ob_buf_reset(&b); /* no memory yet: still fine */
	ck_assert_ptr_null(b.data);

	ck_assert_int_eq(ob_buf_puts(&b, "some text"), OB_OK);
	data = b.data;
	cap = b.cap;
	ob_buf_reset(&b);
	ck_assert_ptr_eq(b.data, data);
	ck_assert_uint_eq(b.cap, cap);
	ck_assert_buf(&b, "");
	ck_assert_int_eq(ob_buf_puts(&b, "new"), OB_OK);
	ck_assert_buf(&b, "new");
	ob_buf_fini(&b);
}
END_TEST

START_TEST(test_reserve)
{
	struct ob_buf b = OB_BUF_INIT;
	char *data;

	ck_assert_int_eq(ob_buf_reserve(&b, 0), OB_OK);
	ck_assert_buf(&b, "");

	ck_assert_int_eq(ob_buf_puts(&b, "abc"), OB_OK);
	ck_assert_int_eq(ob_buf_reserve(&b, 1000), OB_OK);
	ck_assert_uint_ge(b.cap, b.len + 1000 + 1);
	ck_assert_buf(&b, "abc");

	/* after a reserve, appends within it do not move the data */
	data = b.data;
	for (int i = 0; i < 1000; i++)
		ck_assert_int_eq(ob_buf_append(&b, "x", 1), OB_OK);
	ck_assert_ptr_eq(b.data, data);
	ck_assert_uint_eq(b.len, 1003);
	ob_buf_fini(&b);
}
END_TEST

START_TEST(test_enomem_unchanged)
{
	struct ob_buf b = OB_BUF_INIT;
	char *data;
	size_t cap;

	ck_assert_int_eq(ob_buf_puts(&b, "keep me"), OB_OK);
	data = b.data;
	cap = b.cap;

	/* sizes that would wrap are refused before reaching the allocator
	 * (a real huge malloc would abort under ASan's default options) */
	ck_assert_int_eq(ob_buf_reserve(&b, SIZE_MAX), OB_ENOMEM);
	ck_assert_int_eq(ob_buf_reserve(&b, SIZE_MAX - b.len), OB_ENOMEM);
	ck_assert_int_eq(ob_buf_append(&b, "x", SIZE_MAX - 3), OB_ENOMEM);

	ck_assert_ptr_eq(b.data, data);
	ck_assert_uint_eq(b.cap, cap);
	ck_assert_buf(&b, "keep me");

	/* and the buffer still works */
	ck_assert_int_eq(ob_buf_puts(&b, "!"), OB_OK);
	ck_assert_buf(&b, "keep me!");
	ob_buf_fini(&b);
}
END_TEST

START_TEST(test_printf)
{
	struct ob_buf b = OB_BUF_INIT;
	char big[3001];

	ck_assert_int_eq(ob_buf_printf(&b, "id=%d key=%s", 42, "k1"), OB_OK);
	ck_assert_buf(&b, "id=42 key=k1");
	ck_assert_int_eq(ob_buf_printf(&b, "%s", ""), OB_OK);
	ck_assert_buf(&b, "id=42 key=k1");

	/* longer than the spare room: takes the grow-and-retry path */
	memset(big, 'z', 3000);
	big[3000] = '\0';
	ob_buf_reset(&b);
	ck_assert_int_eq(ob_buf_puts(&b, "<"), OB_OK);
	ck_assert_int_eq(ob_buf_printf(&b, "%s>", big), OB_OK);
	ck_assert_uint_eq(b.len, 3002);
	ck_assert_int_eq(b.data[0], '<');
	ck_assert_int_eq(b.data[3000], 'z');
	ck_assert_int_eq(b.data[3001], '>');
	ck_assert_int_eq(b.data[3002], '\0');

	/* exactly filling the spare room */
	ob_buf_fini(&b);
	ck_assert_int_eq(ob_buf_reserve(&b, 0), OB_OK);
	memset(big, 'q', b.cap - 1);
	big[b.cap - 1] = '\0';
	ck_assert_int_eq(ob_buf_printf(&b, "%s", big), OB_OK);
	ck_assert_buf(&b, big);
	ob_buf_fini(&b);
}
END_TEST

START_TEST(test_put_ints)
{
	struct ob_buf b = OB_BUF_INIT;
	static const uint8_t expect[] = {
		0xab,
		0x12, 0x34,
		0xde, 0xad, 0xbe, 0xef,
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	};

	ck_assert_int_eq(ob_buf_put_u8(&b, 0xab), OB_OK);
	ck_assert_int_eq(ob_buf_put_u16(&b, 0x1234), OB_OK);
	ck_assert_int_eq(ob_buf_put_u32(&b, 0xdeadbeefu), OB_OK);
	ck_assert_int_eq(ob_buf_put_u64(&b, 0x0102030405060708ull), OB_OK);
	ck_assert_int_eq(ob_buf_put_u64(&b, UINT64_MAX), OB_OK);
	ck_assert_uint_eq(b.len, sizeof(expect));
	ck_assert_mem_eq(b.data, expect, sizeof(expect));
	ck_assert_int_eq(b.data[b.len], '\0');
	ob_buf_fini(&b);
}
END_TEST

START_TEST(test_pg_array_text)
{
	struct ob_buf b = OB_BUF_INIT;

	ck_assert_int_eq(ob_buf_puts(&b, "{"), OB_OK);
	ck_assert_int_eq(ob_buf_put_pg_array_text(&b, "plain", 5), OB_OK);
	ck_assert_int_eq(ob_buf_puts(&b, ","), OB_OK);
	ck_assert_int_eq(ob_buf_put_pg_array_text(&b, "", 0), OB_OK);
	ck_assert_int_eq(ob_buf_puts(&b, ","), OB_OK);
	ck_assert_int_eq(ob_buf_put_pg_array_text(&b, "a\"b\\c", 5), OB_OK);
	ck_assert_int_eq(ob_buf_puts(&b, ","), OB_OK);
	/* braces, commas, spaces and NULL need no escape inside quotes */
	ck_assert_int_eq(ob_buf_put_pg_array_text(&b, "{x, NULL}", 9), OB_OK);
	ck_assert_int_eq(ob_buf_puts(&b, ","), OB_OK);
	/* only n bytes are used */
	ck_assert_int_eq(ob_buf_put_pg_array_text(&b, "\\\\\"zzz", 3), OB_OK);
	ck_assert_int_eq(ob_buf_puts(&b, "}"), OB_OK);
	ck_assert_buf(&b,
	    "{\"plain\",\"\",\"a\\\"b\\\\c\",\"{x, NULL}\",\"\\\\\\\\\\\"\"}");
	ob_buf_fini(&b);
}
END_TEST

static Suite *
buf_suite(void)
{
	Suite *s = suite_create("buf");
	TCase *tc = tcase_create("buf");

	tcase_add_test(tc, test_init_fini);
	tcase_add_test(tc, test_append);
	tcase_add_test(tc, test_puts);
	tcase_add_test(tc, test_reset);
	tcase_add_test(tc, test_reserve);
	tcase_add_test(tc, test_enomem_unchanged);
	tcase_add_test(tc, test_printf);
	tcase_add_test(tc, test_put_ints);
	tcase_add_test(tc, test_pg_array_text);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return ts_run_suite(buf_suite());
}
