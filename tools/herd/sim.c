/*
 * sim.c - the discrete-event simulation of sim.h.
 *
 * Four kinds of event, each a message arriving somewhere: a read at the
 * server, its reply at the client, a write at the server, its reply at the
 * client. Each client has exactly one message in flight until it is done,
 * so the queue never holds more than one event per client. The server's
 * row is a version number; a client is a small state machine (reading,
 * writing, done) changed only by client_enter. Time only moves forward:
 * every event is scheduled after the one that caused it.
 *
 * The generator is drawn from in a fixed order (the first reads' delays
 * client by client, then each event's draws as it is handled), which with
 * the queue's push-order tie-break makes a run a function of its seed.
 *
 * Recording the writes' arrival times (herd_run_record) only appends to an
 * array as each write is handled: it draws nothing and changes no event,
 * so a run is the same recorded or not. The histogram (herd_histogram_bin)
 * is computed from that array afterwards, with exact comparisons at the
 * bins' edges.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "evqueue.h"
#include "outbox/backoff.h"
#include "outbox/err.h"
#include "sim.h"

#define HERD_PI 3.14159265358979323846

enum herd_ev_kind {
	HERD_EV_READ,        /* a read arrives at the server */
	HERD_EV_READ_REPLY,  /* the version read arrives at the client */
	HERD_EV_WRITE,       /* a write with that version arrives at the server */
	HERD_EV_WRITE_REPLY, /* success or failure arrives at the client */
};

enum herd_client_state {
	HERD_CLIENT_READING = 0, /* a read in flight (after its backoff, if any) */
	HERD_CLIENT_WRITING, /* a write in flight */
	HERD_CLIENT_DONE,    /* its write succeeded */
};

struct herd_client {
	enum herd_client_state state;
	uint32_t attempt; /* writes lost so far */
	double prev_ms;   /* the last backoff slept (Decorrelated Jitter) */
};

struct herd_sim {
	const struct herd_params *p;
	ob_jitter_fn backoff;
	uint64_t rng;
	struct herd_evq q;
	struct herd_client *clients; /* owned */
	uint64_t version;
	uint32_t done;
	struct herd_run_result res;
	struct herd_arrivals *rec; /* NULL: not recording; else owned until returned */
	uint64_t rec_cap;
	bool rec_nomem; /* the array could not grow: the run is abandoned */
};

/* The one change of a client's state: reading -> writing -> reading
 * (lost) or done (won). Anything else is a broken invariant. */
static void
client_enter(struct herd_client *c, enum herd_client_state to)
{
	bool ok = (c->state == HERD_CLIENT_READING && to == HERD_CLIENT_WRITING) ||
	    (c->state == HERD_CLIENT_WRITING && to != HERD_CLIENT_WRITING);
	if (!ok)
		abort();
	c->state = to;
}

double
herd_net_delay(double mean_ms, double sd_ms, uint64_t *rng)
{
	/* u1 in (0, 1]: log(u1) is finite */
	double u1 = 1.0 - ob_jitter_uniform(rng);
	double u2 = ob_jitter_uniform(rng);
	double z = sqrt(-2.0 * log(u1)) * cos(2.0 * HERD_PI * u2);
	return fabs(mean_ms + sd_ms * z);
}

static double
delay(struct herd_sim *s)
{
	return herd_net_delay(s->p->delay_mean_ms, s->p->delay_sd_ms, &s->rng);
}

/* Send a message that arrives at at_ms. The queue has room for one event
 * per client and each client has at most one in flight. */
static void
send(struct herd_sim *s, double at_ms, uint32_t client, enum herd_ev_kind kind, uint64_t value)
{
	struct herd_event e = { .at_ms = at_ms, .client = client, .kind = (uint8_t)kind,
		.value = value };
	if (!herd_evq_push(&s->q, &e))
		abort(); /* a broken invariant: two messages of one client in flight */
}

/* Append a write's arrival time when recording. On failure to grow, the
 * run stops at the next event (rec_nomem) and returns OB_ENOMEM. */
