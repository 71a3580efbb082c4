/*
 * metrics_rows.c - registering a program's series from a table (see
 * outbox/metrics.h, struct ob_metric_row): each program lists its series
 * once, as rows, instead of one registration call per series; the
 * per-topic ones are registered the same way when a topic cache gives a
 * topic its slot.
 */
#include "outbox/metrics.h"

void
ob_metrics_register_rows(struct ob_metrics *m, void *owner,
    const struct ob_metric_row *rows, size_t n, const char *const *labels)
{
	for (size_t i = 0; i < n; i++) {
		struct ob_metric **field = (struct ob_metric **)((char *)owner + rows[i].at);
		*field = rows[i].type == OB_METRIC_GAUGE
		    ? ob_metrics_gauge(m, rows[i].name, rows[i].help, labels)
		    : ob_metrics_counter(m, rows[i].name, rows[i].help, labels);
	}
}

void *
ob_topic_cache_rows(struct ob_metrics *m, struct ob_topic_cache *c, void *entries,
    size_t entry_size, const struct ob_metric_row *rows, size_t n, const char *topic,
    size_t len)
{
	bool fresh;
	unsigned slot = ob_topic_cache_slot(c, topic, len, &fresh);
	void *e = (char *)entries + slot * entry_size;
	if (fresh) {
		const char *labels[] = { "topic", c->topic[slot], NULL };
		ob_metrics_register_rows(m, e, rows, n, labels);
	}
	return e;
}

void
ob_metrics_counters_by(struct ob_metrics *m, const char *name, const char *help,
    const char *label, const char *const *values, size_t n, struct ob_metric **out)
{
	for (size_t i = 0; i < n; i++) {
		const char *labels[] = { label, values[i], NULL };
		out[i] = ob_metrics_counter(m, name, help, labels);
	}
}
