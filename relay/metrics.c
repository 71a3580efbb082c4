/*
 * metrics.c - the relay's series: registration before fork, the workers'
 * per-topic handle cache, and the supervisor's fold of the workers' live
 * rows into gauges (see metrics.h). Names and meanings: docs/metrics.md.
 */
#include <string.h>

#include "metrics.h"
#include "outbox/err.h"
#include "outbox/reload.h"

static const double delivery_buckets[] = {
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
};

#define ROW(field, type, name, help) OB_METRIC_ROW(struct relay_metrics, field, type, name, help)
static const struct ob_metric_row rows[] = {
	ROW(claimed, COUNTER, "outbox_relay_claimed_total",
	    "Messages claimed under a lease (every attempt, takeovers included)"),
	ROW(fenced_out, COUNTER, "outbox_relay_fenced_out_total",
	    "Outcome writes refused because the claim's fence moved on (a stalled worker)"),
	ROW(takeovers, COUNTER, "outbox_relay_lease_takeovers_total",
	    "Messages claimed in a batch taken over from a holder whose lease expired"),
	ROW(released, COUNTER, "outbox_relay_released_total",
	    "Claimed messages handed back as a batch, due again later: unsent (breaker open,"
	    " shutdown; attempt refunded) or after a failed frame (attempt counted)"),
	ROW(standby_gate_waits, COUNTER, "outbox_relay_standby_gate_waits_total",
	    "Batches that waited for the standbys of --standby-gate before being sent"),
	ROW(standby_gate_timeouts, COUNTER, "outbox_relay_standby_gate_timeouts_total",
	    "Batches handed back unsent because the standbys of --standby-gate did not reach"
	    " them within --standby-gate-timeout"),
	ROW(inflight, GAUGE, "outbox_relay_inflight",
	    "Messages claimed by a live worker whose outcome is not recorded yet"),
	ROW(pending, GAUGE, "outbox_relay_pending",
	    "Messages not yet delivered (waiting, in a batch out, or retrying)"),
	ROW(oldest_claimable, GAUGE, "outbox_relay_oldest_claimable_age_seconds",
	    "Seconds the oldest message a relay could claim now has been waiting; 0 when"
	    " none"),
	ROW(blocked_keys, GAUGE, "outbox_relay_blocked_keys",
	    "Ordering keys waiting behind a dead letter (blocked until requeued)"),
	ROW(frames_sent, COUNTER, "outbox_relay_frames_sent_total",
	    "Request frames handed to nng"),
	ROW(frames_failed, COUNTER, "outbox_relay_frames_failed_total",
	    "Request frames sent that got no reply (timeout, transport error)"),
	ROW(budget_spent, COUNTER, "outbox_relay_retry_budget_spent_total",
	    "Frames whose retry their destination's retry budget refused: their messages"
	    " wait --retry-budget-slow"),
	ROW(purged, COUNTER, "outbox_relay_purged_total",
	    "Messages dropped with their slot by the retention housekeeping"),
	ROW(oldest_xact_age, GAUGE, "outbox_relay_oldest_xact_age_seconds",
	    "Age of the oldest open transaction holding vacuum back in the database (the"
	    " bookkeeping's dead rows wait for it); 0 when none"),
	ROW(oldest_xact_pid, GAUGE, "outbox_relay_oldest_xact_pid",
	    "Backend pid of that transaction's session (pg_stat_activity.pid); 0 when none"),
};

/* Per topic, labelled topic=T (relay_metrics_topic). */
#define TOPIC_ROW(field, name, help) \
	OB_METRIC_ROW(struct relay_topic_metrics, field, COUNTER, name, help)
static const struct ob_metric_row topic_rows[] = {
	TOPIC_ROW(delivered, "outbox_relay_delivered_total",
	    "Messages recorded as delivered (applied or duplicate at the consumer)"),
	TOPIC_ROW(retried, "outbox_relay_retried_total",
	    "Messages recorded as retries (a retry answer, or a failed frame decided"
	    " message by message), due again after a backoff"),
	TOPIC_ROW(dead, "outbox_relay_dead_lettered_total",
	    "Messages recorded as dead (rejected, no route, too large, attempts or age used up)"),
};
#undef TOPIC_ROW
#undef ROW

