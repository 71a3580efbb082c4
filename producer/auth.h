/*
 * auth.h - bearer tokens for the producer API (`serve --api-token-file`),
 * each in a scope.
 *
 * The file holds one token per line (blank lines and lines starting with
 * '#' ignored): PRODUCER_TOKEN_MIN..PRODUCER_TOKEN_MAX printable ASCII
 * characters without spaces, at most PRODUCER_TOKENS_MAX of them. A line
 * is either `TOKEN` (the default scope) or `scope=NAME TOKEN` (scope NAME:
 * 1..PRODUCER_SCOPE_MAX characters of a-z, 0-9, '_', '-'). Several lines
 * may share a scope, so that a client's token can be rotated by listing
 * the old and the new one for a while; one token may not be in two
 * scopes. A scope is the client (Stripe's account): idempotency keys are
 * kept per scope (report_input.h, report_scoped_key), so that two clients
 * using the same key make two reports and neither sees the other's.
 *
 * A request must carry `Authorization: Bearer <one of them>`; the
 * comparison takes the same time whichever token (if any) matches and
 * wherever they differ. Tokens are never logged or printed: errors name
 * the file and the line number only (not even what looked like a scope
 * name: it may be a token written in the wrong place).
 *
 * Topics: a line may also carry `topics=P1,P2,...` before the token
 * (after the scope, if any): the token may then enqueue on POST
 * /v1/messages only to topics matching one of those shell patterns
 * (fnmatch(3): `notify.*`, `alerts.pager`), else 403. Without it, any
 * topic. At most PRODUCER_TOPICS_MAX characters.
 */
#ifndef OUTBOX_PRODUCER_AUTH_H
#define OUTBOX_PRODUCER_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#define PRODUCER_TOKENS_MAX 64
#define PRODUCER_TOKEN_MIN 16
#define PRODUCER_TOKEN_MAX 256
#define PRODUCER_SCOPE_MAX 32       /* characters of a scope name */
#define PRODUCER_TOKEN_LINE_MAX 512 /* characters of a line of the file */
#define PRODUCER_SCOPE_PREFIX "scope=" /* `scope=NAME TOKEN` */
#define PRODUCER_TOPICS_PREFIX "topics=" /* `topics=P1,P2 TOKEN` */
#define PRODUCER_TOPICS_MAX 200     /* characters of a topics list */

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

/* How many named scopes they are in (the default scope not counted). */
int producer_tokens_scopes(const struct producer_tokens *t);

/* Check an Authorization header value (NULL: absent). Constant time over
 * the configured tokens, the matching token's scope included. On
 * PRODUCER_AUTH_OK, *scope (when scope is not NULL) is the scope's name, ""
 * for the default scope, and *topics (when not NULL) the token's topic
 * list or NULL for none, both borrowed from t (valid until
 * producer_tokens_free); else neither is written. Thread-safe (reads only). */
enum producer_auth producer_tokens_check(const struct producer_tokens *t,
    const char *authorization, const char **scope, const char **topics);

/* Whether topics (a token's list as producer_tokens_check gave it; NULL:
 * no list, every topic) allows topic. */
bool producer_topic_allowed(const char *topics, const char *topic);

/* A client's token (`submit` / `lookup --api-token-file`): the file must
 * hold exactly one token, in the same format (a `scope=NAME` prefix is
 * allowed and ignored: the server's file decides the scope). On OB_OK the
 * token is in out, which must hold PRODUCER_TOKEN_MAX + 1 bytes; OB_EINVAL
 * or OB_ENOMEM with one line in err that never contains a token. */
int producer_token_read(const char *path, char *out, size_t outlen, char *err,
    size_t errlen);

/* A client command's --api-token-file, path: unset or "" sends no token
 * (*token = NULL); else its token is read (producer_token_read) into buf,
 * of PRODUCER_TOKEN_MAX + 1 bytes, and *token = buf. OB_OK, or the error
 * of producer_token_read with *token unchanged. */
int producer_token_flag(const char *path, char *buf, size_t buflen, const char **token,
    char *err, size_t errlen);

/* Wipe and free. NULL is ok. */
void producer_tokens_free(struct producer_tokens *t);

#endif
