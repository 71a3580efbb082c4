/*
 * target.c - outbox-herd --target: N client threads against a running
 * producer API, each retrying one POST with a backoff strategy (target.h).
 *
 * Owns the client threads, their nng HTTP clients and the start gate.
 * Every attempt is one request over a new connection through
 * ob_http_exchange (common/http_exchange.c, the agent-side client's), so a
 * failure says whether the request may have reached the server. The
 * threads share nothing while they run but the start time and two "first"
 * flags for the log; each counts into its own slot, summed after the join.
 * Never touches a database, never honours a Retry-After (target.h says
 * why), never retries past the deadline.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#include "outbox/backoff.h"
#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/http_exchange.h"
#include "outbox/idem_key.h"
#include "outbox/log.h"
#include "outbox/url.h"
#include "target.h"

#define TARGET_URL_MAX 1024          /* the whole URL, base and path */
#define TARGET_BODY_MAX 96           /* {"topic":"herd.test","payload":{"client":N}} */
#define TARGET_STACK_BYTES (512 * 1024) /* a client thread only waits on nng */

/* What ended a client's call. */
enum client_end {
	CLIENT_END_NONE, /* still running (or never started) */
	CLIENT_END_OK,
	CLIENT_END_REFUSED,
	CLIENT_END_GAVE_UP,
};

/* Every client waits here until all are made, then all start together. */
struct gate {
	pthread_mutex_t mtx;
	pthread_cond_t cv;
	int state;     /* 0 wait, 1 go, -1 abort */
	int64_t t0_us; /* the start (ob_mono_us), set before go */
};

struct run {
	const struct herd_target_params *p;
	const struct ob_jitter_strategy *s;
	char url[TARGET_URL_MAX];
	struct gate gate;
	atomic_bool failed_logged, ok_logged, refused_logged, gave_up_logged;
};

struct client {
	struct run *run;
	uint32_t index;
	uint64_t rng;
	char key[OB_IDEM_KEY_MAX + 1];
	char body[TARGET_BODY_MAX];
	nng_url *url;
	nng_http_client *http;
	pthread_t thread;
	/* results, read after the join */
	struct herd_target_result counts; /* the counters only */
	enum client_end end;
	double first_failure_ms, ok_ms;
};

enum herd_try
herd_try_of_status(int status)
{
	if (status >= 200 && status <= 299)
		return HERD_TRY_OK;
	if (status == 409 || status == 429 || (status >= 500 && status <= 599))
		return HERD_TRY_RETRY;
	return HERD_TRY_REFUSED;
}

bool
herd_try_retries(enum herd_try t)
{
	return t == HERD_TRY_RETRY || t == HERD_TRY_NOT_CONNECTED || t == HERD_TRY_LOST;
}

/* base + HERD_TARGET_PATH into out, one '/' between them. */
static int
join_url(const char *base, char *out, size_t outlen)
{
	size_t n = strlen(base);
	while (n > 0 && base[n - 1] == '/')
		n--;
	int w = snprintf(out, outlen, "%.*s%s", (int)n, base, HERD_TARGET_PATH);
	return w < 0 || (size_t)w >= outlen ? OB_EINVAL : OB_OK;
}

int
herd_target_check(const struct herd_target_params *p, char *err, size_t errlen)
{
	char url[TARGET_URL_MAX], key[OB_IDEM_KEY_MAX + 64], why[160];
	nng_url *u = NULL;
	if (join_url(p->url, url, sizeof(url)) != OB_OK) {
		snprintf(err, errlen, "--target: longer than %d bytes", TARGET_URL_MAX - 32);
		return OB_EINVAL;
	}
	if (strncmp(p->url, "http://", 7) != 0 || ob_url_parse(&u, url) != 0 ||
	    u->u_hostname == NULL || u->u_hostname[0] == '\0') {
		if (u != NULL)
			nng_url_free(u);
		snprintf(err, errlen, "--target: '%.200s' is not http://HOST:PORT", p->url);
		return OB_EINVAL;
	}
	nng_url_free(u);
	/* the longest key is the last client's */
	snprintf(key, sizeof(key), "%s-%" PRIu32, p->key_prefix, p->clients - 1);
	if (strlen(key) > OB_IDEM_KEY_MAX ||
	    ob_idem_key_check(key, strlen(key), why, sizeof(why)) != OB_OK) {
		snprintf(err, errlen, "--key-prefix: the key '%.40s...' is not an Idempotency-Key"
		    " (1..%d printable ASCII bytes)", key, OB_IDEM_KEY_MAX);
		return OB_EINVAL;
	}
	return OB_OK;
}

