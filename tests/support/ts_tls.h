/*
 * ts_tls.h - certificates for the mutual TLS tests, made at run time with
 * the openssl CLI into the test process's temp dir (P-256 keys: quick to
 * make): the hop's CA, a consumer certificate with a DNS SAN, a relay
 * client certificate, an expired client certificate from the same CA, and
 * a second CA with a client and a consumer certificate of its own (the
 * "wrong CA", or the new CA of a rotation).
 */
#ifndef OUTBOX_TS_TLS_H
#define OUTBOX_TS_TLS_H

#include <stdint.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

/* The DNS name in the consumer's certificate (SAN and CN). */
#define TS_TLS_SERVER_NAME "consumer.test"

#define TS_TLS_PATH_MAX 300

struct ts_tls {
	char dir[TS_TLS_PATH_MAX - 40];
	char ca[TS_TLS_PATH_MAX];          /* CA 1: the hop's own CA */
	char server_cert[TS_TLS_PATH_MAX]; /* consumer: SAN DNS:consumer.test, by CA 1 */
	char server_key[TS_TLS_PATH_MAX];
	char client_cert[TS_TLS_PATH_MAX]; /* relay: clientAuth, by CA 1 */
	char client_key[TS_TLS_PATH_MAX];
	char expired_cert[TS_TLS_PATH_MAX]; /* relay: by CA 1, valid only in January 2020 */
	char expired_key[TS_TLS_PATH_MAX];
	char ca2[TS_TLS_PATH_MAX];          /* CA 2: another CA */
	char other_cert[TS_TLS_PATH_MAX];   /* relay: clientAuth, by CA 2 */
	char other_key[TS_TLS_PATH_MAX];
	char server2_cert[TS_TLS_PATH_MAX]; /* consumer: SAN DNS:consumer.test, by CA 2
	                                     * (the CA a rotation moves to) */
	char server2_key[TS_TLS_PATH_MAX];
	char ca_both[TS_TLS_PATH_MAX];      /* CA 1 and CA 2 in one PEM file */
	char garbage[TS_TLS_PATH_MAX];      /* a text file that is no PEM at all */
};

/* Make them (once per process; later calls return the same set). Asserts
 * openssl succeeded, showing its output when not. */
const struct ts_tls *ts_tls_certs(void);

/* An nng REQ client's TLS configuration: CA ca, server name, and a client
 * certificate when cert is not NULL. Release with nng_tls_config_free. */
nng_tls_config *ts_tls_client_config(const char *ca, const char *cert, const char *key);

/* Replace the file at dst with a copy of src, atomically (a temporary file
 * in dst's directory renamed over it): a program re-reading dst sees the
 * old contents or the new, never half of them. Asserts it worked. */
void ts_tls_replace(const char *dst, const char *src);

/* One request (topic "rogue", idempotency key key, message id id) from a
 * hand-made nng REQ client dialing url, with tls (NULL: plain tcp://).
 * Returns the reply's first status, or 0 when no reply came within
 * TS_TLS_CALL_WAIT_MS (refused in the handshake). */
#define TS_TLS_CALL_WAIT_MS 3000
int ts_tls_call(const char *url, nng_tls_config *tls, uint64_t id, const char *key);

#endif
