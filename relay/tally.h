/*
 * tally.h - a worker's counters: the totals of this process, the totals of
 * the whole process tree (in the shared mapping, relay.h) and the metrics
 * of the shared registry, kept in step, and the lines that report them
 * (relay.progress, relay.message.dead).
 *
 * Counting only: nothing here touches the database or a socket. Worker
 * loop only (one tally per worker process).
 */
#ifndef OUTBOX_RELAY_TALLY_H
#define OUTBOX_RELAY_TALLY_H

#include <stdatomic.h>

#include "claim.h"
#include "metrics.h"
#include "record.h"
#include "relay.h"

struct relay_tally {
	struct relay_totals mine;       /* this process's */
	struct relay_totals *all;       /* the tree's (relay_shared.totals), or NULL */
	struct relay_metrics *metrics;  /* the shared registry's handles, or NULL */
	struct relay_topic_cache topics; /* per-topic metric handles, looked up once */
};

/* Add n to one counter of both totals. */
#define RELAY_TALLY_ADD(t, field, n)                                    \
	do {                                                            \
		atomic_fetch_add(&(t)->mine.field, (uint64_t)(n));      \
		if ((t)->all != NULL)                                   \
			atomic_fetch_add(&(t)->all->field, (uint64_t)(n)); \
	} while (0)

/* A metric of the shared registry (NULL, a no-op, without one). */
#define RELAY_TALLY_METRIC(t, field) ((t)->metrics != NULL ? (t)->metrics->field : NULL)

/* Count a written batch's outcomes b / o (b->n of them), in the totals and
 * per topic; a dead letter is logged (relay.message.dead). Borrows both. */
void relay_tally_recorded(struct relay_tally *t, const struct relay_batch *b,
    const struct relay_outcome *o);

/* One info line under event with this process's totals so far. */
void relay_tally_log_progress(struct relay_tally *t, const char *event);

#endif
