/*
 * metrics.c - the consumer's metrics registry and what the request path
 * bumps (see metrics.h). It only counts: it never blocks, never allocates
 * on an update once a series exists, and never touches the database.
 */
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "outbox/reload.h"

/* Messages per request frame (the relay's --batch, up to --max-batch). */
static const double batch_buckets[] = {
	1, 2, 5, 10, 20, 50, 100, 200, 500, 1000,
};

/* One batch transaction, BEGIN .. COMMIT returned. */
static const double apply_buckets[] = {
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
};

#define ROW(field, type, name, help) \
	OB_METRIC_ROW(struct consumer_metrics, field, type, name, help)
static const struct ob_metric_row rows[] = {
	ROW(requests, COUNTER, "outbox_consumer_requests_total",
	    "Request frames received (well-formed or not)"),
	ROW(fingerprint_mismatch, COUNTER, "outbox_consumer_fingerprint_mismatch_total",
	    "Keys redelivered with a different topic or payload (rejected, nothing applied)"),
	ROW(db_failures, COUNTER, "outbox_consumer_db_failures_total",
	    "Batches whose transaction failed as a whole (every message answered retry)"),
	ROW(db_connections, GAUGE, "outbox_consumer_db_connections",
	    "Serving threads holding a usable database connection"),
	ROW(purged, COUNTER, "outbox_consumer_dedup_purged_total",
	    "Dedup records deleted by the retention purge (--dedup-retention)"),
	ROW(purge_failures, COUNTER, "outbox_consumer_purge_failures_total",
	    "Retention purge passes that failed (tried again next interval)"),
};

/* Per topic, labelled topic=T (topic_metrics). */
#define TOPIC_ROW(field, name, help) \
	OB_METRIC_ROW(struct consumer_topic_metrics, field, COUNTER, name, help)
static const struct ob_metric_row topic_rows[] = {
	TOPIC_ROW(applied, "outbox_consumer_applied_total",
	    "Messages applied: effect and dedup record committed"),
	TOPIC_ROW(duplicate, "outbox_consumer_duplicate_total",
	    "Messages answered duplicate: key applied before with the same fingerprint,"
	    " nothing applied"),
};
#undef TOPIC_ROW
#undef ROW

/* Reasons that never label a rejected / retried message. */
static bool
is_reason(int why)
{
	return why != INBOX_WHY_NONE && why != INBOX_WHY_DUPLICATE;
}

/* The series of outbox_consumer_bad_frames_total labelled with error rc:
 * one per request error registered at start, any other looked up when it
 * happens (consumer_metrics_bad_frame). */
static struct ob_metric *
bad_frames_counter(struct ob_metrics *r, int rc)
{
	const char *labels[] = { "reason", ob_err_name(rc), NULL };
	return ob_metrics_counter(r, "outbox_consumer_bad_frames_total",
	    "Request frames refused as a whole by the decoder, by wire error"
	    " (error reply, nothing written)", labels);
}

static void
register_webhook(struct ob_metrics *r, struct webhook_metrics *w)
{
	static const char calls_help[] =
	    "Downstream HTTP calls of the webhook handler, by outcome";
	static const char claims_help[] =
	    "Webhook key-claim events that sent no call or whose result was refused";
	struct {
		struct ob_metric **h;
		const char *label, *value;
	} s[] = {
		{ &w->calls_2xx, "outcome", "2xx" },
		{ &w->calls_4xx, "outcome", "4xx" },
		{ &w->calls_5xx, "outcome", "5xx" },
		{ &w->calls_other, "outcome", "other_status" },
		{ &w->calls_timeout, "outcome", "timeout" },
		{ &w->calls_conn_error, "outcome", "conn_error" },
		{ &w->busy, "event", "busy" },
		{ &w->takeovers, "event", "takeover" },
		{ &w->fenced_out, "event", "fenced_out" },
		{ &w->replayed, "event", "replayed" },
		{ &w->mismatch, "event", "fingerprint_mismatch" },
		{ &w->bad_keys, "event", "bad_key" },
		{ &w->parked, "event", "parked" },
	};
	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
		const char *labels[] = { s[i].label, s[i].value, NULL };
		bool call = strcmp(s[i].label, "outcome") == 0;
		*s[i].h = ob_metrics_counter(r, call ? "outbox_consumer_webhook_calls_total"
		    : "outbox_consumer_webhook_claims_total", call ? calls_help : claims_help,
		    labels);
	}
}

