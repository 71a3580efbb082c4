/*
 * claim.c - the claim statement and its result mapping.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "claim.h"
#include "outbox/err.h"
#include "outbox/pg.h"

/* lease_until IS NULL covers fresh rows; an expired lease is a takeover of a
 * dead or stalled worker's claim: the fence bump fences that worker out.
 * Of an ordering key only its head is claimable (sql/outbox/005_ordering.sql),
 * so one message per key is in flight, across every worker and relay. The
 * predicate matches the partial index messages_claimable. `takeover` is the
 * row as locked, before the update: an outcome write clears the lease, so a
 * claimable row that still has one holds an expired, unrecorded claim.
 * The id = ANY(ARRAY(...)) is redundant with the join and keeps the update
 * a primary-key lookup per claimed row: planned for LIMIT rows, the join
 * alone hash-joined a scan of the whole table (17 ms for 8 rows of 14,000,
 * and growing with the table). */
#define CLAIM_SQL(ORDERING_PREDICATE)                                        \
    "WITH due AS ("                                                     \
    "  SELECT id, lease_until IS NOT NULL AS takeover FROM outbox.messages" \
    "   WHERE status = 'pending' AND available_at <= now()"             \
    "     AND (lease_until IS NULL OR lease_until < now())"             \
    ORDERING_PREDICATE                                                  \
    "   ORDER BY available_at, id"                                      \
    "   LIMIT $3"                                                       \
    "   FOR UPDATE SKIP LOCKED)"                                        \
    " UPDATE outbox.messages m"                                         \
    "    SET lease_owner = $1,"                                         \
    "        lease_until = now() + $2::bigint * interval '1 millisecond'," \
    "        fence = m.fence + 1,"                                      \
    "        attempts = m.attempts + 1"                                 \
    "   FROM due WHERE m.id = due.id"                                   \
    "     AND m.id = ANY(ARRAY(SELECT id FROM due))"                    \
    " RETURNING m.id, m.fence, m.attempts,"                             \
    "   (extract(epoch FROM m.created_at) * 1000000)::bigint,"          \
    "   m.topic, m.idempotency_key, m.payload::text, m.ordering_key,"   \
    "   COALESCE(m.ordering_seq, 0), due.takeover"

static const char claim_sql[] = CLAIM_SQL("     AND (ordering_key IS NULL OR is_head)");

/* BROKEN mode (--no-ordering): every due message of a key is claimable. */
static const char claim_sql_unordered[] = CLAIM_SQL("");

int
relay_claim_batch(PGconn *conn, const char *owner, int64_t lease_ms,
    uint32_t max, bool ordering, struct relay_claim *out, char *err, size_t errlen)
{
	char lease[24], limit[16];
	snprintf(lease, sizeof(lease), "%" PRId64, lease_ms);
	snprintf(limit, sizeof(limit), "%" PRIu32, max);
	const char *params[3] = { owner, lease, limit };
	PGresult *res = PQexecParams(conn, ordering ? claim_sql : claim_sql_unordered, 3, NULL, params, NULL, NULL, 0);
	int rc = ob_pg_check(res, PGRES_TUPLES_OK, "claim", err, errlen);
	if (rc != OB_OK) {
		PQclear(res);
		return rc;
	}
	uint32_t n = (uint32_t)PQntuples(res);
	struct ob_wire_msg *msgs = NULL;
	out->takeovers = 0;
	if (n > 0 && (msgs = calloc(n, sizeof(*msgs))) == NULL) {
		PQclear(res);
		snprintf(err, errlen, "claim: out of memory");
		return OB_ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct ob_wire_msg *m = &msgs[i];
		m->id = (uint64_t)ob_pg_int64(res, (int)i, 0);
		m->fence = (uint64_t)ob_pg_int64(res, (int)i, 1);
		m->attempt = (uint32_t)ob_pg_int64(res, (int)i, 2);
		m->created_at_us = ob_pg_int64(res, (int)i, 3);
		m->topic = PQgetvalue(res, (int)i, 4);
		m->topic_len = (uint16_t)PQgetlength(res, (int)i, 4);
		m->key = PQgetvalue(res, (int)i, 5);
		m->key_len = (uint16_t)PQgetlength(res, (int)i, 5);
		m->payload = PQgetvalue(res, (int)i, 6);
		m->payload_len = (uint32_t)PQgetlength(res, (int)i, 6);
		if (!PQgetisnull(res, (int)i, 7)) {
			m->ordering_key = PQgetvalue(res, (int)i, 7);
			m->ordering_key_len = (uint16_t)PQgetlength(res, (int)i, 7);
			m->ordering_seq = (uint64_t)ob_pg_int64(res, (int)i, 8);
		}
		if (PQgetvalue(res, (int)i, 9)[0] == 't')
			out->takeovers++;
	}
	out->res = res;
	out->msgs = msgs;
	out->n = n;
	return OB_OK;
}

void
relay_claim_fini(struct relay_claim *c)
{
	PQclear(c->res);
	free(c->msgs);
	memset(c, 0, sizeof(*c));
}
