/*
 * retry_after.c - Retry-After as a delay (see retry_after.h). Only the
 * digits of delta-seconds are read here; the date goes to strptime and
 * timegm, never to a parser of our own.
 */
#include <ctype.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "outbox/err.h"
#include "retry_after.h"

/* IMF-fixdate, RFC 9110 5.6.7; strptime reads the names in the C locale
 * (the consumer never calls setlocale). */
#define IMF_FIXDATE "%a, %d %b %Y %H:%M:%S GMT"

static bool
blank(char c)
{
	return c == ' ' || c == '\t';
}

/* s[0..n) is 1*DIGIT: its seconds as ms, saturated at cap_ms. */
static bool
delta_seconds(const char *s, size_t n, int64_t cap_ms, int64_t *ms)
{
	int64_t v = 0;

	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return false;
		if (v <= cap_ms) /* past the cap: keep reading digits, stay there */
			v = v * 10 + (s[i] - '0');
	}
	/* v is at most 10 * (cap_ms + 1) + 9, far from overflow; in ms: */
	*ms = v > cap_ms / 1000 ? cap_ms : v * 1000;
	return true;
}

static bool
http_date(const char *s, size_t n, int64_t now_s, int64_t cap_ms, int64_t *ms)
{
	char buf[64];
	struct tm tm;

	if (n == 0 || n >= sizeof(buf))
		return false;
	memcpy(buf, s, n);
	buf[n] = '\0';
	memset(&tm, 0, sizeof(tm));
	const char *end = strptime(buf, IMF_FIXDATE, &tm);
	if (end == NULL || *end != '\0')
		return false;
	time_t t = timegm(&tm);
	if (t == (time_t)-1)
		return false;
	int64_t d = (int64_t)t - now_s;
	*ms = d <= 0 ? 0 : d > cap_ms / 1000 ? cap_ms : d * 1000;
	return true;
}

int
webhook_retry_after_parse(const char *value, int64_t now_s, int64_t cap_ms,
    int64_t *ms)
{
	int64_t v;

	if (value == NULL || ms == NULL || cap_ms < 0 || cap_ms > WEBHOOK_RETRY_AFTER_CEILING_MS)
		return OB_EINVAL;
	size_t b = 0, e = strlen(value);
	while (b < e && blank(value[b]))
		b++;
	while (e > b && blank(value[e - 1]))
		e--;
	if (!delta_seconds(value + b, e - b, cap_ms, &v) &&
	    !http_date(value + b, e - b, now_s, cap_ms, &v))
		return OB_EINVAL;
	*ms = v;
	return OB_OK;
}
