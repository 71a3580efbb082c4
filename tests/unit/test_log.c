/*
 * test_log.c - log lines as written to fd 2: the text and JSON formats,
 * level filtering before formatting, ob_log_q quoting, truncation of long
 * lines, and the pid refresh after fork.
 */
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "outbox/err.h"
#include "outbox/log.h"
#include "testsupport.h"

#define TS_RE "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z"

static FILE *cap_file;
static int saved_fd2 = -1;
static char out[16384];

/* Send fd 2 to a temp file until capture_end. */
static void
capture_begin(void)
{
	cap_file = tmpfile();
	ck_assert_ptr_nonnull(cap_file);
	saved_fd2 = dup(STDERR_FILENO);
	ck_assert_int_ge(saved_fd2, 0);
	ck_assert_int_ge(dup2(fileno(cap_file), STDERR_FILENO), 0);
}

/* Restore fd 2 and return what was written, NUL-terminated, in out. */
static size_t
capture_end(void)
{
	size_t n;

	dup2(saved_fd2, STDERR_FILENO);
	close(saved_fd2);
	rewind(cap_file);
	n = fread(out, 1, sizeof out - 1, cap_file);
	out[n] = '\0';
	fclose(cap_file);
	return n;
}

static void
assert_matches(const char *s, const char *re)
{
	regex_t rx;

	ck_assert_int_eq(regcomp(&rx, re, REG_EXTENDED | REG_NOSUB), 0);
	int rc = regexec(&rx, s, 0, NULL, 0);
	regfree(&rx);
	ck_assert_msg(rc == 0, "'%s' does not match '%s'", s, re);
}

static size_t
count_char(const char *s, char c)
{
	size_t n = 0;
	for (; *s; s++)
		n += *s == c;
	return n;
}

/* A flat JSON object of string and integer members, one line. Enough to
 * prove a cut line is still well-formed. */
static bool
json_flat_ok(const char *s)
{
	if (*s++ != '{')
		return false;
	for (bool firstm = true;; firstm = false) {
		if (*s == '}')
			return !firstm && strcmp(s, "}\n") == 0;
		if (!firstm && *s++ != ',')
			return false;
		for (int part = 0; part < 2; part++) {
			if (part == 1 && *s != '"') { /* integer value */
				if (*s < '0' || *s > '9')
					return false;
				while (*s >= '0' && *s <= '9')
					s++;
				break;
			}
			if (*s++ != '"')
				return false;
			while (*s != '"') {
				if ((unsigned char)*s < 0x20)
					return false;
				if (*s == '\\') {
					s++;
					if (*s == 'u') {
						for (int i = 1; i <= 4; i++)
							if (!strchr("0123456789abcdef", s[i]) || !s[i])
								return false;
						s += 4;
					} else if (!strchr("\"\\/bfnrt", *s) || !*s) {
						return false;
					}
				}
				s++;
			}
			s++;
			if (part == 0 && *s++ != ':')
				return false;
		}
	}
}

START_TEST(test_text_line)
{
	char re[512];

	ob_log_init("outbox-relay", OB_LOG_INFO, OB_LOG_TEXT);
	capture_begin();
	ob_info("relay.claim", "n=%d fence=%d", 5, 9);
	capture_end();
	snprintf(re, sizeof re, "^" TS_RE " level=info prog=outbox-relay "
	    "pid=%ld event=relay.claim n=5 fence=9\n$", (long)getpid());
	assert_matches(out, re);
}
END_TEST

START_TEST(test_text_levels_and_empty_fmt)
{
	ob_log_init("p", OB_LOG_DEBUG, OB_LOG_TEXT);
	capture_begin();
	ob_debug("a.b", "%s", "");
	ob_warn("c.d", "x=1");
	ob_error("e.f", "y=2");
	capture_end();
	assert_matches(out, "^" TS_RE " level=debug prog=p pid=[0-9]+ "
	    "event=a.b\n" TS_RE " level=warn prog=p pid=[0-9]+ event=c.d x=1\n"
	    TS_RE " level=error prog=p pid=[0-9]+ event=e.f y=2\n$");
}
END_TEST

START_TEST(test_text_no_raw_newlines)
{
	ob_log_init("p", OB_LOG_INFO, OB_LOG_TEXT);
	capture_begin();
	ob_info("e", "msg=%s", "a\nb\rc");
	capture_end();
	ck_assert_uint_eq(count_char(out, '\n'), 1);
	ck_assert_ptr_nonnull(strstr(out, " event=e msg=a b c\n"));
}
END_TEST

