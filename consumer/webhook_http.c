/*
 * webhook_http.c - one webhook POST over libcurl (webhook_http.h): the
 * target's URL and trust checked at start, a pool of easy handles that keep
 * their connections, and the outcome of a call in the terms the handler
 * decides on (answered, timeout, TLS, failed; sent or not).
 *
 * Owns the easy handles and their connections, nothing else: the request's
 * headers and body are the caller's, borrowed for the call. Never retries,
 * never follows a redirect (a 3xx is an answer like any other), never
 * skips a certificate check, never logs a proxy variable's value (it may
 * carry a password).
 *
 * libcurl runs in the calling thread (curl_easy_perform); CURLOPT_NOSIGNAL
 * because the consumer has threads (libcurl's resolver is threaded, so a
 * DNS lookup still keeps the deadline).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <curl/curl.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include "outbox/err.h"
#include "outbox/log.h"
#include "outbox/pem_file.h"
#include "webhook_http.h"

/* One easy handle and what its callbacks write into; in the pool while
 * idle, the calling thread's during a call. */
struct conn {
	CURL *easy;
	char errbuf[CURL_ERROR_SIZE];
	int prereqs;      /* pre-request callbacks during this call */
	bool body_oom;    /* the body could not be kept: the call failed */
	char *body;       /* this call's body so far, NUL-terminated */
	size_t len, cap, max;
	struct conn *next;
};

struct webhook_http {
	char *url;                     /* the URL sent (its host is tls_name) */
	struct curl_slist *connect_to; /* NULL, or "NAME:PORT:HOST:PORT" */
	bool https;
	bool narrow;                   /* --webhook-ca: that file only */
	char *cainfo, *capath;         /* NULL: libcurl's default (unless narrow) */
	char *sys_cainfo, *sys_capath; /* $SSL_CERT_FILE, $SSL_CERT_DIR: the proxy's */
	char tls_name[WEBHOOK_HTTP_NAME_MAX + 1];
	char trust[400];
	int64_t timeout_ms;
	size_t body_max;
	bool global;                   /* our curl_global_init is to be undone */
	pthread_mutex_t mu;            /* guards idle */
	struct conn *idle;
};

bool
webhook_http_header_safe(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c == 0x7f)
			return false;
	}
	return true;
}

int
webhook_http_global_init(char *err, size_t errlen)
{
	CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
	if (rc != CURLE_OK) {
		snprintf(err, errlen, "libcurl: %s", curl_easy_strerror(rc));
		return OB_ENOMEM;
	}
	return OB_OK;
}

void
webhook_http_global_fini(void)
{
	curl_global_cleanup();
}

enum webhook_http_outcome
webhook_http_outcome_of(int code)
{
	switch ((CURLcode)code) {
	case CURLE_OK:
		return WEBHOOK_HTTP_ANSWERED;
	case CURLE_OPERATION_TIMEDOUT:
		return WEBHOOK_HTTP_TIMEOUT;
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_SSL_INVALIDCERTSTATUS:
	case CURLE_SSL_CLIENTCERT:
	case CURLE_SSL_ENGINE_NOTFOUND:
	case CURLE_SSL_ENGINE_SETFAILED:
	case CURLE_SSL_ENGINE_INITFAILED:
	case CURLE_USE_SSL_FAILED:
		return WEBHOOK_HTTP_TLS;
	default:
		return WEBHOOK_HTTP_FAILED;
	}
}

/* --- start-up checks ------------------------------------------------- */

/* path holds at least one PEM certificate OpenSSL reads (the parser
 * libcurl hands CURLOPT_CAINFO to). what names the flag or variable. */
static int
ca_file_parse(const char *what, const char *path, char *err, size_t errlen)
{
	X509_STORE *st = X509_STORE_new();
	X509_LOOKUP *lu = st != NULL ? X509_STORE_add_lookup(st, X509_LOOKUP_file()) : NULL;
	int n = lu != NULL ? X509_load_cert_crl_file(lu, path, X509_FILETYPE_PEM) : 0;
	int certs = 0;
	if (n > 0) {
		STACK_OF(X509_OBJECT) *objs = X509_STORE_get0_objects(st);
		for (int i = 0; i < sk_X509_OBJECT_num(objs); i++)
			if (X509_OBJECT_get_type(sk_X509_OBJECT_value(objs, i)) == X509_LU_X509)
				certs++;
	}
	char why[256] = "no certificate in it";
	unsigned long e = ERR_peek_last_error();
	if (e != 0)
		ERR_error_string_n(e, why, sizeof(why));
	ERR_clear_error();
	X509_STORE_free(st);
	if (st == NULL || lu == NULL) {
		snprintf(err, errlen, "%s %s: out of memory", what, path);
		return OB_ENOMEM;
	}
	if (certs == 0) {
		snprintf(err, errlen, "%s %s: not a PEM CA certificate OpenSSL can parse (%s)",
		    what, path, why);
		return OB_EINVAL;
	}
	return OB_OK;
}

