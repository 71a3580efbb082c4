/*
 * ts_tls_webhook.h - the webhook target certificates the https:// webhook
 * tests need beside ts_tls.h's, made with the openssl CLI from ts_tls's
 * CA 1 into the same temp dir: a server certificate for another DNS name,
 * an expired one for the right name, and CA 1 as an OpenSSL hashed
 * directory (what SSL_CERT_DIR names).
 */
#ifndef OUTBOX_TS_TLS_WEBHOOK_H
#define OUTBOX_TS_TLS_WEBHOOK_H

#include "ts_tls.h"

/* The DNS name in other_cert (SAN and CN). */
#define TS_TLS_OTHER_NAME "other.test"

struct ts_tls_webhook {
	char other_cert[TS_TLS_PATH_MAX];   /* serverAuth, SAN DNS:other.test, by CA 1 */
	char other_key[TS_TLS_PATH_MAX];
	char expired_cert[TS_TLS_PATH_MAX]; /* serverAuth, SAN DNS:consumer.test, by CA 1,
	                                     * valid only in January 2020 */
	char expired_key[TS_TLS_PATH_MAX];
	char ca_dir[TS_TLS_PATH_MAX];       /* CA 1 alone, `openssl rehash`ed */
};

/* Make them (once per process; later calls return the same set), after
 * ts_tls_certs. Asserts openssl succeeded, showing its output when not. */
const struct ts_tls_webhook *ts_tls_webhook_certs(void);

#endif