static void
record_write(struct herd_sim *s, double at_ms)
{
	struct herd_arrivals *a = s->rec;
	if (a == NULL || s->rec_nomem)
		return;
	if (a->n == s->rec_cap) {
		uint64_t cap = s->rec_cap * 2;
		double *ms = cap <= SIZE_MAX / sizeof(*ms) ? realloc(a->ms, cap * sizeof(*ms)) : NULL;
		if (ms == NULL) {
			s->rec_nomem = true;
			return;
		}
		a->ms = ms;
		s->rec_cap = cap;
	}
	a->ms[a->n++] = at_ms;
}

static void
handle(struct herd_sim *s, const struct herd_event *e)
{
	struct herd_client *c = &s->clients[e->client];
	double t = e->at_ms;

	switch ((enum herd_ev_kind)e->kind) {
	case HERD_EV_READ:
		send(s, t + delay(s), e->client, HERD_EV_READ_REPLY, s->version);
		break;
	case HERD_EV_READ_REPLY:
		client_enter(c, HERD_CLIENT_WRITING);
		send(s, t + delay(s), e->client, HERD_EV_WRITE, e->value);
		break;
	case HERD_EV_WRITE: {
		bool won = e->value == s->version;
		s->res.calls++;
		record_write(s, t);
		if (won)
			s->version++;
		else
			s->res.failed++;
		send(s, t + delay(s), e->client, HERD_EV_WRITE_REPLY, won);
		break;
	}
	case HERD_EV_WRITE_REPLY:
		if (e->value) {
			client_enter(c, HERD_CLIENT_DONE);
			s->done++;
			s->res.ms = t;
			break;
		}
		c->attempt++;
		/* as the blog's simulator: the read leaves after the backoff and
		 * takes a network delay to arrive */
		double d = delay(s);
		double sleep = s->backoff(&s->p->range, c->attempt, c->prev_ms, &s->rng);
		c->prev_ms = sleep;
		client_enter(c, HERD_CLIENT_READING);
		send(s, t + d + sleep, e->client, HERD_EV_READ, 0);
		break;
	}
}

uint64_t
herd_run_seed(uint64_t seed, uint32_t clients, uint32_t run)
{
	/* splitmix64's finaliser over the three numbers in turn */
	uint64_t parts[3] = { seed, clients, run };
	uint64_t x = 0;
	for (int i = 0; i < 3; i++) {
		x ^= parts[i];
		x += 0x9e3779b97f4a7c15ull;
		x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
		x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
		x ^= x >> 31;
	}
	return x ? x : 1;
}

static bool
params_ok(const struct herd_params *p)
{
	return p->clients >= 1 && (unsigned)p->strategy < OB_JITTER_COUNT &&
	    p->delay_mean_ms >= 0 && p->delay_sd_ms >= 0 && isfinite(p->delay_mean_ms) &&
	    isfinite(p->delay_sd_ms);
}

int
herd_run(const struct herd_params *p, uint64_t seed, struct herd_run_result *out)
{
	return herd_run_record(p, seed, out, NULL);
}

void
herd_arrivals_free(struct herd_arrivals *a)
{
	free(a->ms);
	a->ms = NULL;
	a->n = 0;
}

int
herd_run_record(const struct herd_params *p, uint64_t seed, struct herd_run_result *out,
    struct herd_arrivals *arrivals)
{
	if (!params_ok(p))
		return OB_EINVAL;
	struct herd_sim s = { .p = p, .backoff = ob_jitter_strategies[p->strategy].sleep_ms,
		.rng = seed ? seed : 1 };
	struct herd_arrivals rec = { 0 };
	if (arrivals != NULL) {
		/* every client writes at least once; most runs need a few times that */
		s.rec_cap = (uint64_t)p->clients * 4;
		if ((rec.ms = malloc(s.rec_cap * sizeof(*rec.ms))) == NULL)
			return OB_ENOMEM;
		s.rec = &rec;
	}
	s.clients = calloc(p->clients, sizeof(*s.clients));
	if (s.clients == NULL)
		goto fail;
	if (herd_evq_init(&s.q, p->clients) != OB_OK)
		goto fail;
	/* every client starts reading at time 0 (calloc: HERD_CLIENT_READING) */
	for (uint32_t i = 0; i < p->clients; i++)
		send(&s, delay(&s), i, HERD_EV_READ, 0);
	struct herd_event e;
	while (!s.rec_nomem && herd_evq_pop(&s.q, &e))
		handle(&s, &e);
	herd_evq_fini(&s.q);
	if (s.rec_nomem)
		goto fail;
	if (s.done != p->clients)
		abort(); /* a broken invariant: the queue ran dry with clients waiting */
	free(s.clients);
	*out = s.res;
	if (arrivals != NULL)
		*arrivals = rec;
	return OB_OK;
fail:
	free(s.clients);
	free(rec.ms);
	return OB_ENOMEM;
}

