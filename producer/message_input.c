/*
 * message_input.c - the body of POST /v1/messages (see message_input.h).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "json_members.h"
#include "message_input.h"
#include "outbox/err.h"
#include "report_input.h"

static bool
bytes_in(const char *s, unsigned char lo, unsigned char hi)
{
	for (; *s; s++)
		if ((unsigned char)*s < lo || (unsigned char)*s > hi)
			return false;
	return true;
}

/* No C0 control character and no DEL (UTF-8 bytes >= 0x80 are fine). */
static bool
no_controls(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s == 0x7f)
			return false;
	return true;
}

int
message_parse_body(const char *body, size_t len, struct message_input *out, char *err,
    size_t errlen)
{
	static const char *const known[] = { "topic", "payload", "ordering_key", NULL };
	json_t *root = producer_json_load_body(body, len, known,
	    " {topic, payload, ordering_key?}", err, errlen);
	if (root == NULL)
		return OB_EINVAL;
	struct message_input in = { .root = root };
	int rc = OB_EINVAL;
	json_t *topic = json_object_get(root, "topic");
	if (!json_is_string(topic)) {
		snprintf(err, errlen, "field 'topic' is required and must be a string");
		goto fail;
	}
	in.topic = json_string_value(topic);
	size_t tlen = strlen(in.topic);
	if (tlen < 1 || tlen > PRODUCER_TOPIC_MAX || !bytes_in(in.topic, 0x21, 0x7e)) {
		snprintf(err, errlen, "field 'topic' must be 1..%d bytes of printable ASCII without"
		    " spaces (got %zu bytes)", PRODUCER_TOPIC_MAX, tlen);
		goto fail;
	}
	json_t *payload = json_object_get(root, "payload");
	if (!json_is_object(payload) && !json_is_array(payload)) {
		snprintf(err, errlen, "field 'payload' is required and must be a JSON object or"
		    " array");
		goto fail;
	}
	json_t *ok_v = json_object_get(root, "ordering_key");
	if (ok_v != NULL && !json_is_null(ok_v)) {
		if (!json_is_string(ok_v)) {
			snprintf(err, errlen, "field 'ordering_key' must be a string or null");
			goto fail;
		}
		in.ordering_key = json_string_value(ok_v);
		size_t n = strlen(in.ordering_key);
		if (n < 1 || n > PRODUCER_ORDERING_KEY_MAX || !no_controls(in.ordering_key)) {
			snprintf(err, errlen, "field 'ordering_key' must be 1..%d bytes without control"
			    " characters (got %zu bytes)", PRODUCER_ORDERING_KEY_MAX, n);
			goto fail;
		}
	}
	rc = OB_ENOMEM;
	in.payload = json_dumps(payload, JSON_COMPACT | JSON_ENCODE_ANY);
	/* The fingerprint of the request: a null ordering_key and an absent
	 * one are the same request. */
	if (ok_v != NULL && json_is_null(ok_v))
		json_object_del(root, "ordering_key");
	in.canonical = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
	if (in.payload == NULL || in.canonical == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	in.canonical_len = strlen(in.canonical);
	/* topic and ordering_key point into root, which lives on */
	*out = in;
	return OB_OK;
fail:
	message_input_fini(&in);
	return rc;
}

void
message_input_fini(struct message_input *in)
{
	free(in->payload);
	free(in->canonical);
	json_decref(in->root);
	memset(in, 0, sizeof(*in));
}

int
message_outbox_key(const char *scope, const char *key, char *out, size_t outlen, char *err,
    size_t errlen)
{
	size_t slen = scope != NULL ? strlen(scope) : 0, klen = strlen(key);
	if (slen == 0) {
		if (key[0] == PRODUCER_SCOPED_MESSAGE_KEY_MARK) {
			snprintf(err, errlen, "an Idempotency-Key of /v1/messages may not start with"
			    " '%c' (reserved for the keys of scoped tokens)",
			    PRODUCER_SCOPED_MESSAGE_KEY_MARK);
			return OB_EINVAL;
		}
		if (klen + 1 > outlen)
			return OB_EINVAL;
		memcpy(out, key, klen + 1);
		return OB_OK;
	}
	size_t need = 1 + slen + 1 + klen; /* ~SCOPE/KEY */
	if (need > PRODUCER_KEY_MAX || need + 1 > outlen) {
		snprintf(err, errlen, "Idempotency-Key is %zu bytes; with this token the maximum on"
		    " /v1/messages is %zu (its scope's name counts against the %d bytes a key may"
		    " have)", klen, slen + 2 < PRODUCER_KEY_MAX ? (size_t)PRODUCER_KEY_MAX - slen - 2
		                                                : 0, PRODUCER_KEY_MAX);
		return OB_EINVAL;
	}
	snprintf(out, outlen, "%c%s/%s", PRODUCER_SCOPED_MESSAGE_KEY_MARK, scope, key);
	return OB_OK;
}
