/*
 * metrics.c - the producer's metrics registry and the handles the request
 * path bumps (see metrics.h). It only counts: it never blocks, never
 * allocates on an update, and never touches the database.
 */
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "outbox/err.h"

static const char *const route_names[PRODUCER_ROUTE_N] = {
	"/v1/reports", "/v1/reports/{id}", "/healthz", "/v1/messages", "other",
};

static const char *const method_names[PRODUCER_METHOD_N] = {
	"GET", "HEAD", "POST", "other",
};

#define ROW(field, name, help) \
	OB_METRIC_ROW(struct producer_metrics, field, COUNTER, name, help)
static const struct ob_metric_row rows[] = {
	ROW(replays, "outbox_producer_replays_total",
	    "POSTs answered with a stored response (Idempotent-Replayed: true)"),
	ROW(conflicts, "outbox_producer_conflicts_total",
	    "409 answers: the key is in progress under another request's live lease"),
	ROW(key_mismatch, "outbox_producer_key_mismatch_total",
	    "422 answers: the key was used before with a different request body"),
	ROW(takeovers, "outbox_producer_takeovers_total",
	    "keys taken over after their holder's lease expired (fencing token bumped)"),
	ROW(fenced_out, "outbox_producer_fenced_out_total",
	    "final commits refused because the key was taken over meanwhile (rolled back)"),
	ROW(keys_collected, "outbox_producer_keys_collected_total",
	    "idempotency keys deleted by the retention GC (--key-retention)"),
};
#undef ROW

enum producer_route
producer_route_of(const char *path)
{
	static const char prefix[] = "/v1/reports/";
	if (strcmp(path, "/v1/reports") == 0)
		return PRODUCER_ROUTE_REPORTS;
	if (strncmp(path, prefix, sizeof(prefix) - 1) == 0)
		return PRODUCER_ROUTE_REPORT_ID;
	if (strcmp(path, "/healthz") == 0)
		return PRODUCER_ROUTE_HEALTHZ;
	if (strcmp(path, "/v1/messages") == 0)
		return PRODUCER_ROUTE_MESSAGES;
	return PRODUCER_ROUTE_OTHER;
}

const char *
producer_route_name(enum producer_route r)
{
	return (unsigned)r < PRODUCER_ROUTE_N ? route_names[r] : "other";
}

static enum producer_method
method_of(const char *m)
{
	for (int i = 0; i < PRODUCER_METHOD_OTHER; i++)
		if (strcmp(m, method_names[i]) == 0)
			return (enum producer_method)i;
	return PRODUCER_METHOD_OTHER;
}

int
producer_metrics_new(struct producer_metrics **out)
{
	struct producer_metrics *pm = calloc(1, sizeof(*pm));
	if (pm == NULL)
		return OB_ENOMEM;
	int rc = ob_metrics_new(PRODUCER_METRICS_CAPACITY, &pm->reg);
	if (rc != OB_OK) {
		free(pm);
		return rc;
	}
	ob_metrics_register_rows(pm->reg, pm, rows, sizeof(rows) / sizeof(rows[0]), NULL);
	/* "other" (a path the API does not have: 404, whatever the client
	 * asked) is counted but gets no histogram: its latency says nothing. */
	for (int r = 0; r < PRODUCER_ROUTE_OTHER; r++) {
		const char *labels[] = { "route", route_names[r], NULL };
		pm->request_seconds[r] = ob_metrics_histogram(pm->reg,
		    "outbox_producer_request_seconds",
		    "time from the request reaching the server to its answer (queue wait included)",
		    labels, ob_metrics_latency_buckets, OB_METRICS_LATENCY_N);
	}
	*out = pm;
	return OB_OK;
}

void
producer_metrics_free(struct producer_metrics *pm)
{
	if (pm == NULL)
		return;
	ob_metrics_free(pm->reg);
	free(pm);
}

static struct ob_metric *
requests_counter(struct producer_metrics *pm, enum producer_method m, enum producer_route r,
    int status)
{
	if (status < PRODUCER_STATUS_MIN || status > PRODUCER_STATUS_MAX)
		status = PRODUCER_STATUS_MAX; /* never happens: statuses are ours */
	_Atomic(struct ob_metric *) *slot = &pm->requests[r][m][status - PRODUCER_STATUS_MIN];
	struct ob_metric *c = atomic_load_explicit(slot, memory_order_acquire);
	if (c != NULL)
		return c;
	char st[8];
	st[0] = (char)('0' + status / 100);
	st[1] = (char)('0' + status / 10 % 10);
	st[2] = (char)('0' + status % 10);
	st[3] = '\0';
	const char *labels[] = { "method", method_names[m], "route", route_names[r], "status", st,
		NULL };
	/* Two threads may race here: both get the same series from the registry. */
	c = ob_metrics_counter(pm->reg, "outbox_producer_requests_total",
	    "HTTP requests answered, by method, route pattern and status", labels);
	atomic_store_explicit(slot, c, memory_order_release);
	return c;
}

void
producer_metrics_request(struct producer_metrics *pm, const char *method,
    enum producer_route route, int status, bool replayed, double seconds)
{
	if (pm == NULL)
		return;
	if ((unsigned)route >= PRODUCER_ROUTE_N)
		route = PRODUCER_ROUTE_OTHER;
	ob_metric_inc(requests_counter(pm, method_of(method), route, status));
	ob_metric_observe(pm->request_seconds[route], seconds);
	if (status == 409)
		ob_metric_inc(pm->conflicts);
	else if (status == 422)
		ob_metric_inc(pm->key_mismatch);
	if (replayed)
		ob_metric_inc(pm->replays);
}

void
producer_metrics_takeover(struct producer_metrics *pm)
{
	if (pm != NULL)
		ob_metric_inc(pm->takeovers);
}

void
producer_metrics_fenced_out(struct producer_metrics *pm)
{
	if (pm != NULL)
		ob_metric_inc(pm->fenced_out);
}

void
producer_metrics_keys_collected(struct producer_metrics *pm, int64_t n)
{
	if (pm != NULL && n > 0)
		ob_metric_add(pm->keys_collected, (uint64_t)n);
}