/* A DNS name of 1..WEBHOOK_HTTP_NAME_MAX letters, digits, '-' and '.'. */
static bool
dns_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > WEBHOOK_HTTP_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		        c == '-' || c == '.'))
			return false;
	}
	return true;
}

static int
oom(char *err, size_t errlen)
{
	snprintf(err, errlen, "out of memory (webhook target)");
	return OB_ENOMEM;
}

/* The URL: scheme, no user info, the host; with a server name the URL is
 * sent to that name and connected to the URL's host (connect_to). */
static int
target_parse(struct webhook_http *h, const struct webhook_http_config *cfg, char *err,
    size_t errlen)
{
	const char *url = cfg->url;
	bool has_ca = cfg->ca != NULL && cfg->ca[0] != '\0';
	bool has_name = cfg->server_name != NULL && cfg->server_name[0] != '\0';
	h->https = url != NULL && strncasecmp(url, "https://", 8) == 0;
	if (url == NULL || (strncasecmp(url, "http://", 7) != 0 && !h->https)) {
		snprintf(err, errlen, "--webhook-url: need an http:// or https:// URL");
		return OB_EINVAL;
	}
	if (!h->https && (has_ca || has_name)) {
		snprintf(err, errlen, "%s is set but --webhook-url %s is not https:// (it would"
		    " protect nothing)", has_ca ? "--webhook-ca" : "--webhook-server-name", url);
		return OB_EINVAL;
	}
	CURLU *u = curl_url();
	if (u == NULL)
		return oom(err, errlen);
	char *host = NULL, *port = NULL, *user = NULL, *full = NULL;
	int rc = OB_EINVAL;
	CURLUcode uc = curl_url_set(u, CURLUPART_URL, url, 0);
	if (uc != CURLUE_OK) {
		snprintf(err, errlen, "--webhook-url %s: %s", url, curl_url_strerror(uc));
		goto out;
	}
	if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK) {
		snprintf(err, errlen, "--webhook-url %s: no user info in the URL (sign the calls"
		    " with --webhook-secret-file)", url);
		goto out;
	}
	if ((uc = curl_url_get(u, CURLUPART_HOST, &host, 0)) != CURLUE_OK ||
	    (uc = curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT)) != CURLUE_OK) {
		snprintf(err, errlen, "--webhook-url %s: %s", url, curl_url_strerror(uc));
		goto out;
	}
	const char *name = host;
	if (has_name) {
		if (!dns_name_ok(cfg->server_name)) {
			snprintf(err, errlen, "--webhook-server-name: a DNS name of 1..%d letters,"
			    " digits, '-' and '.'", WEBHOOK_HTTP_NAME_MAX);
			goto out;
		}
		name = cfg->server_name;
	}
	if (strlen(name) > WEBHOOK_HTTP_NAME_MAX) {
		snprintf(err, errlen, "--webhook-url %s: a host name of more than %d bytes", url,
		    WEBHOOK_HTTP_NAME_MAX);
		goto out;
	}
	snprintf(h->tls_name, sizeof(h->tls_name), "%s", h->https ? name : "");
	if (has_name && strcasecmp(name, host) != 0) {
		char entry[2 * WEBHOOK_HTTP_NAME_MAX + 32];
		snprintf(entry, sizeof(entry), "%s:%s:%s:%s", name, port, host, port);
		if ((uc = curl_url_set(u, CURLUPART_HOST, name, 0)) != CURLUE_OK) {
			snprintf(err, errlen, "--webhook-server-name %s: %s", name,
			    curl_url_strerror(uc));
			goto out;
		}
		if ((h->connect_to = curl_slist_append(NULL, entry)) == NULL) {
			rc = oom(err, errlen);
			goto out;
		}
	}
	if ((uc = curl_url_get(u, CURLUPART_URL, &full, 0)) != CURLUE_OK) {
		snprintf(err, errlen, "--webhook-url %s: %s", url, curl_url_strerror(uc));
		goto out;
	}
	if ((h->url = strdup(full)) == NULL) {
		rc = oom(err, errlen);
		goto out;
	}
	rc = OB_OK;
