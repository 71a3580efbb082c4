/*
 * requeue.c - dead letters back to pending (requeue.h): the checks and the
 * transaction of `outboxctl dead requeue`, shared with the web view.
 *
 * Requeue moves dead letters back to pending with outbox.requeue_dead: a
 * retry due now, attempts 0, no lease; its fence moves on at its next claim
 * (every claim takes a new one from outbox.fences); an ordering key it
 * belongs to waits behind it again. It is all or nothing: every id is
 * checked inside one transaction (exists, is dead, young enough), with the
 * dead rows locked, before any row changes.
 *
 * The dedup-retention rule: the consumer forgets an idempotency key after
 * its dedup retention. A message created longer ago than that may have been
 * applied once (a reply lost, then dead-lettered) and its key since
 * forgotten, so delivering it again could apply it twice. Such messages are
 * refused unless force (the operator asserts it was never applied).
 *
 * Never prints: the reasons go back to the caller, who reports them.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_util.h"
#include "outbox/err.h"
#include "outbox/pg.h"
#include "requeue.h"

/* The ids as a PostgreSQL bigint[] literal: "{1,2,3}". */
static char *
id_array(char *const *ids, int n)
{
	size_t cap = (size_t)n * 21 + 3, len = 0;
	char *s = malloc(cap);

	if (s == NULL)
		return NULL;
	s[len++] = '{';
	for (int i = 0; i < n; i++)
		len += (size_t)snprintf(s + len, cap - len, "%s%s", i ? "," : "", ids[i]);
	snprintf(s + len, cap - len, "}");
	return s;
}

void
ctl_requeue_result_free(struct ctl_requeue_result *r)
{
	free(r->requeued);
	free(r->refused);
	memset(r, 0, sizeof *r);
}

/* Why row r of the check query cannot be requeued, into reason; false when
 * it can. */
static bool
refusal(const PGresult *res, int r, const struct ctl_requeue_req *req, char *reason,
    size_t len)
{
	const char *id = PQgetvalue(res, r, 0);
	char shown[CTL_SHOWN_MAX], age[64], ret[64];

	if (PQgetisnull(res, r, 1)) {
		snprintf(reason, len, "no message with id %s", id);
	} else if (strcmp(PQgetvalue(res, r, 1), "dead") != 0) {
		snprintf(reason, len, "message %s is %s, not dead: not requeued", id,
		    ctl_shown(PQgetvalue(res, r, 1), shown, sizeof shown));
	} else if (PQgetvalue(res, r, 4)[0] != 't') {
		/* dead in this snapshot, gone before the lock (expired by a
		 * relay's dead retention, or requeued by someone else) */
		snprintf(reason, len, "message %s changed while it was checked: not requeued"
		    " (run it again)", id);
	} else if (PQgetvalue(res, r, 2)[0] == 't' && !req->force) {
		ctl_fmt_age(strtod(PQgetvalue(res, r, 3), NULL), age, sizeof age);
		ctl_fmt_age((double)req->retention_ms / 1000.0, ret, sizeof ret);
		snprintf(reason, len, "message %s was created %s ago, longer than the consumer's"
		    " dedup retention (%s): the consumer may have forgotten its key, and rejects"
		    " a message that old rather than apply it blindly; use --force only if the"
		    " consumer's --dedup-retention is longer than %s", id, age, ret, age);
	} else {
		return false;
	}
	return true;
}

/*
 * Lock the candidate dead rows, check them all, then requeue them all, in
 * one transaction. The check query returns one row per requested id (or
 * per dead message with all) with what is wrong with it, if anything:
 * status is 'dead' for a row locked here, else what the outbox.messages
 * view says (NULL: no such message). The view cannot be locked; the dead
 * rows can, and they are what changes.
 */
