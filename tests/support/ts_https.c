/*
 * ts_https.c - the tests' HTTPS client and ClientHello maker (ts_https.h),
 * on OpenSSL. Blocking sockets with receive/send timeouts: a test client
 * may wait, the server under test may not.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "testsupport.h"
#include "ts_https.h"
#include "ts_tls.h"

static void
set_why(char *why, size_t whylen, const char *what, int ret, SSL *ssl)
{
	if (why == NULL || whylen == 0)
		return;
	unsigned long e = ERR_peek_last_error();
	const char *r = e != 0 ? ERR_reason_error_string(e) : NULL;
	int se = ssl != NULL ? SSL_get_error(ssl, ret) : 0;
	snprintf(why, whylen, "%s: %s (ssl error %d, errno %s)", what, r ? r : "no reason", se,
	    strerror(errno));
}

int
ts_https_raw(int port, const struct ts_https_client *cl, const char *request, size_t len,
    char *out, size_t outlen, int timeout_ms, char *why, size_t whylen)
{
	signal(SIGPIPE, SIG_IGN); /* a server that closes first must not kill the test */
	out[0] = '\0';
	if (why != NULL && whylen > 0)
		why[0] = '\0';
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	ck_assert_ptr_nonnull(ctx);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	ck_assert_int_eq(SSL_CTX_load_verify_locations(ctx, cl->ca, NULL), 1);
	if (cl->cert != NULL) {
		ck_assert_int_eq(SSL_CTX_use_certificate_chain_file(ctx, cl->cert), 1);
		ck_assert_int_eq(SSL_CTX_use_PrivateKey_file(ctx, cl->key, SSL_FILETYPE_PEM), 1);
	}
	const char *name = cl->server_name != NULL ? cl->server_name : TS_TLS_SERVER_NAME;
	int fd = ts_tcp_connect(port);
	struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	SSL *ssl = SSL_new(ctx);
	ck_assert_ptr_nonnull(ssl);
	SSL_set_fd(ssl, fd);
	SSL_set_tlsext_host_name(ssl, name);
	SSL_set1_host(ssl, name);
	int status = 0;
	size_t got = 0;
	ERR_clear_error();
	errno = 0;
	int ret = SSL_connect(ssl);
	if (ret != 1) {
		set_why(why, whylen, "handshake", ret, ssl);
		goto out;
	}
	size_t put = 0;
	ERR_clear_error();
	if ((ret = SSL_write_ex(ssl, request, len, &put)) != 1 || put != len) {
		set_why(why, whylen, "write", ret, ssl);
		goto out;
	}
	int64_t end = ts_now_ms() + timeout_ms;
	while (got + 1 < outlen && ts_now_ms() < end) {
		size_t n = 0;
		ERR_clear_error();
		errno = 0;
		ret = SSL_read_ex(ssl, out + got, outlen - 1 - got, &n);
		if (ret != 1) {
			if (SSL_get_error(ssl, ret) != SSL_ERROR_ZERO_RETURN)
				set_why(why, whylen, "read", ret, ssl);
			break;
		}
		got += n;
		out[got] = '\0';
	}
	status = ts_http_raw_status(out);
out:
	out[got] = '\0';
	SSL_free(ssl);
	close(fd);
	SSL_CTX_free(ctx);
	ERR_clear_error();
	return status;
}

size_t
ts_https_client_hello(unsigned char *out, size_t outlen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	ck_assert_ptr_nonnull(ctx);
	SSL *ssl = SSL_new(ctx);
	BIO *rb = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
	ck_assert(ssl != NULL && rb != NULL && wb != NULL);
	SSL_set_bio(ssl, rb, wb); /* ssl owns both */
	SSL_set_tlsext_host_name(ssl, TS_TLS_SERVER_NAME);
	ck_assert_int_eq(SSL_connect(ssl), -1); /* wants the ServerHello */
	int n = BIO_read(wb, out, (int)outlen);
	ck_assert_msg(n > 0 && (size_t)n < outlen, "ClientHello of %d bytes", n);
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	ERR_clear_error();
	return (size_t)n;
}
