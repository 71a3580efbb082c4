/*
 * webhook_http.h - the webhook handler's HTTP transport, on libcurl: send
 * one POST to the configured target and report what came back (status,
 * Retry-After, the start of the body), or how far the call got. It knows
 * nothing of keys, claims or retries: handler_webhook.c decides what an
 * outcome means.
 *
 * Trust (https:// targets; verification of the certificate chain and of
 * the name is always on, there is no way to skip it):
 *   --webhook-ca FILE      only the CA certificate(s) in FILE (PEM), no
 *                          system store beside it
 *   otherwise              the system store: $SSL_CERT_FILE and
 *                          $SSL_CERT_DIR when set (the variables every
 *                          OpenSSL program reads; libcurl itself does not,
 *                          so they are passed on here), else libcurl's
 *                          built-in bundle and directory (Debian:
 *                          /etc/ssl/certs/ca-certificates.crt, /etc/ssl/certs)
 * The name checked is the URL's host, or server_name: then the URL is sent
 * to that name (Host header, SNI) while the connection goes to the URL's
 * host and port (libcurl's CONNECT_TO).
 *
 * Proxies: from the environment, by libcurl's rules: https_proxy (or
 * HTTPS_PROXY) for https://, http_proxy for http:// (lower case only),
 * all_proxy / ALL_PROXY for both, and no_proxy / NO_PROXY naming hosts
 * reached directly (matched against the name the URL is sent to). An
 * https:// target is reached through the proxy's CONNECT tunnel, TLS end to
 * end; an https:// proxy is verified against the system store.
 *
 * Connections are kept open between calls and reused: a pool of libcurl
 * handles, one per caller at a time (a serving thread), each with its own
 * connections. A call with fresh = true opens a new connection and closes
 * it after (the at-most-once calls).
 *
 * Sent or not: a call is "sent" once its request was handed to an
 * established connection (TCP, the proxy's tunnel and the TLS handshake
 * done: libcurl's pre-request callback). A failure before that reached no
 * target; after it the target may have acted. libcurl re-sends a request
 * by itself when a reused connection dies before any answer; that second
 * send is refused here (the call fails, sent): one request per call.
 */
#ifndef OUTBOX_CONSUMER_WEBHOOK_HTTP_H
#define OUTBOX_CONSUMER_WEBHOOK_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WEBHOOK_HTTP_NAME_MAX 253   /* bytes of a DNS name (server_name) */
#define WEBHOOK_HTTP_ERR_MAX 320    /* bytes of webhook_http_result.err */
#define WEBHOOK_HTTP_HEADERS_MAX 16 /* headers of one request */

enum webhook_http_outcome {
	WEBHOOK_HTTP_ANSWERED, /* an HTTP answer, any status */
	WEBHOOK_HTTP_TIMEOUT,  /* the deadline passed first */
	WEBHOOK_HTTP_TLS,      /* the target's (or the proxy's) TLS handshake
	                        * failed: certificate, name, expiry, protocol */
	WEBHOOK_HTTP_FAILED,   /* anything else: DNS, refused, no route, the
	                        * proxy refused, reset, closed unanswered */
};

struct webhook_http_config {
	const char *url;         /* http:// or https://, no user info; copied */
	const char *ca;          /* https:// only: NULL or "" = the system store,
	                          * else only this CA file (PEM); copied */
	const char *server_name; /* https:// only: NULL or "" = the URL's host */
	int64_t timeout_ms;      /* whole call, connect included */
	size_t body_max;         /* bytes of an answer's body kept */
};

struct webhook_http_header {
	const char *name;  /* a token, e.g. "Idempotency-Key" */
	const char *value; /* webhook_http_header_safe */
};

struct webhook_http_result {
	enum webhook_http_outcome outcome;
	bool sent;             /* the request went out on an established connection
	                        * (see above): a failure after it is an unknown outcome */
	int status;            /* ANSWERED: the final status */
	char retry_after[64];  /* ANSWERED: its Retry-After (header-safe), "" when none */
	char *body;            /* ANSWERED: the first body_max bytes, NUL-terminated,
	                        * or NULL when empty; owned, free() */
	size_t body_len;
	char err[WEBHOOK_HTTP_ERR_MAX]; /* not ANSWERED: what failed (libcurl's text) */
};

/* Bytes that may stand in an HTTP header value: no control characters. */
bool webhook_http_header_safe(const char *s, size_t n);

/* Once per process before any thread that might call libcurl starts
 * (outbox-consumer's main), and webhook_http_global_fini at its end;
 * reference-counted by libcurl, so webhook_http_new's own pair is safe
 * beside it. OB_OK, or OB_ENOMEM with one line in err. */
int webhook_http_global_init(char *err, size_t errlen);
void webhook_http_global_fini(void);

struct webhook_http;

/* Parse and check the configuration: the URL, the server name, and for
 * https:// the trust (the CA file checked as every TLS flag's file,
 * pem_file.h, at most OB_PEM_FILE_MAX bytes, and parsed by OpenSSL as
 * libcurl will; a given $SSL_CERT_FILE parsed the same, $SSL_CERT_DIR a
 * directory); logs
 * one info line (consumer.webhook.target) naming the trust and the proxy
 * variables that apply (names, never their values). OB_OK and *out,
 * release with webhook_http_free; OB_EINVAL with one line in err naming
 * the flag or variable; OB_ENOMEM. Start-up only. */
int webhook_http_new(const struct webhook_http_config *cfg, struct webhook_http **out,
    char *err, size_t errlen);
/* After every caller of webhook_http_post returned: closes the pooled
 * connections. NULL is a no-op. */
void webhook_http_free(struct webhook_http *h);

/* The name the target's certificate must carry ("" for http://), and the
 * trust in words ("--webhook-ca FILE", "the system CA store"), for logs
 * and answers. Valid until webhook_http_free. */
const char *webhook_http_tls_name(const struct webhook_http *h);
const char *webhook_http_trust(const struct webhook_http *h);

/* POST body (len bytes, borrowed) with hdrs[0..n) (Content-Type among
 * them; every value header-safe), over a pooled connection (fresh: a new
 * one, closed after). Blocks up to the configured timeout; any thread.
 * OB_OK and *out (the outcome; release out->body); OB_EINVAL (a header
 * not safe, too many) or OB_ENOMEM with one line in err: nothing sent. */
int webhook_http_post(struct webhook_http *h, const struct webhook_http_header *hdrs,
    size_t n, const void *body, size_t len, bool fresh, struct webhook_http_result *out,
    char *err, size_t errlen);

/* What a libcurl result code means here (exposed for the unit test):
 * CURLE_OK answered, CURLE_OPERATION_TIMEDOUT timeout, a TLS code tls,
 * any other failed. */
enum webhook_http_outcome webhook_http_outcome_of(int curl_code);

#endif
