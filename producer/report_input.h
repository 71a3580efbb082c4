/*
 * report_input.h - what a client sends, checked before anything is stored:
 * the Idempotency-Key header and the JSON body of POST /v1/reports.
 *
 * Validation failures are answered 400 (naming the field) and never reach
 * the key table: a client may fix its request and retry with the same key.
 */
#ifndef OUTBOX_PRODUCER_REPORT_INPUT_H
#define OUTBOX_PRODUCER_REPORT_INPUT_H

#include <stddef.h>

#include "enqueue.h"
#include "outbox/idem_key.h"

#define PRODUCER_KEY_MAX OB_IDEM_KEY_MAX /* bytes of an Idempotency-Key value */
#define PRODUCER_TITLE_MAX 200     /* characters */
#define PRODUCER_MODULE_MAX 100    /* characters */
#define PRODUCER_STEPS_MAX 10000   /* characters */

/* The stored form of an Idempotency-Key sent with a token of a named scope
 * (auth.h): SCOPE, then this byte, then the key. A client's key is
 * printable ASCII (0x20..0x7e) and a scope name is [a-z0-9_-], so this
 * byte (ASCII's unit separator) can be in no key of the default scope
 * (stored as sent, as before scopes existed) and marks exactly where the
 * scope ends: no two (scope, key) pairs share a stored form. The stored
 * form counts against PRODUCER_KEY_MAX (the key tables' limit), so a
 * scoped client's key may be at most PRODUCER_KEY_MAX - 1 - strlen(scope)
 * bytes. What a client reads back (201 body, replay, lookups) is always
 * the key it sent. */
#define PRODUCER_SCOPE_SEP '\x1f'
#define PRODUCER_SCOPE_SEP_SQL "chr(31)"

/* The key a client sent, from a stored key column (SQL over col): the part
 * after the first PRODUCER_SCOPE_SEP, or all of it in the default scope. */
#define PRODUCER_CLIENT_KEY_SQL(col)                                          \
	"substr(" col ", strpos(" col ", " PRODUCER_SCOPE_SEP_SQL ") + 1)"

/* The scope of a stored key column, "" for the default scope (NULL too). */
#define PRODUCER_KEY_SCOPE_SQL(col)                                           \
	"CASE WHEN strpos(" col ", " PRODUCER_SCOPE_SEP_SQL ") > 0"           \
	" THEN split_part(" col ", " PRODUCER_SCOPE_SEP_SQL ", 1) ELSE '' END"

/* A validated report. Owned: release with report_input_fini. */
struct report_input {
	void *root;              /* the parsed document (jansson json_t) */
	struct bug_report r;     /* fields borrowed from root */
	char *canonical;         /* sorted-keys compact JSON: the fingerprint input */
	size_t canonical_len;
};

/* Parse an Idempotency-Key header value: a bare token or a structured-field
 * string ("..." with \" and \\ escapes). The value must be 1..255 printable
 * ASCII bytes (0x20..0x7e). On OB_OK the value (unquoted) is in out, which
 * must hold PRODUCER_KEY_MAX + 1 bytes. OB_EINVAL with a reason otherwise. */
int report_parse_key(const char *header, char *out, size_t outlen, char *err,
    size_t errlen);

/* Check a key given on the command line or derived by a client (same rules,
 * no quoting). */
int report_check_key(const char *key, char *err, size_t errlen);

/* The stored form of key (already checked: report_parse_key or
 * report_check_key) under scope (NULL or "": the default scope, key as it
 * is) into out, which must hold PRODUCER_KEY_MAX + 1 bytes. OB_EINVAL when
 * the scope leaves no room for key, with a reason saying the maximum. */
int report_scoped_key(const char *scope, const char *key, char *out, size_t outlen,
    char *err, size_t errlen);

/* Parse and validate a body: a JSON object with title (string, 1..200
 * characters), module (string, 1..100), severity (low|medium|high|critical),
 * optional steps (string, 0..10000); any other member is refused. On OB_OK
 * *out is filled (release with report_input_fini); OB_EINVAL with a reason
 * naming the field; OB_ENOMEM. */
int report_parse_body(const char *body, size_t len, struct report_input *out,
    char *err, size_t errlen);

void report_input_fini(struct report_input *in);

#endif