int
relay_metrics_init(struct relay_metrics *rm, const char *const *dests, int ndests)
{
	memset(rm, 0, sizeof(*rm));
	int rc = ob_metrics_new_shared(RELAY_METRICS_CAPACITY, &rm->reg);
	if (rc != OB_OK)
		return rc;
	struct ob_metrics *r = rm->reg;
	ob_metrics_register_rows(r, rm, rows, sizeof(rows) / sizeof(rows[0]), NULL);
	rm->delivery_seconds = ob_metrics_histogram(r, "outbox_relay_delivery_seconds",
	    "Round trip of a request frame that got a reply (send, consumer commit, reply)",
	    NULL, delivery_buckets, sizeof(delivery_buckets) / sizeof(delivery_buckets[0]));
	ob_metrics_counters_by(r, "outbox_relay_handshake_refused_total",
	    "Connection attempts to a consumer refused in negotiation, by class: tls_auth"
	    " (TLS handshake: certificate not signed by --tls-ca, expired, wrong server"
	    " name, or not TLS), protocol (not an SP REP peer: tcp:// against tls+tcp://),"
	    " timeout, closed (reset or closed in negotiation); counted after a frame"
	    " failed for want of a connection", "reason", ob_bus_refusal_names,
	    OB_BUS_REFUSED_COUNT, rm->handshake_refused);
	ob_metrics_counters_by(r, "outbox_relay_tls_reload_total",
	    "SIGHUP re-reads of --tls-cert, --tls-key and --tls-ca, one per worker: ok (new"
	    " dials use them), failed (a file did not read or parse, or the key is not the"
	    " certificate's: the running configuration is kept)", "result", ob_reload_results,
	    OB_RELOAD_RESULTS, rm->tls_reload);
	for (int i = 0; i < ndests && i < RELAY_METRICS_MAX_DESTS; i++) {
		const char *labels[] = { "destination", dests[i], NULL };
		rm->breaker_open[i] = ob_metrics_gauge(r, "outbox_relay_breaker_open",
		    "1 while any worker's circuit breaker for the destination is open", labels);
		rm->ndests = i + 1;
	}
	return OB_OK;
}

void
relay_metrics_fini(struct relay_metrics *rm)
{
	ob_metrics_free(rm->reg);
	memset(rm, 0, sizeof(*rm));
}

struct relay_topic_metrics *
relay_metrics_topic(struct relay_metrics *rm, struct relay_topic_cache *c,
    const char *topic, size_t len)
{
	return ob_topic_cache_rows(rm->reg, &c->slots, c->e, sizeof(c->e[0]), topic_rows,
	    sizeof(topic_rows) / sizeof(topic_rows[0]), topic, len);
}

struct ob_metric *
relay_metrics_unrouted(struct relay_metrics *rm, const char *topic, size_t len)
{
	char name[OB_TOPIC_CACHE_TOPIC_MAX + 1];
	if (len > OB_TOPIC_CACHE_TOPIC_MAX)
		len = OB_TOPIC_CACHE_TOPIC_MAX;
	memcpy(name, topic, len);
	name[len] = '\0';
	const char *labels[] = { "topic", name, NULL };
	return ob_metrics_gauge(rm->reg, "outbox_relay_unrouted_pending",
	    "Messages pending in a topic no --route of this relay matches (left unclaimed by"
	    " --unrouted wait); 0 for a topic it routes", labels);
}

void
relay_metrics_fold(struct relay_metrics *rm, struct relay_worker_live *live,
    int nworkers)
{
	int64_t inflight = 0;
	bool ready = false;
	for (int w = 0; w < nworkers; w++) {
		inflight += atomic_load(&live[w].inflight);
		ready |= atomic_load(&live[w].connected) != 0;
	}
	ob_metric_set(rm->inflight, (double)inflight);
	for (int d = 0; d < rm->ndests; d++) {
		int64_t last_ok = 0;
		for (int w = 0; w < nworkers; w++) {
			int64_t ok = atomic_load(&live[w].breakers[d].ok_ms);
			last_ok = ok > last_ok ? ok : last_ok;
		}
		bool open = false;
		for (int w = 0; w < nworkers && !open; w++)
			open = atomic_load(&live[w].breakers[d].open) != 0 &&
			    atomic_load(&live[w].breakers[d].fail_ms) > last_ok;
		ob_metric_set(rm->breaker_open[d], open ? 1 : 0);
	}
	ob_metrics_set_ready(rm->reg, ready);
}

void
relay_metrics_worker_gone(struct relay_worker_live *row)
{
	atomic_store(&row->connected, 0);
	atomic_store(&row->inflight, 0);
	for (int d = 0; d < RELAY_METRICS_MAX_DESTS; d++) {
		atomic_store(&row->breakers[d].open, 0);
		atomic_store(&row->breakers[d].fail_ms, 0);
		atomic_store(&row->breakers[d].ok_ms, 0);
	}
}
