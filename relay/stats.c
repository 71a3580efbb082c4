/*
 * stats.c - the database's side of the relay's gauges and of its unrouted
 * report: the rows of outbox.topic_stats() (sql/outbox/functions/
 * topic_stats.sql), per topic, in one statement; the totals are summed
 * here. Pending counts the backlog of every stream (messages not yet
 * assigned, and those in open batches) plus the retries; the oldest
 * claimable age is that of the oldest message a relay could claim now;
 * blocked keys are ordering keys waiting behind a dead letter. Only the
 * columns read here are asked for: the function is inlined, so the
 * count of a topic's retained (delivered) messages is never made.
 * Read-only; never decides anything.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/err.h"
#include "outbox/pg.h"
#include "stats.h"

static const char stats_sql[] =
    "SELECT topic, pending, COALESCE(oldest_pending_s, 0), COALESCE(oldest_claimable_s, 0),"
    " blocked_keys FROM outbox.topic_stats()";

int
relay_stats_query(PGconn *conn, struct relay_stats *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	PGresult *res = PQexec(conn, stats_sql);
	int rc = ob_pg_check(res, PGRES_TUPLES_OK, "read outbox gauges", err, errlen);
	if (rc != OB_OK) {
		PQclear(res);
		return rc;
	}
	int n = PQntuples(res);
	out->topics = calloc(n > 0 ? (size_t)n : 1, sizeof(*out->topics));
	if (out->topics == NULL) {
		snprintf(err, errlen, "read outbox gauges: out of memory");
		PQclear(res);
		return OB_ENOMEM;
	}
	for (int r = 0; r < n; r++) {
		struct relay_topic_stat *t = &out->topics[r];
		t->topic = PQgetvalue(res, r, 0);
		t->topic_len = (size_t)PQgetlength(res, r, 0);
		t->pending = ob_pg_int64(res, r, 1);
		t->oldest_pending_s = strtod(PQgetvalue(res, r, 2), NULL);
		t->oldest_claimable_s = strtod(PQgetvalue(res, r, 3), NULL);
		t->blocked_keys = ob_pg_int64(res, r, 4);
		out->pending += t->pending;
		out->blocked_keys += t->blocked_keys;
		if (t->oldest_claimable_s > out->oldest_claimable_s)
			out->oldest_claimable_s = t->oldest_claimable_s;
	}
	out->ntopics = n;
	out->res = res;
	return OB_OK;
}

void
relay_stats_fini(struct relay_stats *st)
{
	free(st->topics);
	PQclear(st->res);
	memset(st, 0, sizeof(*st));
}
