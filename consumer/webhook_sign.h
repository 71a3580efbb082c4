/*
 * webhook_sign.h - signed webhook calls (`--webhook-secret-file`): every
 * POST carries
 *
 *     Outbox-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>[,v1=...]
 *
 * where each v1 is HMAC-SHA256(secret, "<t>." + body) under one of the
 * secrets in the file (several during a rotation, as Stripe sends
 * several v1 values). A downstream recomputes the HMAC over the timestamp
 * it was given and the raw body, compares in constant time, and refuses
 * a timestamp older than its tolerance (5 minutes is usual): a forgery has
 * no valid signature, a replay an old t. Each attempt is signed anew (a
 * retry carries a fresh t, the same Idempotency-Key).
 *
 * The file: one secret per line (blank lines and '#' comments ignored),
 * WEBHOOK_SECRET_MIN..WEBHOOK_SECRET_MAX bytes of printable ASCII, at most
 * WEBHOOK_SECRETS_MAX; read at start. Secrets are never logged: errors name
 * the file and the line. The HMAC is OpenSSL's (libcrypto, EVP_MAC).
 */
#ifndef OUTBOX_CONSUMER_WEBHOOK_SIGN_H
#define OUTBOX_CONSUMER_WEBHOOK_SIGN_H

#include <stddef.h>
#include <stdint.h>

#define WEBHOOK_SECRETS_MAX 4
#define WEBHOOK_SECRET_MIN 16
#define WEBHOOK_SECRET_MAX 256
#define WEBHOOK_SIGNATURE_HEADER "Outbox-Signature"
/* "t=" + 20 digits + WEBHOOK_SECRETS_MAX x ",v1=" + 64 hex + NUL */
#define WEBHOOK_SIGNATURE_MAX (2 + 20 + WEBHOOK_SECRETS_MAX * (4 + 64) + 1)

struct webhook_secrets;

/* Read the secret file. OB_OK (*out owned: webhook_secrets_free), or
 * OB_EINVAL / OB_ENOMEM with one line in err that never holds a secret. */
int webhook_secrets_load(const char *path, struct webhook_secrets **out, char *err,
    size_t errlen);

int webhook_secrets_count(const struct webhook_secrets *s);

/* The header value for body signed at unix time t, into out
 * (WEBHOOK_SIGNATURE_MAX bytes). OB_OK, or OB_ENOMEM when libcrypto
 * failed. Thread-safe. */
int webhook_sign(const struct webhook_secrets *s, int64_t t, const void *body, size_t len,
    char *out, size_t outlen);

/* One HMAC-SHA256(secret, "<t>." + body) as 64 lower-case hex digits into
 * out (65 bytes): what a downstream computes (tests verify with it).
 * OB_OK or OB_ENOMEM. */
int webhook_hmac_hex(const char *secret, size_t secret_len, int64_t t, const void *body,
    size_t len, char out[65]);

/* Wipes the secrets. */
void webhook_secrets_free(struct webhook_secrets *s);

#endif