START_TEST(test_json_line)
{
	char re[512];

	ob_log_init("outbox-relay", OB_LOG_INFO, OB_LOG_JSON);
	capture_begin();
	ob_info("relay.claim", "n=%d fence=%d", 5, 9);
	capture_end();
	snprintf(re, sizeof re, "^\\{\"ts\":\"" TS_RE "\",\"level\":\"info\","
	    "\"prog\":\"outbox-relay\",\"pid\":%ld,\"event\":\"relay.claim\","
	    "\"n\":\"5\",\"fence\":\"9\"\\}\n$", (long)getpid());
	assert_matches(out, re);
	ck_assert(json_flat_ok(out));
}
END_TEST

START_TEST(test_json_values)
{
	char q[128];
	const char *want =
	    ",\"event\":\"e\",\"k\":\"a \\\"b\\\"\\\\c\\n\\t\\u0001\","
	    "\"msg\":\"hello  world\",\"n\":\"1\",\"msg\":\"quoted msg\","
	    "\"u\":\"h\xc3\xa9\",\"eq\":\"a=b\",\"empty\":\"\"}\n";

	ob_log_init("p", OB_LOG_INFO, OB_LOG_JSON);
	capture_begin();
	ob_info("e", "k=%s hello  world n=1 %s u=h\xc3\xa9 eq=a=b empty=",
	    ob_log_q("a \"b\"\\c\n\t\x01", q, sizeof q),
	    "\"quoted msg\"");
	capture_end();
	ck_assert_msg(strstr(out, want) != NULL, "got %s", out);
	ck_assert(json_flat_ok(out));
}
END_TEST

START_TEST(test_json_escapes_prog_event)
{
	ob_log_init("a\"b", OB_LOG_INFO, OB_LOG_JSON);
	capture_begin();
	ob_info("x\\y", "%s", "");
	capture_end();
	ck_assert_ptr_nonnull(strstr(out, "\"prog\":\"a\\\"b\""));
	ck_assert_ptr_nonnull(strstr(out, "\"event\":\"x\\\\y\"}\n"));
	ck_assert(json_flat_ok(out));
}
END_TEST

static int calls;

static int
counted(void)
{
	calls++;
	return 7;
}

START_TEST(test_level_filter)
{
	ob_log_init("p", OB_LOG_WARN, OB_LOG_TEXT);
	ck_assert_int_eq(ob_log_min_level, OB_LOG_WARN);
	calls = 0;
	capture_begin();
	ob_debug("d", "n=%d", counted());
	ob_info("i", "n=%d", counted());
	ob_log_event(OB_LOG_INFO, "direct", "n=1"); /* checks the level too */
	ck_assert_int_eq(calls, 0);
	ck_assert_uint_eq(capture_end(), 0);

	capture_begin();
	ob_warn("w", "n=%d", counted());
	ob_error("e", "n=%d", counted());
	capture_end();
	ck_assert_int_eq(calls, 2);
	ck_assert_uint_eq(count_char(out, '\n'), 2);
	ck_assert_ptr_nonnull(strstr(out, "level=warn prog=p"));
	ck_assert_ptr_nonnull(strstr(out, "event=w n=7\n"));
	ck_assert_ptr_nonnull(strstr(out, "level=error prog=p"));

	ob_log_min_level = OB_LOG_ERROR; /* the global is what the macros read */
	capture_begin();
	ob_warn("w", "n=%d", counted());
	ck_assert_uint_eq(capture_end(), 0);
	ck_assert_int_eq(calls, 2);
}
END_TEST

START_TEST(test_level_format_parse)
{
	static const char *const names[] = { "debug", "info", "warn", "error" };
	enum ob_log_level l;
	enum ob_log_format f;

	for (int i = 0; i < 4; i++) {
		l = (enum ob_log_level)-1;
		ck_assert_int_eq(ob_log_level_parse(names[i], &l), OB_OK);
		ck_assert_int_eq(l, i);
	}
	l = OB_LOG_ERROR;
	ck_assert_int_eq(ob_log_level_parse("WARN", &l), OB_EINVAL);
	ck_assert_int_eq(ob_log_level_parse("warning", &l), OB_EINVAL);
	ck_assert_int_eq(ob_log_level_parse("", &l), OB_EINVAL);
	ck_assert_int_eq(ob_log_level_parse(NULL, &l), OB_EINVAL);
	ck_assert_int_eq(l, OB_LOG_ERROR); /* untouched on error */

	ck_assert_int_eq(ob_log_format_parse("json", &f), OB_OK);
	ck_assert_int_eq(f, OB_LOG_JSON);
	ck_assert_int_eq(ob_log_format_parse("text", &f), OB_OK);
	ck_assert_int_eq(f, OB_LOG_TEXT);
	f = OB_LOG_JSON;
	ck_assert_int_eq(ob_log_format_parse("xml", &f), OB_EINVAL);
	ck_assert_int_eq(f, OB_LOG_JSON);
}
END_TEST

