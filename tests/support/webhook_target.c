/*
 * webhook_target.c - the downstream HTTP server of the webhook tests (see
 * webhook_target.h). nng parses HTTP (and, for wt_start_tls, speaks TLS);
 * this file only keeps counts.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>
#include <nng/supplemental/tls/tls.h>
#include <nng/supplemental/util/platform.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "testsupport.h"
#include "webhook_target.h"

#define WT_KEYS 256
#define WT_FENCES 256
#define WT_GATE_MAX_MS 60000 /* a gated request answers by then, released or not */

struct wt_key {
	char key[256];
	int requests, effects;
	int acts; /* what a downstream that ignores the key would have applied */
	char fences[WT_FENCES];
	int64_t times[WT_TIMES]; /* arrival of the first WT_TIMES requests */
};

struct wt_target {
	nng_http_server *server;
	nng_url *url;
	pthread_mutex_t mtx;
	struct wt_key keys[WT_KEYS];
	int nkeys, total;
	int fail_n, fail_status, hold_n, hold_ms, lose_n, drop_n;
	int gate_n;                /* wt_gate_next: requests still to be held */
	bool released;             /* wt_release: the gate is open */
	pthread_cond_t gate_cv;    /* signalled by wt_release */
	char fail_retry_after[64]; /* Retry-After of the failing answers, "" = none */
	char secret[300];          /* wt_require_signature: "" = none required */
	int tolerance_s, refused;
	char last_fence[32], last_topic[256], last_id[32], last_type[64], last_sig[300];
};

static struct wt_key *
find(struct wt_target *t, const char *key, bool create)
{
	for (int i = 0; i < t->nkeys; i++)
		if (strcmp(t->keys[i].key, key) == 0)
			return &t->keys[i];
	if (!create || t->nkeys == WT_KEYS)
		return NULL;
	struct wt_key *k = &t->keys[t->nkeys++];
	snprintf(k->key, sizeof(k->key), "%s", key);
	return k;
}

static void
copy_header(nng_http_req *req, const char *name, char *out, size_t len)
{
	const char *v = nng_http_req_get_header(req, name);
	snprintf(out, len, "%s", v ? v : "");
}

/* Outbox-Signature as a downstream checks it, written here on its own
 * (OpenSSL's one-shot HMAC), not with the consumer's code: t within the
 * tolerance, and one v1 equal to HMAC-SHA256(secret, t "." body). */
static bool
signature_ok(struct wt_target *t, nng_http_req *req)
{
	const char *h = nng_http_req_get_header(req, "Outbox-Signature");
	if (h == NULL || strncmp(h, "t=", 2) != 0)
		return false;
	char *end;
	long long ts = strtoll(h + 2, &end, 10);
	long long now = (long long)time(NULL);
	if (end == h + 2 || ts < now - t->tolerance_s || ts > now + t->tolerance_s)
		return false;
	void *body;
	size_t len;
	nng_http_req_get_data(req, &body, &len);
	char prefix[32];
	int pn = snprintf(prefix, sizeof(prefix), "%lld.", ts);
	unsigned char *msg = malloc((size_t)pn + len + 1);
	if (msg == NULL)
		return false;
	memcpy(msg, prefix, (size_t)pn);
	if (len > 0)
		memcpy(msg + pn, body, len);
	unsigned char md[32];
	unsigned int mdlen = 0;
	HMAC(EVP_sha256(), t->secret, (int)strlen(t->secret), msg, (size_t)pn + len, md, &mdlen);
	free(msg);
	char want[65];
	for (unsigned i = 0; i < 32; i++)
		snprintf(want + 2 * i, 3, "%02x", md[i]);
	for (const char *v = strstr(end, ",v1="); v != NULL; v = strstr(v + 1, ",v1="))
		if (strncmp(v + 4, want, 64) == 0 && (v[68] == '\0' || v[68] == ','))
			return true;
	return false;
}