int
ctl_requeue(PGconn *conn, const struct ctl_requeue_req *req, struct ctl_requeue_result *out,
    char *err, size_t errlen)
{
	char retention[32], *arr = NULL, **checked = NULL;
	PGresult *res = NULL;
	struct ctl_requeue_result r;
	int code = OB_ENOMEM;

	memset(&r, 0, sizeof r);
	memset(out, 0, sizeof *out);
	snprintf(retention, sizeof retention, "%" PRId64, req->retention_ms);
	if (!req->all && (arr = id_array(req->ids, req->nids)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return OB_ENOMEM;
	}
	if (ob_pg_exec(conn, "BEGIN", "begin", err, errlen) != 0) {
		free(arr);
		return OB_EDB;
	}
	const char *params[3] = { arr, req->all ? req->topic : NULL, retention };
	/* $1 NULL means all; an id given twice is one */
	res = PQexecParams(conn,
	    "WITH want AS ("
	    "  SELECT w.id, min(w.ord) AS ord"
	    "   FROM unnest($1::bigint[]) WITH ORDINALITY AS w(id, ord) GROUP BY w.id"
	    "  UNION ALL"
	    "  SELECT d.id, d.id FROM outbox.dead d"
	    "   WHERE $1 IS NULL AND ($2::text IS NULL OR d.topic = $2)),"
	    " locked AS ("
	    "  SELECT d.id, d.created_at FROM outbox.dead d"
	    "   WHERE d.id IN (SELECT id FROM want) FOR UPDATE)"
	    " SELECT w.id,"
	    "  CASE WHEN l.id IS NOT NULL THEN 'dead'"
	    "   ELSE (SELECT m.status FROM outbox.messages m WHERE m.id = w.id LIMIT 1) END,"
	    "  l.created_at < now() - $3::bigint * interval '1 millisecond' AS too_old,"
	    "  round(extract(epoch FROM now() - l.created_at)::numeric, 3) AS age_s,"
	    "  l.id IS NOT NULL AS is_locked"
	    " FROM want w LEFT JOIN locked l ON l.id = w.id ORDER BY w.ord",
	    3, NULL, params, NULL, NULL, 0);
	if (ob_pg_check(res, PGRES_TUPLES_OK, "dead requeue check", err, errlen) != 0) {
		code = OB_EDB;
		goto fail;
	}
	int n = PQntuples(res);
	r.checked = n;
	if (n > 0 && ((r.refused = calloc((size_t)n, sizeof *r.refused)) == NULL ||
	    (checked = malloc((size_t)n * sizeof *checked)) == NULL)) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (int i = 0; i < n; i++) {
		struct ctl_requeue_refusal *f = &r.refused[r.nrefused];
		if (refusal(res, i, req, f->reason, sizeof f->reason)) {
			f->id = ob_pg_int64(res, i, 0);
			r.nrefused++;
		}
		checked[i] = PQgetvalue(res, i, 0);
	}
	if (r.nrefused > 0 || n == 0) {
		/* all or nothing: refused, or nothing to do */
		free(checked);
		PQclear(res);
		ob_pg_rollback(conn);
		free(arr);
		*out = r;
		return OB_OK;
	}
	/* requeue exactly the rows checked and locked above (with all, a
	 * message dead-lettered meanwhile was not checked: left alone) */
	free(arr);
	arr = id_array(checked, n);
	free(checked);
	checked = NULL;
	PQclear(res);
	res = NULL;
	if (arr == NULL || (r.requeued = malloc((size_t)n * sizeof *r.requeued)) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	params[0] = arr;
	res = PQexecParams(conn, "SELECT outbox.requeue_dead($1::bigint[])", 1, NULL, params, NULL,
	    NULL, 0);
	if (ob_pg_check(res, PGRES_TUPLES_OK, "dead requeue", err, errlen) != 0) {
		code = OB_EDB;
		goto fail;
	}
	int done = PQntuples(res);
	if (done != n) {
		/* cannot happen: the rows are locked and were dead */
		snprintf(err, errlen, "%d of %d locked dead messages requeued: nothing requeued",
		    done, n);
		code = OB_EDB;
		goto fail;
	}
	for (int i = 0; i < done; i++)
		r.requeued[i] = ob_pg_int64(res, i, 0);
	r.nrequeued = done;
	PQclear(res);
	res = NULL;
	/* wake the relays now rather than at their next poll */
	if (ob_pg_exec(conn, "SELECT pg_notify('outbox_enqueued', '')", "notify", err,
	    errlen) != 0 || ob_pg_commit(conn, err, errlen) != 0) {
		code = OB_EDB;
		goto fail;
	}
	free(arr);
	*out = r;
	return OB_OK;
fail:
	free(checked);
	PQclear(res);
	ob_pg_rollback(conn);
	free(arr);
	ctl_requeue_result_free(&r);
	return code;
}
