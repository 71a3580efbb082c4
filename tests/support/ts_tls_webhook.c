/*
 * ts_tls_webhook.c - the extra webhook target certificates
 * (ts_tls_webhook.h), made with the openssl CLI in a directory of their
 * own beside ts_tls's, signed by its CA 1.
 */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testsupport.h"
#include "ts_tls_webhook.h"

/* $1: the directory to make them in; $2: CA 1's directory (ca.pem,
 * ca.key). The expired one with `openssl ca` (the only CLI that sets both
 * dates in OpenSSL 3.0), from a database of its own. */
static const char script[] =
    "set -e\n"
    "cd \"$1\"\n"
    "ca=\"$2\"\n"
    "key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out \"$1\"; }\n"
    "printf 'subjectAltName=DNS:other.test\\nextendedKeyUsage=serverAuth\\n"
    "basicConstraints=CA:FALSE\\n' > other.ext\n"
    "key other.key\n"
    "openssl req -new -key other.key -out other.csr -subj /CN=other.test\n"
    "openssl x509 -req -in other.csr -CA \"$ca/ca.pem\" -CAkey \"$ca/ca.key\""
    "  -CAcreateserial -CAserial ca.srl -out other.pem -days 365 -extfile other.ext\n"
    "mkdir -p db && : > db/index.txt && echo 2000 > db/serial\n"
    "cat > ca.cnf <<'EOF'\n"
    "[ca]\ndefault_ca = c\n"
    "[c]\ndatabase = db/index.txt\nnew_certs_dir = db\nserial = db/serial\n"
    "default_md = sha256\npolicy = p\nunique_subject = no\ncopy_extensions = none\n"
    "[p]\ncommonName = supplied\n"
    "[ext]\nsubjectAltName = DNS:consumer.test\nextendedKeyUsage = serverAuth\n"
    "basicConstraints = CA:FALSE\n"
    "EOF\n"
    "key expired.key\n"
    "openssl req -new -key expired.key -out expired.csr -subj /CN=consumer.test\n"
    "openssl ca -batch -notext -config ca.cnf -cert \"$ca/ca.pem\" -keyfile \"$ca/ca.key\""
    "  -in expired.csr -out expired.pem -startdate 20200101000000Z -enddate 20200201000000Z"
    "  -extensions ext\n"
    "mkdir -p cadir && cp \"$ca/ca.pem\" cadir/ca1.pem && openssl rehash cadir\n";

/* dir: at most TS_TLS_PATH_MAX - 25 bytes; name: a short one of ours */
static void
path(char *out, const char dir[TS_TLS_PATH_MAX - 24], const char *name)
{
	snprintf(out, TS_TLS_PATH_MAX, "%.*s/%.16s", TS_TLS_PATH_MAX - 25, dir, name);
}

const struct ts_tls_webhook *
ts_tls_webhook_certs(void)
{
	static struct ts_tls_webhook t;
	static bool made;
	if (made)
		return &t;
	const struct ts_tls *base = ts_tls_certs();
	char dir[TS_TLS_PATH_MAX - 24], mk[TS_TLS_PATH_MAX + 16], out[8192];
	ck_assert(strlen(base->dir) + 10 < sizeof(dir));
	snprintf(dir, sizeof(dir), "%s/webhook", base->dir);
	snprintf(mk, sizeof(mk), "mkdir -p '%s'", dir);
	ck_assert_int_eq(system(mk), 0);
	char *argv[] = { "/bin/sh", "-c", (char *)script, "sh", dir, (char *)base->dir, NULL };
	int rc = ts_run(argv, NULL, out, sizeof(out), 120000);
	ck_assert_msg(rc == 0, "making webhook test certificates with openssl failed (%d):\n%s",
	    rc, out);
	path(t.other_cert, dir, "other.pem");
	path(t.other_key, dir, "other.key");
	path(t.expired_cert, dir, "expired.pem");
	path(t.expired_key, dir, "expired.key");
	path(t.ca_dir, dir, "cadir");
	made = true;
	return &t;
}
