/*
 * metrics.c - the metrics registry: fixed-capacity series in one anonymous
 * mapping, updated with lock-free atomics, rendered as Prometheus text.
 *
 * The mapping holds no pointers, only offsets-free arrays, so the same bytes
 * mean the same thing in every process that inherited them through fork().
 * A series is published in two steps under the registration mutex: its slot
 * is filled, its `ready` flag is stored (release), then the series count is
 * bumped (release); readers load the count (acquire) and only look at ready
 * slots below it, so they never see a half-written series. The mutex is
 * process-shared and robust: a worker killed while registering leaves the
 * lock to the next taker and an unpublished slot that is simply reused.
 *
 * Values: counters are uint64 (fetch_add); gauges and histogram sums are
 * doubles stored as their bit pattern in a uint64 (store, or a CAS loop to
 * add). Histogram buckets are stored per bucket and made cumulative when
 * rendered, so _count and the +Inf bucket always agree.
 *
 * Never: take a lock on an update or a render, or allocate on an update.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "outbox/err.h"
#include "outbox/metrics.h"
#include "outbox/version.h"
#include "outbox/wire.h"

_Static_assert(OB_TOPIC_CACHE_TOPIC_MAX == OB_WIRE_MAX_TOPIC,
    "the topic cache keeps whole topics");

#define METRICS_MAGIC 0x6f626d6574726963ULL /* "obmetric" */
#define RESERVED_PREFIX "outbox_metrics_"

const double ob_metrics_latency_buckets[OB_METRICS_LATENCY_N] = {
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10,
};

struct ob_metric {
	_Atomic uint32_t ready; /* 1 once every field below is written */
	uint8_t type;           /* enum ob_metric_type */
	uint8_t nbounds;
	char name[OB_METRICS_NAME_MAX];
	char labels[OB_METRICS_LABELS_MAX]; /* rendered: a="x",b="y" */
	char help[OB_METRICS_HELP_MAX];
	double bounds[OB_METRICS_BUCKETS_MAX];
	_Atomic uint64_t value;    /* counter count; gauge double bits */
	_Atomic uint64_t sum_bits; /* histogram sum, double bits */
	_Atomic uint64_t buckets[OB_METRICS_BUCKETS_MAX + 1]; /* last: > max bound */
};

struct ob_metrics {
	uint64_t magic;
	size_t capacity;
	size_t map_len;
	pthread_mutex_t lock; /* registration only */
	_Atomic uint32_t nseries;
	_Atomic uint64_t dropped;
	_Atomic bool ready;
	struct ob_metric series[];
};

static uint64_t
dbl_bits(double v)
{
	uint64_t u;
	memcpy(&u, &v, sizeof u);
	return u;
}

static double
bits_dbl(uint64_t u)
{
	double v;
	memcpy(&v, &u, sizeof v);
	return v;
}

static int
metrics_map(size_t capacity, bool shared, struct ob_metrics **out)
{
	pthread_mutexattr_t attr;
	struct ob_metrics *m;
	size_t len;
	void *p;

	if (capacity < OB_METRICS_CAPACITY_MIN || capacity > OB_METRICS_CAPACITY_MAX)
		return OB_EINVAL;
	len = sizeof(struct ob_metrics) + capacity * sizeof(struct ob_metric);
	p = mmap(NULL, len, PROT_READ | PROT_WRITE,
	    (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return OB_ENOMEM;
	m = p; /* anonymous mappings are zero-filled */
	m->magic = METRICS_MAGIC;
	m->capacity = capacity;
	m->map_len = len;
	if (pthread_mutexattr_init(&attr) != 0)
		goto fail;
	if ((shared && pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED) != 0) ||
	    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST) != 0 ||
	    pthread_mutex_init(&m->lock, &attr) != 0) {
		pthread_mutexattr_destroy(&attr);
		goto fail;
	}
	pthread_mutexattr_destroy(&attr);
	*out = m;
	return OB_OK;
fail:
	munmap(p, len);
	return OB_ENOMEM;
}

int
ob_metrics_new(size_t capacity, struct ob_metrics **out)
{
	return metrics_map(capacity, false, out);
}

