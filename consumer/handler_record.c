/*
 * handler_record.c - the built-in `record` handler: the demo effect is one
 * row in inbox.notifications per applied message. The table has no unique
 * constraint on the key, so a dedup failure shows as a second row.
 *
 * This is the per-message form (inbox.add_notification); inbox.c applies
 * whole batches of this handler set-based with the same columns and the
 * same checks (inbox.apply_notifications).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "handler.h"
#include "outbox/pg.h"
#include "outbox/sqlstate.h"

int
inbox_status_for_sqlstate(const char *sqlstate)
{
	if (ob_sqlstate_bad_input(sqlstate))
		return OB_WIRE_REJECT;
	return OB_WIRE_RETRY;
}

static int
record_apply(PGconn *tx, const struct ob_wire_msg *m, void *arg,
    struct inbox_handler_call *call, char *detail, size_t detaillen)
{
	char id[24], seq[24];
	snprintf(id, sizeof(id), "%" PRIu64, m->id);
	snprintf(seq, sizeof(seq), "%" PRIu64, m->ordering_seq);
	/* text in binary form (its bytes; not UTF-8 is a data error), the
	 * payload's bytes (inbox.add_notification decodes them as JSON) */
	const char *params[7] = { m->source != NULL ? m->source : "", m->topic, m->key,
		m->payload ? m->payload : "", id, m->ordering_key_len ? m->ordering_key : NULL,
		m->ordering_key_len ? seq : NULL };
	int lens[7] = { m->source_len, m->topic_len, m->key_len, (int)m->payload_len, 0,
		m->ordering_key_len, 0 };
	int formats[7] = { 1, 1, 1, 1, 0, 1, 0 };
	PGresult *res = PQexecParams(tx,
	    "SELECT inbox.add_notification(source => $1, topic => $2, idempotency_key => $3,"
	    " payload => $4, message_id => $5, ordering_key => $6, ordering_seq => $7)",
	    7, (const Oid[]){ 25, 25, 25, 17, 20, 25, 20 }, params, lens, formats, 0);
	int status = OB_WIRE_APPLIED;
	if (ob_pg_check(res, PGRES_TUPLES_OK, "record effect", detail, detaillen) != 0) {
		status = inbox_status_for_sqlstate(ob_pg_sqlstate(res));
		call->reason = status == OB_WIRE_REJECT ? "bad_data" : "database";
	} else
		detail[0] = '\0';
	PQclear(res);
	return status;
}

const struct inbox_handler inbox_handler_record = { "record", record_apply, NULL, NULL, NULL };
