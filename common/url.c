/*
 * url.c - nng_url_parse behind a guard for nng 1.5.2's over-read on user
 * info (see url.h).
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