out:
	curl_free(full);
	curl_free(user);
	curl_free(port);
	curl_free(host);
	curl_url_cleanup(u);
	return rc;
}

/* The trust of an https:// target (webhook_http.h): --webhook-ca alone,
 * else the system store with the OpenSSL variables passed on. */
static int
trust_set(struct webhook_http *h, const char *ca, char *err, size_t errlen)
{
	const char *f = getenv("SSL_CERT_FILE"), *d = getenv("SSL_CERT_DIR");
	f = f != NULL && f[0] != '\0' ? f : NULL;
	d = d != NULL && d[0] != '\0' ? d : NULL;
	if ((f != NULL && (h->sys_cainfo = strdup(f)) == NULL) ||
	    (d != NULL && (h->sys_capath = strdup(d)) == NULL))
		return oom(err, errlen);
	if (!h->https)
		return OB_OK;
	int rc;
	if (ca != NULL && ca[0] != '\0') {
		if ((rc = ob_pem_file_check("--webhook-ca", ca, err, errlen)) != OB_OK ||
		    (rc = ca_file_parse("--webhook-ca", ca, err, errlen)) != OB_OK)
			return rc;
		if ((h->cainfo = strdup(ca)) == NULL)
			return oom(err, errlen);
		h->narrow = true;
		snprintf(h->trust, sizeof(h->trust), "--webhook-ca %s", ca);
		return OB_OK;
	}
	struct stat st;
	if (f != NULL) {
		const char *why = stat(f, &st) != 0 ? strerror(errno)
		    : !S_ISREG(st.st_mode) ? "not a regular file" : NULL;
		if (why != NULL) {
			snprintf(err, errlen, "SSL_CERT_FILE %s (the https:// webhook's CA"
			    " store): %s", f, why);
			return OB_EINVAL;
		}
		if ((rc = ca_file_parse("SSL_CERT_FILE", f, err, errlen)) != OB_OK)
			return rc;
		h->cainfo = h->sys_cainfo;
	}
	if (d != NULL) {
		const char *why = stat(d, &st) != 0 ? strerror(errno)
		    : !S_ISDIR(st.st_mode) ? "not a directory" : NULL;
		if (why != NULL) {
			snprintf(err, errlen, "SSL_CERT_DIR %s (the https:// webhook's CA"
			    " store): %s", d, why);
			return OB_EINVAL;
		}
		h->capath = h->sys_capath;
	}
	const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
	snprintf(h->trust, sizeof(h->trust), "the system CA store (file %s%s, directory %s%s)",
	    f != NULL ? f : v->cainfo != NULL ? v->cainfo : "none",
	    f != NULL ? " from SSL_CERT_FILE" : "", d != NULL ? d : v->capath != NULL ? v->capath
	    : "none", d != NULL ? " from SSL_CERT_DIR" : "");
	return OB_OK;
}

/* The first of the variables libcurl reads for name (its order), or NULL. */
static const char *
env_first(const char *const *names)
{
	for (; *names != NULL; names++) {
		const char *v = getenv(*names);
		if (v != NULL && v[0] != '\0')
			return *names;
	}
	return NULL;
}

static void
log_target(const struct webhook_http *h)
{
	static const char *const https_env[] = { "https_proxy", "HTTPS_PROXY", "all_proxy",
		"ALL_PROXY", NULL };
	static const char *const http_env[] = { "http_proxy", "all_proxy", "ALL_PROXY", NULL };
	static const char *const no_env[] = { "no_proxy", "NO_PROXY", NULL };
	const char *proxy = env_first(h->https ? https_env : http_env);
	const char *no = env_first(no_env);
	char qu[600], qt[900];
	ob_info("consumer.webhook.target", "url=%s tls=%s name=%s trust=%s proxy_env=%s"
	    " no_proxy_env=%s", ob_log_q(h->url, qu, sizeof(qu)), h->https ? "verify" : "off",
	    h->https ? h->tls_name : "-", h->https ? ob_log_q(h->trust, qt, sizeof(qt)) : "-",
	    proxy != NULL ? proxy : "none", no != NULL ? no : "none");
}