int
ob_metrics_new_shared(size_t capacity, struct ob_metrics **out)
{
	return metrics_map(capacity, true, out);
}

void
ob_metrics_free(struct ob_metrics *m)
{
	if (m == NULL)
		return;
	/* the mutex is not destroyed: other processes may still share it */
	munmap(m, m->map_len);
}

static bool
valid_name(const char *s, bool colon_ok)
{
	if (s == NULL || *s == '\0')
		return false;
	for (const char *p = s; *p != '\0'; p++) {
		char c = *p;
		bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    c == '_' || (colon_ok && c == ':');
		if (!alpha && !(p > s && c >= '0' && c <= '9'))
			return false;
	}
	return true;
}

/* The text format's escape of c: backslash and newline in HELP text and
 * label values, the double quote in label values only (quotes). NULL when
 * c stands as it is; an escape is two bytes. */
static const char *
text_escape(char c, bool quotes)
{
	return c == '\\' ? "\\\\" : c == '\n' ? "\\n" : quotes && c == '"' ? "\\\"" : NULL;
}

/* Render the label set into out (a="x",b="y"); false when invalid or too
 * long. */
static bool
render_labels(const char *const *labels, char *out, size_t outlen)
{
	size_t n = 0;

	out[0] = '\0';
	if (labels == NULL)
		return true;
	for (size_t i = 0; labels[i] != NULL; i += 2) {
		const char *k = labels[i], *v = labels[i + 1];

		if (v == NULL || !valid_name(k, false) || strncmp(k, "__", 2) == 0 ||
		    strcmp(k, "le") == 0)
			return false;
		for (size_t j = 0; j < i; j += 2)
			if (strcmp(labels[j], k) == 0)
				return false; /* duplicate label name */
		int w = snprintf(out + n, outlen - n, "%s%s=\"", i ? "," : "", k);
		if (w < 0 || (size_t)w >= outlen - n)
			return false;
		n += (size_t)w;
		for (const char *p = v; *p != '\0'; p++) {
			const char *esc = text_escape(*p, true);
			size_t need = esc ? 2 : 1;
			if (n + need + 1 >= outlen)
				return false;
			if (esc) {
				memcpy(out + n, esc, 2);
			} else {
				out[n] = *p;
			}
			n += need;
		}
		if (n + 2 >= outlen)
			return false;
		out[n++] = '"';
		out[n] = '\0';
	}
	return true;
}

static void
copy_help(char *dst, const char *help)
{
	size_t n = 0;

	for (const char *p = help ? help : ""; *p != '\0' && n + 3 < OB_METRICS_HELP_MAX; p++) {
		const char *esc = text_escape(*p, false);
		if (esc != NULL) {
			memcpy(dst + n, esc, 2);
			n += 2;
		} else {
			dst[n++] = *p;
		}
	}
	dst[n] = '\0';
}

static bool
same_shape(const struct ob_metric *s, enum ob_metric_type type,
    const double *bounds, size_t nbounds)
{
	if (s->type != type)
		return false;
	if (type != OB_METRIC_HISTOGRAM)
		return true;
	return s->nbounds == nbounds &&
	    memcmp(s->bounds, bounds, nbounds * sizeof *bounds) == 0;
}

/* Scan the published series [0, n) for (name, labels). Returns the series,
 * or NULL; *conflict is set when the name exists with another shape. */
static struct ob_metric *
scan(struct ob_metrics *m, uint32_t n, const char *name, const char *labels,
    enum ob_metric_type type, const double *bounds, size_t nbounds,
    bool *conflict)
{
	for (uint32_t i = 0; i < n; i++) {
		struct ob_metric *s = &m->series[i];

		if (!atomic_load_explicit(&s->ready, memory_order_acquire))
			continue;
		if (strcmp(s->name, name) != 0)
			continue;
		if (!same_shape(s, type, bounds, nbounds)) {
			*conflict = true;
			return NULL;
		}
		if (strcmp(s->labels, labels) == 0)
			return s;
	}
	return NULL;
}

static struct ob_metric *
drop(struct ob_metrics *m)
{
	atomic_fetch_add_explicit(&m->dropped, 1, memory_order_relaxed);
	return NULL;
}

