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
relay_claim_from_result(PGresult *res, int col0, int flag_col, int takeover_col,
    struct relay_claim *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	out->res[0] = res;
	int rows = PQntuples(res);
	uint32_t n = 0;
	for (int r = 0; r < rows; r++)
		n += flag_col < 0 || PQgetvalue(res, r, flag_col)[0] == 't';
	if (n == 0)
		return OB_OK;
	if ((out->msgs = calloc(n, sizeof(*out->msgs))) == NULL) {
		snprintf(err, errlen, "claim: out of memory");
		return OB_ENOMEM;
	}
	for (int r = 0; r < rows; r++) {
		if (flag_col >= 0 && PQgetvalue(res, r, flag_col)[0] != 't')
			continue;
		struct ob_wire_msg *m = &out->msgs[out->n++];
		m->id = (uint64_t)ob_pg_int64(res, r, col0);
		m->fence = (uint64_t)ob_pg_int64(res, r, col0 + 1);
		m->attempt = (uint32_t)ob_pg_int64(res, r, col0 + 2);
		m->created_at_us = ob_pg_int64(res, r, col0 + 3);
		m->topic = PQgetvalue(res, r, col0 + 4);
		m->topic_len = (uint16_t)PQgetlength(res, r, col0 + 4);
		m->key = PQgetvalue(res, r, col0 + 5);
		m->key_len = (uint16_t)PQgetlength(res, r, col0 + 5);
		m->payload = PQgetvalue(res, r, col0 + 6);
		m->payload_len = (uint32_t)PQgetlength(res, r, col0 + 6);
		if (!PQgetisnull(res, r, col0 + 7)) {
			m->ordering_key = PQgetvalue(res, r, col0 + 7);
			m->ordering_key_len = (uint16_t)PQgetlength(res, r, col0 + 7);
			m->ordering_seq = (uint64_t)ob_pg_int64(res, r, col0 + 8);
		}
		if (takeover_col >= 0 && PQgetvalue(res, r, takeover_col)[0] == 't')
			out->takeovers++;
	}
	return OB_OK;
}

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
		memset(out, 0, sizeof(*out));
		return rc;
	}
	rc = relay_claim_from_result(res, 0, -1, RELAY_CLAIM_COLUMNS, out, err, errlen);
	if (rc != OB_OK)
		relay_claim_fini(out);
	return rc;
}

int
relay_claim_append(struct relay_claim *dst, struct relay_claim *src)
{
	if (src->n > 0) {
		struct ob_wire_msg *m = realloc(dst->msgs, (dst->n + src->n) * sizeof(*m));
		if (m == NULL)
			return OB_ENOMEM;
		memcpy(m + dst->n, src->msgs, src->n * sizeof(*m));
		dst->msgs = m;
		dst->n += src->n;
		dst->takeovers += src->takeovers;
	}
	/* Keep src's result alive: dst's messages borrow from it now. */
	if (dst->res[0] == NULL)
		dst->res[0] = src->res[0];
	else if (src->res[0] != NULL)
		dst->res[1] = src->res[0];
	free(src->msgs);
	memset(src, 0, sizeof(*src));
	return OB_OK;
}

void
relay_claim_fini(struct relay_claim *c)
{
	PQclear(c->res[0]);
	PQclear(c->res[1]);
	free(c->msgs);
	memset(c, 0, sizeof(*c));
}