/* --- the pool --------------------------------------------------------- */

static int
on_prereq(void *arg, char *remote_ip, char *local_ip, int remote_port, int local_port)
{
	(void)remote_ip, (void)local_ip, (void)remote_port, (void)local_port;
	struct conn *c = arg;
	/* a second request in one call is libcurl re-sending on a fresh
	 * connection what a dead reused one may have delivered: refused */
	return c->prereqs++ == 0 ? CURL_PREREQFUNC_OK : CURL_PREREQFUNC_ABORT;
}

/* Keep the first c->max bytes of the body, discard the rest. */
static size_t
on_body(char *p, size_t size, size_t nmemb, void *arg)
{
	struct conn *c = arg;
	size_t n = size * nmemb;
	size_t keep = c->max - c->len < n ? c->max - c->len : n;
	if (keep == 0)
		return n;
	if (c->len + keep + 1 > c->cap) {
		size_t cap = c->cap == 0 ? 1024 : c->cap;
		while (cap < c->len + keep + 1)
			cap *= 2;
		if (cap > c->max + 1)
			cap = c->max + 1;
		char *b = realloc(c->body, cap);
		if (b == NULL) {
			c->body_oom = true;
			return 0; /* the call fails: CURLE_WRITE_ERROR */
		}
		c->body = b;
		c->cap = cap;
	}
	memcpy(c->body + c->len, p, keep);
	c->len += keep;
	c->body[c->len] = '\0';
	return n;
}

#define SET(e, opt, v)                                                  \
	do {                                                            \
		if ((rc = curl_easy_setopt((e), (opt), (v))) != CURLE_OK) { \
			what = #opt;                                    \
			goto fail;                                      \
		}                                                       \
	} while (0)

