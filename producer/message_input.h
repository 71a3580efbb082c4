/*
 * message_input.h - the JSON body of POST /v1/messages, checked before
 * anything is stored: {"topic": T, "payload": P, "ordering_key": K?}.
 *
 * Limits are outbox.enqueue's (sql/outbox/functions/enqueue.sql), checked
 * here first so that a bad request is a 400 naming the field and never
 * reaches the key table: topic 1..255 bytes of printable ASCII without
 * spaces (it is matched by route patterns, shown in metrics and logs);
 * payload a JSON object or array (its size is the server's --max-body and
 * outbox.max_payload_bytes()); ordering_key absent, null, or 1..255 bytes
 * without control characters.
 */
#ifndef OUTBOX_PRODUCER_MESSAGE_INPUT_H
#define OUTBOX_PRODUCER_MESSAGE_INPUT_H

#include <stddef.h>

#define PRODUCER_TOPIC_MAX 255        /* bytes (outbox.enqueue) */
#define PRODUCER_ORDERING_KEY_MAX 255 /* bytes (outbox.enqueue) */

/* The first byte of every scoped message key (message_outbox_key). */
#define PRODUCER_SCOPED_MESSAGE_KEY_MARK '~'

/* A validated message. Owned: release with message_input_fini. */
struct message_input {
	void *root;               /* the parsed document (jansson json_t) */
	const char *topic;        /* borrowed from root */
	const char *ordering_key; /* borrowed from root; NULL = none */
	char *payload;            /* compact JSON text of the payload */
	char *canonical;          /* sorted-keys compact JSON of the body: the fingerprint */
	size_t canonical_len;
};

/* Parse and validate body. OB_OK (*out filled), OB_EINVAL with a reason
 * naming the field, OB_ENOMEM. */
int message_parse_body(const char *body, size_t len, struct message_input *out, char *err,
    size_t errlen);

void message_input_fini(struct message_input *in);

/* The outbox idempotency key of a message sent with client key key (checked)
 * under scope (NULL or "": the default): the key itself in the default
 * scope, "~SCOPE/KEY" in a named one, so that every consumer and
 * downstream sees a printable key and no two (scope, key) pairs share one.
 * The default scope's keys may therefore not start with '~'. out must hold
 * 256 bytes. OB_EINVAL with a reason (the '~', or the key too long for
 * the scope). */
int message_outbox_key(const char *scope, const char *key, char *out, size_t outlen, char *err,
    size_t errlen);

#endif
