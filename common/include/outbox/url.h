/*
 * url.h - nng_url_parse, guarded. nng 1.5.2 (Debian 12) reads past the end
 * of a URL whose authority ends in '@' (user info and no host:
 * "tcp://@", "tcp://x:y@"): found by tests/fuzz/fuzz_config.c under ASan.
 * Every URL a user gives (routes, --listen, --metrics, --http, the webhook
 * target, the client's --url) goes through ob_url_parse instead.
 */
#ifndef OUTBOX_URL_H
#define OUTBOX_URL_H

#include <nng/nng.h>

/* nng_url_parse(u, s), except that a URL with user info ('@' before the
 * first '/' after "scheme://") is refused with NNG_EINVAL before nng sees
 * it: no transport of ours takes user info. */
int ob_url_parse(nng_url **u, const char *s);

#endif