/* A new handle with every option that does not change between calls. */
static int
conn_new(struct webhook_http *h, struct conn **out, char *err, size_t errlen)
{
	struct conn *c = calloc(1, sizeof(*c));
	if (c == NULL || (c->easy = curl_easy_init()) == NULL) {
		free(c);
		return oom(err, errlen);
	}
	c->max = h->body_max;
	CURL *e = c->easy;
	CURLcode rc;
	const char *what = "";
	SET(e, CURLOPT_ERRORBUFFER, c->errbuf);
	SET(e, CURLOPT_NOSIGNAL, 1L);
	SET(e, CURLOPT_URL, h->url);
	SET(e, CURLOPT_PROTOCOLS_STR, "http,https");
	SET(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	SET(e, CURLOPT_FOLLOWLOCATION, 0L);
	SET(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	SET(e, CURLOPT_POST, 1L);
	SET(e, CURLOPT_TIMEOUT_MS, (long)h->timeout_ms);
	SET(e, CURLOPT_CONNECTTIMEOUT_MS, (long)h->timeout_ms);
	SET(e, CURLOPT_WRITEFUNCTION, on_body);
	SET(e, CURLOPT_WRITEDATA, c);
	SET(e, CURLOPT_PREREQFUNCTION, on_prereq);
	SET(e, CURLOPT_PREREQDATA, c);
	SET(e, CURLOPT_SSL_VERIFYPEER, 1L);
	SET(e, CURLOPT_SSL_VERIFYHOST, 2L);
	SET(e, CURLOPT_PROXY_SSL_VERIFYPEER, 1L);
	SET(e, CURLOPT_PROXY_SSL_VERIFYHOST, 2L);
	if (h->connect_to != NULL)
		SET(e, CURLOPT_CONNECT_TO, h->connect_to);
	if (h->cainfo != NULL)
		SET(e, CURLOPT_CAINFO, h->cainfo);
	if (h->narrow)
		SET(e, CURLOPT_CAPATH, (char *)NULL); /* no system directory beside it */
	else if (h->capath != NULL)
		SET(e, CURLOPT_CAPATH, h->capath);
	if (h->sys_cainfo != NULL)
		SET(e, CURLOPT_PROXY_CAINFO, h->sys_cainfo);
	if (h->sys_capath != NULL)
		SET(e, CURLOPT_PROXY_CAPATH, h->sys_capath);
	*out = c;
	return OB_OK;
fail:
	snprintf(err, errlen, "libcurl refused %s: %s", what, curl_easy_strerror(rc));
	curl_easy_cleanup(e);
	free(c);
	return rc == CURLE_OUT_OF_MEMORY ? OB_ENOMEM : OB_EINVAL;
}

static void
conn_free(struct conn *c)
{
	curl_easy_cleanup(c->easy);
	free(c->body);
	free(c);
}

/* An idle handle, or a new one (the pool grows to the callers at a time). */
static int
conn_take(struct webhook_http *h, struct conn **out, char *err, size_t errlen)
{
	pthread_mutex_lock(&h->mu);
	struct conn *c = h->idle;
	if (c != NULL)
		h->idle = c->next;
	pthread_mutex_unlock(&h->mu);
	if (c != NULL) {
		*out = c;
		return OB_OK;
	}
	return conn_new(h, out, err, errlen);
}

static void
conn_give(struct webhook_http *h, struct conn *c)
{
	pthread_mutex_lock(&h->mu);
	c->next = h->idle;
	h->idle = c;
	pthread_mutex_unlock(&h->mu);
}

/* --- life cycle --------------------------------------------------------- */

int
webhook_http_new(const struct webhook_http_config *cfg, struct webhook_http **out,
    char *err, size_t errlen)
{
	struct webhook_http *h = calloc(1, sizeof(*h));
	if (h == NULL)
		return oom(err, errlen);
	h->timeout_ms = cfg->timeout_ms;
	h->body_max = cfg->body_max;
	pthread_mutex_init(&h->mu, NULL);
	int rc = webhook_http_global_init(err, errlen);
	if (rc != OB_OK) {
		pthread_mutex_destroy(&h->mu);
		free(h);
		return rc;
	}
	h->global = true;
	struct conn *first = NULL;
	if ((rc = target_parse(h, cfg, err, errlen)) != OB_OK ||
	    (rc = trust_set(h, cfg->ca, err, errlen)) != OB_OK ||
	    (rc = conn_new(h, &first, err, errlen)) != OB_OK) {
		webhook_http_free(h);
		return rc;
	}
	/* Retry-After is read through libcurl's header API */
	struct curl_header *hh;
	if (curl_easy_header(first->easy, "Retry-After", 0, CURLH_HEADER, -1, &hh) ==
	    CURLHE_NOT_BUILT_IN) {
		snprintf(err, errlen, "libcurl %s is built without its header API (Retry-After"
		    " could not be read)", curl_version_info(CURLVERSION_NOW)->version);
		conn_free(first);
		webhook_http_free(h);
		return OB_EINVAL;
	}
	conn_give(h, first);
	log_target(h);
	*out = h;
	return OB_OK;
}

void
webhook_http_free(struct webhook_http *h)
{
	if (h == NULL)
		return;
	while (h->idle != NULL) {
		struct conn *c = h->idle;
		h->idle = c->next;
		conn_free(c);
	}
	curl_slist_free_all(h->connect_to);
	if (h->cainfo != h->sys_cainfo)
		free(h->cainfo);
	free(h->sys_cainfo);
	free(h->sys_capath);
	free(h->url);
	pthread_mutex_destroy(&h->mu);
	if (h->global)
		webhook_http_global_fini();
	free(h);
}

const char *
webhook_http_tls_name(const struct webhook_http *h)
{
	return h->tls_name;
}

const char *
webhook_http_trust(const struct webhook_http *h)
{
	return h->https ? h->trust : "none (http://)";
}

/* --- one call ----------------------------------------------------------- */

/* The request's header lines; the ones libcurl would add (Accept, Expect:
 * 100-continue) removed, so the request is ours byte for byte. */
static int
headers_build(const struct webhook_http_header *hdrs, size_t n, struct curl_slist **out,
    char *err, size_t errlen)
{
	if (n > WEBHOOK_HTTP_HEADERS_MAX) {
		snprintf(err, errlen, "more than %d headers", WEBHOOK_HTTP_HEADERS_MAX);
		return OB_EINVAL;
	}
	struct curl_slist *l = NULL, *t;
	char line[1024];
	for (size_t i = 0; i < n; i++) {
		const char *v = hdrs[i].value;
		if (!webhook_http_header_safe(v, strlen(v)) ||
		    strcspn(hdrs[i].name, ":; \t\r\n") != strlen(hdrs[i].name) ||
		    strlen(hdrs[i].name) + strlen(v) + 3 > sizeof(line)) {
			snprintf(err, errlen, "header %.64s: not sendable (a control character,"
			    " or too long)", hdrs[i].name);
			curl_slist_free_all(l);
			return OB_EINVAL;
		}
		/* "Name;" is libcurl's spelling of a header with an empty value */
		snprintf(line, sizeof(line), v[0] != '\0' ? "%s: %s" : "%s;", hdrs[i].name, v);
		if ((t = curl_slist_append(l, line)) == NULL)
			goto nomem;
		l = t;
	}
	if ((t = curl_slist_append(l, "Accept:")) == NULL)
		goto nomem;
	l = t;
	if ((t = curl_slist_append(l, "Expect:")) == NULL)
		goto nomem;
	*out = t;
	return OB_OK;
nomem:
	curl_slist_free_all(l);
	snprintf(err, errlen, "out of memory (request headers)");
	return OB_ENOMEM;
}

int
webhook_http_post(struct webhook_http *h, const struct webhook_http_header *hdrs, size_t n,
    const void *body, size_t len, bool fresh, struct webhook_http_result *out, char *err,
    size_t errlen)
{
	struct curl_slist *hl = NULL;
	struct conn *c = NULL;
	int rc;
	if ((rc = headers_build(hdrs, n, &hl, err, errlen)) != OB_OK)
		return rc;
	if ((rc = conn_take(h, &c, err, errlen)) != OB_OK) {
		curl_slist_free_all(hl);
		return rc;
	}
	CURL *e = c->easy;
	c->prereqs = 0;
	c->body_oom = false;
	c->len = 0;
	c->errbuf[0] = '\0';
	CURLcode cc;
	const char *what = "";
	/* fresh: no reused connection, none kept (the at-most-once calls) */
	if ((cc = curl_easy_setopt(e, CURLOPT_HTTPHEADER, hl)) != CURLE_OK ||
	    (what = "CURLOPT_POSTFIELDS",
	        cc = curl_easy_setopt(e, CURLOPT_POSTFIELDS, len > 0 ? body : "")) != CURLE_OK ||
	    (what = "CURLOPT_POSTFIELDSIZE_LARGE",
	        cc = curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len)) !=
	        CURLE_OK ||
	    (what = "CURLOPT_FRESH_CONNECT",
	        cc = curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, fresh ? 1L : 0L)) != CURLE_OK ||
	    (what = "CURLOPT_FORBID_REUSE",
	        cc = curl_easy_setopt(e, CURLOPT_FORBID_REUSE, fresh ? 1L : 0L)) != CURLE_OK) {
		snprintf(err, errlen, "libcurl refused %s: %s", what[0] ? what :
		    "CURLOPT_HTTPHEADER", curl_easy_strerror(cc));
		rc = cc == CURLE_OUT_OF_MEMORY ? OB_ENOMEM : OB_EINVAL;
		goto out;
	}
	cc = curl_easy_perform(e);
	struct webhook_http_result r = { webhook_http_outcome_of((int)cc), c->prereqs > 0, 0, "",
		NULL, 0, "" };
	if (cc == CURLE_OK) {
		long status = 0;
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
		r.status = (int)status;
		struct curl_header *hh;
		if (curl_easy_header(e, "Retry-After", 0, CURLH_HEADER, -1, &hh) == CURLHE_OK &&
		    webhook_http_header_safe(hh->value, strlen(hh->value)))
			snprintf(r.retry_after, sizeof(r.retry_after), "%s", hh->value);
		if (c->len > 0) {
			r.body = c->body; /* handed over: the next call allocates anew */
			r.body_len = c->len;
			c->body = NULL;
			c->cap = 0;
		}
	} else if (cc == CURLE_ABORTED_BY_CALLBACK && c->prereqs > 1) {
		snprintf(r.err, sizeof(r.err), "the connection closed without an answer after the"
		    " request was sent (not sent again)");
	} else if (c->body_oom) {
		snprintf(r.err, sizeof(r.err), "out of memory keeping the answer's body");
	} else {
		snprintf(r.err, sizeof(r.err), "%s", c->errbuf[0] ? c->errbuf
		    : curl_easy_strerror(cc));
	}
	*out = r;
	rc = OB_OK;
out:
	/* nothing of this call's may stay referenced by the handle */
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, (struct curl_slist *)NULL);
	curl_easy_setopt(e, CURLOPT_POSTFIELDS, (char *)NULL);
	curl_slist_free_all(hl);
	conn_give(h, c);
	return rc;
}