/* The smallest whole W >= 1 with bins x W > last: floor(last / bins) + 1,
 * the division's rounding corrected by exact comparisons (whole numbers
 * below 2^53 and their products with bins are exact doubles). */
static uint64_t
bin_width(double last_ms, uint32_t bins)
{
	double k = floor(last_ms / bins);
	while (k > 0 && k * bins > last_ms)
		k--;
	while ((k + 1) * bins <= last_ms)
		k++;
	return (uint64_t)k + 1;
}

int
herd_histogram_bin(const double *at_ms, uint64_t n, uint32_t bins, uint64_t *bin_ms,
    uint64_t *counts)
{
	if (bins < 1 || bins > HERD_HISTOGRAM_BINS_MAX)
		return OB_EINVAL;
	double last = 0;
	for (uint64_t i = 0; i < n; i++) {
		if (!(at_ms[i] >= 0) || !isfinite(at_ms[i]))
			return OB_EINVAL;
		last = at_ms[i] > last ? at_ms[i] : last;
	}
	uint64_t w = bin_width(last, bins);
	double wd = (double)w;
	memset(counts, 0, bins * sizeof(*counts));
	for (uint64_t i = 0; i < n; i++) {
		/* floor(t / W), then exactly: i x W <= t < (i+1) x W */
		double t = at_ms[i];
		double b = floor(t / wd);
		while (b > 0 && b * wd > t)
			b--;
		while ((b + 1) * wd <= t)
			b++;
		if (b >= bins)
			abort(); /* a broken invariant: bins x W > last >= t */
		counts[(uint32_t)b]++;
	}
	*bin_ms = w;
	return OB_OK;
}

/* Run 0 of a cell, recorded and binned: *r and *h (whose run, calls, ms,
 * bin_ms, bins and counts it writes) only on OB_OK. */
static int
run_binned(const struct herd_params *p, uint64_t run_seed, uint32_t bins,
    struct herd_run_result *r, struct herd_histogram *h)
{
	struct herd_run_result one;
	struct herd_arrivals a;
	int rc = herd_run_record(p, run_seed, &one, &a);
	if (rc != OB_OK)
		return rc;
	rc = herd_histogram_bin(a.ms, a.n, bins, &h->bin_ms, h->counts);
	herd_arrivals_free(&a);
	if (rc != OB_OK)
		return rc;
	h->run = 0;
	h->calls = one.calls;
	h->ms = one.ms;
	h->bins = bins;
	*r = one;
	return OB_OK;
}

int
herd_cell_run(const struct herd_params *p, uint64_t seed, uint32_t runs, uint32_t bins,
    struct herd_cell *out, struct herd_histogram *hist)
{
	if (runs == 0 || (hist != NULL && (bins < 1 || bins > HERD_HISTOGRAM_BINS_MAX)))
		return OB_EINVAL;
	struct herd_histogram h; /* run 0's, copied out on success */
	double calls = 0, failed = 0, ms = 0;
	for (uint32_t r = 0; r < runs; r++) {
		struct herd_run_result one;
		uint64_t run_seed = herd_run_seed(seed, p->clients, r);
		int rc = r == 0 && hist != NULL ? run_binned(p, run_seed, bins, &one, &h) :
		    herd_run(p, run_seed, &one);
		if (rc != OB_OK)
			return rc;
		calls += (double)one.calls;
		failed += (double)one.failed;
		ms += one.ms;
	}
	out->runs = runs;
	out->calls = calls / runs;
	out->failed = failed / runs;
	out->ms = ms / runs;
	if (hist != NULL)
		*hist = h;
	return OB_OK;
}
