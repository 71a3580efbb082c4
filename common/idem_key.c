/*
 * idem_key.c - the Idempotency-Key rule (see outbox/idem_key.h).
 */
#include <stdio.h>

#include "outbox/err.h"
#include "outbox/idem_key.h"

int
ob_idem_key_check(const char *k, size_t n, char *err, size_t errlen)
{
	if (n == 0) {
		snprintf(err, errlen, "Idempotency-Key must not be empty");
		return OB_EINVAL;
	}
	if (n > OB_IDEM_KEY_MAX) {
		snprintf(err, errlen, "Idempotency-Key is %zu bytes, the maximum is %d", n,
		    OB_IDEM_KEY_MAX);
		return OB_EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)k[i];
		if (c < 0x20 || c > 0x7e) {
			snprintf(err, errlen, "Idempotency-Key byte %zu is 0x%02x: only printable"
			    " ASCII is allowed", i, c);
			return OB_EINVAL;
		}
	}
	return OB_OK;
}
