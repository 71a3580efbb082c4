/*
 * queries.c - SQL shared by outboxctl commands (queries.h). Read-only.
 */
#include "queries.h"

#include "ctl_util.h" /* CTL_SQL_TS */

/* unclaimed: the pending messages of a topic no relay is claiming from.
 * A relay claims only the topics it routes (--unrouted wait, the
 * default), and every relay that routes a topic claims from it at least
 * once per breaker probe interval, even while its consumer is down; so a
 * topic with a message claimable for over a minute whose streams were not
 * cut, and none of whose batches was made, finished or held, within that
 * minute is served by no running relay: unrouted, or no relay runs.
 * A read of outbox.streams (by its key) and of outbox.batches (small:
 * done rows go after a minute) per topic. */
#define UNCLAIMED_AFTER "interval '1 minute'"
#define UNCLAIMED_SQL                                                            \
    " CASE WHEN s.oldest_claimable_s > extract(epoch FROM " UNCLAIMED_AFTER ")"   \
    " AND NOT EXISTS (SELECT 1 FROM outbox.streams x WHERE x.topic = s.topic"     \
    "   AND x.cut_at > now() - " UNCLAIMED_AFTER ")"                              \
    " AND NOT EXISTS (SELECT 1 FROM outbox.batches b WHERE b.topic = s.topic"     \
    "   AND (b.created_at > now() - " UNCLAIMED_AFTER                              \
    "        OR b.done_at > now() - " UNCLAIMED_AFTER                              \
    "        OR (b.state = 'leased' AND b.lease_until > now() - " UNCLAIMED_AFTER ")))" \
    " THEN s.pending ELSE 0 END"

/* The oldest of the total is the largest age. */
const char ctl_status_sql[] =
    "SELECT topic, GROUPING(topic) = 1 AS is_total,"
    " COALESCE(sum(pending), 0)::bigint AS pending,"
    " COALESCE(sum(in_flight), 0)::bigint AS leased,"
    " COALESCE(sum(delivered), 0)::bigint AS delivered,"
    " COALESCE(sum(dead), 0)::bigint AS dead,"
    /* An ordering key held behind a dead letter (--on-dead-head block). */
    " COALESCE(sum(blocked_keys), 0)::bigint AS blocked_keys,"
    " round(max(oldest_pending_s)::numeric, 3) AS oldest_pending_age_seconds,"
    " round(max(oldest_claimable_s)::numeric, 3) AS oldest_claimable_age_seconds,"
    " COALESCE(sum(retrying), 0)::bigint AS retrying,"
    " COALESCE(sum(unclaimed), 0)::bigint AS unclaimed"
    " FROM (SELECT s.*," UNCLAIMED_SQL " AS unclaimed FROM outbox.topic_stats($1::text) s) s"
    " GROUP BY GROUPING SETS ((topic), ())";

const char ctl_dead_list_sql[] =
    "SELECT id, topic, idempotency_key AS key, attempts, " CTL_SQL_TS("created_at") ","
    " round(extract(epoch FROM now() - created_at)::numeric, 3) AS age_seconds,"
    " left(last_error, 80) AS last_error"
    " FROM outbox.dead WHERE $1::text IS NULL OR topic = $1"
    " ORDER BY id LIMIT $2::bigint";
