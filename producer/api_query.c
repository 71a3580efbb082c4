/*
 * api_query.c - one parameter of a request's query string, percent-decoded
 * (RFC 3986; '+' is a literal plus). A value that decodes to a NUL is
 * refused rather than cut short.
 */
#include <string.h>

#include "api_query.h"
#include "outbox/err.h"
#include "outbox/url.h"

int
api_query_param(const char *query, const char *name, char *out, size_t outlen)
{
	size_t nlen = strlen(name);
	for (const char *p = query; p != NULL && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL) {
		if (strncmp(p, name, nlen) != 0 || p[nlen] != '=')
			continue;
		size_t n = 0;
		for (const char *v = p + nlen + 1; *v && *v != '&'; v++) {
			int c = (unsigned char)*v;
			if (c == '%') {
				int hi = ob_url_hexval((unsigned char)v[1]);
				int lo = hi < 0 ? -1 : ob_url_hexval((unsigned char)v[2]);
				if (lo < 0)
					return OB_EINVAL;
				c = hi * 16 + lo;
				v += 2;
				/* %00 would cut the value short (K%00zzz read as K):
				 * refused (the HTTP server refuses it first, httpd.h). */
				if (c == 0)
					return OB_EINVAL;
			}
			if (n + 1 >= outlen)
				return OB_EINVAL;
			out[n++] = (char)c;
		}
		out[n] = '\0';
		return OB_OK;
	}
	return OB_EINVAL;
}
