/*
 * webhook_key.c - the webhook's key for a message from its (source, topic,
 * key): webhook_key.h gives the rule. Pure string building, no I/O.
 */
#include <string.h>

#include "outbox/webhook_key.h"

void
ob_webhook_key_of(const struct ob_wire_msg *m, char *out)
{
	size_t n = 0;
	if (m->source_len > 0) {
		memcpy(out, m->source, m->source_len);
		n = m->source_len;
		out[n++] = '/';
		for (uint16_t i = 0; i < m->topic_len; i++) {
			char c = m->topic[i];
			if (c == '%' || c == '/') {
				memcpy(out + n, c == '%' ? "%25" : "%2F", 3);
				n += 3;
			} else
				out[n++] = c;
		}
		out[n++] = '/';
	}
	memcpy(out + n, m->key, m->key_len);
	out[n + m->key_len] = '\0';
}