static struct ob_metric *
lookup(struct ob_metrics *m, const char *name, const char *help,
    const char *const *labels, enum ob_metric_type type, const double *bounds,
    size_t nbounds)
{
	char text[OB_METRICS_LABELS_MAX];
	struct ob_metric *s;
	bool conflict = false;
	uint32_t n;
	int rc;

	if (m == NULL)
		return NULL;
	if (!valid_name(name, true) || strlen(name) >= OB_METRICS_NAME_MAX ||
	    strncmp(name, RESERVED_PREFIX, strlen(RESERVED_PREFIX)) == 0 ||
	    !render_labels(labels, text, sizeof text))
		return drop(m);
	if (type == OB_METRIC_HISTOGRAM) {
		if (bounds == NULL || nbounds < 1 || nbounds > OB_METRICS_BUCKETS_MAX)
			return drop(m);
		for (size_t i = 0; i < nbounds; i++)
			if (!isfinite(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1]))
				return drop(m);
	} else {
		nbounds = 0;
	}

	/* fast path: no lock */
	n = atomic_load_explicit(&m->nseries, memory_order_acquire);
	if ((s = scan(m, n, name, text, type, bounds, nbounds, &conflict)) != NULL)
		return s;
	if (conflict)
		return drop(m);

	rc = pthread_mutex_lock(&m->lock);
	if (rc == EOWNERDEAD)
		pthread_mutex_consistent(&m->lock); /* the dead holder published nothing */
	else if (rc != 0)
		return drop(m);
	n = atomic_load_explicit(&m->nseries, memory_order_acquire);
	s = scan(m, n, name, text, type, bounds, nbounds, &conflict);
	if (s == NULL && !conflict && n < m->capacity) {
		s = &m->series[n];
		memset(s, 0, sizeof *s);
		s->type = (uint8_t)type;
		s->nbounds = (uint8_t)nbounds;
		snprintf(s->name, sizeof s->name, "%s", name);
		memcpy(s->labels, text, sizeof s->labels);
		copy_help(s->help, help);
		if (nbounds > 0)
			memcpy(s->bounds, bounds, nbounds * sizeof *bounds);
		atomic_store_explicit(&s->ready, 1, memory_order_release);
		atomic_store_explicit(&m->nseries, n + 1, memory_order_release);
	}
	pthread_mutex_unlock(&m->lock);
	return s != NULL ? s : drop(m);
}

struct ob_metric *
ob_metrics_counter(struct ob_metrics *m, const char *name, const char *help,
    const char *const *labels)
{
	return lookup(m, name, help, labels, OB_METRIC_COUNTER, NULL, 0);
}

struct ob_metric *
ob_metrics_gauge(struct ob_metrics *m, const char *name, const char *help,
    const char *const *labels)
{
	return lookup(m, name, help, labels, OB_METRIC_GAUGE, NULL, 0);
}

struct ob_metric *
ob_metrics_histogram(struct ob_metrics *m, const char *name, const char *help,
    const char *const *labels, const double *bounds, size_t nbounds)
{
	return lookup(m, name, help, labels, OB_METRIC_HISTOGRAM, bounds, nbounds);
}

void
ob_metric_inc(struct ob_metric *c)
{
	ob_metric_add(c, 1);
}

void
ob_metric_add(struct ob_metric *c, uint64_t n)
{
	if (c != NULL && c->type == OB_METRIC_COUNTER)
		atomic_fetch_add_explicit(&c->value, n, memory_order_relaxed);
}

void
ob_metric_set(struct ob_metric *g, double v)
{
	if (g != NULL && g->type == OB_METRIC_GAUGE)
		atomic_store_explicit(&g->value, dbl_bits(v), memory_order_relaxed);
}

static void
add_double(_Atomic uint64_t *cell, double delta)
{
	uint64_t old = atomic_load_explicit(cell, memory_order_relaxed);

	while (!atomic_compare_exchange_weak_explicit(cell, &old,
	    dbl_bits(bits_dbl(old) + delta), memory_order_relaxed,
	    memory_order_relaxed))
		;
}

