/*
 * webhook_key.h - the webhook handler's key for a message: its claim in
 * inbox.webhook_calls and the Idempotency-Key header sent downstream, one
 * string for both, derived from the dedup identity (source, topic, key) so
 * that two producer databases' 'order-42' never meet, and the same on
 * every attempt of a message (docs/consumer.md, "Idempotency-Key").
 * Shared: the consumer's webhook handler makes it, outboxctl webhook
 * checks a key against its bound.
 */
#ifndef OUTBOX_WEBHOOK_KEY_H
#define OUTBOX_WEBHOOK_KEY_H

#include <stddef.h>

#include "outbox/wire.h"

/* Longest key with its NUL: source, '/', the topic with every byte
 * escaped (3 bytes each), '/', the key. */
#define OB_WEBHOOK_KEY_MAX (OB_WIRE_MAX_SOURCE + 1 + 3 * OB_WIRE_MAX_TOPIC + 1 + \
	OB_WIRE_MAX_KEY + 1)

/* Write m's key into out (OB_WEBHOOK_KEY_MAX bytes), NUL-terminated:
 *   source ""      -> KEY                 (as before sources existed)
 *   source S       -> S/TOPIC/KEY         ('%' and '/' in TOPIC written
 *                                          %25 and %2F)
 * A source has no '/' and the escaped topic none either, so the first two
 * '/' split the three parts again: two identities never give one string.
 * Pure. (The handler keeps KEY instead of S/TOPIC/KEY for a message
 * claimed under KEY before: handler_webhook.c legacy_key.) */
void ob_webhook_key_of(const struct ob_wire_msg *m, char *out);

#endif
