/*
 * queries.h - the SQL that more than one outboxctl command runs: `status`
 * and `dead list` print it, the web view (web_poll.c) serves the same rows
 * as JSON, so both always show the same figures.
 */
#ifndef OUTBOX_CTL_QUERIES_H
#define OUTBOX_CTL_QUERIES_H

/* Per topic ($1: one topic, or NULL for all), then the total over all
 * topics (is_total true, topic NULL), from outbox.topic_stats: columns
 * topic, is_total, pending, leased, delivered, dead, blocked_keys,
 * oldest_pending_age_seconds, oldest_claimable_age_seconds, retrying,
 * unclaimed (ages NULL when there is no such message; unclaimed: the
 * pending messages of a topic no running relay claims from, queries.c).
 * Unordered: callers wrap it. */
extern const char ctl_status_sql[];

/* Dead letters oldest first ($1: a topic or NULL; $2: the limit): id,
 * topic, key, attempts, created_at, age_seconds, last_error (cut to 80). */
extern const char ctl_dead_list_sql[];

#endif