void
ob_metric_gauge_add(struct ob_metric *g, double delta)
{
	if (g != NULL && g->type == OB_METRIC_GAUGE)
		add_double(&g->value, delta);
}

void
ob_metric_observe(struct ob_metric *h, double v)
{
	size_t i;

	if (h == NULL || h->type != OB_METRIC_HISTOGRAM || isnan(v))
		return;
	for (i = 0; i < h->nbounds && v > h->bounds[i]; i++)
		;
	atomic_fetch_add_explicit(&h->buckets[i], 1, memory_order_relaxed);
	add_double(&h->sum_bits, v);
}

double
ob_metric_value(const struct ob_metric *s)
{
	uint64_t n = 0;

	if (s == NULL)
		return 0;
	switch (s->type) {
	case OB_METRIC_COUNTER:
		return (double)atomic_load_explicit(&s->value, memory_order_relaxed);
	case OB_METRIC_GAUGE:
		return bits_dbl(atomic_load_explicit(&s->value, memory_order_relaxed));
	default:
		for (size_t i = 0; i <= s->nbounds; i++)
			n += atomic_load_explicit(&s->buckets[i], memory_order_relaxed);
		return (double)n;
	}
}

void
ob_metrics_set_ready(struct ob_metrics *m, bool ready)
{
	if (m != NULL)
		atomic_store_explicit(&m->ready, ready, memory_order_relaxed);
}

bool
ob_metrics_ready(const struct ob_metrics *m)
{
	return m != NULL && atomic_load_explicit(&m->ready, memory_order_relaxed);
}

uint64_t
ob_metrics_dropped(const struct ob_metrics *m)
{
	return m ? atomic_load_explicit(&m->dropped, memory_order_relaxed) : 0;
}

/* Shortest text that reads back as v; Prometheus spellings for NaN/Inf. */
static void
fmt_double(char *out, size_t outlen, double v)
{
	if (isnan(v)) {
		snprintf(out, outlen, "NaN");
		return;
	}
	if (isinf(v)) {
		snprintf(out, outlen, v > 0 ? "+Inf" : "-Inf");
		return;
	}
	if (v == floor(v) && fabs(v) < 1e15) {
		snprintf(out, outlen, "%.0f", v);
		return;
	}
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(out, outlen, "%.*g", prec, v);
		if (strtod(out, NULL) == v)
			return;
	}
}

static int
cmp_series(const void *a, const void *b)
{
	const struct ob_metric *x = *(const struct ob_metric *const *)a;
	const struct ob_metric *y = *(const struct ob_metric *const *)b;
	int c = strcmp(x->name, y->name);

	if (c != 0)
		return c;
	return x < y ? -1 : x > y;
}

static const char *
type_name(uint8_t t)
{
	return t == OB_METRIC_COUNTER ? "counter" : t == OB_METRIC_GAUGE ? "gauge" : "histogram";
}

/* {labels} or {labels,extra} or {extra} or nothing */
static int
put_labels(struct ob_buf *out, const char *labels, const char *extra)
{
	bool a = labels[0] != '\0', b = extra != NULL;

	if (!a && !b)
		return OB_OK;
	return ob_buf_printf(out, "{%s%s%s}", labels, a && b ? "," : "", b ? extra : "");
}

/* One sample line: name<suffix>{labels[,extra]} value */
static int
put_sample(struct ob_buf *out, const struct ob_metric *s, const char *suffix,
    const char *extra, const char *value)
{
	int rc;

	if ((rc = ob_buf_printf(out, "%s%s", s->name, suffix)) != OB_OK ||
	    (rc = put_labels(out, s->labels, extra)) != OB_OK)
		return rc;
	return ob_buf_printf(out, " %s\n", value);
}

/* A counter's value (or a bucket's cumulative count) as text. */
static void
fmt_count(char *out, size_t outlen, uint64_t n)
{
	snprintf(out, outlen, "%llu", (unsigned long long)n);
}

