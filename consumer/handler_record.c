/*
 * handler_record.c - the built-in `record` handler: the demo effect is one
 * row in inbox.notifications per applied message. The table has no unique
 * constraint on the key, so a dedup failure shows as a second row.
 *
 * This is the per-message form; inbox.c applies whole batches of this
 * handler set-based with the same columns and the same checks.
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
	const char *params[7] = { m->key, m->topic, m->payload ? m->payload : "", id,
		m->ordering_key_len ? m->ordering_key : NULL,
		m->ordering_key_len ? seq : NULL, m->source != NULL ? m->source : "" };
	int lens[7] = { m->key_len, m->topic_len, (int)m->payload_len, 0,
		m->ordering_key_len, 0, m->source_len };
	int formats[7] = { 1, 1, 1, 0, 1, 0, 1 }; /* binary = raw bytes, no NUL needed */
	PGresult *res = PQexecParams(tx,
	    "INSERT INTO inbox.notifications"
	    " (idempotency_key, topic, payload, message_id, ordering_key, ordering_seq, source)"
	    " VALUES (convert_from($1, 'UTF8'), convert_from($2, 'UTF8'),"
	    " convert_from($3, 'UTF8')::jsonb, $4::bigint,"
	    " convert_from($5, 'UTF8'), $6::bigint, convert_from($7, 'UTF8'))",
	    7, (const Oid[]){ 17, 17, 17, 0, 17, 0, 17 }, params, lens, formats, 0);
	int status = OB_WIRE_APPLIED;
	if (ob_pg_check(res, PGRES_COMMAND_OK, "record effect", detail, detaillen) != 0) {
		status = inbox_status_for_sqlstate(ob_pg_sqlstate(res));
		call->reason = status == OB_WIRE_REJECT ? "bad_data" : "database";
	} else
		detail[0] = '\0';
	PQclear(res);
	return status;
}

const struct inbox_handler inbox_handler_record = { "record", record_apply, NULL, NULL, NULL };
