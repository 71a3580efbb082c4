/*
 * record.c - one outbox.record call per batch.
 *
 * A stream batch lists only its exceptions (messages not listed were
 * delivered); a retry batch lists every message. The arrays travel as
 * text array literals; error texts are escaped by ob_buf_put_pg_array_text.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "outbox/buf.h"
#include "outbox/err.h"
#include "outbox/pg.h"
#include "outbox/sqlstate.h"
#include "record.h"

/* Arguments by name (outbox.record's parameters, sql/outbox/functions/
 * record.sql), not by position. */
static const char record_sql[] =
    "SELECT outbox.record(protocol => $1::int, batch => $2::bigint, fence => $3::bigint,"
    " fencing => $4::boolean, outcome => $5, delay_ms => $6::bigint, refund => $7::boolean,"
    " ids => $8::bigint[], kinds => $9::text[], delays => $10::bigint[], errors => $11::text[],"
    " skip_dead_heads => $12::boolean)";


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

int
relay_record_batch(PGconn *conn, const struct relay_batch *b,
    const struct relay_outcome *o, const struct relay_record_mode *mode, bool *written,
    char *err, size_t errlen)
{
	*written = false;
	if (b->n == 0)
		return OB_OK;
	uint32_t released = 0;
	bool refund = false;
	for (uint32_t i = 0; i < b->n; i++) {
		released += o[i].kind == RELAY_OUT_RELEASE;
		refund |= o[i].kind == RELAY_OUT_RELEASE && o[i].refund_attempt;
	}
	if (released != 0 && released != b->n) {
		snprintf(err, errlen, "record: batch %" PRIu64 " mixes released and recorded"
		    " messages", b->id);
		return OB_EINVAL;
	}
	bool release = released == b->n;
	struct ob_buf a[4];
	int rc = OB_OK;
	for (int k = 0; k < 4; k++) {
		ob_buf_init(&a[k]);
		rc |= ob_buf_puts(&a[k], "{");
	}
	bool first = true;
	if (release) { /* the batch's reason, for the record */
		first = false;
		rc |= ob_buf_puts(&a[0], "0") | ob_buf_puts(&a[1], "release") |
		    ob_buf_puts(&a[2], "0");
		rc |= ob_buf_put_pg_array_text(&a[3], o[0].error, strnlen(o[0].error,
		    RELAY_ERROR_MAX));
	}
	for (uint32_t i = 0; i < b->n && !release && rc == OB_OK; i++) {
		/* A stream batch lists its exceptions only. */
		if (b->kind == RELAY_BATCH_STREAM && o[i].kind == RELAY_OUT_DELIVERED)
			continue;
		const char *sep = first ? "" : ",";
		first = false;
		rc |= ob_buf_printf(&a[0], "%s%" PRIu64, sep, o[i].id);
		rc |= ob_buf_printf(&a[1], "%s%s", sep, relay_outcome_name(o[i].kind));
		rc |= ob_buf_printf(&a[2], "%s%" PRId64, sep, o[i].delay_ms);
		rc |= ob_buf_puts(&a[3], sep);
		rc |= ob_buf_put_pg_array_text(&a[3], o[i].error, strnlen(o[i].error,
		    RELAY_ERROR_MAX));
	}
	for (int k = 0; k < 4; k++)
		rc |= ob_buf_puts(&a[k], "}");
	if (rc != OB_OK) {
		snprintf(err, errlen, "record: out of memory");
		rc = OB_ENOMEM;
		goto out;
	}
	char proto[16], batch[24], fence[24], delay[24];
	snprintf(proto, sizeof(proto), "%d", RELAY_PROTOCOL);
	snprintf(batch, sizeof(batch), "%" PRIu64, b->id);
	snprintf(fence, sizeof(fence), "%" PRIu64, b->fence);
	snprintf(delay, sizeof(delay), "%" PRId64, release ? o[0].delay_ms : 0);
	const char *params[12] = { proto, batch, fence, mode->fencing ? "true" : "false",
		release ? "release" : "done", delay, refund ? "true" : "false",
		a[0].data, a[1].data, a[2].data, a[3].data,
		mode->skip_dead_heads ? "true" : "false" };
	/* prepared once per connection: parsed and planned once, not per batch */
	PGresult *res = ob_pg_exec_prepared(conn, "relay_record", record_sql, 12, params, NULL,
	    NULL);
	rc = ob_pg_check(res, PGRES_TUPLES_OK, "record outcomes", err, errlen);
	if (rc == OB_OK && PQntuples(res) == 1)
		*written = PQgetvalue(res, 0, 0)[0] == 't';
	else if (rc != OB_OK && ob_sqlstate_is(ob_pg_sqlstate(res), OB_SQLSTATE_PROTOCOL))
		rc = OB_EPROTO;
	PQclear(res);
out:
	for (int k = 0; k < 4; k++)
		ob_buf_fini(&a[k]);
	return rc;
}