START_TEST(test_q)
{
	static const struct {
		const char *in, *want;
	} quoted[] = {
		{ "", "\"\"" },
		{ "a b", "\"a b\"" },
		{ "a=b", "\"a=b\"" },
		{ "a\"b", "\"a\\\"b\"" },
		{ "a\\b", "\"a\\\\b\"" },
		{ "\n\t\r\x01\x7f", "\"\\n\\t\\r\\x01\\x7f\"" },
	};
	char buf[64];

	/* no quoting needed: the same pointer comes back */
	const char *plain = "relay.claim-9/x:y,h\xc3\xa9";
	ck_assert_ptr_eq(ob_log_q(plain, buf, sizeof buf), plain);
	for (size_t i = 0; i < sizeof quoted / sizeof quoted[0]; i++) {
		memset(buf, 'Z', sizeof buf);
		const char *r = ob_log_q(quoted[i].in, buf, sizeof buf);
		ck_assert_ptr_eq(r, buf);
		ck_assert_str_eq(r, quoted[i].want);
	}
	ck_assert_str_eq(ob_log_q(NULL, buf, sizeof buf), "\"\"");
}
END_TEST

START_TEST(test_q_truncates)
{
	char buf[16];

	memset(buf, 'Z', sizeof buf);
	ck_assert_str_eq(ob_log_q("hello world", buf, 8), "\"he...\"");
	ck_assert_int_eq(buf[8], 'Z'); /* nothing past buflen */
	/* exactly fits: no ellipsis */
	ck_assert_str_eq(ob_log_q("hello world", buf, 14), "\"hello world\"");
	ck_assert_str_eq(ob_log_q("hello world", buf, 13), "\"hello w...\"");
	/* an escape sequence is never split */
	ck_assert_str_eq(ob_log_q("\n\n\n\n", buf, 8), "\"\\n...\"");
	ck_assert_str_eq(ob_log_q("\x01\x01", buf, 8), "\"...\"");
	ck_assert_str_eq(ob_log_q("a b", buf, 3), "\"\"");
	ck_assert_str_eq(ob_log_q("a b", buf, 1), "");
	ck_assert_str_eq(ob_log_q("a b", NULL, 0), "");
}
END_TEST

START_TEST(test_truncate_text)
{
	static char big[10000];

	memset(big, 'a', sizeof big - 1);
	ob_log_init("p", OB_LOG_INFO, OB_LOG_TEXT);
	capture_begin();
	ob_info("e", "big=%s tail=1", big);
	size_t n = capture_end();
	ck_assert_uint_eq(n, 4096);
	ck_assert_uint_eq(count_char(out, '\n'), 1);
	ck_assert_str_eq(out + n - 5, "a...\n");
	ck_assert_ptr_null(strstr(out, "tail"));
}
END_TEST

START_TEST(test_truncate_json_value)
{
	static char big[10000];

	memset(big, 'a', sizeof big - 1);
	ob_log_init("p", OB_LOG_INFO, OB_LOG_JSON);
	capture_begin();
	ob_info("e", "first=1 big=%s tail=1", big);
	size_t n = capture_end();
	ck_assert_uint_le(n, 4096);
	ck_assert_uint_gt(n, 4000);
	ck_assert_uint_eq(count_char(out, '\n'), 1);
	ck_assert_str_eq(out + n - 7, "a...\"}\n");
	ck_assert_ptr_nonnull(strstr(out, "\"first\":\"1\",\"big\":\"aaa"));
	ck_assert(json_flat_ok(out));
}
END_TEST

START_TEST(test_truncate_json_escapes)
{
	static char big[3000];
	char q[8192];

	/* each control byte becomes 4 in the text and 6 in JSON */
	memset(big, '\x01', sizeof big - 1);
	ob_log_init("p", OB_LOG_INFO, OB_LOG_JSON);
	capture_begin();
	ob_info("e", "v=%s", ob_log_q(big, q, sizeof q));
	size_t n = capture_end();
	ck_assert_uint_le(n, 4096);
	ck_assert_uint_gt(n, 4000);
	ck_assert_str_eq(out + n - 12, "\\u0001...\"}\n");
	ck_assert(json_flat_ok(out));
}
END_TEST

