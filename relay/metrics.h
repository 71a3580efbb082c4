/*
 * metrics.h - the relay's Prometheus metrics (names and meanings in
 * docs/metrics.md).
 *
 * One shared-memory registry (outbox/metrics.h) is created by main before
 * the supervisor forks anything; the handles below point into that mapping
 * and stay valid in every forked worker and in the metrics process, so
 * /metrics shows the sum over all workers, including dead ones.
 *
 * Counters are bumped by the workers directly (lock-free). Gauges that are
 * really a fold over the workers (in flight, breaker open, ready) are not
 * written by the workers: each worker writes its own row of
 * relay_worker_live, and the supervisor folds the rows into the gauges on
 * every tick (relay_metrics_fold), and clears the row of a worker that
 * exits, so a worker killed mid-flight never leaves a gauge stuck.
 */
#ifndef OUTBOX_RELAY_METRICS_H
#define OUTBOX_RELAY_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "outbox/bus_tls.h"
#include "outbox/metrics.h"
#include "outbox/wire.h"

/* Series in the registry (static ones, breaker gauges and per-topic ones,
 * four per topic; overflow is dropped and counted in
 * outbox_metrics_dropped_series_total). */
#define RELAY_METRICS_CAPACITY 2048
/* Destinations that get an outbox_relay_breaker_open series (in --route
 * order); further ones are not shown, and main says so at start. */
#define RELAY_METRICS_MAX_DESTS 64

/* Handles into the shared registry; NULL handles are no-ops. */
struct relay_metrics {
	struct ob_metrics *reg;
	struct ob_metric *claimed;
	struct ob_metric *fenced_out;
	struct ob_metric *takeovers;
	struct ob_metric *released;
	struct ob_metric *standby_gate_waits;
	struct ob_metric *standby_gate_timeouts;
	struct ob_metric *inflight;
	struct ob_metric *pending;
	struct ob_metric *oldest_claimable;
	struct ob_metric *blocked_keys;
	struct ob_metric *delivery_seconds;
	struct ob_metric *frames_sent;
	struct ob_metric *frames_failed;
	struct ob_metric *budget_spent;
	struct ob_metric *purged;
	struct ob_metric *oldest_xact_age;
	struct ob_metric *oldest_xact_pid;
	struct ob_metric *handshake_refused[OB_BUS_REFUSED_COUNT]; /* by enum ob_bus_refusal */
	struct ob_metric *tls_reload[2];  /* SIGHUP's TLS reloads per worker: ok, failed */
	struct ob_metric *breaker_open[RELAY_METRICS_MAX_DESTS];
	int ndests;                    /* destinations with a breaker gauge */
};

/* One worker's live state (its row of the shared table), written by that
 * worker, folded by the supervisor, cleared when the worker exits. */
struct relay_worker_live {
	_Atomic int connected;         /* has a database connection */
	_Atomic int64_t inflight;      /* messages claimed, outcome not yet recorded */
	struct relay_breaker_live {
		_Atomic uint8_t open;      /* this worker's breaker is open */
		_Atomic int64_t fail_ms;   /* CLOCK_MONOTONIC ms of its last failed frame */
		_Atomic int64_t ok_ms;     /* ... and of its last replied frame */
	} breakers[RELAY_METRICS_MAX_DESTS];
};

/* The per-topic counters of one topic. */
struct relay_topic_metrics {
	struct ob_metric *delivered;
	struct ob_metric *retried;
	struct ob_metric *dead;
};

/* A worker's per-topic handles, by slot of its topic cache. */
struct relay_topic_cache {
	struct ob_topic_cache slots;
	struct relay_topic_metrics e[OB_TOPIC_CACHE];
};

/* Create the shared registry and register every static series (so a
 * scrape shows them at 0 from the start) and one breaker gauge per
 * destination URL in dests (ndests of them; beyond RELAY_METRICS_MAX_DESTS
 * are skipped). OB_OK or OB_ENOMEM. */
int relay_metrics_init(struct relay_metrics *rm, const char *const *dests, int ndests);

/* Unmap the registry (in the process that created it). */
void relay_metrics_fini(struct relay_metrics *rm);

/* The counters of a topic (len bytes, not NUL-terminated), registered on
 * first use. Never NULL; its handles may be NULL when the registry is full. */
struct relay_topic_metrics *relay_metrics_topic(struct relay_metrics *rm,
    struct relay_topic_cache *c, const char *topic, size_t len);

/* Worker 0: the gauge outbox_relay_unrouted_pending of a topic (len
 * bytes, not NUL-terminated; cut to OB_TOPIC_CACHE_TOPIC_MAX), found or
 * registered (a scan of the registry, under its lock when new: once per
 * topic per --metrics-interval). NULL when the registry is full. */
struct ob_metric *relay_metrics_unrouted(struct relay_metrics *rm, const char *topic,
    size_t len);

/* Supervisor: fold the nworkers live rows into the in-flight gauge, the
 * breaker gauges and the registry's ready flag. Atomics only.
 *
 * Breakers are per worker, and an idle worker's breaker stays open until
 * it has something to probe with; so a destination shows open (1) when
 * some worker's breaker is open on a failure newer than the last reply any
 * worker got from it, and closed (0) once any worker gets a reply again. */
void relay_metrics_fold(struct relay_metrics *rm, struct relay_worker_live *live,
    int nworkers);

/* Supervisor: a worker exited; forget its live state. */
void relay_metrics_worker_gone(struct relay_worker_live *row);

#endif