/* Sleep us microseconds, the whole time. */
static void
sleep_us(int64_t us)
{
	struct timespec ts = { (time_t)(us / 1000000), (long)(us % 1000000) * 1000 };
	while (us > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* One POST of c's call within timeout_ms; the HTTP status into *status
 * when an answer came. Returns what it came to. */
static enum herd_try
attempt(struct client *c, int64_t timeout_ms, int *status)
{
	nng_http_req *req = NULL;
	nng_http_res *res = NULL;
	enum herd_try t = HERD_TRY_NOT_CONNECTED;
	bool connected = false;
	*status = 0;
	if (nng_http_req_alloc(&req, c->url) != 0 || nng_http_res_alloc(&res) != 0 ||
	    nng_http_req_set_method(req, "POST") != 0 ||
	    nng_http_req_set_header(req, "Idempotency-Key", c->key) != 0 ||
	    nng_http_req_set_header(req, "Content-Type", "application/json") != 0 ||
	    nng_http_req_copy_data(req, c->body, strlen(c->body)) != 0)
		goto done; /* out of memory: counted as a request that never left */
	if (ob_http_exchange(c->http, req, res, timeout_ms, &connected) != 0) {
		t = connected ? HERD_TRY_LOST : HERD_TRY_NOT_CONNECTED;
		goto done;
	}
	*status = nng_http_res_get_status(res);
	t = herd_try_of_status(*status);
done:
	if (req != NULL)
		nng_http_req_free(req);
	if (res != NULL)
		nng_http_res_free(res);
	return t;
}

static void
count(struct herd_target_result *r, enum herd_try t, int status)
{
	r->requests++;
	if (t == HERD_TRY_NOT_CONNECTED)
		r->not_connected++;
	else if (t == HERD_TRY_LOST)
		r->lost++;
	else if (status >= 200 && status <= 299)
		r->status_2xx++;
	else if (status == 409)
		r->status_409++;
	else if (status == 429)
		r->status_429++;
	else if (status >= 500 && status <= 599)
		r->status_5xx++;
	else
		r->status_other++;
}

/* What a failed attempt was, for the log: "status=503" or "err=...". */
static void
describe(enum herd_try t, int status, char *out, size_t outlen)
{
	if (t == HERD_TRY_NOT_CONNECTED)
		snprintf(out, outlen, "err=not_connected");
	else if (t == HERD_TRY_LOST)
		snprintf(out, outlen, "err=no_answer");
	else
		snprintf(out, outlen, "status=%d", status);
}

/* True the first time it is called on flag in a run: an event logged once. */
static bool
first(atomic_bool *flag)
{
	return !atomic_exchange(flag, true);
}

static void *
client_main(void *arg)
{
	struct client *c = arg;
	struct run *run = c->run;
	const struct herd_target_params *p = run->p;
	pthread_mutex_lock(&run->gate.mtx);
	while (run->gate.state == 0)
		pthread_cond_wait(&run->gate.cv, &run->gate.mtx);
	int state = run->gate.state;
	int64_t t0 = run->gate.t0_us;
	pthread_mutex_unlock(&run->gate.mtx);
	if (state < 0)
		return NULL;

	int64_t deadline = t0 + p->deadline_ms * 1000;
	uint32_t retry = 0;
	double prev_ms = 0;
	char what[48];
	for (;;) {
		int64_t left_ms = (deadline - ob_mono_us()) / 1000;
		if (left_ms <= 0) {
			c->end = CLIENT_END_GAVE_UP;
			break;
		}
		int status;
		enum herd_try t = attempt(c, left_ms < p->request_timeout_ms ? left_ms :
		    p->request_timeout_ms, &status);
		int64_t now = ob_mono_us();
		double at_ms = (double)(now - t0) / 1000;
		count(&c->counts, t, status);
		if (t == HERD_TRY_OK) {
			c->end = CLIENT_END_OK;
			c->ok_ms = at_ms;
			if (first(&run->ok_logged))
				ob_info("herd.target.first_ok", "client=%" PRIu32 " attempts=%" PRIu64
				    " at_ms=%.0f", c->index, c->counts.requests, at_ms);
			break;
		}
		describe(t, status, what, sizeof(what));
		if (c->first_failure_ms < 0) {
			c->first_failure_ms = at_ms;
			if (first(&run->failed_logged))
				ob_info("herd.target.failing", "client=%" PRIu32 " %s at_ms=%.0f",
				    c->index, what, at_ms);
		}
		if (!herd_try_retries(t)) {
			c->end = CLIENT_END_REFUSED;
			if (first(&run->refused_logged))
				ob_warn("herd.target.refused", "client=%" PRIu32 " %s at_ms=%.0f"
				    " key=%s", c->index, what, at_ms, c->key);
			break;
		}
		double s = run->s->sleep_ms(&p->range, ++retry, prev_ms, &c->rng);
		prev_ms = s;
		int64_t s_us = (int64_t)(s * 1000);
		if (now + s_us >= deadline) {
			c->end = CLIENT_END_GAVE_UP;
			break;
		}
		sleep_us(s_us);
	}
	if (c->end == CLIENT_END_GAVE_UP && first(&run->gave_up_logged))
		ob_warn("herd.target.gave_up", "client=%" PRIu32 " attempts=%" PRIu64
		    " deadline_ms=%" PRId64, c->index, c->counts.requests, p->deadline_ms);
	return NULL;
}

/* A generator state for client i: splitmix64 of the seed and i, never 0. */
static uint64_t
client_seed(uint64_t seed, uint32_t i)
{
	uint64_t z = seed + 0x9e3779b97f4a7c15ULL * ((uint64_t)i + 1);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return z != 0 ? z : 1;
}

static void
clients_free(struct client *cs, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		if (cs[i].http != NULL)
			nng_http_client_free(cs[i].http);
		if (cs[i].url != NULL)
			nng_url_free(cs[i].url);
	}
	free(cs);
}

/* Release (state 1) or abort (-1) every client waiting at the gate. */
static void
gate_open(struct gate *g, int state)
{
	pthread_mutex_lock(&g->mtx);
	g->t0_us = ob_mono_us();
	g->state = state;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mtx);
}

