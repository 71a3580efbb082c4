/*
 * ts_https.h - an HTTPS client for the tests of `serve --http https://`:
 * OpenSSL on a blocking loopback socket, the server's certificate verified
 * against a CA and a DNS name (TS_TLS_SERVER_NAME of ts_tls.h), a client
 * certificate when asked; and the bytes of a real ClientHello, so that a
 * test can send half of one and stall.
 */
#ifndef OUTBOX_TS_HTTPS_H
#define OUTBOX_TS_HTTPS_H

#include <stddef.h>

struct ts_https_client {
	const char *ca;          /* CA file the server's certificate must chain to */
	const char *server_name; /* SNI and the name verified; NULL = TS_TLS_SERVER_NAME */
	const char *cert, *key;  /* client certificate, or NULL */
};

/* Connect to 127.0.0.1:port, handshake, send the raw request (it should
 * say Connection: close), read the answer until the server closes or
 * timeout_ms passes (into out, NUL-terminated). Returns the status of the
 * first response, 0 when none came; then why (may be NULL) says what
 * failed (the handshake's or the read's reason from OpenSSL). */
int ts_https_raw(int port, const struct ts_https_client *cl, const char *request, size_t len,
    char *out, size_t outlen, int timeout_ms, char *why, size_t whylen);

/* The first flight of a TLS client (a ClientHello record, a few hundred
 * bytes) into out. Returns its length (asserts it fits). */
size_t ts_https_client_hello(unsigned char *out, size_t outlen);

#endif
