/*
 * httpd_tls.c - the OpenSSL side of HTTPS for httpd.c (see httpd_tls.h):
 * the server context from PEM files, and one non-blocking session per
 * accepted socket, its results mapped to WANT_READ / WANT_WRITE for the
 * event loop.
 *
 * OpenSSL keeps its errors in a per-thread queue: every call here clears
 * it first and reads the reason right after, so that one connection's
 * error never shows up as another's. Never: block (the sockets are
 * non-blocking and no callback here waits), prompt for a passphrase, or
 * log (httpd_conn.c logs once per connection).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "outbox/err.h"
#include "outbox/httpd_tls.h"
#include "outbox/pem_file.h"

struct ob_httpd_tls {
	SSL_CTX *ctx;
	bool mutual;
};

struct ob_httpd_tls_conn {
	SSL *ssl;
};

/* OpenSSL's reason for the first error queued on this thread (the cause;
 * later ones are the layers that passed it on, "PEM lib"), or fallback. */
static const char *
ssl_reason(const char *fallback)
{
	unsigned long e = ERR_peek_error();
	const char *r = e != 0 ? ERR_reason_error_string(e) : NULL;
	return r != NULL ? r : fallback;
}

/* The key's passphrase callback: none is ever given (no prompt on a tty). */
static int
no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return -1;
}

