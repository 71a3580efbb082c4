/*
 * bus_tls.c - the relay <-> consumer hop's TLS settings: checked at start
 * (without nng), turned into nng TLS configurations (with nng), and the
 * refusal counters nng keeps per endpoint read back (bus_tls.h).
 *
 * Files are read here, not by nng_tls_config_cert_key_file (which wants
 * certificate and key in one file and cannot say which of them is wrong):
 * the certificate is parsed on its own first (as a CA chain of a scratch
 * configuration), so a parse failure of the pair can be blamed on the key.
 * mbedTLS (which nng's TLS runs on) does not check that the key belongs
 * to the certificate: a wrong pair would only fail in the first handshake.
 * So the pair is checked here too, with mbedTLS's own parser
 * (mbedtls_pk_check_pair; libmbedtls-dev comes with libnng-dev).
 * Nothing here logs; errors go into the caller's buffer.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mbedtls/pk.h>
#include <mbedtls/x509_crt.h>
#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

#include "outbox/bus_tls.h"
#include "outbox/err.h"
#include "outbox/pem_file.h"
#include "outbox/url.h"

bool
ob_bus_tls_url(const char *url)
{
	return url != NULL && (strncmp(url, "tls+tcp://", 10) == 0 ||
	    strncmp(url, "tls+tcp4://", 11) == 0 || strncmp(url, "tls+tcp6://", 11) == 0);
}

int
ob_bus_tls_check(const char *const *urls, size_t n, const struct ob_bus_tls_files *f,
    bool server, char *err, size_t errlen)
{
	const char *tls_url = NULL;
	for (size_t i = 0; i < n && tls_url == NULL; i++)
		if (ob_bus_tls_url(urls[i]))
			tls_url = urls[i];
	const char *what = server ? "--listen" : "--route";
	if (tls_url == NULL) {
		const char *set = f->cert ? "tls-cert" : f->key ? "tls-key" : f->ca ? "tls-ca"
		    : f->server_name ? "tls-server-name" : NULL;
		if (set != NULL) {
			snprintf(err, errlen, "--%s is set but no %s is a tls+tcp:// URL: nothing"
			    " would be encrypted or authenticated", set, what);
			return OB_EINVAL;
		}
		return OB_OK;
	}
	if (f->cert == NULL || f->key == NULL || f->ca == NULL) {
		snprintf(err, errlen, "%s %s needs --tls-cert, --tls-key and --tls-ca (%s)", what,
		    tls_url, server ? "mutual TLS: this consumer's certificate and key, and the"
		    " CA that signs the relays' client certificates"
		    : "mutual TLS: this relay's client certificate and key, and the CA that"
		    " signs the consumers' certificates");
		return OB_EINVAL;
	}
	int rc;
	if ((rc = ob_pem_file_check("--tls-cert", f->cert, err, errlen)) != OB_OK ||
	    (rc = ob_pem_file_check("--tls-key", f->key, err, errlen)) != OB_OK ||
	    (rc = ob_pem_file_check("--tls-ca", f->ca, err, errlen)) != OB_OK)
		return rc;
	if (f->server_name != NULL && f->server_name[0] == '\0') {
		snprintf(err, errlen, "--tls-server-name: empty");
		return OB_EINVAL;
	}
	return OB_OK;
}

/* The whole file as a NUL-terminated string (malloc'ed), or NULL with one
 * line in err. A NUL inside (a DER file) is refused: PEM is text. */
static char *
read_pem(const char *flag, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		snprintf(err, errlen, "--%s %s: %s", flag, path, strerror(errno));
		return NULL;
	}
	char *buf = malloc(OB_PEM_FILE_MAX + 1);
	size_t len = buf != NULL ? fread(buf, 1, OB_PEM_FILE_MAX + 1, f) : 0;
	int rerr = ferror(f) ? errno : 0;
	fclose(f);
	if (buf == NULL) {
		snprintf(err, errlen, "--%s %s: out of memory", flag, path);
		return NULL;
	}
	const char *why = rerr ? strerror(rerr)
	    : len > OB_PEM_FILE_MAX ? "larger than 1 MiB, not a PEM file"
	    : len == 0 ? "empty"
	    : memchr(buf, '\0', len) != NULL ? "binary (DER?): PEM text expected"
	    : NULL;
	if (why != NULL) {
		snprintf(err, errlen, "--%s %s: %s", flag, path, why);
		free(buf);
		return NULL;
	}
	buf[len] = '\0';
	return buf;
}

/* Whether key (PEM) is the private key of cert's first certificate (PEM);
 * both already parsed by nng. false with one line in err when not. */
