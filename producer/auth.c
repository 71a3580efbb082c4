/*
 * auth.c - bearer tokens for the producer API (see auth.h).
 *
 * Constant time: the presented token is copied into a zero-padded buffer
 * of PRODUCER_TOKEN_MAX bytes and compared with EVERY configured token
 * over all PRODUCER_TOKEN_MAX bytes (and its length), the differences
 * OR-ed together, with no early exit; so the time does not depend on
 * which token matched, how long a prefix matched, or whether any did.
 * Never: log, print or keep a copy of a token beyond this struct (wiped
 * on free).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "auth.h"
#include "outbox/err.h"

struct producer_tokens {
	int n;
	size_t len[PRODUCER_TOKENS_MAX];
	unsigned char tok[PRODUCER_TOKENS_MAX][PRODUCER_TOKEN_MAX];
};

static bool
token_chars_ok(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			return false;
	return true;
}

/* Wipe memory the compiler must not optimise away. */
static void
wipe(void *p, size_t n)
{
	volatile unsigned char *v = p;
	while (n-- > 0)
		*v++ = 0;
}

int
producer_tokens_load(const char *path, struct producer_tokens **out, char *err,
    size_t errlen)
{
	char line[PRODUCER_TOKEN_MAX + 64];
	int lineno = 0, rc = OB_EINVAL;
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		snprintf(err, errlen, "--api-token-file %s: %s", path, strerror(errno));
		return OB_EINVAL;
	}
	struct producer_tokens *t = calloc(1, sizeof(*t));
	if (t == NULL) {
		fclose(f);
		snprintf(err, errlen, "out of memory");
		return OB_ENOMEM;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		lineno++;
		size_t n = strlen(line);
		if (n == sizeof(line) - 1 && line[n - 1] != '\n') {
			snprintf(err, errlen, "--api-token-file %s line %d: longer than %d characters",
			    path, lineno, PRODUCER_TOKEN_MAX);
			goto out;
		}
		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' ' ||
		    line[n - 1] == '\t'))
			line[--n] = '\0';
		if (n == 0 || line[0] == '#')
			continue;
		if (n < PRODUCER_TOKEN_MIN || n > PRODUCER_TOKEN_MAX || !token_chars_ok(line, n)) {
			snprintf(err, errlen, "--api-token-file %s line %d: a token is %d..%d printable"
			    " ASCII characters without spaces", path, lineno, PRODUCER_TOKEN_MIN,
			    PRODUCER_TOKEN_MAX);
			goto out;
		}
		if (t->n == PRODUCER_TOKENS_MAX) {
			snprintf(err, errlen, "--api-token-file %s: more than %d tokens", path,
			    PRODUCER_TOKENS_MAX);
			goto out;
		}
		memcpy(t->tok[t->n], line, n);
		t->len[t->n] = n;
		t->n++;
	}
	if (ferror(f)) {
		snprintf(err, errlen, "--api-token-file %s: %s", path, strerror(errno));
		goto out;
	}
	if (t->n == 0) {
		snprintf(err, errlen, "--api-token-file %s: no token in it", path);
		goto out;
	}
	*out = t;
	t = NULL;
	rc = OB_OK;
out:
	wipe(line, sizeof(line));
	fclose(f);
	producer_tokens_free(t);
	return rc;
}

int
producer_tokens_count(const struct producer_tokens *t)
{
	return t != NULL ? t->n : 0;
}

enum producer_auth
producer_tokens_check(const struct producer_tokens *t, const char *authorization)
{
	unsigned char given[PRODUCER_TOKEN_MAX];
	if (authorization == NULL || strncasecmp(authorization, "Bearer ", 7) != 0)
		return PRODUCER_AUTH_MISSING;
	const char *p = authorization + 7;
	while (*p == ' ')
		p++;
	size_t n = strlen(p);
	while (n > 0 && p[n - 1] == ' ')
		n--;
	/* Too long to be any token: still compared (as a different length),
	 * so that the time says nothing. */
	size_t copy = n < sizeof(given) ? n : sizeof(given);
	memset(given, 0, sizeof(given));
	memcpy(given, p, copy);
	unsigned match = 0;
	for (int i = 0; i < t->n; i++) {
		unsigned diff = (unsigned)(t->len[i] ^ n);
		for (size_t j = 0; j < PRODUCER_TOKEN_MAX; j++)
			diff |= (unsigned)(t->tok[i][j] ^ given[j]);
		/* 1 when diff == 0, without a branch */
		match |= 1u & ((diff - 1u) >> (sizeof(diff) * 8 - 1)) & ~(diff >> (sizeof(diff) * 8 - 1));
	}
	wipe(given, sizeof(given));
	return match ? PRODUCER_AUTH_OK : PRODUCER_AUTH_INVALID;
}

void
producer_tokens_free(struct producer_tokens *t)
{
	if (t == NULL)
		return;
	wipe(t, sizeof(*t));
	free(t);
}