int
ob_httpd_tls_new(const struct ob_httpd_tls_files *f, struct ob_httpd_tls **out, char *err,
    size_t errlen)
{
	static const unsigned char sid_ctx[] = "outbox-httpd";
	int rc;
	if ((rc = ob_pem_file_check("--tls-cert", f->cert, err, errlen)) != OB_OK ||
	    (rc = ob_pem_file_check("--tls-key", f->key, err, errlen)) != OB_OK ||
	    (f->ca != NULL && (rc = ob_pem_file_check("--tls-ca", f->ca, err, errlen)) != OB_OK))
		return rc;
	struct ob_httpd_tls *t = calloc(1, sizeof(*t));
	if (t == NULL) {
		snprintf(err, errlen, "out of memory");
		return OB_ENOMEM;
	}
	ERR_clear_error();
	rc = OB_EINVAL;
	if ((t->ctx = SSL_CTX_new(TLS_server_method())) == NULL) {
		snprintf(err, errlen, "TLS: cannot make a context: %s", ssl_reason("out of memory"));
		rc = OB_ENOMEM;
		goto fail;
	}
	SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(t->ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
	    SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_IGNORE_UNEXPECTED_EOF);
	/* The write buffer stays put between retries, but the length may
	 * shrink by what a partial write took. */
	SSL_CTX_set_mode(t->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
	    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_default_passwd_cb(t->ctx, no_passphrase);
	/* Resumed sessions of a context that verifies clients need this. */
	SSL_CTX_set_session_id_context(t->ctx, sid_ctx, sizeof(sid_ctx) - 1);
	if (SSL_CTX_use_certificate_chain_file(t->ctx, f->cert) != 1) {
		snprintf(err, errlen, "--tls-cert %s: not a PEM certificate OpenSSL can read (%s)",
		    f->cert, ssl_reason("unknown error"));
		goto fail;
	}
	ERR_clear_error();
	if (SSL_CTX_use_PrivateKey_file(t->ctx, f->key, SSL_FILETYPE_PEM) != 1) {
		int r = ERR_GET_REASON(ERR_peek_error());
		if (r == X509_R_KEY_VALUES_MISMATCH || r == X509_R_KEY_TYPE_MISMATCH)
			snprintf(err, errlen, "--tls-key %s: not the private key of --tls-cert %s (%s)",
			    f->key, f->cert, ssl_reason("key values mismatch"));
		else
			snprintf(err, errlen, "--tls-key %s: not an unencrypted PEM private key"
			    " OpenSSL can read (%s)", f->key, ssl_reason("unknown error"));
		goto fail;
	}
	ERR_clear_error();
	if (SSL_CTX_check_private_key(t->ctx) != 1) {
		snprintf(err, errlen, "--tls-key %s: not the private key of --tls-cert %s (%s)",
		    f->key, f->cert, ssl_reason("key values mismatch"));
		goto fail;
	}
	if (f->ca != NULL) {
		ERR_clear_error();
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(f->ca);
		if (names == NULL || SSL_CTX_load_verify_locations(t->ctx, f->ca, NULL) != 1) {
			if (names != NULL)
				sk_X509_NAME_pop_free(names, X509_NAME_free);
			snprintf(err, errlen, "--tls-ca %s: no PEM CA certificate OpenSSL can read"
			    " (%s)", f->ca, ssl_reason("no certificate found"));
			goto fail;
		}
		/* The CA names go in the CertificateRequest (clients pick by them). */
		SSL_CTX_set_client_CA_list(t->ctx, names);
		SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
		t->mutual = true;
	}
	ERR_clear_error();
	*out = t;
	return OB_OK;
fail:
	ERR_clear_error();
	ob_httpd_tls_free(t);
	return rc;
}

void
ob_httpd_tls_free(struct ob_httpd_tls *t)
{
	if (t == NULL)
		return;
	SSL_CTX_free(t->ctx);
	free(t);
}

bool
ob_httpd_tls_mutual(const struct ob_httpd_tls *t)
{
	return t != NULL && t->mutual;
}

struct ob_httpd_tls_conn *
ob_httpd_tls_conn_new(struct ob_httpd_tls *t, int fd)
{
	struct ob_httpd_tls_conn *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return NULL;
	ERR_clear_error();
	if ((c->ssl = SSL_new(t->ctx)) == NULL || SSL_set_fd(c->ssl, fd) != 1) {
		ERR_clear_error();
		ob_httpd_tls_conn_free(c);
		return NULL;
	}
	SSL_set_accept_state(c->ssl);
	return c;
}

/* Map an SSL_* result (ret <= 0) to the loop's terms; why gets the reason. */
static enum ob_httpd_tls_io
io_result(struct ob_httpd_tls_conn *c, int ret, int saved_errno, char *why, size_t whylen)
{
	int e = SSL_get_error(c->ssl, ret);
	enum ob_httpd_tls_io io;
	const char *r = NULL;
	switch (e) {
	case SSL_ERROR_WANT_READ:
		io = OB_HTTPD_TLS_WANT_READ;
		break;
	case SSL_ERROR_WANT_WRITE:
		io = OB_HTTPD_TLS_WANT_WRITE;
		break;
	case SSL_ERROR_ZERO_RETURN:
		io = OB_HTTPD_TLS_CLOSED;
		r = "the peer closed the connection";
		break;
	case SSL_ERROR_SYSCALL:
		io = saved_errno != 0 ? OB_HTTPD_TLS_ERROR : OB_HTTPD_TLS_CLOSED;
		r = saved_errno != 0 ? strerror(saved_errno) : "the peer closed the connection";
		break;
	default:
		io = OB_HTTPD_TLS_ERROR;
		r = ssl_reason("TLS error");
		break;
	}
	if (why != NULL && whylen > 0 && r != NULL)
		snprintf(why, whylen, "%s", r);
	ERR_clear_error();
	return io;
}

/* Before each SSL_* call: the queue and errno start empty, so that what
 * io_result reads afterwards is this call's. */
static void
io_begin(void)
{
	ERR_clear_error();
	errno = 0;
}

/* After SSL_read_ex / SSL_write_ex: *done gets the bytes moved on success. */
static enum ob_httpd_tls_io
io_end(struct ob_httpd_tls_conn *c, int ret, size_t n, size_t *done)
{
	if (ret != 1)
		return io_result(c, ret, errno, NULL, 0);
	*done = n;
	return OB_HTTPD_TLS_OK;
}

enum ob_httpd_tls_io
ob_httpd_tls_handshake(struct ob_httpd_tls_conn *c, char *why, size_t whylen)
{
	io_begin();
	int ret = SSL_do_handshake(c->ssl);
	if (ret == 1)
		return OB_HTTPD_TLS_OK;
	return io_result(c, ret, errno, why, whylen);
}

enum ob_httpd_tls_io
ob_httpd_tls_read(struct ob_httpd_tls_conn *c, void *buf, size_t len, size_t *got)
{
	size_t n = 0;
	io_begin();
	int ret = SSL_read_ex(c->ssl, buf, len, &n);
	return io_end(c, ret, n, got);
}

enum ob_httpd_tls_io
ob_httpd_tls_write(struct ob_httpd_tls_conn *c, const void *buf, size_t len, size_t *put)
{
	size_t n = 0;
	io_begin();
	int ret = SSL_write_ex(c->ssl, buf, len, &n);
	return io_end(c, ret, n, put);
}

bool
ob_httpd_tls_pending(const struct ob_httpd_tls_conn *c)
{
	return SSL_has_pending(c->ssl) == 1;
}

void
ob_httpd_tls_close_notify(struct ob_httpd_tls_conn *c)
{
	ERR_clear_error();
	(void)SSL_shutdown(c->ssl); /* sends ours; the peer's is not waited for */
	ERR_clear_error();
}

const char *
ob_httpd_tls_version(const struct ob_httpd_tls_conn *c)
{
	return SSL_get_version(c->ssl);
}

void
ob_httpd_tls_conn_free(struct ob_httpd_tls_conn *c)
{
	if (c == NULL)
		return;
	SSL_free(c->ssl);
	free(c);
}
