/*
 * inbox.c - the idempotent consumer's core: dedup record and effect commit
 * together, or not at all.
 *
 * The dedup insert is INSERT ... ON CONFLICT DO NOTHING on the key's primary
 * key: when two deliveries of one key race, the second waits for the first
 * transaction and then finds the key (DUPLICATE) or, if the first rolled
 * back, inserts it. Either way the effect is applied once.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inbox.h"
#include "outbox/err.h"
#include "outbox/pg.h"

int
inbox_batch_init(struct inbox_batch *b, uint32_t cap)
{
	b->results = calloc(cap, sizeof(*b->results));
	b->details = calloc(cap, sizeof(*b->details));
	b->cap = cap;
	if (b->results == NULL || b->details == NULL) {
		inbox_batch_fini(b);
		return OB_ENOMEM;
	}
	return OB_OK;
}

void
inbox_batch_fini(struct inbox_batch *b)
{
	free(b->results);
	free(b->details);
	b->results = NULL;
	b->details = NULL;
	b->cap = 0;
}

static void
set_result(struct inbox_batch *b, uint32_t i, uint64_t id, int status,
    const char *detail)
{
	b->results[i].id = id;
	b->results[i].status = (uint8_t)status;
	if (detail != b->details[i])
		snprintf(b->details[i], INBOX_DETAIL_MAX, "%s", detail);
	b->results[i].detail = b->details[i];
	b->results[i].detail_len = (uint16_t)strlen(b->details[i]);
}

static void
all_retry(struct inbox_batch *b, const struct ob_wire_request *req,
    const char *why)
{
	for (uint32_t i = 0; i < req->count; i++)
		set_result(b, i, req->msgs[i].id, OB_WIRE_RETRY, why);
}

/* Insert the dedup record. *fresh = true when this transaction owns the key
 * now, false when it was already processed. */
static int
claim_key(PGconn *conn, const struct ob_wire_msg *m, bool *fresh, char *err,
    size_t errlen)
{
	char id[24], fence[24];
	snprintf(id, sizeof(id), "%" PRIu64, m->id);
	snprintf(fence, sizeof(fence), "%" PRIu64, m->fence);
	const char *params[4] = { m->key, m->topic, id, fence };
	int lens[4] = { m->key_len, m->topic_len, 0, 0 };
	int formats[4] = { 1, 1, 0, 0 };
	PGresult *res = PQexecParams(conn,
	    "INSERT INTO inbox.processed (idempotency_key, topic, message_id, fence)"
	    " VALUES (convert_from($1, 'UTF8'), convert_from($2, 'UTF8'),"
	    " $3::bigint, $4::bigint)"
	    " ON CONFLICT (idempotency_key) DO NOTHING RETURNING 1",
	    4, (const Oid[]){ 17, 17, 0, 0 }, params, lens, formats, 0);
	int rc = ob_pg_check(res, PGRES_TUPLES_OK, "dedup record", err, errlen);
	if (rc == OB_OK)
		*fresh = PQntuples(res) == 1;
	else if (inbox_status_for_sqlstate(ob_pg_sqlstate(res)) == OB_WIRE_REJECT)
		rc = OB_EINVAL; /* e.g. a key that is not valid UTF-8 */
	PQclear(res);
	return rc;
}

/* Apply one message between SAVEPOINT and RELEASE / ROLLBACK TO. Returns
 * OB_EDB only when the transaction as a whole is lost. */
static int
apply_one(PGconn *conn, const struct inbox_options *opt,
    const struct ob_wire_msg *m, struct inbox_batch *b, uint32_t i)
{
	char *detail = b->details[i];
	int rc = ob_pg_exec(conn, "SAVEPOINT msg", "savepoint", detail, INBOX_DETAIL_MAX);
	if (rc != OB_OK)
		return rc;

	int status;
	bool fresh = true;
	if (opt->dedup)
		rc = claim_key(conn, m, &fresh, detail, INBOX_DETAIL_MAX);
	if (rc == OB_EINVAL)
		status = OB_WIRE_REJECT;
	else if (rc != OB_OK)
		status = OB_WIRE_RETRY;
	else if (!fresh) {
		status = OB_WIRE_DUPLICATE;
		snprintf(detail, INBOX_DETAIL_MAX, "already processed");
	} else
		status = opt->handler->apply(conn, m, opt->handler->arg, detail,
		    INBOX_DETAIL_MAX);

	const char *end = (status == OB_WIRE_APPLIED || status == OB_WIRE_DUPLICATE)
	    ? "RELEASE SAVEPOINT msg" : "ROLLBACK TO SAVEPOINT msg";
	char err[INBOX_DETAIL_MAX];
	if ((rc = ob_pg_exec(conn, end, "savepoint end", err, sizeof(err))) != OB_OK) {
		snprintf(detail, INBOX_DETAIL_MAX, "%s", err);
		return rc;
	}
	set_result(b, i, m->id, status, detail);
	return OB_OK;
}

static void
sleep_ms(int64_t ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0)
		;
}

int
inbox_apply_batch(PGconn *conn, const struct inbox_options *opt,
    const struct ob_wire_request *req, struct inbox_batch *b, char *err,
    size_t errlen)
{
	int rc = ob_pg_exec(conn, "BEGIN", "begin", err, errlen);
	if (rc != OB_OK)
		goto fail;
	for (uint32_t i = 0; i < req->count; i++) {
		if ((rc = apply_one(conn, opt, &req->msgs[i], b, i)) != OB_OK) {
			snprintf(err, errlen, "%s", b->details[i]);
			goto fail;
		}
	}
	struct inbox_faults *f = opt->faults;
	if (f != NULL && ob_fault_fire(&f->slow))
		sleep_ms(f->slow_ms);
	if (f != NULL && ob_fault_fire(&f->die_before_commit))
		ob_fault_die("consumer.before_commit");
	if ((rc = ob_pg_commit(conn, err, errlen)) != OB_OK)
		goto fail;
	if (f != NULL && ob_fault_fire(&f->die_after_commit))
		ob_fault_die("consumer.after_commit");
	return OB_OK;

fail:
	ob_pg_rollback(conn);
	all_retry(b, req, err);
	return OB_EDB;
}
