/*
 * stats.h - the outbox gauges that only the database knows: pending
 * messages, the age of the oldest claimable one, and ordering keys blocked
 * by a dead head. One read-only statement; worker 0 runs it every
 * --metrics-interval when --metrics is set.
 */
#ifndef OUTBOX_RELAY_STATS_H
#define OUTBOX_RELAY_STATS_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

struct relay_stats {
	int64_t pending;              /* not yet delivered: waiting, in flight, retrying */
	double oldest_claimable_s;    /* now - available_at of the oldest claimable; 0 if none */
	int64_t blocked_keys;         /* ordering keys waiting behind a dead letter */
};

/* Read the gauges. OB_OK, or OB_EDB with the server's message in err.
 * Blocks for one round trip. */
int relay_stats_query(PGconn *conn, struct relay_stats *out, char *err, size_t errlen);

#endif