static bool
pair_matches(const struct ob_bus_tls_files *f, const char *cert, const char *key, char *err,
    size_t errlen)
{
	mbedtls_x509_crt crt;
	mbedtls_pk_context pk;
	mbedtls_x509_crt_init(&crt);
	mbedtls_pk_init(&pk);
	int rv = mbedtls_x509_crt_parse(&crt, (const unsigned char *)cert, strlen(cert) + 1);
	if (rv == 0)
		rv = mbedtls_pk_parse_key(&pk, (const unsigned char *)key, strlen(key) + 1, NULL, 0);
	bool ok = rv == 0 && mbedtls_pk_check_pair(&crt.pk, &pk) == 0;
	if (!ok)
		snprintf(err, errlen, "--tls-key %s: not the private key of --tls-cert %s (the pair"
		    " does not match)", f->key, f->cert);
	mbedtls_pk_free(&pk);
	mbedtls_x509_crt_free(&crt);
	return ok;
}

/* The host of url (for the default server name) into out; false when it
 * has none. */
static bool
url_host(const char *url, char *out, size_t outlen)
{
	nng_url *u = NULL;
	bool ok = ob_url_parse(&u, url) == 0 && u->u_hostname != NULL &&
	    u->u_hostname[0] != '\0' && strlen(u->u_hostname) < outlen;
	if (ok)
		snprintf(out, outlen, "%s", u->u_hostname);
	if (u != NULL)
		nng_url_free(u);
	return ok;
}

int
ob_bus_tls_config_new(bool server, const struct ob_bus_tls_files *f, const char *url,
    nng_tls_config **out, char *err, size_t errlen)
{
	nng_tls_config *cfg = NULL, *scratch = NULL;
	char *cert = NULL, *key = NULL, *ca = NULL;
	int rc = OB_EINVAL, rv;

	if (f->cert == NULL || f->key == NULL || f->ca == NULL) {
		snprintf(err, errlen, "%s needs --tls-cert, --tls-key and --tls-ca", url);
		return OB_EINVAL;
	}
	if ((cert = read_pem("tls-cert", f->cert, err, errlen)) == NULL ||
	    (key = read_pem("tls-key", f->key, err, errlen)) == NULL ||
	    (ca = read_pem("tls-ca", f->ca, err, errlen)) == NULL)
		goto fail;
	if ((rv = nng_tls_config_alloc(&cfg, server ? NNG_TLS_MODE_SERVER
	             : NNG_TLS_MODE_CLIENT)) != 0 ||
	    (rv = nng_tls_config_alloc(&scratch, NNG_TLS_MODE_CLIENT)) != 0) {
		snprintf(err, errlen, "TLS configuration: %s", nng_strerror(rv));
		rc = rv == NNG_ENOMEM ? OB_ENOMEM : OB_ENET;
		goto fail;
	}
	/* The certificate alone first: a pair that fails after it parsed is
	 * the key's fault. */
	if ((rv = nng_tls_config_ca_chain(scratch, cert, NULL)) != 0) {
		snprintf(err, errlen, "--tls-cert %s: not a PEM certificate mbedTLS can parse (%s)",
		    f->cert, nng_strerror(rv));
		goto fail;
	}
	if ((rv = nng_tls_config_own_cert(cfg, cert, key, NULL)) != 0) {
		snprintf(err, errlen, "--tls-key %s: not an unencrypted PEM private key mbedTLS"
		    " can parse (%s)", f->key, nng_strerror(rv));
		goto fail;
	}
	if (!pair_matches(f, cert, key, err, errlen))
		goto fail;
	if ((rv = nng_tls_config_ca_chain(cfg, ca, NULL)) != 0) {
		snprintf(err, errlen, "--tls-ca %s: not a PEM CA certificate mbedTLS can parse (%s)",
		    f->ca, nng_strerror(rv));
		goto fail;
	}
	/* Both sides verify: the consumer refuses a relay without a client
	 * certificate from its CA, the relay a consumer without a certificate
	 * from its CA for the server name. */
	if ((rv = nng_tls_config_auth_mode(cfg, NNG_TLS_AUTH_MODE_REQUIRED)) != 0) {
		snprintf(err, errlen, "TLS auth mode: %s", nng_strerror(rv));
		goto fail;
	}
	if (!server) {
		char host[256];
		const char *name = f->server_name;
		if (name == NULL) {
			if (!url_host(url, host, sizeof(host))) {
				snprintf(err, errlen, "--route %s: no host to verify the consumer's"
				    " certificate against; set --tls-server-name", url);
				goto fail;
			}
			name = host;
		}
		if ((rv = nng_tls_config_server_name(cfg, name)) != 0) {
			snprintf(err, errlen, "--tls-server-name %s: %s", name, nng_strerror(rv));
			goto fail;
		}
	}
	nng_tls_config_free(scratch);
	free(cert);
	free(key);
	free(ca);
	*out = cfg;
	return OB_OK;

fail:
	if (cfg != NULL)
		nng_tls_config_free(cfg);
	if (scratch != NULL)
		nng_tls_config_free(scratch);
	free(cert);
	free(key);
	free(ca);
	return rc;
}

