/*
 * queries.c - SQL shared by outboxctl commands (queries.h). Read-only.
 */
#include "queries.h"

#define MSG_TS(col) "to_char(" col ", 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') AS " col

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
    " COALESCE(sum(retrying), 0)::bigint AS retrying"
    " FROM outbox.topic_stats($1::text) GROUP BY GROUPING SETS ((topic), ())";

const char ctl_dead_list_sql[] =
    "SELECT id, topic, idempotency_key AS key, attempts, " MSG_TS("created_at") ","
    " round(extract(epoch FROM now() - created_at)::numeric, 3) AS age_seconds,"
    " left(last_error, 80) AS last_error"
    " FROM outbox.dead WHERE $1::text IS NULL OR topic = $1"
    " ORDER BY id LIMIT $2::bigint";