static void
sum(const struct client *cs, uint32_t n, struct herd_target_result *r)
{
	memset(r, 0, sizeof(*r));
	r->first_failure_ms = r->first_ok_ms = r->done_ms = r->recover_ms = -1;
	for (uint32_t i = 0; i < n; i++) {
		const struct client *c = &cs[i];
		const struct herd_target_result *k = &c->counts;
		r->requests += k->requests;
		r->status_2xx += k->status_2xx;
		r->status_409 += k->status_409;
		r->status_429 += k->status_429;
		r->status_5xx += k->status_5xx;
		r->status_other += k->status_other;
		r->not_connected += k->not_connected;
		r->lost += k->lost;
		if (c->first_failure_ms >= 0 &&
		    (r->first_failure_ms < 0 || c->first_failure_ms < r->first_failure_ms))
			r->first_failure_ms = c->first_failure_ms;
		if (c->end == CLIENT_END_OK) {
			r->completed++;
			if (r->first_ok_ms < 0 || c->ok_ms < r->first_ok_ms)
				r->first_ok_ms = c->ok_ms;
			if (c->ok_ms > r->done_ms)
				r->done_ms = c->ok_ms;
		} else if (c->end == CLIENT_END_REFUSED) {
			r->refused++;
		} else {
			r->gave_up++;
		}
	}
	/* "done" is when every client completed: not otherwise */
	if (r->completed < n)
		r->done_ms = -1;
	else
		r->recover_ms = r->done_ms - r->first_ok_ms;
}

