/*
 * stats_report.c - worker 0's gauges and relay.topic.unrouted lines from the
 * outbox's figures (stats_report.h). Reads only: never writes a table.
 */
#include <inttypes.h>
#include <string.h>

#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/log.h"
#include "routes.h"
#include "stats.h"
#include "stats_report.h"

void
relay_stats_report_init(struct relay_stats_report *r, const struct relay_config *cfg,
    struct relay_metrics *metrics)
{
	memset(r, 0, sizeof(*r));
	r->cfg = cfg;
	r->metrics = metrics;
	bool unrouted_dead = cfg->unrouted != NULL && strcmp(cfg->unrouted, "dead-letter") == 0;
	/* with a default route every topic is routed: nothing to report */
	r->unrouted_wait = !unrouted_dead && cfg->route_table != NULL;
	for (int i = 0; r->unrouted_wait && i < cfg->route_table->nroutes; i++)
		r->unrouted_wait = strcmp(cfg->route_table->routes[i].topic, "*") != 0;
}

bool
relay_stats_report_unrouted_due(struct relay_stats_report *r, const char *topic, size_t len,
    int64_t now_ms)
{
	struct relay_unrouted_logged *slot = NULL, *oldest = &r->unrouted[0];
	if (len > OB_WIRE_MAX_TOPIC)
		len = OB_WIRE_MAX_TOPIC;
	for (int i = 0; i < RELAY_UNROUTED_LOGGED && slot == NULL; i++) {
		struct relay_unrouted_logged *u = &r->unrouted[i];
		if (strlen(u->topic) == len && memcmp(u->topic, topic, len) == 0)
			slot = u;
		else if (u->next_ms < oldest->next_ms)
			oldest = u;
	}
	if (slot != NULL && now_ms < slot->next_ms)
		return false;
	if (slot == NULL) {
		slot = oldest;
		memcpy(slot->topic, topic, len);
		slot->topic[len] = '\0';
	}
	slot->next_ms = now_ms + r->cfg->unrouted_log_interval_ms;
	return true;
}

void
relay_stats_report_run(struct relay_stats_report *r, PGconn *conn)
{
	const struct relay_config *c = r->cfg;
	bool metrics = r->metrics != NULL && c->metrics != NULL && c->metrics[0] != '\0';
	if ((!metrics && !r->unrouted_wait) || ob_mono_ms() < r->next_ms)
		return;
	r->next_ms = ob_mono_ms() + (metrics ? c->metrics_interval_ms
	                                     : c->unrouted_log_interval_ms);
	char err[1024], q[1100];
	struct relay_stats st;
	if (relay_stats_query(conn, &st, err, sizeof(err)) != OB_OK) {
		ob_warn("relay.metrics.stats_failed", "err=%s", ob_log_q(err, q, sizeof(q)));
		return;
	}
	if (metrics) {
		ob_metric_set(r->metrics->pending, (double)st.pending);
		ob_metric_set(r->metrics->oldest_claimable, st.oldest_claimable_s);
		ob_metric_set(r->metrics->blocked_keys, (double)st.blocked_keys);
	}
	int64_t now = ob_mono_ms();
	for (int i = 0; i < st.ntopics; i++) {
		const struct relay_topic_stat *t = &st.topics[i];
		bool routed = relay_routes_find(c->route_table, t->topic, t->topic_len) >= 0;
		if (metrics)
			ob_metric_set(relay_metrics_unrouted(r->metrics, t->topic, t->topic_len),
			    routed ? 0 : (double)t->pending);
		if (routed || !r->unrouted_wait || t->pending == 0 ||
		    t->oldest_claimable_s * 1000 < (double)c->unrouted_log_interval_ms ||
		    !relay_stats_report_unrouted_due(r, t->topic, t->topic_len, now))
			continue;
		ob_warn("relay.topic.unrouted", "topic=%s pending=%" PRId64 " oldest_pending_s=%.1f"
		    " oldest_claimable_s=%.1f hint=\"no --route of this relay matches the topic and"
		    " no relay has claimed its messages for a while: they wait, pending (--unrouted"
		    " wait); route it here or start the relay that serves it\"",
		    ob_log_q(t->topic, q, sizeof(q)), t->pending, t->oldest_pending_s,
		    t->oldest_claimable_s);
	}
	relay_stats_fini(&st);
}
