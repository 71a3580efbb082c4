/*
 * record.c - fenced outcome writes, one call to outbox.record_outcomes per batch.
 *
 * The arrays travel as text array literals; the error texts are escaped by
 * ob_buf_put_pg_array_text.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/buf.h"
#include "outbox/err.h"
#include "outbox/pg.h"
#include "record.h"

/* One call per batch: outbox.record_outcomes_chain (sql/outbox/011_chain_heads.sql)
 * writes every outcome fenced (unless $7 is false: the BROKEN --no-fencing
 * mode), hands each ordering key's head on to its next message and, with
 * a chain owner ($9), claims that message for it. Rows: (chained, id, the
 * claim's columns): chained = false for each outcome written. */
static const char record_sql[] =
    "SELECT * FROM outbox.record_outcomes_chain($1::bigint[], $2::bigint[], $3::text[],"
    " $4::bigint[], $5::int[], $6::text[], $7::boolean, $8::boolean, $9::text,"
    " $10::bigint, $11::int)";

const char *
relay_outcome_name(enum relay_outcome_kind k)
{
	switch (k) {
	case RELAY_OUT_DELIVERED: return "delivered";
	case RELAY_OUT_RETRY: return "retry";
	case RELAY_OUT_DEAD: return "dead";
	case RELAY_OUT_RELEASE: return "release";
	}
	return "unknown";
}

/* Which of the n outcomes' ids are missing from the written rows: those
 * are the fenced-out ones. Writes up to max of them into ids. */
static uint32_t
missing_ids(const PGresult *res, const struct relay_outcome *o, uint32_t n,
    uint64_t *ids, uint32_t max)
{
	int rows = PQntuples(res);
	uint32_t found = 0;
	if (ids == NULL || max == 0)
		return 0;
	for (uint32_t i = 0; i < n && found < max; i++) {
		bool seen = false;
		/* Batches are small (claim_max); a scan is fine. */
		for (int r = 0; r < rows && !seen; r++)
			seen = PQgetvalue(res, r, 0)[0] == 'f' &&
			    (uint64_t)ob_pg_int64(res, r, 1) == o[i].id;
		if (!seen)
			ids[found++] = o[i].id;
	}
	return found;
}

int
relay_record_outcomes(PGconn *conn, const struct relay_outcome *o,
    uint32_t n, const struct relay_record_mode *mode, const struct relay_chain *chain,
    uint64_t *fenced_ids, uint32_t fenced_ids_max, struct relay_record_result *r,
    char *err, size_t errlen)
{
	memset(r, 0, sizeof(*r));
	if (n == 0)
		return OB_OK;
	struct ob_buf a[6];
	int rc = OB_OK;
	for (int k = 0; k < 6; k++) {
		ob_buf_init(&a[k]);
		rc |= ob_buf_puts(&a[k], "{");
	}
	for (uint32_t i = 0; i < n && rc == OB_OK; i++) {
		const char *sep = i ? "," : "";
		rc |= ob_buf_printf(&a[0], "%s%" PRIu64, sep, o[i].id);
		rc |= ob_buf_printf(&a[1], "%s%" PRIu64, sep, o[i].fence);
		rc |= ob_buf_printf(&a[2], "%s%s", sep, relay_outcome_name(o[i].kind));
		rc |= ob_buf_printf(&a[3], "%s%" PRId64, sep, o[i].delay_ms);
		rc |= ob_buf_printf(&a[4], "%s%d", sep, o[i].refund_attempt ? 1 : 0);
		rc |= ob_buf_puts(&a[5], sep);
		rc |= ob_buf_put_pg_array_text(&a[5], o[i].error, strnlen(o[i].error,
		    RELAY_ERROR_MAX));
	}
	for (int k = 0; k < 6; k++)
		rc |= ob_buf_puts(&a[k], "}");
	if (rc != OB_OK) {
		snprintf(err, errlen, "record: out of memory");
		rc = OB_ENOMEM;
		goto out;
	}
	char lease[24], max[16];
	snprintf(lease, sizeof(lease), "%" PRId64, chain != NULL ? chain->lease_ms : 0);
	snprintf(max, sizeof(max), "%" PRIu32, chain != NULL ? chain->max : 0);
	const char *params[11];
	for (int k = 0; k < 6; k++)
		params[k] = a[k].data;
	params[6] = mode->fencing ? "true" : "false";
	params[7] = mode->skip_dead_heads ? "true" : "false";
	params[8] = chain != NULL ? chain->owner : NULL;
	params[9] = lease;
	params[10] = max;
	PGresult *res = PQexecParams(conn, record_sql, 11, NULL, params, NULL, NULL, 0);
	rc = ob_pg_check(res, PGRES_TUPLES_OK, "record outcomes", err, errlen);
	if (rc == OB_OK) {
		int rows = PQntuples(res);
		for (int i = 0; i < rows; i++)
			r->written += PQgetvalue(res, i, 0)[0] == 'f';
		r->fenced_out = n > r->written ? n - r->written : 0;
		if (r->fenced_out > 0)
			r->fenced_ids_n = missing_ids(res, o, n, fenced_ids, fenced_ids_max);
		/* The chained messages keep res alive. */
		rc = relay_claim_from_result(res, 1, 0, -1, &r->chained, err, errlen);
		if (rc != OB_OK)
			relay_claim_fini(&r->chained);
	} else {
		PQclear(res);
	}
out:
	for (int k = 0; k < 6; k++)
		ob_buf_fini(&a[k]);
	return rc;
}