START_TEST(test_truncate_json_members)
{
	static const char key[] = "a_rather_long_key_name_for_this_test_";
	char body[4096], *last;
	size_t len = 0, n;

	/* many members with long keys: the cut lands in a key, which is
	 * dropped whole, never emitted half-written */
	while (len + sizeof key + 8 < sizeof body)
		len += (size_t)snprintf(body + len, sizeof body - len,
		    "%s%03zu=v ", key, len % 1000);
	ob_log_init("p", OB_LOG_INFO, OB_LOG_JSON);
	capture_begin();
	ob_info("e", "%s", body);
	n = capture_end();
	ck_assert_uint_le(n, 4096);
	ck_assert_uint_gt(n, 3900);
	ck_assert_uint_eq(count_char(out, '\n'), 1);
	ck_assert_msg(json_flat_ok(out), "bad json: %s", out + n - 64);
	ck_assert_str_eq(out + n - 6, "...\"}\n");
	last = strrchr(out, ',');
	ck_assert_ptr_nonnull(last);
	ck_assert_msg(strncmp(last + 2, key, sizeof key - 1) == 0 &&
	    last[2 + sizeof key - 1 + 3] == '"', "last member: %s", last);
}
END_TEST

START_TEST(test_set_pid_after_fork)
{
	char re[512];
	pid_t child;
	int status;

	ob_log_init("p", OB_LOG_INFO, OB_LOG_TEXT);
	capture_begin();
	fflush(NULL);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		ob_info("before", "%s", ""); /* still the cached parent pid */
		ob_log_set_pid();
		ob_info("after", "%s", "");
		_exit(0);
	}
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	capture_end();
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	snprintf(re, sizeof re, "^" TS_RE " level=info prog=p pid=%ld "
	    "event=before\n" TS_RE " level=info prog=p pid=%ld event=after\n$",
	    (long)getpid(), (long)child);
	assert_matches(out, re);
}
END_TEST

START_TEST(test_errno_kept)
{
	ob_log_init("p", OB_LOG_INFO, OB_LOG_TEXT);
	capture_begin();
	errno = ERANGE;
	ob_info("e", "n=1");
	ck_assert_int_eq(errno, ERANGE);
	capture_end();
	ck_assert_uint_eq(count_char(out, '\n'), 1);
}
END_TEST

START_TEST(test_one_write_per_line)
{
	/* Two processes logging long lines into one pipe: every line arrives
	 * whole, never interleaved with the other's. */
	static char all[1 << 21];
	pid_t kids[2];
	size_t len = 0;
	ssize_t r;
	int fds[2];

	ob_log_init("p", OB_LOG_INFO, OB_LOG_TEXT);
	ck_assert_int_eq(pipe(fds), 0);
	fflush(NULL);
	for (int k = 0; k < 2; k++) {
		kids[k] = fork();
		ck_assert_int_ge(kids[k], 0);
		if (kids[k] == 0) {
			dup2(fds[1], STDERR_FILENO);
			close(fds[0]);
			ob_log_set_pid();
			for (int i = 0; i < 200; i++)
				ob_info("kid", "k=%d i=%d pad=%03000d", k, i, 0);
			_exit(0);
		}
	}
	close(fds[1]);
	while ((r = read(fds[0], all + len, sizeof all - 1 - len)) > 0)
		len += (size_t)r;
	close(fds[0]);
	for (int k = 0; k < 2; k++)
		waitpid(kids[k], NULL, 0);
	all[len] = '\0';
	ck_assert_uint_eq(count_char(all, '\n'), 400);
	for (char *line = all, *nl; (nl = strchr(line, '\n')) != NULL;
	    line = nl + 1) {
		*nl = '\0';
		assert_matches(line, "^" TS_RE " level=info prog=p pid=[0-9]+ "
		    "event=kid k=[01] i=[0-9]+ pad=0+$");
		ck_assert_uint_ge(strlen(line), 3000);
	}
}
END_TEST

static Suite *
log_suite(void)
{
	Suite *s = suite_create("log");
	TCase *tc = tcase_create("log");

	tcase_add_test(tc, test_text_line);
	tcase_add_test(tc, test_text_levels_and_empty_fmt);
	tcase_add_test(tc, test_text_no_raw_newlines);
	tcase_add_test(tc, test_json_line);
	tcase_add_test(tc, test_json_values);
	tcase_add_test(tc, test_json_escapes_prog_event);
	tcase_add_test(tc, test_level_filter);
	tcase_add_test(tc, test_level_format_parse);
	tcase_add_test(tc, test_q);
	tcase_add_test(tc, test_q_truncates);
	tcase_add_test(tc, test_truncate_text);
	tcase_add_test(tc, test_truncate_json_value);
	tcase_add_test(tc, test_truncate_json_escapes);
	tcase_add_test(tc, test_truncate_json_members);
	tcase_add_test(tc, test_set_pid_after_fork);
	tcase_add_test(tc, test_errno_kept);
	tcase_add_test(tc, test_one_write_per_line);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return ts_run_suite(log_suite());
}
