/*
 * stats_report.h - worker 0's report of the outbox's figures (stats.h's
 * query): the gauges every --metrics-interval with --metrics, and under
 * --unrouted wait the topics no route of this relay matches, every
 * --unrouted-log-interval.
 *
 * A topic no route matches is never claimed by this relay: its pending
 * count goes to outbox_relay_unrouted_pending (0 for a routed topic, so
 * that a topic no relay routes is the minimum over the relays), and once
 * its messages have waited past the interval (another relay that routes it
 * would have claimed them) one warn line per interval names it:
 * relay.topic.unrouted. One line per topic, never per message.
 *
 * Worker 0's loop only.
 */
#ifndef OUTBOX_RELAY_STATS_REPORT_H
#define OUTBOX_RELAY_STATS_REPORT_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics.h"
#include "outbox/wire.h"
#include "relay.h"

/* Topics whose relay.topic.unrouted line is remembered (for its once per
 * --unrouted-log-interval); past that the oldest entry is reused. */
#define RELAY_UNROUTED_LOGGED 64

struct relay_stats_report {
	const struct relay_config *cfg; /* borrowed */
	struct relay_metrics *metrics;  /* the shared registry's handles, or NULL */
	bool unrouted_wait;             /* report the topics not routed */
	int64_t next_ms;                /* ob_mono_ms() of the next report */
	struct relay_unrouted_logged {  /* when a topic's line may come again */
		char topic[OB_WIRE_MAX_TOPIC + 1];
		int64_t next_ms;
	} unrouted[RELAY_UNROUTED_LOGGED];
};

/* Set r up (zeroed first) for cfg and metrics (both borrowed; metrics may
 * be NULL). Unrouted topics are reported under --unrouted wait, unless a
 * default route makes every topic routed. */
void relay_stats_report_init(struct relay_stats_report *r, const struct relay_config *cfg,
    struct relay_metrics *metrics);

/* When due, read the figures on conn and report them (gauges, unrouted
 * lines); a failed read is logged (relay.metrics.stats_failed) and tried
 * again at the next interval. Blocks for one round trip. */
void relay_stats_report_run(struct relay_stats_report *r, PGconn *conn);

/* Whether relay.topic.unrouted may be logged for topic (len bytes) at
 * now_ms: at most once per --unrouted-log-interval per topic; if so, it is
 * remembered as logged. Pure: no clock, no I/O. */
bool relay_stats_report_unrouted_due(struct relay_stats_report *r, const char *topic,
    size_t len, int64_t now_ms);

#endif
