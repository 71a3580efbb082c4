/*
 * inbox_purge.c - retention of the dedup records: delete those older than
 * --dedup-retention, a bounded batch per call of inbox.purge (each its own short
 * transaction, so a purge never holds many locks or a long snapshot), and
 * the webhook key claims of the same age through the key-claim GC.
 *
 * A purged key is forgotten: inbox_plan rejects any message older than the
 * retention, so a late redelivery of a purged key is never applied blindly.
 * That holds only if both sides ask one clock about one time: the message's
 * created_at (the time it carries on the wire, stamped by the producer's
 * database), against the inbox database's clock (now() in inbox.purge;
 * inbox_plan an estimate of it that is never behind it). A record is
 * deleted only when its message is older than the retention plus
 * INBOX_RETENTION_MARGIN_MS by that clock, so every later delivery of it is rejected by the check,
 * whatever the producer's clock or the consumer host's said. Its
 * processed_at (the inbox database's clock when it was applied) must be
 * older than the retention too: that keeps the scan on the BRIN index of
 * processed_at, and a record of a message stamped in the past by a slow
 * producer clock is still kept a whole retention after it was applied. A
 * record without created_at (written before inbox 002) goes by
 * processed_at alone, as before. The webhook's claims carry their
 * message's created_at as a floor of their own (handler_webhook.c), and
 * their GC counts the same retention plus margin from it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "inbox.h"
#include "outbox/err.h"
#include "outbox/keyclaim.h"
#include "outbox/pg.h"

static int
purge_round(PGconn *conn, int64_t retention_ms, int batch, int64_t *n, char *err,
    size_t errlen)
{
	char r[24], b[16], m[24];
	snprintf(r, sizeof(r), "%" PRId64, retention_ms);
	snprintf(b, sizeof(b), "%d", batch);
	snprintf(m, sizeof(m), "%" PRId64, (int64_t)INBOX_RETENTION_MARGIN_MS);
	const char *params[3] = { r, m, b };
	/* what it deletes, and how it finds it: sql/inbox/functions/purge.sql */
	PGresult *res = PQexecParams(conn,
	    "SELECT inbox.purge(retention_ms => $1, margin_ms => $2, max_rows => $3)",
	    3, (const Oid[]){ 20, 20, 23 }, params, NULL, NULL, 0);
	int rc = ob_pg_check(res, PGRES_TUPLES_OK, "purge dedup records", err, errlen);
	if (rc == OB_OK)
		*n = ob_pg_int64(res, 0, 0);
	PQclear(res);
	return rc;
}

int
inbox_purge(PGconn *conn, int64_t retention_ms, int batch, int max_rounds,
    int64_t *deleted, char *err, size_t errlen)
{
	int64_t total = 0, n = 0;
	int rc = OB_OK;
	for (int round = 0; round < max_rounds; round++) {
		if ((rc = purge_round(conn, retention_ms, batch, &n, err, errlen)) != OB_OK)
			break;
		total += n;
		if (n < batch)
			break;
	}
	for (int round = 0; rc == OB_OK && round < max_rounds; round++) {
		if ((rc = ob_keyclaim_gc(conn, "inbox.webhook_calls",
		         retention_ms + INBOX_RETENTION_MARGIN_MS, batch, &n, err, errlen)) != OB_OK)
			break;
		total += n;
		if (n < batch)
			break;
	}
	if (rc == OB_OK)
		*deleted = total;
	return rc;
}