static void
hook(nng_aio *aio)
{
	nng_http_req *req = nng_aio_get_input(aio, 0);
	nng_http_handler *h = nng_aio_get_input(aio, 1);
	struct wt_target *t = nng_http_handler_get_data(h);
	const char *key = nng_http_req_get_header(req, "Idempotency-Key");
	int status = 200, hold = 0;
	bool lose = false, gated = false;
	char body[128], retry_after[64] = "";
	int64_t now = (int64_t)nng_clock();

	pthread_mutex_lock(&t->mtx);
	t->total++;
	copy_header(req, "Outbox-Fence", t->last_fence, sizeof(t->last_fence));
	copy_header(req, "Outbox-Topic", t->last_topic, sizeof(t->last_topic));
	copy_header(req, "Outbox-Message-Id", t->last_id, sizeof(t->last_id));
	copy_header(req, "Content-Type", t->last_type, sizeof(t->last_type));
	copy_header(req, "Outbox-Signature", t->last_sig, sizeof(t->last_sig));
	struct wt_key *k = key != NULL ? find(t, key, true) : NULL;
	if (k != NULL) {
		if (k->requests < WT_TIMES)
			k->times[k->requests] = now;
		k->requests++;
		size_t used = strlen(k->fences);
		snprintf(k->fences + used, sizeof(k->fences) - used, "%s%s", used ? "," : "",
		    t->last_fence);
	}
	if (key == NULL) {
		status = 400;
		snprintf(body, sizeof(body), "{\"error\":\"no Idempotency-Key\"}");
	} else if (t->secret[0] != '\0' && !signature_ok(t, req)) {
		t->refused++;
		status = 401;
		snprintf(body, sizeof(body), "{\"error\":\"bad or missing Outbox-Signature\"}");
	} else if (t->drop_n > 0) {
		t->drop_n--;
		lose = true; /* lost before acting: nothing applied */
	} else if (t->fail_n > 0) {
		t->fail_n--;
		status = t->fail_status;
		snprintf(retry_after, sizeof(retry_after), "%s", t->fail_retry_after);
		snprintf(body, sizeof(body), "{\"error\":\"failing on purpose\"}");
	} else {
		k->acts++;
		if (k->effects == 0) {
			k->effects = 1;
			status = 201;
		}
		snprintf(body, sizeof(body), "{\"key\":\"%.60s\",\"created\":true}", key);
		if (t->gate_n > 0) {
			t->gate_n--;
			gated = true;
		} else if (t->hold_n > 0) {
			t->hold_n--;
			hold = t->hold_ms;
		} else if (t->lose_n > 0) {
			t->lose_n--;
			lose = true;
		}
	}
	if (gated) {
		/* acted; the answer waits for wt_release (or the safety bound) */
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += WT_GATE_MAX_MS / 1000;
		while (!t->released &&
		    pthread_cond_timedwait(&t->gate_cv, &t->mtx, &until) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&t->mtx);

	if (hold > 0)
		nng_msleep((nng_duration)hold);
	if (lose) {
		nng_aio_finish(aio, NNG_ECONNRESET); /* nng closes the connection */
		return;
	}
	nng_http_res *res;
	if (nng_http_res_alloc(&res) != 0) {
		nng_aio_finish(aio, NNG_ENOMEM);
		return;
	}
	nng_http_res_set_status(res, (uint16_t)status);
	nng_http_res_set_header(res, "Content-Type", "application/json");
	if (retry_after[0] != '\0')
		nng_http_res_set_header(res, "Retry-After", retry_after);
	nng_http_res_copy_data(res, body, strlen(body));
	nng_aio_set_output(aio, 0, res);
	nng_aio_finish(aio, 0);
}

static struct wt_target *
start(char *url, size_t urllen, const char *cert, const char *key)
{
	struct wt_target *t = calloc(1, sizeof(*t));
	nng_http_handler *h = NULL;
	nng_tls_config *tls = NULL;
	if (t == NULL)
		return NULL;
	pthread_mutex_init(&t->mtx, NULL);
	pthread_cond_init(&t->gate_cv, NULL);
	nng_sockaddr sa;
	if (nng_url_parse(&t->url, cert != NULL ? "https://127.0.0.1:0" : "http://127.0.0.1:0") != 0 ||
	    nng_http_server_hold(&t->server, t->url) != 0)
		return NULL;
	if (cert != NULL) {
		char *c = ts_read_file(cert), *k = ts_read_file(key);
		int rv = c == NULL || k == NULL ? NNG_ENOENT
		    : nng_tls_config_alloc(&tls, NNG_TLS_MODE_SERVER);
		if (rv == 0)
			rv = nng_tls_config_own_cert(tls, c, k, NULL);
		if (rv == 0)
			rv = nng_http_server_set_tls(t->server, tls);
		free(c);
		free(k);
		if (tls != NULL)
			nng_tls_config_free(tls); /* the server holds its own */
		if (rv != 0)
			return NULL;
	}
	if (nng_http_handler_alloc(&h, "/hook", hook) != 0 ||
	    nng_http_handler_set_method(h, "POST") != 0 ||
	    nng_http_handler_collect_body(h, true, 16u * 1024 * 1024) != 0 ||
	    nng_http_handler_set_data(h, t, NULL) != 0 ||
	    nng_http_server_add_handler(t->server, h) != 0 ||
	    nng_http_server_start(t->server) != 0 ||
	    nng_http_server_get_addr(t->server, &sa) != 0)
		return NULL; /* the test fails on NULL; nothing to tidy for it */
	snprintf(url, urllen, "%s://127.0.0.1:%u/hook", cert != NULL ? "https" : "http",
	    (unsigned)ntohs(sa.s_in.sa_port));
	return t;
}

struct wt_target *
wt_start(char *url, size_t urllen)
{
	return start(url, urllen, NULL, NULL);
}

struct wt_target *
wt_start_tls(char *url, size_t urllen, const char *cert, const char *key)
{
	return start(url, urllen, cert, key);
}

void
wt_stop(struct wt_target *t)
{
	wt_release(t); /* a gated request must not hold up the stop */
	nng_http_server_stop(t->server);
	nng_http_server_release(t->server);
	nng_url_free(t->url);
	pthread_cond_destroy(&t->gate_cv);
	pthread_mutex_destroy(&t->mtx);
	free(t);
}

void
wt_require_signature(struct wt_target *t, const char *secret, int tolerance_s)
{
	pthread_mutex_lock(&t->mtx);
	snprintf(t->secret, sizeof(t->secret), "%s", secret != NULL ? secret : "");
	t->tolerance_s = tolerance_s;
	pthread_mutex_unlock(&t->mtx);
}

int
wt_refused(struct wt_target *t)
{
	pthread_mutex_lock(&t->mtx);
	int n = t->refused;
	pthread_mutex_unlock(&t->mtx);
	return n;
}

void
wt_fail_next(struct wt_target *t, int n, int status)
{
	wt_fail_next_retry_after(t, n, status, NULL);
}

void
wt_fail_next_retry_after(struct wt_target *t, int n, int status, const char *retry_after)
{
	pthread_mutex_lock(&t->mtx);
	t->fail_n = n;
	t->fail_status = status;
	snprintf(t->fail_retry_after, sizeof(t->fail_retry_after), "%s",
	    retry_after != NULL ? retry_after : "");
	pthread_mutex_unlock(&t->mtx);
}

void
wt_hold_next(struct wt_target *t, int n, int hold_ms)
{
	pthread_mutex_lock(&t->mtx);
	t->hold_n = n;
	t->hold_ms = hold_ms;
	pthread_mutex_unlock(&t->mtx);
}

void
wt_gate_next(struct wt_target *t, int n)
{
	pthread_mutex_lock(&t->mtx);
	t->gate_n = n;
	t->released = false;
	pthread_mutex_unlock(&t->mtx);
}

void
wt_release(struct wt_target *t)
{
	pthread_mutex_lock(&t->mtx);
	t->released = true;
	pthread_cond_broadcast(&t->gate_cv);
	pthread_mutex_unlock(&t->mtx);
}

void
wt_lose_next(struct wt_target *t, int n)
{
	pthread_mutex_lock(&t->mtx);
	t->lose_n = n;
	pthread_mutex_unlock(&t->mtx);
}

void
wt_drop_next(struct wt_target *t, int n)
{
	pthread_mutex_lock(&t->mtx);
	t->drop_n = n;
	pthread_mutex_unlock(&t->mtx);
}

int
wt_acts(struct wt_target *t, const char *key)
{
	pthread_mutex_lock(&t->mtx);
	struct wt_key *k = find(t, key, false);
	int n = k ? k->acts : 0;
	pthread_mutex_unlock(&t->mtx);
	return n;
}

int
wt_requests(struct wt_target *t, const char *key)
{
	pthread_mutex_lock(&t->mtx);
	struct wt_key *k = find(t, key, false);
	int n = k ? k->requests : 0;
	pthread_mutex_unlock(&t->mtx);
	return n;
}

int
wt_effects(struct wt_target *t, const char *key)
{
	pthread_mutex_lock(&t->mtx);
	struct wt_key *k = find(t, key, false);
	int n = k ? k->effects : 0;
	pthread_mutex_unlock(&t->mtx);
	return n;
}

int
wt_keys(struct wt_target *t)
{
	pthread_mutex_lock(&t->mtx);
	int n = t->nkeys;
	pthread_mutex_unlock(&t->mtx);
	return n;
}

int
wt_total(struct wt_target *t)
{
	pthread_mutex_lock(&t->mtx);
	int n = t->total;
	pthread_mutex_unlock(&t->mtx);
	return n;
}

int
wt_request_times(struct wt_target *t, const char *key, int64_t *ms, int max)
{
	pthread_mutex_lock(&t->mtx);
	struct wt_key *k = find(t, key, false);
	int n = k == NULL ? 0 : k->requests < WT_TIMES ? k->requests : WT_TIMES;
	for (int i = 0; i < n && i < max; i++)
		ms[i] = k->times[i];
	pthread_mutex_unlock(&t->mtx);
	return n;
}

void
wt_fences(struct wt_target *t, const char *key, char *out, size_t outlen)
{
	pthread_mutex_lock(&t->mtx);
	struct wt_key *k = find(t, key, false);
	snprintf(out, outlen, "%s", k ? k->fences : "");
	pthread_mutex_unlock(&t->mtx);
}

void
wt_last_header(struct wt_target *t, const char *name, char *out, size_t outlen)
{
	pthread_mutex_lock(&t->mtx);
	const char *v = strcmp(name, "Outbox-Fence") == 0 ? t->last_fence
	    : strcmp(name, "Outbox-Topic") == 0         ? t->last_topic
	    : strcmp(name, "Outbox-Message-Id") == 0    ? t->last_id
	    : strcmp(name, "Content-Type") == 0         ? t->last_type
	    : strcmp(name, "Outbox-Signature") == 0     ? t->last_sig
	                                                : "";
	snprintf(out, outlen, "%s", v);
	pthread_mutex_unlock(&t->mtx);
}
