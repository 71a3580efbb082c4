/*
 * report_input.c - checks on what a client sends (see report_input.h).
 *
 * JSON is parsed by jansson (never by hand); the canonical form used as the
 * request fingerprint is jansson's sorted-keys compact dump, so two bodies
 * that differ only in member order or whitespace are the same request.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "json_members.h"
#include "outbox/err.h"
#include "outbox/idem_key.h"
#include "report_input.h"

int
report_check_key(const char *key, char *err, size_t errlen)
{
	return ob_idem_key_check(key, strlen(key), err, errlen);
}

int
report_parse_key(const char *header, char *out, size_t outlen, char *err,
    size_t errlen)
{
	char buf[PRODUCER_KEY_MAX + 1];
	size_t n = 0, len = strlen(header);
	if (len > 0 && header[0] == '"') {
		/* RFC 8941 sf-string: "..." with \" and \\ as the only escapes. */
		size_t i = 1;
		for (; i < len && header[i] != '"'; i++) {
			char c = header[i];
			if (c == '\\') {
				if (i + 1 >= len || (header[i + 1] != '"' && header[i + 1] != '\\')) {
					snprintf(err, errlen, "Idempotency-Key: bad escape in quoted string");
					return OB_EINVAL;
				}
				c = header[++i];
			}
			if (n >= sizeof(buf) - 1) {
				snprintf(err, errlen, "Idempotency-Key is over %d bytes", PRODUCER_KEY_MAX);
				return OB_EINVAL;
			}
			buf[n++] = c;
		}
		if (i >= len || i + 1 != len) {
			snprintf(err, errlen, "Idempotency-Key: unterminated quoted string");
			return OB_EINVAL;
		}
		int rc = ob_idem_key_check(buf, n, err, errlen);
		if (rc != OB_OK)
			return rc;
	} else {
		int rc = ob_idem_key_check(header, len, err, errlen);
		if (rc != OB_OK)
			return rc;
		memcpy(buf, header, len);
		n = len;
	}
	if (n + 1 > outlen) {
		snprintf(err, errlen, "Idempotency-Key: no room");
		return OB_EINVAL;
	}
	memcpy(out, buf, n);
	out[n] = '\0';
	return OB_OK;
}

int
report_scoped_key(const char *scope, const char *key, char *out, size_t outlen, char *err,
    size_t errlen)
{
	size_t slen = scope != NULL ? strlen(scope) : 0, klen = strlen(key);
	size_t need = slen > 0 ? slen + 1 + klen : klen;
	if (need > PRODUCER_KEY_MAX || need + 1 > outlen) {
		snprintf(err, errlen, "Idempotency-Key is %zu bytes; with this token the maximum is"
		    " %zu (its scope's name counts against the %d bytes a key may have)", klen,
		    slen + 1 < PRODUCER_KEY_MAX ? (size_t)PRODUCER_KEY_MAX - slen - 1 : 0,
		    PRODUCER_KEY_MAX);
		return OB_EINVAL;
	}
	if (slen == 0) {
		memcpy(out, key, klen + 1);
		return OB_OK;
	}
	memcpy(out, scope, slen);
	out[slen] = PRODUCER_SCOPE_SEP;
	memcpy(out + slen + 1, key, klen + 1);
	return OB_OK;
}

/* Characters (code points) of valid UTF-8, as PostgreSQL's length() counts. */
static size_t
utf8_chars(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			n++;
	return n;
}

static int
string_field(json_t *root, const char *name, bool required, size_t min, size_t max,
    const char **out, char *err, size_t errlen)
{
	json_t *v = json_object_get(root, name);
	if (v == NULL) {
		if (!required) {
			*out = NULL;
			return OB_OK;
		}
		snprintf(err, errlen, "field '%s' is required", name);
		return OB_EINVAL;
	}
	if (!json_is_string(v)) {
		snprintf(err, errlen, "field '%s' must be a string", name);
		return OB_EINVAL;
	}
	size_t n = utf8_chars(json_string_value(v));
	if (n < min || n > max) {
		snprintf(err, errlen, "field '%s' must be %zu..%zu characters (got %zu)", name, min,
		    max, n);
		return OB_EINVAL;
	}
	*out = json_string_value(v);
	return OB_OK;
}

int
report_parse_body(const char *body, size_t len, struct report_input *out,
    char *err, size_t errlen)
{
	static const char *const known[] = { "title", "module", "steps", "severity", NULL };
	static const char *const severities[] = { "low", "medium", "high", "critical", NULL };
	json_t *root = producer_json_load_body(body, len, known, "", err, errlen);
	if (root == NULL)
		return OB_EINVAL;
	struct report_input in = { .root = root };
	int rc = OB_EINVAL;
	if ((rc = string_field(root, "title", true, 1, PRODUCER_TITLE_MAX, &in.r.title, err,
	         errlen)) != OB_OK ||
	    (rc = string_field(root, "module", true, 1, PRODUCER_MODULE_MAX, &in.r.module, err,
	         errlen)) != OB_OK ||
	    (rc = string_field(root, "steps", false, 0, PRODUCER_STEPS_MAX, &in.r.steps, err,
	         errlen)) != OB_OK ||
	    (rc = string_field(root, "severity", true, 1, 16, &in.r.severity, err,
	         errlen)) != OB_OK)
		goto fail;
	rc = OB_EINVAL;
	bool sev_ok = false;
	for (const char *const *s = severities; *s; s++)
		sev_ok |= strcmp(*s, in.r.severity) == 0;
	if (!sev_ok) {
		snprintf(err, errlen, "field 'severity' must be one of low, medium, high, critical");
		goto fail;
	}
	if (in.r.steps == NULL)
		in.r.steps = "";
	in.canonical = json_dumps(root, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENSURE_ASCII);
	if (in.canonical == NULL) {
		snprintf(err, errlen, "out of memory");
		rc = OB_ENOMEM;
		goto fail;
	}
	in.canonical_len = strlen(in.canonical);
	*out = in;
	return OB_OK;
fail:
	json_decref(root);
	return rc;
}

void
report_input_fini(struct report_input *in)
{
	if (in->root != NULL)
		json_decref((json_t *)in->root);
	free(in->canonical);
	in->root = NULL;
	in->canonical = NULL;
}
