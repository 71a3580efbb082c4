/*
 * web_token.c - the web view's bearer token (--token-file): read once at
 * start, kept only as its SHA-256, compared with CRYPTO_memcmp, so that
 * neither the comparison's time nor a log line can give it away.
 */
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/err.h"
#include "web.h"

int
web_token_load(const char *path, struct web_token *out, char *err, size_t errlen)
{
	char line[WEB_TOKEN_MAX + 2];
	FILE *f = fopen(path, "r");

	if (f == NULL) {
		snprintf(err, errlen, "--token-file %s: %s", path, strerror(errno));
		return OB_EINVAL;
	}
	if (fgets(line, sizeof line, f) == NULL)
		line[0] = '\0';
	fclose(f);
	size_t n = strcspn(line, "\n");
	if (n > WEB_TOKEN_MAX) {
		snprintf(err, errlen, "--token-file %s: the token is longer than %d bytes", path,
		    WEB_TOKEN_MAX);
		return OB_EINVAL;
	}
	while (n > 0 && (line[n - 1] == ' ' || line[n - 1] == '\t' || line[n - 1] == '\r'))
		n--;
	line[n] = '\0';
	if (n < WEB_TOKEN_MIN || strpbrk(line, " \t") != NULL) {
		snprintf(err, errlen, "--token-file %s: want one token of at least %d characters,"
		    " no blanks, on the first line", path, WEB_TOKEN_MIN);
		OPENSSL_cleanse(line, sizeof line);
		return OB_EINVAL;
	}
	SHA256((const unsigned char *)line, n, out->hash);
	OPENSSL_cleanse(line, sizeof line);
	return OB_OK;
}

bool
web_token_check(const struct web_token *t, const char *header)
{
	static const char scheme[] = "Bearer ";
	unsigned char h[WEB_TOKEN_HASH];

	if (header == NULL || strncmp(header, scheme, sizeof scheme - 1) != 0)
		return false;
	const char *v = header + sizeof scheme - 1;
	SHA256((const unsigned char *)v, strlen(v), h);
	return CRYPTO_memcmp(h, t->hash, sizeof h) == 0;
}
