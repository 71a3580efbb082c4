/*
 * url.c - nng_url_parse behind a guard for nng 1.5.2's over-read on user
 * info, and the hex digits of percent-escapes (see url.h).
 */
#include <stdbool.h>
#include <string.h>

#include "outbox/url.h"

int
ob_url_parse(nng_url **u, const char *s)
{
	const char *auth = strstr(s, "://");
	/* ipc:// and the like name a path, not a host: '@' is theirs to use */
	bool path_url = strncmp(s, "ipc://", 6) == 0 || strncmp(s, "abstract://", 11) == 0 ||
	    strncmp(s, "inproc://", 9) == 0;
	if (auth != NULL && !path_url) {
		auth += 3;
		size_t n = strcspn(auth, "/");
		if (memchr(auth, '@', n) != NULL)
			return NNG_EINVAL;
	}
	return nng_url_parse(u, s);
}

int
ob_url_hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}
