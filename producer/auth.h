/*
 * auth.h - bearer tokens for the producer API (`serve --api-token-file`).
 *
 * The file holds one token per line (blank lines and lines starting with
 * '#' ignored): PRODUCER_TOKEN_MIN..PRODUCER_TOKEN_MAX printable ASCII
 * characters without spaces, at most PRODUCER_TOKENS_MAX of them, so that
 * tokens can be rotated by listing the old and the new one for a while.
 * A request must carry `Authorization: Bearer <one of them>`; the
 * comparison takes the same time whichever token (if any) matches and
 * wherever they differ. Tokens are never logged or printed: errors name
 * the file and the line number only.
 */
#ifndef OUTBOX_PRODUCER_AUTH_H
#define OUTBOX_PRODUCER_AUTH_H

#include <stddef.h>

#define PRODUCER_TOKENS_MAX 64
#define PRODUCER_TOKEN_MIN 16
#define PRODUCER_TOKEN_MAX 256

struct producer_tokens;

enum producer_auth {
	PRODUCER_AUTH_OK = 0,
	PRODUCER_AUTH_MISSING, /* no Authorization header, or not Bearer */
	PRODUCER_AUTH_INVALID, /* Bearer, but no configured token */
};

/* Read the token file at path. On OB_OK *out is owned
 * (producer_tokens_free); OB_EINVAL (unreadable, no token, a bad line)
 * or OB_ENOMEM with one line in err that never contains a token. */
int producer_tokens_load(const char *path, struct producer_tokens **out, char *err,
    size_t errlen);

/* How many tokens were loaded. */
int producer_tokens_count(const struct producer_tokens *t);

/* Check an Authorization header value (NULL: absent). Constant time over
 * the configured tokens. Thread-safe (reads only). */
enum producer_auth producer_tokens_check(const struct producer_tokens *t,
    const char *authorization);

/* Wipe and free. NULL is ok. */
void producer_tokens_free(struct producer_tokens *t);

#endif
