/*
 * stats.h - the outbox figures that only the database knows, per topic:
 * pending messages, the ages of the oldest pending and oldest claimable
 * one, and ordering keys blocked by a dead head. One read-only statement;
 * worker 0 runs it every --metrics-interval when --metrics is set (the
 * gauges), and every --unrouted-log-interval under --unrouted wait (the
 * topics this relay has no route for: relay.topic.unrouted).
 */
#ifndef OUTBOX_RELAY_STATS_H
#define OUTBOX_RELAY_STATS_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

/* One topic's figures. */
struct relay_topic_stat {
	const char *topic;            /* borrows relay_stats.res */
	size_t topic_len;
	int64_t pending;              /* not yet delivered: waiting, in flight, retrying */
	double oldest_pending_s;      /* age of the oldest pending message; 0 if none */
	double oldest_claimable_s;    /* now - available_at of the oldest claimable; 0 if none */
	int64_t blocked_keys;         /* ordering keys waiting behind a dead letter */
};

struct relay_stats {
	/* over every topic */
	int64_t pending;
	double oldest_claimable_s;
	int64_t blocked_keys;
	/* per topic (every topic outbox.topic_stats knows, by name) */
	struct relay_topic_stat *topics;
	int ntopics;
	PGresult *res;                /* the rows topics[] borrow */
};

/* Read the figures into *out (zeroed first). OB_OK (release with
 * relay_stats_fini), or OB_EDB with the server's message in err, or
 * OB_ENOMEM; *out then holds nothing to release. Blocks for one round
 * trip. */
int relay_stats_query(PGconn *conn, struct relay_stats *out, char *err, size_t errlen);

/* Release what relay_stats_query filled in (safe on a zeroed one). */
void relay_stats_fini(struct relay_stats *st);

#endif