static int
render_series(const struct ob_metric *s, struct ob_buf *out)
{
	char num[64], count[24], le[80];
	uint64_t cum = 0;
	int rc;

	if (s->type == OB_METRIC_COUNTER) {
		fmt_count(count, sizeof count, atomic_load_explicit(&s->value, memory_order_relaxed));
		return put_sample(out, s, "", NULL, count);
	}
	if (s->type == OB_METRIC_GAUGE) {
		fmt_double(num, sizeof num,
		    bits_dbl(atomic_load_explicit(&s->value, memory_order_relaxed)));
		return put_sample(out, s, "", NULL, num);
	}
	for (size_t i = 0; i <= s->nbounds; i++) {
		cum += atomic_load_explicit(&s->buckets[i], memory_order_relaxed);
		if (i < s->nbounds)
			fmt_double(num, sizeof num, s->bounds[i]);
		snprintf(le, sizeof le, "le=\"%s\"", i < s->nbounds ? num : "+Inf");
		fmt_count(count, sizeof count, cum);
		if ((rc = put_sample(out, s, "_bucket", le, count)) != OB_OK)
			return rc;
	}
	fmt_double(num, sizeof num,
	    bits_dbl(atomic_load_explicit(&s->sum_bits, memory_order_relaxed)));
	if ((rc = put_sample(out, s, "_sum", NULL, num)) != OB_OK)
		return rc;
	return put_sample(out, s, "_count", NULL, count); /* the +Inf bucket's */
}

int
ob_metrics_render(const struct ob_metrics *m, struct ob_buf *out)
{
	const struct ob_metric **order;
	uint32_t n, k = 0;
	int rc = OB_OK;

	n = atomic_load_explicit(&m->nseries, memory_order_acquire);
	if ((order = calloc(n + 1, sizeof *order)) == NULL)
		return OB_ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		if (atomic_load_explicit(&m->series[i].ready, memory_order_acquire))
			order[k++] = &m->series[i];
	qsort(order, k, sizeof *order, cmp_series);
	for (uint32_t i = 0; i < k && rc == OB_OK; i++) {
		const struct ob_metric *s = order[i];

		if (i == 0 || strcmp(order[i - 1]->name, s->name) != 0)
			rc = ob_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", s->name,
			    s->help, s->name, type_name(s->type));
		if (rc == OB_OK)
			rc = render_series(s, out);
	}
	free(order);
	if (rc != OB_OK)
		return rc;
	return ob_buf_printf(out,
	    "# HELP outbox_metrics_dropped_series_total Series not registered because"
	    " the registry was full or the name or labels were invalid.\n"
	    "# TYPE outbox_metrics_dropped_series_total counter\n"
	    "outbox_metrics_dropped_series_total %llu\n"
	    "# HELP outbox_metrics_series Series registered, out of the registry's capacity.\n"
	    "# TYPE outbox_metrics_series gauge\n"
	    "outbox_metrics_series %u\n"
	    "# HELP outbox_metrics_capacity Series the registry can hold.\n"
	    "# TYPE outbox_metrics_capacity gauge\n"
	    "outbox_metrics_capacity %zu\n"
	    "# HELP outbox_build_info The release of this program (its --version).\n"
	    "# TYPE outbox_build_info gauge\n"
	    "outbox_build_info{version=\"" OB_VERSION "\"} 1\n",
	    (unsigned long long)atomic_load_explicit(&m->dropped, memory_order_relaxed),
	    k, m->capacity);
}

unsigned
ob_topic_cache_slot(struct ob_topic_cache *c, const char *topic, size_t len, bool *fresh)
{
	if (len > OB_TOPIC_CACHE_TOPIC_MAX)
		len = OB_TOPIC_CACHE_TOPIC_MAX;
	for (unsigned i = 0; i < c->n; i++)
		if (c->len[i] == len && memcmp(c->topic[i], topic, len) == 0) {
			*fresh = false;
			return i;
		}
	unsigned slot;
	if (c->n < OB_TOPIC_CACHE) {
		slot = c->n++;
	} else {
		slot = c->next_evict;
		c->next_evict = (c->next_evict + 1) % OB_TOPIC_CACHE;
	}
	memcpy(c->topic[slot], topic, len);
	c->topic[slot][len] = '\0';
	c->len[slot] = (uint16_t)len;
	*fresh = true;
	return slot;
}
