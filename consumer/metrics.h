/*
 * metrics.h - the consumer's Prometheus metrics (names and meanings in
 * docs/metrics.md, section Consumer).
 *
 * One process, one registry (ob_metrics_new): the serving threads and the
 * purge thread bump the handles below directly (lock-free atomics), and
 * `--metrics ADDR` serves the registry with outbox/http_endpoint.h, so a
 * scrape reads atomics only and never waits for a request or the database.
 * The plain struct consumer_counters (server.h) is kept beside it: tests
 * and the exit log line read those. Every function accepts a NULL struct
 * consumer_metrics (metrics off) and does nothing.
 */
#ifndef OUTBOX_CONSUMER_METRICS_H
#define OUTBOX_CONSUMER_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "handler_webhook.h"
#include "inbox.h"
#include "outbox/bus_tls.h"
#include "outbox/err.h"
#include "outbox/metrics.h"
#include "outbox/wire.h"

/* Series in the registry: about 50 static ones plus two per topic seen
 * (room for ~480 topics); beyond it series are dropped and counted in
 * outbox_metrics_dropped_series_total, never affecting delivery. */
#define CONSUMER_METRICS_CAPACITY 1024

struct consumer_metrics {
	struct ob_metrics *reg;
	struct ob_metric *requests;
	struct ob_metric *bad_frames[OB_ERR_COUNT];   /* by decoder error (wire.*) */
	struct ob_metric *rejected[INBOX_WHY_COUNT];  /* by enum inbox_why */
	struct ob_metric *retried[INBOX_WHY_COUNT];   /* by enum inbox_why */
	struct ob_metric *fingerprint_mismatch;
	struct ob_metric *apply_seconds;
	struct ob_metric *batch_size;
	struct ob_metric *db_failures;
	struct ob_metric *db_connections;             /* gauge */
	struct ob_metric *purged;
	struct ob_metric *purge_failures;
	struct ob_metric *handshake_refused[OB_BUS_REFUSED_COUNT]; /* by enum ob_bus_refusal */
	struct ob_metric *tls_reload[2];              /* SIGHUP's TLS reloads: ok, failed */
	struct webhook_metrics webhook;               /* NULL handles without webhook */
};

/* One topic's per-topic counters. */
struct consumer_topic_metrics {
	struct ob_metric *applied;
	struct ob_metric *duplicate;
};

/* A serving thread's per-topic handles, by slot of its topic cache. */
struct consumer_topic_cache {
	struct ob_topic_cache slots;
	struct consumer_topic_metrics e[OB_TOPIC_CACHE];
};

/* Create the registry and register the static series (so a scrape shows
 * them at 0 from the start); the webhook series only when webhook is true.
 * On OB_OK *out is owned (consumer_metrics_free); OB_ENOMEM otherwise. */
int consumer_metrics_new(bool webhook, struct consumer_metrics **out);

/* Free cm and its registry. NULL is ok. */
void consumer_metrics_free(struct consumer_metrics *cm);

/* A frame refused by the decoder with error code rc. */
void consumer_metrics_bad_frame(struct consumer_metrics *cm, int rc);

/* A batch's final statuses (after COMMIT or its failure): applied and
 * duplicate by topic, rejected and retried by reason, fingerprint
 * mismatches, the batch size; apply_seconds is observed when reached_db
 * (the batch got a database connection). */
void consumer_metrics_batch(struct consumer_metrics *cm, struct consumer_topic_cache *c,
    const struct ob_wire_request *req, const struct inbox_batch *b, bool reached_db,
    double apply_seconds);

#endif