/* ---- refusals ----------------------------------------------------------- */

const char *const ob_bus_refusal_names[OB_BUS_REFUSED_COUNT] = {
	[OB_BUS_REFUSED_AUTH] = "tls_auth",
	[OB_BUS_REFUSED_PROTO] = "protocol",
	[OB_BUS_REFUSED_TIMEOUT] = "timeout",
	[OB_BUS_REFUSED_CLOSED] = "closed",
};

/* nng's statistics of each class (listener.c / dialer.c, nng 1.5:
 * nni_listener_bump_error, nni_dialer_bump_error), summed. */
static const char *const refusal_stats[OB_BUS_REFUSED_COUNT][2] = {
	[OB_BUS_REFUSED_AUTH] = { "auth", NULL },       /* NNG_EPEERAUTH, NNG_ECRYPTO */
	[OB_BUS_REFUSED_PROTO] = { "proto", NULL },     /* NNG_EPROTO */
	[OB_BUS_REFUSED_TIMEOUT] = { "timeout", NULL }, /* NNG_ETIMEDOUT */
	[OB_BUS_REFUSED_CLOSED] = { "disconnect", "other" }, /* reset, closed, ... */
};

static const char *const refusal_hints[OB_BUS_REFUSED_COUNT] = {
	[OB_BUS_REFUSED_AUTH] = "TLS handshake failed: certificate not signed by the CA,"
	    " expired, not for the server name, no client certificate, or the peer does"
	    " not speak TLS",
	[OB_BUS_REFUSED_PROTO] = "not an SP peer of the right protocol: plain tcp:// against"
	    " tls+tcp:// (or the reverse), or not a REQ/REP peer",
	[OB_BUS_REFUSED_TIMEOUT] = "connection negotiation (SP header and TLS handshake) not"
	    " finished within 10 s",
	[OB_BUS_REFUSED_CLOSED] = "the peer closed or reset the connection during"
	    " negotiation: often plain tcp:// against tls+tcp:// (or the reverse)",
};

const char *
ob_bus_refusal_name(enum ob_bus_refusal r)
{
	return (unsigned)r < OB_BUS_REFUSED_COUNT ? ob_bus_refusal_names[r] : "unknown";
}

const char *
ob_bus_refusal_hint(enum ob_bus_refusal r)
{
	return (unsigned)r < OB_BUS_REFUSED_COUNT ? refusal_hints[r] : "";
}

static int
read_counters(nng_stat *ep, struct ob_bus_refusals *out)
{
	if (ep == NULL)
		return OB_ENET;
	for (int i = 0; i < OB_BUS_REFUSED_COUNT; i++) {
		out->n[i] = 0;
		for (int k = 0; k < 2 && refusal_stats[i][k] != NULL; k++) {
			nng_stat *s = nng_stat_find(ep, refusal_stats[i][k]);
			out->n[i] += s != NULL ? nng_stat_value(s) : 0;
		}
	}
	return OB_OK;
}

int
ob_bus_refusals_listener(nng_listener l, struct ob_bus_refusals *out)
{
	nng_stat *all = NULL;
	if (nng_stats_get(&all) != 0)
		return OB_ENET;
	int rc = read_counters(nng_stat_find_listener(all, l), out);
	nng_stats_free(all);
	return rc;
}

int
ob_bus_refusals_dialer(nng_dialer d, struct ob_bus_refusals *out)
{
	nng_stat *all = NULL;
	if (nng_stats_get(&all) != 0)
		return OB_ENET;
	int rc = read_counters(nng_stat_find_dialer(all, d), out);
	nng_stats_free(all);
	return rc;
}

bool
ob_bus_watch_update(struct ob_bus_watch *w, const struct ob_bus_refusals *now,
    int64_t now_ms, struct ob_bus_watch_news *news)
{
	bool any = false;
	memset(news, 0, sizeof(*news));
	for (int i = 0; i < OB_BUS_REFUSED_COUNT; i++) {
		/* a counter never goes back; if it did (a new endpoint), start over */
		uint64_t fresh = now->n[i] >= w->seen.n[i] ? now->n[i] - w->seen.n[i] : now->n[i];
		w->seen.n[i] = now->n[i];
		news->fresh[i] = fresh;
		news->total[i] = now->n[i];
		w->unlogged[i] += fresh;
		if (w->unlogged[i] > 0 && now_ms >= w->next_log_ms[i]) {
			news->log[i] = w->unlogged[i];
			w->unlogged[i] = 0;
			w->next_log_ms[i] = now_ms + w->every_ms;
		}
		any |= fresh > 0 || news->log[i] > 0;
	}
	return any;
}
