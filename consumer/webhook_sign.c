/*
 * webhook_sign.c - signed webhook calls (see webhook_sign.h).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "outbox/err.h"
#include "outbox/secret_file.h"
#include "webhook_sign.h"

struct webhook_secrets {
	int n;
	size_t len[WEBHOOK_SECRETS_MAX];
	char sec[WEBHOOK_SECRETS_MAX][WEBHOOK_SECRET_MAX + 1];
};

int
webhook_secrets_load(const char *path, struct webhook_secrets **out, char *err, size_t errlen)
{
	struct ob_secret_file sf;
	struct webhook_secrets *s;
	int rc = ob_secret_file_open(&sf, "--webhook-secret-file", path, WEBHOOK_SECRET_MAX,
	    "\r\n", sizeof(*s), (void **)&s, err, errlen);
	if (rc != OB_OK)
		return rc;
	char line[WEBHOOK_SECRET_MAX + 3];
	int len = 0;
	while (rc == OB_OK && (len = ob_secret_file_next(&sf, line, sizeof(line), err, errlen)) > 0) {
		size_t n = (size_t)len;
		bool printable = true;
		for (size_t i = 0; i < n; i++)
			printable = printable && line[i] > 0x20 && line[i] < 0x7f;
		if (n < WEBHOOK_SECRET_MIN || n > WEBHOOK_SECRET_MAX || !printable) {
			snprintf(err, errlen, "--webhook-secret-file %s line %d: a secret is %d..%d"
			    " printable characters without spaces", path, sf.lineno, WEBHOOK_SECRET_MIN,
			    WEBHOOK_SECRET_MAX);
			rc = OB_EINVAL;
		} else if (s->n == WEBHOOK_SECRETS_MAX) {
			snprintf(err, errlen, "--webhook-secret-file %s line %d: more than %d secrets",
			    path, sf.lineno, WEBHOOK_SECRETS_MAX);
			rc = OB_EINVAL;
		} else {
			memcpy(s->sec[s->n], line, n + 1);
			s->len[s->n++] = n;
		}
	}
	if (rc == OB_OK && len < 0)
		rc = OB_EINVAL;
	ob_secret_file_close(&sf, line, sizeof(line));
	if (rc == OB_OK && s->n == 0) {
		snprintf(err, errlen, "--webhook-secret-file %s: no secret in it", path);
		rc = OB_EINVAL;
	}
	if (rc != OB_OK) {
		webhook_secrets_free(s);
		return rc;
	}
	*out = s;
	return OB_OK;
}

int
webhook_secrets_count(const struct webhook_secrets *s)
{
	return s->n;
}

int
webhook_hmac_hex(const char *secret, size_t secret_len, int64_t t, const void *body,
    size_t len, char out[65])
{
	static const char hex[] = "0123456789abcdef";
	char ts[32];
	int tn = snprintf(ts, sizeof(ts), "%" PRId64 ".", t);
	unsigned char md[32];
	size_t mdlen = 0;
	int rc = OB_ENOMEM;
	EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	EVP_MAC_CTX *ctx = mac != NULL ? EVP_MAC_CTX_new(mac) : NULL;
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
		OSSL_PARAM_construct_end(),
	};
	if (ctx != NULL &&
	    EVP_MAC_init(ctx, (const unsigned char *)secret, secret_len, params) == 1 &&
	    EVP_MAC_update(ctx, (const unsigned char *)ts, (size_t)tn) == 1 &&
	    (len == 0 || EVP_MAC_update(ctx, body, len) == 1) &&
	    EVP_MAC_final(ctx, md, &mdlen, sizeof(md)) == 1 && mdlen == sizeof(md)) {
		for (size_t i = 0; i < sizeof(md); i++) {
			out[2 * i] = hex[md[i] >> 4];
			out[2 * i + 1] = hex[md[i] & 15];
		}
		out[64] = '\0';
		rc = OB_OK;
	}
	EVP_MAC_CTX_free(ctx);
	EVP_MAC_free(mac);
	return rc;
}

int
webhook_sign(const struct webhook_secrets *s, int64_t t, const void *body, size_t len,
    char *out, size_t outlen)
{
	size_t n = (size_t)snprintf(out, outlen, "t=%" PRId64, t);
	for (int i = 0; i < s->n; i++) {
		char h[65];
		if (webhook_hmac_hex(s->sec[i], s->len[i], t, body, len, h) != OB_OK)
			return OB_ENOMEM;
		n += (size_t)snprintf(out + n, n < outlen ? outlen - n : 0, ",v1=%s", h);
	}
	return n < outlen ? OB_OK : OB_ENOMEM;
}

void
webhook_secrets_free(struct webhook_secrets *s)
{
	ob_secret_free(s, sizeof(*s));
}
