/*
 * metrics.h - the producer's Prometheus metrics (names and meanings in
 * docs/metrics.md, section Producer).
 *
 * One process, one registry (ob_metrics_new): the serving threads, nng's
 * HTTP threads and the key GC thread bump the handles below directly
 * (lock-free atomics); `serve --metrics ADDR` serves the registry with
 * outbox/http_endpoint.h. Every function accepts a NULL struct
 * producer_metrics (metrics off) and does nothing.
 */
#ifndef OUTBOX_PRODUCER_METRICS_H
#define OUTBOX_PRODUCER_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "outbox/metrics.h"

/* Series in the registry: the static ones plus requests_total per
 * (method, route, status) actually seen. */
#define PRODUCER_METRICS_CAPACITY 512

/* The route label: the route pattern, never the raw path. */
enum producer_route {
	PRODUCER_ROUTE_REPORTS = 0, /* /v1/reports */
	PRODUCER_ROUTE_REPORT_ID,   /* /v1/reports/{id} */
	PRODUCER_ROUTE_HEALTHZ,     /* /healthz */
	PRODUCER_ROUTE_MESSAGES,    /* /v1/messages */
	PRODUCER_ROUTE_OTHER,       /* anything else that reached a handler */
	PRODUCER_ROUTE_N,
};

/* The method label: the methods the server routes, or OTHER. */
enum producer_method {
	PRODUCER_METHOD_GET = 0,
	PRODUCER_METHOD_HEAD,
	PRODUCER_METHOD_POST,
	PRODUCER_METHOD_OTHER,
	PRODUCER_METHOD_N,
};

#define PRODUCER_STATUS_MIN 100
#define PRODUCER_STATUS_MAX 599

struct producer_metrics {
	struct ob_metrics *reg;
	struct ob_metric *replays;
	struct ob_metric *conflicts;
	struct ob_metric *key_mismatch;
	struct ob_metric *takeovers;
	struct ob_metric *fenced_out;
	struct ob_metric *keys_collected;
	struct ob_metric *request_seconds[PRODUCER_ROUTE_N];
	/* requests_total handles, registered on first use (a registry lookup
	 * scans; this keeps the hot path to one atomic load). */
	_Atomic(struct ob_metric *) requests[PRODUCER_ROUTE_N][PRODUCER_METHOD_N]
	    [PRODUCER_STATUS_MAX - PRODUCER_STATUS_MIN + 1];
};

/* Create the registry and register the static series (so a scrape shows
 * them at 0 from the start). On OB_OK *out is owned (producer_metrics_free);
 * OB_ENOMEM otherwise. */
int producer_metrics_new(struct producer_metrics **out);

/* Free pm and its registry. NULL is ok. */
void producer_metrics_free(struct producer_metrics *pm);

/* The route pattern of a request path (without its query string). */
enum producer_route producer_route_of(const char *path);
const char *producer_route_name(enum producer_route r);

/* Count one answered request: requests_total{method,route,status}, the
 * latency histogram of its route, and by status the conflicts (409) and
 * key mismatch (422) counters, and replays when replayed. Lock-free once
 * the series exists; thread-safe. NULL pm is a no-op. */
void producer_metrics_request(struct producer_metrics *pm, const char *method,
    enum producer_route route, int status, bool replayed, double seconds);

/* The event counters; NULL pm is a no-op. */
void producer_metrics_takeover(struct producer_metrics *pm);
void producer_metrics_fenced_out(struct producer_metrics *pm);
void producer_metrics_keys_collected(struct producer_metrics *pm, int64_t n);

#endif
