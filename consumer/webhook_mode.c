/*
 * webhook_mode.c - the webhook handler's per-route mode (see
 * webhook_mode.h): the topic patterns of --webhook-at-most-once, and
 * whether a failed call may have reached the downstream (the call itself,
 * and whether its request went out, is webhook_http.c's).
 */
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

#include "outbox/err.h"
#include "webhook_mode.h"

static int
add_pattern(struct webhook_mode *m, const char *p, size_t len, char *err, size_t errlen)
{
	if (len == 0) {
		snprintf(err, errlen, "--webhook-at-most-once: an empty topic pattern");
		return OB_EINVAL;
	}
	if (len > WEBHOOK_AMO_PATTERN_MAX) {
		snprintf(err, errlen, "--webhook-at-most-once: a pattern of %zu bytes (at most %d)",
		    len, WEBHOOK_AMO_PATTERN_MAX);
		return OB_EINVAL;
	}
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f) {
			snprintf(err, errlen, "--webhook-at-most-once: a control character in a"
			    " pattern");
			return OB_EINVAL;
		}
	if (m->n == WEBHOOK_AMO_PATTERNS_MAX) {
		snprintf(err, errlen, "--webhook-at-most-once: more than %d patterns",
		    WEBHOOK_AMO_PATTERNS_MAX);
		return OB_EINVAL;
	}
	memcpy(m->pat[m->n], p, len);
	m->pat[m->n][len] = '\0';
	m->n++;
	return OB_OK;
}

int
webhook_mode_parse(char *const *items, size_t n, struct webhook_mode *out, char *err,
    size_t errlen)
{
	struct webhook_mode m; /* 16 KiB, once at start */
	memset(&m, 0, sizeof(m));
	for (size_t i = 0; i < n; i++) {
		const char *p = items[i];
		for (;;) {
			size_t len = strcspn(p, ",");
			if (add_pattern(&m, p, len, err, errlen) != OB_OK)
				return OB_EINVAL;
			if (p[len] == '\0')
				break;
			p += len + 1;
		}
	}
	*out = m;
	return OB_OK;
}

bool
webhook_mode_at_most_once(const struct webhook_mode *m, const char *topic)
{
	for (int i = 0; i < m->n; i++)
		if (fnmatch(m->pat[i], topic, 0) == 0)
			return true;
	return false;
}

bool
webhook_outcome_unknown(enum webhook_http_outcome outcome, bool sent)
{
	return outcome != WEBHOOK_HTTP_ANSWERED && sent;
}
