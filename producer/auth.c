/*
 * auth.c - bearer tokens for the producer API (see auth.h).
 *
 * Constant time: the presented token is copied into a zero-padded buffer
 * of PRODUCER_TOKEN_MAX bytes and compared with EVERY configured token
 * over all PRODUCER_TOKEN_MAX bytes (and its length), the differences
 * OR-ed together, with no early exit; so the time does not depend on
 * which token matched, how long a prefix matched, or whether any did.
 * The matching token's scope is picked the same way: every token's scope
 * index is AND-ed with its match mask (all ones or zero) and OR-ed in, so
 * the scope costs no branch either. That needs at most one token to
 * match: the same token in two scopes is refused at load.
 * Never: log, print or keep a copy of a token beyond this struct (wiped
 * on free).
 */
#include <fnmatch.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "auth.h"
#include "outbox/err.h"
#include "outbox/secret_file.h"

struct producer_tokens {
	int n;
	size_t len[PRODUCER_TOKENS_MAX];
	unsigned char tok[PRODUCER_TOKENS_MAX][PRODUCER_TOKEN_MAX];
	unsigned scope_of[PRODUCER_TOKENS_MAX]; /* index into scope[] */
	int line[PRODUCER_TOKENS_MAX];          /* of the file, for errors */
	char topics[PRODUCER_TOKENS_MAX][PRODUCER_TOPICS_MAX + 1]; /* "" = any */
	int nscopes;                            /* scope[0] is "", the default */
	char scope[PRODUCER_TOKENS_MAX + 1][PRODUCER_SCOPE_MAX + 1];
};

static bool
token_chars_ok(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			return false;
	return true;
}

static bool
scope_name_ok(const char *s, size_t n)
{
	if (n == 0 || n > PRODUCER_SCOPE_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
		        s[i] == '-'))
			return false;
	return true;
}

/* The index of scope name[0..n) in t, added when new (n == 0: the default). */
static unsigned
scope_index(struct producer_tokens *t, const char *name, size_t n)
{
	for (int i = 0; i < t->nscopes; i++)
		if (strlen(t->scope[i]) == n && memcmp(t->scope[i], name, n) == 0)
			return (unsigned)i;
	/* at most one new scope per token, and t->n < PRODUCER_TOKENS_MAX */
	memcpy(t->scope[t->nscopes], name, n);
	t->scope[t->nscopes][n] = '\0';
	return (unsigned)t->nscopes++;
}

