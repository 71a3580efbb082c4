/*
 * idem_key.h - the producer API's rule for an Idempotency-Key value: 1 to
 * OB_IDEM_KEY_MAX printable ASCII bytes. Shared: the API (producer/)
 * refuses a key that breaks it with 400, and the agent-side client
 * (client/) checks the key it derives before the first attempt, so the two
 * never disagree.
 */
#ifndef OUTBOX_IDEM_KEY_H
#define OUTBOX_IDEM_KEY_H

#include <stddef.h>

#define OB_IDEM_KEY_MAX 255 /* bytes of an Idempotency-Key value */

/* Check the n bytes of key k. OB_OK, or OB_EINVAL with a reason naming the
 * byte or the length in err. */
int ob_idem_key_check(const char *k, size_t n, char *err, size_t errlen);

#endif
