/*
 * httpd_tls.h - HTTPS for outbox/httpd.h: the server side of TLS on
 * OpenSSL 3 (Debian's libssl3), driven non-blocking from httpd.c's event
 * loop.
 *
 * Why OpenSSL and not nng's TLS: nng's TLS (mbedTLS underneath) only
 * wraps nng's own sockets and its HTTP server, which httpd.c replaced for
 * lack of deadlines (httpd.h); OpenSSL takes a plain non-blocking file
 * descriptor and says WANT_READ / WANT_WRITE, which is what an epoll loop
 * needs. Nothing here is hand-written TLS: this file only loads the PEM
 * files, checks them, and maps OpenSSL's results to the loop's.
 *
 * The context (struct ob_httpd_tls) is made once at start from three
 * files: certificate (chain), unencrypted private key, and optionally a CA
 * whose certificates clients must present (mutual TLS). TLS 1.2 and 1.3
 * only, no renegotiation, no compression. Per connection, an
 * ob_httpd_tls_conn wraps one accepted socket; only the loop thread
 * touches it. The process must ignore SIGPIPE (ob_sig_init does): OpenSSL
 * writes to the socket with write(2).
 */
#ifndef OUTBOX_HTTPD_TLS_H
#define OUTBOX_HTTPD_TLS_H

#include <stdbool.h>
#include <stddef.h>

/* The files (borrowed). cert and key are required; ca NULL = no client
 * certificate asked for. */
struct ob_httpd_tls_files {
	const char *cert; /* --tls-cert: the server's certificate (chain), PEM */
	const char *key;  /* --tls-key: its private key, PEM, unencrypted */
	const char *ca;   /* --tls-ca: CA(s) a client certificate must chain to */
};

struct ob_httpd_tls;

/* Read and check the files and build the server context: each must pass
 * ob_pem_file_check (outbox/pem_file.h) and be a file OpenSSL parses, and
 * the key must be the certificate's. OB_OK and *out owned
 * (ob_httpd_tls_free; it must outlive every server using it), or OB_EINVAL
 * (OB_ENOMEM) with one line in err naming the flag, the file and why.
 * Never prompts for a passphrase (an encrypted key is refused). */
int ob_httpd_tls_new(const struct ob_httpd_tls_files *f, struct ob_httpd_tls **out,
    char *err, size_t errlen);

/* NULL is ok. */
void ob_httpd_tls_free(struct ob_httpd_tls *t);

/* Whether client certificates are required (a CA was given). */
bool ob_httpd_tls_mutual(const struct ob_httpd_tls *t);

/* ---- per connection: httpd.c's loop thread only --------------------- */

/* What one call on a connection came to. */
enum ob_httpd_tls_io {
	OB_HTTPD_TLS_OK = 0,     /* done (handshake finished, bytes moved) */
	OB_HTTPD_TLS_WANT_READ,  /* call again when the socket is readable */
	OB_HTTPD_TLS_WANT_WRITE, /* call again when the socket is writable */
	OB_HTTPD_TLS_CLOSED,     /* the peer closed (close_notify or EOF) */
	OB_HTTPD_TLS_ERROR,      /* failed: the reason in why */
};

struct ob_httpd_tls_conn;

/* A server-side TLS session on the connected, non-blocking socket fd
 * (borrowed: the caller closes it after ob_httpd_tls_conn_free). NULL when
 * out of memory. */
struct ob_httpd_tls_conn *ob_httpd_tls_conn_new(struct ob_httpd_tls *t, int fd);

/* One step of the handshake. why (may be NULL) gets OpenSSL's reason on
 * OB_HTTPD_TLS_ERROR / CLOSED ("http request" for plain HTTP sent to the
 * port, "peer did not return a certificate", ...). */
enum ob_httpd_tls_io ob_httpd_tls_handshake(struct ob_httpd_tls_conn *c, char *why,
    size_t whylen);

/* Read up to len decrypted bytes; *got on OB_HTTPD_TLS_OK (> 0). */
enum ob_httpd_tls_io ob_httpd_tls_read(struct ob_httpd_tls_conn *c, void *buf, size_t len,
    size_t *got);

/* Write up to len bytes (a part may be taken: *put, > 0, on OK). After
 * WANT_*, the next call must pass the same buf and len. */
enum ob_httpd_tls_io ob_httpd_tls_write(struct ob_httpd_tls_conn *c, const void *buf,
    size_t len, size_t *put);

/* Decrypted or undecrypted bytes already inside OpenSSL (epoll will not
 * report them): read them before waiting. */
bool ob_httpd_tls_pending(const struct ob_httpd_tls_conn *c);

/* Send close_notify, best effort, without waiting for the peer's. */
void ob_httpd_tls_close_notify(struct ob_httpd_tls_conn *c);

/* "TLSv1.3" etc. once the handshake is done. */
const char *ob_httpd_tls_version(const struct ob_httpd_tls_conn *c);

/* NULL is ok. Does not close the socket. */
void ob_httpd_tls_conn_free(struct ob_httpd_tls_conn *c);

#endif
