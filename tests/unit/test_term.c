/*
 * test_term.c - ob_term_escape (common/term.c): every byte a terminal
 * could act on comes out as a visible escape, valid UTF-8 comes out as it
 * went in, and a cut never splits an escape or a character.
 */
#include <stdio.h>
#include <string.h>

#include "outbox/term.h"
#include "testsupport.h"

struct tcase {
	const char *in;
	unsigned flags;
	const char *want;
};

static const struct tcase cases[] = {
	{ "", 0, "" },
	{ "report-8f3e", 0, "report-8f3e" },
	{ "a\x1b[2Jb", 0, "a\\x1b[2Jb" },
	{ "\x1b]0;owned\x07", 0, "\\x1b]0;owned\\x07" },
	{ "x\x01\x1f\x7fy", 0, "x\\x01\\x1f\\x7fy" },
	{ "tab\tnl\ncr\r", 0, "tab\\tnl\\ncr\\r" },
	{ "tab\tnl\ncr\r", OB_TERM_MULTILINE, "tab\tnl\ncr\\r" },
	{ "a\\x1b", 0, "a\\\\x1b" },
	{ "{\"a\": \"\\u001b\"}\n\x7f", OB_TERM_MULTILINE | OB_TERM_RAW_BACKSLASH,
	    "{\"a\": \"\\u001b\"}\n\\x7f" },
	/* valid UTF-8 stays */
	{ "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 0, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80" },
	/* C1 controls (CSI U+009B) and bidi overrides are escaped */
	{ "a\xc2\x9b" "2Jb", 0, "a\\u009b2Jb" },
	{ "\xc2\x85", 0, "\\u0085" },
	{ "abc\xe2\x80\xae" "def", 0, "abc\\u202edef" },
	{ "\xe2\x81\xa6x\xe2\x81\xa9", 0, "\\u2066x\\u2069" },
	/* not UTF-8: each bad byte */
	{ "\xff\xfe", 0, "\\xff\\xfe" },
	{ "a\xc3", 0, "a\\xc3" },
	{ "\xc3(", 0, "\\xc3(" },
	{ "\xc0\xaf", 0, "\\xc0\\xaf" },          /* overlong '/' */
	{ "\xe0\x80\xaf", 0, "\\xe0\\x80\\xaf" },  /* overlong, 3 bytes */
	{ "\xed\xa0\x80", 0, "\\xed\\xa0\\x80" },  /* a surrogate */
	{ "\xf4\x90\x80\x80", 0, "\\xf4\\x90\\x80\\x80" }, /* past U+10FFFF */
	{ "\x80", 0, "\\x80" },
	{ "\xe2\x82", 0, "\\xe2\\x82" },
};

START_TEST(test_escape_table)
{
	const struct tcase *c = &cases[_i];
	char out[128];
	size_t n = ob_term_escape(out, sizeof out, c->in, c->flags);

	ck_assert_msg(strcmp(out, c->want) == 0, "case %d: <%s>, want <%s>", _i, out, c->want);
	ck_assert_uint_eq(n, strlen(c->want));
	ck_assert_msg(strchr(out, '\x1b') == NULL, "case %d", _i);
}
END_TEST

/* A cut stops before the unit that does not fit; the return says how long
 * the whole is; outlen 0 writes nothing (a size query). */
START_TEST(test_escape_cut)
{
	char out[16];

	memset(out, 'Z', sizeof out);
	ck_assert_uint_eq(ob_term_escape(out, 4, "ab\x1b", 0), 6);
	ck_assert_str_eq(out, "ab"); /* not "ab\x" */
	ck_assert_uint_eq(ob_term_escape(out, 3, "a\xe2\x82\xac", 0), 4);
	ck_assert_str_eq(out, "a"); /* not half a euro sign */
	ck_assert_uint_eq(ob_term_escape(out, 5, "a\xe2\x82\xac", 0), 4);
	ck_assert_str_eq(out, "a\xe2\x82\xac");
	out[0] = 'Z';
	ck_assert_uint_eq(ob_term_escape(out, 0, "\x1b", 0), 4);
	ck_assert_int_eq(out[0], 'Z');
	ck_assert_uint_eq(ob_term_escape(NULL, 0, "abc", 0), 3);
	ck_assert_uint_eq(ob_term_escape(out, sizeof out, NULL, 0), 0);
	ck_assert_str_eq(out, "");
}
END_TEST

/* Every byte value alone: the output is printable ASCII or valid UTF-8,
 * never a control byte. */
START_TEST(test_escape_every_byte)
{
	for (int b = 1; b < 256; b++) {
		char in[2] = { (char)b, 0 }, out[16];
		ob_term_escape(out, sizeof out, in, 0);
		for (const unsigned char *p = (const unsigned char *)out; *p; p++)
			ck_assert_msg(*p >= 0x20 && *p < 0x7f, "byte 0x%02x gave 0x%02x", b, *p);
	}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("term");
	TCase *tc = tcase_create("term");
	tcase_add_loop_test(tc, test_escape_table, 0, (int)(sizeof cases / sizeof cases[0]));
	tcase_add_test(tc, test_escape_cut);
	tcase_add_test(tc, test_escape_every_byte);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
