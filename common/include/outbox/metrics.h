/*
 * metrics.h - counters, gauges and fixed-bucket histograms, rendered in the
 * Prometheus text exposition format (version 0.0.4).
 *
 * A registry holds a fixed number of series; a series is (name, labels) and
 * is registered lazily the first time it is looked up. The registry can live
 * in shared memory: ob_metrics_new_shared() maps it MAP_SHARED|MAP_ANONYMOUS,
 * so a supervisor that creates it before fork() and its forked workers all
 * update the same atomics, and a scrape of any of them shows the sum over
 * all processes. Handles (struct ob_metric *) are pointers into the mapping
 * and stay valid in every forked child.
 *
 * Concurrency: updates (inc/add/set/observe) are lock-free atomics and never
 * block. Registering a NEW series takes a process-shared mutex for a few
 * microseconds; looking up an existing one takes no lock. Rendering reads
 * atomics only and takes no lock.
 *
 * Limits: a full registry, a name or label set that is too long or not
 * valid Prometheus syntax, or a name reused with another type or other
 * buckets: the lookup returns NULL, the series is dropped and counted in
 * outbox_metrics_dropped_series_total. Every update function accepts NULL
 * and does nothing, so callers need no special case.
 */
#ifndef OUTBOX_METRICS_H
#define OUTBOX_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "outbox/buf.h"

#define OB_METRICS_NAME_MAX 96     /* bytes of a metric name, NUL included */
#define OB_METRICS_LABELS_MAX 320  /* bytes of the rendered label set */
#define OB_METRICS_HELP_MAX 200    /* bytes of the HELP text (truncated) */
#define OB_METRICS_BUCKETS_MAX 16  /* finite bucket bounds of a histogram */
#define OB_METRICS_CAPACITY_MIN 1
#define OB_METRICS_CAPACITY_MAX 65536
#define OB_METRICS_CAPACITY_DEFAULT 1024

enum ob_metric_type {
	OB_METRIC_COUNTER = 1,
	OB_METRIC_GAUGE,
	OB_METRIC_HISTOGRAM,
};

struct ob_metrics; /* the registry */
struct ob_metric;  /* one series */

/* Default latency buckets in seconds (1 ms .. 10 s), OB_METRICS_LATENCY_N. */
extern const double ob_metrics_latency_buckets[];
#define OB_METRICS_LATENCY_N 12

/* A registry for one process (private anonymous mapping). capacity is the
 * number of series, OB_METRICS_CAPACITY_MIN..MAX. On success *out is owned
 * by the caller (ob_metrics_free). OB_EINVAL (bad capacity) or OB_ENOMEM. */
int ob_metrics_new(size_t capacity, struct ob_metrics **out);

/* The same in a MAP_SHARED anonymous mapping with a PTHREAD_PROCESS_SHARED
 * mutex: create it BEFORE fork(); parent and children share every series.
 * Free it once in each process that no longer needs it (munmap is
 * per-process; the memory goes when the last process unmaps or exits). */
int ob_metrics_new_shared(size_t capacity, struct ob_metrics **out);

/* Unmap the registry. Handles obtained from it become invalid. */
void ob_metrics_free(struct ob_metrics *m);

/* Find or register a series. name: [a-zA-Z_:][a-zA-Z0-9_:]*; labels: NULL
 * or a NULL-terminated array of alternating names and values
 * ({"topic", "t", "outcome", "applied", NULL}); label names
 * [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__", "le" not allowed; values
 * any UTF-8 (escaped on output). help: one line, borrowed and copied (the
 * first registration of a name wins). Returns a handle valid as long as the
 * registry, or NULL when the series is dropped (see above). Thread- and
 * process-safe; may block briefly on the registration mutex. */
struct ob_metric *ob_metrics_counter(struct ob_metrics *m, const char *name,
    const char *help, const char *const *labels);
struct ob_metric *ob_metrics_gauge(struct ob_metrics *m, const char *name,
    const char *help, const char *const *labels);
/* bounds: nbounds (1..OB_METRICS_BUCKETS_MAX) strictly increasing finite
 * upper bounds; +Inf is implied. Every series of one name must use the same
 * bounds. */
struct ob_metric *ob_metrics_histogram(struct ob_metrics *m, const char *name,
    const char *help, const char *const *labels, const double *bounds,
    size_t nbounds);