int
consumer_metrics_new(bool webhook, struct consumer_metrics **out)
{
	struct consumer_metrics *cm = calloc(1, sizeof(*cm));
	if (cm == NULL)
		return OB_ENOMEM;
	int rc = ob_metrics_new(CONSUMER_METRICS_CAPACITY, &cm->reg);
	if (rc != OB_OK) {
		free(cm);
		return rc;
	}
	struct ob_metrics *r = cm->reg;
	ob_metrics_register_rows(r, cm, rows, sizeof(rows) / sizeof(rows[0]), NULL);
	for (int e = OB_EWIRE_TRUNC; e < OB_ERR_COUNT; e++) {
		if (e == OB_EWIRE_STATUS || e == OB_EWIRE_DETAIL)
			continue; /* reply-only errors: a request never has them */
		cm->bad_frames[e] = bad_frames_counter(r, e);
	}
	for (int w = 0; w < INBOX_WHY_COUNT; w++) {
		if (!is_reason(w))
			continue;
		const char *labels[] = { "reason", inbox_why_name((enum inbox_why)w), NULL };
		cm->rejected[w] = ob_metrics_counter(r, "outbox_consumer_rejected_total",
		    "Messages answered reject (the relay dead-letters them), by reason", labels);
		cm->retried[w] = ob_metrics_counter(r, "outbox_consumer_retried_total",
		    "Messages answered retry (the relay delivers them again), by reason", labels);
	}
	cm->apply_seconds = ob_metrics_histogram(r, "outbox_consumer_apply_seconds",
	    "One request's batch transaction, from its first statement to COMMIT returned",
	    NULL, apply_buckets, sizeof(apply_buckets) / sizeof(apply_buckets[0]));
	cm->batch_size = ob_metrics_histogram(r, "outbox_consumer_batch_size",
	    "Messages per well-formed request frame", NULL, batch_buckets,
	    sizeof(batch_buckets) / sizeof(batch_buckets[0]));
	ob_metrics_counters_by(r, "outbox_consumer_handshake_refused_total",
	    "Connections refused before any request was read, by class: tls_auth (TLS"
	    " handshake: no client certificate, not signed by --tls-ca, expired, or not"
	    " TLS), protocol (not an SP REQ peer), timeout (negotiation over 10 s), closed"
	    " (reset or closed in negotiation)", "reason", ob_bus_refusal_names,
	    OB_BUS_REFUSED_COUNT, cm->handshake_refused);
	ob_metrics_counters_by(r, "outbox_consumer_tls_reload_total",
	    "SIGHUP re-reads of --tls-cert, --tls-key and --tls-ca: ok (the listener was"
	    " re-opened with them), failed (a file did not read or parse, or the key is"
	    " not the certificate's: the running configuration is kept)", "result",
	    ob_reload_results, OB_RELOAD_RESULTS, cm->tls_reload);
	if (webhook)
		register_webhook(r, &cm->webhook);
	*out = cm;
	return OB_OK;
}

void
consumer_metrics_free(struct consumer_metrics *cm)
{
	if (cm == NULL)
		return;
	ob_metrics_free(cm->reg);
	free(cm);
}

void
consumer_metrics_bad_frame(struct consumer_metrics *cm, int rc)
{
	if (cm == NULL)
		return;
	if (rc > 0 && rc < OB_ERR_COUNT && cm->bad_frames[rc] != NULL) {
		ob_metric_inc(cm->bad_frames[rc]);
		return;
	}
	/* Not a wire error (out of memory): looked up, rare. */
	ob_metric_inc(bad_frames_counter(cm->reg, rc));
}

static struct consumer_topic_metrics *
topic_metrics(struct consumer_metrics *cm, struct consumer_topic_cache *c,
    const char *topic, uint16_t len)
{
	return ob_topic_cache_rows(cm->reg, &c->slots, c->e, sizeof(c->e[0]), topic_rows,
	    sizeof(topic_rows) / sizeof(topic_rows[0]), topic, len);
}

void
consumer_metrics_batch(struct consumer_metrics *cm, struct consumer_topic_cache *c,
    const struct ob_wire_request *req, const struct inbox_batch *b, bool reached_db,
    double apply_seconds)
{
	if (cm == NULL)
		return;
	ob_metric_observe(cm->batch_size, (double)req->count);
	if (reached_db)
		ob_metric_observe(cm->apply_seconds, apply_seconds);
	for (uint32_t i = 0; i < req->count; i++) {
		unsigned why = b->why[i] < INBOX_WHY_COUNT ? b->why[i] : INBOX_WHY_DB;
		const struct ob_wire_msg *m = &req->msgs[i];
		if (!is_reason((int)why))
			why = INBOX_WHY_HANDLER; /* a retry/reject always has a reason */
		switch (b->results[i].status) {
		case OB_WIRE_APPLIED:
			ob_metric_inc(topic_metrics(cm, c, m->topic, m->topic_len)->applied);
			break;
		case OB_WIRE_DUPLICATE:
			ob_metric_inc(topic_metrics(cm, c, m->topic, m->topic_len)->duplicate);
			break;
		case OB_WIRE_RETRY:
			ob_metric_inc(cm->retried[why]);
			break;
		default:
			ob_metric_inc(cm->rejected[why]);
			if (why == INBOX_WHY_MISMATCH)
				ob_metric_inc(cm->fingerprint_mismatch);
			break;
		}
	}
}
