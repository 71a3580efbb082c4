/*
 * url.h - nng_url_parse, guarded. nng 1.5.2 (Debian 12) reads past the end
 * of a URL whose authority ends in '@' (user info and no host:
 * "tcp://@", "tcp://x:y@"): found by tests/fuzz/fuzz_config.c under ASan.
 * Every URL a user gives (routes, --listen, --metrics, --http, the webhook
 * target, the client's --url) goes through ob_url_parse instead.
 *
 * Also the one hex-digit reader of the percent-decoders (RFC 3986 "%XX":
 * the producer's query strings, the conninfo URIs that pg_redact.c
 * redacts).
 */
#ifndef OUTBOX_URL_H
#define OUTBOX_URL_H

#include <nng/nng.h>

/* nng_url_parse(u, s), except that a URL with user info ('@' before the
 * first '/' after "scheme://") is refused with NNG_EINVAL before nng sees
 * it: no transport of ours takes user info. */
int ob_url_parse(nng_url **u, const char *s);

/* The value of hex digit c (0-9, a-f, A-F: 0..15), or -1 for any other
 * byte. Pass a char as (unsigned char). */
int ob_url_hexval(int c);

#endif
