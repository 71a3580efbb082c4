/*
 * ts_tls.c - the mutual TLS tests' certificates, made with the openssl CLI
 * (ts_tls.h), and a TLS client configuration for test clients.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/tls/tls.h>

#include "outbox/buf.h"
#include "outbox/wire.h"

#include "testsupport.h"
#include "ts_consumer.h"
#include "ts_tls.h"

/* One shell script: two CAs, leaf certificates signed with `openssl x509
 * -req`, the expired one with `openssl ca` (the only CLI that sets both
 * dates in OpenSSL 3.0). */
static const char script[] =
    "set -e\n"
    "cd \"$1\"\n"
    "key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out \"$1\"; }\n"
    "ca() {\n"
    "  key $1.key\n"
    "  openssl req -x509 -new -key $1.key -out $1.pem -days 3650 -subj \"/CN=$2\""
    "    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign\n"
    "}\n"
    "leaf() { # name ca cn extfile\n"
    "  key $1.key\n"
    "  openssl req -new -key $1.key -out $1.csr -subj \"/CN=$3\"\n"
    "  openssl x509 -req -in $1.csr -CA $2.pem -CAkey $2.key -CAcreateserial -out $1.pem"
    "    -days 365 -extfile $4\n"
    "}\n"
    "printf 'subjectAltName=DNS:consumer.test\\nextendedKeyUsage=serverAuth\\n"
    "basicConstraints=CA:FALSE\\n' > server.ext\n"
    "printf 'extendedKeyUsage=clientAuth\\nbasicConstraints=CA:FALSE\\n' > client.ext\n"
    "ca ca 'outbox test hop CA'\n"
    "ca ca2 'outbox test other CA'\n"
    "leaf server ca consumer.test server.ext\n"
    "leaf client ca relay-1 client.ext\n"
    "leaf other ca2 relay-other client.ext\n"
    "leaf server2 ca2 consumer.test server.ext\n"
    "cat ca.pem ca2.pem > ca-both.pem\n"
    "mkdir -p cadb && : > cadb/index.txt && echo 1000 > cadb/serial\n"
    "cat > ca.cnf <<'EOF'\n"
    "[ca]\ndefault_ca = c\n"
    "[c]\ndatabase = cadb/index.txt\nnew_certs_dir = cadb\nserial = cadb/serial\n"
    "default_md = sha256\npolicy = p\nunique_subject = no\n"
    "[p]\ncommonName = supplied\n"
    "[ext]\nextendedKeyUsage = clientAuth\nbasicConstraints = CA:FALSE\n"
    "EOF\n"
    "key expired.key\n"
    "openssl req -new -key expired.key -out expired.csr -subj /CN=relay-expired\n"
    "openssl ca -batch -notext -config ca.cnf -cert ca.pem -keyfile ca.key -in expired.csr"
    "  -out expired.pem -startdate 20200101000000Z -enddate 20200201000000Z -extensions ext\n"
    "echo 'this is not a certificate' > garbage.txt\n";

static void
path(char *out, const char *dir, const char *name)
{
	snprintf(out, TS_TLS_PATH_MAX, "%s/%s", dir, name);
}