/* Counter: add 1 / add n. Lock-free; NULL is a no-op. */
void ob_metric_inc(struct ob_metric *c);
void ob_metric_add(struct ob_metric *c, uint64_t n);

/* Gauge: set / add (negative to subtract). Lock-free; NULL is a no-op. */
void ob_metric_set(struct ob_metric *g, double v);
void ob_metric_gauge_add(struct ob_metric *g, double delta);

/* Histogram: count one observation (e.g. seconds). NULL is a no-op. */
void ob_metric_observe(struct ob_metric *h, double v);

/* Current value of a counter or gauge (histogram: its count). For tests
 * and for callers that export a value elsewhere. NULL gives 0. */
double ob_metric_value(const struct ob_metric *s);

/* Readiness flag kept in the registry (so that a separate process serving
 * /readyz can see it): default false. Lock-free. */
void ob_metrics_set_ready(struct ob_metrics *m, bool ready);
bool ob_metrics_ready(const struct ob_metrics *m);

/* Number of series dropped so far (outbox_metrics_dropped_series_total). */
uint64_t ob_metrics_dropped(const struct ob_metrics *m);

/* Append the whole registry to out in the text exposition format, families
 * sorted by name, one HELP and TYPE line each. Reads atomics only, never
 * blocks. OB_OK or OB_ENOMEM (out unchanged beyond what was appended). */
int ob_metrics_render(const struct ob_metrics *m, struct ob_buf *out);

/* The per-topic series handles one thread keeps at hand (registering or
 * finding a series scans the registry under its lock; a hot path asks
 * once per topic). Up to OB_TOPIC_CACHE topics; past that the slots are
 * reused in turn. The caller keeps its handles in an array indexed by slot. */
#define OB_TOPIC_CACHE 32
#define OB_TOPIC_CACHE_TOPIC_MAX 255 /* bytes of a topic kept: OB_WIRE_MAX_TOPIC */
struct ob_topic_cache {
	char topic[OB_TOPIC_CACHE][OB_TOPIC_CACHE_TOPIC_MAX + 1];
	uint16_t len[OB_TOPIC_CACHE];
	unsigned n, next_evict;
};

/* The slot of topic (len bytes, not NUL-terminated; cut to
 * OB_TOPIC_CACHE_TOPIC_MAX). *fresh is true when the slot was just given
 * to it: register the slot's series then, labelled c->topic[slot]. */
unsigned ob_topic_cache_slot(struct ob_topic_cache *c, const char *topic, size_t len,
    bool *fresh);

/* A program's series in a table instead of a call each (metrics_rows.c).
 * A row registers one unlabelled counter or gauge into the struct
 * ob_metric * field at offset `at` of the program's metrics struct. */
struct ob_metric_row {
	size_t at;                /* offsetof(the program's struct, field) */
	enum ob_metric_type type; /* OB_METRIC_COUNTER or OB_METRIC_GAUGE */
	const char *name, *help;
};
#define OB_METRIC_ROW(owner, field, type, name, help) \
	{ offsetof(owner, field), OB_METRIC_##type, name, help }

/* Register every row of rows (n) into owner's fields, each series with
 * labels (NULL = none; as ob_metrics_counter takes them). */
void ob_metrics_register_rows(struct ob_metrics *m, void *owner,
    const struct ob_metric_row *rows, size_t n, const char *const *labels);

/* The entry of entries (the caller's array indexed by c's slots,
 * entry_size bytes each) that holds topic's series (topic: len bytes, cut
 * as ob_topic_cache_slot cuts it). When the slot was just given to the
 * topic, rows (n) are registered into the entry first, labelled topic=T
 * (may block briefly, as a registration does). Borrows everything and
 * returns a pointer into entries; one thread per cache, as for the slots. */
void *ob_topic_cache_rows(struct ob_metrics *m, struct ob_topic_cache *c, void *entries,
    size_t entry_size, const struct ob_metric_row *rows, size_t n, const char *topic,
    size_t len);

/* One counter per value of one label (a family such as "by reason"):
 * out[i] is the series labelled label=values[i]. */
void ob_metrics_counters_by(struct ob_metrics *m, const char *name, const char *help,
    const char *label, const char *const *values, size_t n, struct ob_metric **out);

#endif