int
producer_tokens_load(const char *path, struct producer_tokens **out, char *err,
    size_t errlen)
{
	static const char prefix[] = PRODUCER_SCOPE_PREFIX;
	char line[PRODUCER_TOKEN_LINE_MAX + 2]; /* + '\n' + NUL */
	int len, rc = OB_EINVAL;
	struct ob_secret_file sf;
	struct producer_tokens *t;
	int opened = ob_secret_file_open(&sf, "--api-token-file", path, PRODUCER_TOKEN_LINE_MAX,
	    "\r\n \t", sizeof(*t), (void **)&t, err, errlen);
	if (opened != OB_OK)
		return opened;
	t->nscopes = 1; /* the default scope, "" */
	while ((len = ob_secret_file_next(&sf, line, sizeof(line), err, errlen)) > 0) {
		int lineno = sf.lineno;
		/* `scope=NAME TOKEN` or `TOKEN` */
		const char *tok = line, *name = "";
		size_t nlen = 0;
		if (strncmp(line, prefix, sizeof(prefix) - 1) == 0) {
			name = line + sizeof(prefix) - 1;
			nlen = strcspn(name, " \t");
			if (!scope_name_ok(name, nlen)) {
				snprintf(err, errlen, "--api-token-file %s line %d: a scope name (%s"
				    "NAME TOKEN) is 1..%d characters of a-z, 0-9, '_' and '-'", path,
				    lineno, PRODUCER_SCOPE_PREFIX, PRODUCER_SCOPE_MAX);
				goto out;
			}
			tok = name + nlen + strspn(name + nlen, " \t");
			if (*tok == '\0') {
				snprintf(err, errlen, "--api-token-file %s line %d: no token after the"
				    " scope name (%sNAME TOKEN)", path, lineno, PRODUCER_SCOPE_PREFIX);
				goto out;
			}
		}
		/* then `topics=P1,P2` (optional) */
		const char *topics = "";
		size_t toplen = 0;
		if (strncmp(tok, PRODUCER_TOPICS_PREFIX, sizeof(PRODUCER_TOPICS_PREFIX) - 1) == 0) {
			topics = tok + sizeof(PRODUCER_TOPICS_PREFIX) - 1;
			toplen = strcspn(topics, " \t");
			bool ok = toplen > 0 && toplen <= PRODUCER_TOPICS_MAX;
			for (size_t i = 0; ok && i < toplen; i++)
				ok = topics[i] > 0x20 && topics[i] < 0x7f &&
				    !(topics[i] == ',' && (i == 0 || i + 1 == toplen || topics[i + 1] == ','));
			if (!ok) {
				snprintf(err, errlen, "--api-token-file %s line %d: a topic list (%sP1,P2"
				    " TOKEN) is 1..%d printable characters, patterns separated by single"
				    " commas", path, lineno, PRODUCER_TOPICS_PREFIX, PRODUCER_TOPICS_MAX);
				goto out;
			}
			tok = topics + toplen + strspn(topics + toplen, " \t");
			if (*tok == '\0') {
				snprintf(err, errlen, "--api-token-file %s line %d: no token after the"
				    " topic list", path, lineno);
				goto out;
			}
		}
		size_t tlen = strlen(tok);
		if (tlen < PRODUCER_TOKEN_MIN || tlen > PRODUCER_TOKEN_MAX ||
		    !token_chars_ok(tok, tlen)) {
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
		unsigned scope = scope_index(t, name, nlen);
		for (int i = 0; i < t->n; i++) {
			/* At load, not per request: no need for constant time. */
			if (t->len[i] == tlen && memcmp(t->tok[i], tok, tlen) == 0 &&
			    t->scope_of[i] != scope) {
				snprintf(err, errlen, "--api-token-file %s line %d: the same token as line"
				    " %d, in another scope (a token names one scope)", path, lineno,
				    t->line[i]);
				goto out;
			}
		}
		memcpy(t->tok[t->n], tok, tlen);
		t->len[t->n] = tlen;
		memcpy(t->topics[t->n], topics, toplen);
		t->topics[t->n][toplen] = '\0';
		t->scope_of[t->n] = scope;
		t->line[t->n] = lineno;
		t->n++;
	}
	if (len < 0)
		goto out;
	if (t->n == 0) {
		snprintf(err, errlen, "--api-token-file %s: no token in it", path);
		goto out;
	}
	*out = t;
	t = NULL;
	rc = OB_OK;
out:
	ob_secret_file_close(&sf, line, sizeof(line));
	producer_tokens_free(t);
	return rc;
}

int
producer_tokens_count(const struct producer_tokens *t)
{
	return t != NULL ? t->n : 0;
}

int
producer_tokens_scopes(const struct producer_tokens *t)
{
	return t != NULL ? t->nscopes - 1 : 0;
}

enum producer_auth
producer_tokens_check(const struct producer_tokens *t, const char *authorization,
    const char **scope, const char **topics)
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
	unsigned match = 0, which = 0, tok_index = 0;
	for (int i = 0; i < t->n; i++) {
		unsigned diff = (unsigned)(t->len[i] ^ n);
		for (size_t j = 0; j < PRODUCER_TOKEN_MAX; j++)
			diff |= (unsigned)(t->tok[i][j] ^ given[j]);
		/* 1 when diff == 0, without a branch */
		unsigned m = 1u & ((diff - 1u) >> (sizeof(diff) * 8 - 1)) &
		    ~(diff >> (sizeof(diff) * 8 - 1));
		match |= m;
		which |= t->scope_of[i] & (0u - m); /* this token's scope, if it matched */
		tok_index |= (unsigned)i & (0u - m);
	}
	explicit_bzero(given, sizeof(given));
	if (!match)
		return PRODUCER_AUTH_INVALID;
	if (scope != NULL)
		*scope = t->scope[which];
	if (topics != NULL)
		*topics = t->topics[tok_index][0] != '\0' ? t->topics[tok_index] : NULL;
	return PRODUCER_AUTH_OK;
}

bool
producer_topic_allowed(const char *topics, const char *topic)
{
	if (topics == NULL)
		return true;
	char pat[PRODUCER_TOPICS_MAX + 1];
	for (const char *p = topics; *p != '\0';) {
		size_t n = strcspn(p, ",");
		memcpy(pat, p, n);
		pat[n] = '\0';
		if (fnmatch(pat, topic, 0) == 0)
			return true;
		p += n + (p[n] == ',');
	}
	return false;
}

int
producer_token_read(const char *path, char *out, size_t outlen, char *err, size_t errlen)
{
	struct producer_tokens *t;
	int rc = producer_tokens_load(path, &t, err, errlen);
	if (rc != OB_OK)
		return rc;
	if (t->n != 1 || t->len[0] + 1 > outlen) {
		snprintf(err, errlen, "--api-token-file %s: holds %d tokens; a client sends one",
		    path, t->n);
		producer_tokens_free(t);
		return OB_EINVAL;
	}
	memcpy(out, t->tok[0], t->len[0]);
	out[t->len[0]] = '\0';
	producer_tokens_free(t);
	return OB_OK;
}

int
producer_token_flag(const char *path, char *buf, size_t buflen, const char **token, char *err,
    size_t errlen)
{
	if (path == NULL || path[0] == '\0') {
		*token = NULL;
		return OB_OK;
	}
	int rc = producer_token_read(path, buf, buflen, err, errlen);
	if (rc == OB_OK)
		*token = buf;
	return rc;
}

void
producer_tokens_free(struct producer_tokens *t)
{
	ob_secret_free(t, sizeof(*t));
}