const struct ts_tls *
ts_tls_certs(void)
{
	static struct ts_tls t;
	static bool made;
	if (made)
		return &t;
	snprintf(t.dir, sizeof(t.dir), "%s/tls", ts_tmpdir());
	char mk[TS_TLS_PATH_MAX + 16], out[8192];
	ck_assert(strlen(ts_tmpdir()) + 4 < sizeof(t.dir));
	snprintf(mk, sizeof(mk), "mkdir -p '%s'", t.dir);
	ck_assert_int_eq(system(mk), 0);
	char *argv[] = { "/bin/sh", "-c", (char *)script, "sh", t.dir, NULL };
	int rc = ts_run(argv, NULL, out, sizeof(out), 120000);
	ck_assert_msg(rc == 0, "making test certificates with openssl failed (%d):\n%s", rc, out);
	path(t.ca, t.dir, "ca.pem");
	path(t.server_cert, t.dir, "server.pem");
	path(t.server_key, t.dir, "server.key");
	path(t.client_cert, t.dir, "client.pem");
	path(t.client_key, t.dir, "client.key");
	path(t.expired_cert, t.dir, "expired.pem");
	path(t.expired_key, t.dir, "expired.key");
	path(t.ca2, t.dir, "ca2.pem");
	path(t.other_cert, t.dir, "other.pem");
	path(t.other_key, t.dir, "other.key");
	path(t.server2_cert, t.dir, "server2.pem");
	path(t.server2_key, t.dir, "server2.key");
	path(t.ca_both, t.dir, "ca-both.pem");
	path(t.garbage, t.dir, "garbage.txt");
	made = true;
	return &t;
}

nng_tls_config *
ts_tls_client_config(const char *ca, const char *cert, const char *key)
{
	nng_tls_config *cfg;
	ck_assert_int_eq(nng_tls_config_alloc(&cfg, NNG_TLS_MODE_CLIENT), 0);
	ck_assert_int_eq(nng_tls_config_ca_file(cfg, ca), 0);
	ck_assert_int_eq(nng_tls_config_server_name(cfg, TS_TLS_SERVER_NAME), 0);
	if (cert != NULL) {
		char *c = ts_read_file(cert), *k = ts_read_file(key);
		ck_assert_ptr_nonnull(c);
		ck_assert_ptr_nonnull(k);
		ck_assert_int_eq(nng_tls_config_own_cert(cfg, c, k, NULL), 0);
		free(c);
		free(k);
	}
	return cfg;
}

void
ts_tls_replace(const char *dst, const char *src)
{
	char tmp[TS_TLS_PATH_MAX + 16];
	snprintf(tmp, sizeof(tmp), "%s.new", dst);
	char *text = ts_read_file(src);
	ck_assert_msg(text != NULL, "cannot read %s", src);
	FILE *f = fopen(tmp, "w");
	ck_assert_msg(f != NULL, "cannot write %s", tmp);
	ck_assert_int_eq(fputs(text, f) >= 0, 1);
	ck_assert_int_eq(fclose(f), 0);
	free(text);
	ck_assert_msg(rename(tmp, dst) == 0, "rename %s -> %s", tmp, dst);
}

int
ts_tls_call(const char *url, nng_tls_config *tls, uint64_t id, const char *key)
{
	nng_socket s;
	nng_dialer d;
	ck_assert_int_eq(nng_req0_open(&s), 0);
	nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, TS_TLS_CALL_WAIT_MS);
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, TS_TLS_CALL_WAIT_MS);
	nng_socket_set_ms(s, NNG_OPT_RECONNMINT, 100);
	ck_assert_int_eq(nng_dialer_create(&d, s, url), 0);
	if (tls != NULL)
		ck_assert_int_eq(nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, tls), 0);
	ck_assert_int_eq(nng_dialer_start(d, NNG_FLAG_NONBLOCK), 0);
	struct ob_wire_msg m = ts_consumer_msg(id, "rogue", key, "{\"forged\":true}");
	struct ob_buf b = OB_BUF_INIT;
	ck_assert_int_eq(ob_wire_encode_request(&b, &m, 1, &ts_consumer_limits), 0);
	int status = 0;
	if (nng_send(s, b.data, b.len, 0) == 0) {
		void *rep = NULL;
		size_t len = 0;
		if (nng_recv(s, &rep, &len, NNG_FLAG_ALLOC) == 0) {
			struct ob_wire_reply r;
			if (ob_wire_decode_reply(rep, len, &ts_consumer_limits, &r) == 0) {
				status = r.count > 0 ? r.results[0].status : -1;
				ob_wire_reply_fini(&r);
			}
			nng_free(rep, len);
		}
	}
	ob_buf_fini(&b);
	nng_close(s);
	return status;
}