int
herd_target_run(const struct herd_target_params *p, struct herd_target_result *out,
    char *err, size_t errlen)
{
	struct run run = { .p = p, .s = &ob_jitter_strategies[p->strategy] };
	struct client *cs = NULL;
	pthread_attr_t attr;
	uint32_t made = 0;
	int rc = OB_OK, rv;

	if ((unsigned)p->strategy >= OB_JITTER_COUNT || p->clients == 0 ||
	    join_url(p->url, run.url, sizeof(run.url)) != OB_OK) {
		snprintf(err, errlen, "bad parameters");
		return OB_EINVAL;
	}
	if ((cs = calloc(p->clients, sizeof(*cs))) == NULL) {
		snprintf(err, errlen, "out of memory for %" PRIu32 " clients", p->clients);
		return OB_ENOMEM;
	}
	for (uint32_t i = 0; i < p->clients; i++) {
		struct client *c = &cs[i];
		c->run = &run;
		c->index = i;
		c->rng = client_seed(p->seed, i);
		c->first_failure_ms = c->ok_ms = -1;
		snprintf(c->key, sizeof(c->key), "%s-%" PRIu32, p->key_prefix, i);
		snprintf(c->body, sizeof(c->body),
		    "{\"topic\":\"" HERD_TARGET_TOPIC "\",\"payload\":{\"client\":%" PRIu32 "}}", i);
		if ((rv = ob_url_parse(&c->url, run.url)) != 0 ||
		    (rv = nng_http_client_alloc(&c->http, c->url)) != 0) {
			snprintf(err, errlen, "client %" PRIu32 ": %s: %s", i, run.url,
			    nng_strerror(rv));
			clients_free(cs, p->clients);
			return rv == NNG_ENOMEM ? OB_ENOMEM : OB_EINVAL;
		}
	}

	pthread_mutex_init(&run.gate.mtx, NULL);
	pthread_cond_init(&run.gate.cv, NULL);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, TARGET_STACK_BYTES);
	for (; made < p->clients; made++) {
		if ((rv = pthread_create(&cs[made].thread, &attr, client_main, &cs[made])) != 0) {
			snprintf(err, errlen, "client thread %" PRIu32 ": %s", made, strerror(rv));
			rc = OB_ENOMEM;
			break;
		}
	}
	pthread_attr_destroy(&attr);
	if (rc == OB_OK)
		ob_info("herd.target.start", "url=%s clients=%" PRIu32 " strategy=%s base_ms=%g"
		    " cap_ms=%g deadline_ms=%" PRId64, run.url, p->clients, run.s->name,
		    p->range.base_ms, p->range.cap_ms, p->deadline_ms);
	int64_t wall_us = ob_wall_us();
	gate_open(&run.gate, rc == OB_OK ? 1 : -1);
	for (uint32_t i = 0; i < made; i++)
		pthread_join(cs[i].thread, NULL);
	pthread_cond_destroy(&run.gate.cv);
	pthread_mutex_destroy(&run.gate.mtx);
	if (rc == OB_OK) {
		sum(cs, p->clients, out);
		out->started_unix_ms = wall_us / 1000;
		char done[40] = "";
		if (out->done_ms >= 0)
			snprintf(done, sizeof(done), " done_ms=%.0f", out->done_ms);
		ob_info("herd.target.done", "requests=%" PRIu64 " completed=%" PRIu32
		    " refused=%" PRIu32 " gave_up=%" PRIu32 "%s", out->requests, out->completed,
		    out->refused, out->gave_up, done);
	}
	clients_free(cs, p->clients);
	return rc;
}
