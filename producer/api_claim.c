/*
 * api_claim.c - the steps of an idempotent create around its key claim
 * (see api_claim.h), the same for every endpoint that claims a key: what
 * the claim's verdict answers, a takeover counted and logged, the final
 * write run, the answer after being fenced out (the winner's), and the
 * answer and the key's release after a failed final write.
 *
 * Never: write a key table but through common/keyclaim.c, or build the
 * endpoint's own write (api.c and api_messages.c do).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_claim.h"
#include "api_fault.h"
#include "api_reply.h"
#include "metrics.h"
#include "outbox/err.h"
#include "outbox/keyclaim.h"
#include "outbox/log.h"
#include "outbox/pg.h"
#include "outbox/sqlstate.h"

/* The answer for a claim's verdict (replay, 422, 409); true when the
 * request proceeds (the caller's write). A replay's stored body is moved
 * from c into res. */
static bool
claim_verdict(struct ob_key_claim *c, struct api_response *res)
{
	switch (c->verdict) {
	case OB_KEY_REPLAY:
		res->status = c->response_status;
		res->body = c->response_body; /* taken over */
		c->response_body = NULL;
		res->replayed = true;
		return false;
	case OB_KEY_MISMATCH:
		api_error(res, 422, "idempotency_key_reused",
		    "this Idempotency-Key was already used with a different request body");
		return false;
	case OB_KEY_BUSY:
	case OB_KEY_PARKED: /* nothing parks the producer's keys: never here */
		api_busy(res, c->retry_after_ms);
		return false;
	case OB_KEY_PROCEED:
		break;
	}
	return true;
}

/* A claim that took the key over from a dead or slow holder: counted and
 * logged (producer.key.takeover). Nothing when c is not a takeover. */
static void
note_takeover(const struct api_config *cfg, const struct api_key *key,
    const struct ob_key_claim *c)
{
	char q[300];
	if (!c->takeover)
		return;
	producer_metrics_takeover(cfg->metrics);
	ob_info("producer.key.takeover", "key=%s scope=%s fence=%" PRId64,
	    ob_log_q(key->sent, q, sizeof(q)), key->scope[0] ? key->scope : "\"\"", c->fence);
}

/* After being fenced out: answer with the winner's stored result, or 409
 * when the winner is not done yet. */
static void
answer_winner(PGconn *conn, const char *table, const char *stored_key,
    struct api_response *res)
{
	char err[512];
	struct ob_key_row row;
	struct ob_key_claim winner;
	bool found = false;
	if (ob_keyclaim_lookup(conn, table, stored_key, &row, &winner, &found, err,
	        sizeof(err)) != OB_OK) {
		api_unavailable(res, "read_winner", err);
	} else if (found && row.state == OB_KEY_DONE) {
		res->status = winner.response_status;
		free(res->body);
		res->body = winner.response_body; /* taken over */
		winner.response_body = NULL;
		res->replayed = true;
	} else {
		api_busy(res, found ? winner.retry_after_ms : 1000);
	}
	ob_keyclaim_result_fini(&winner);
}

/* The final write matched nothing (taken over meanwhile): counted, logged
 * (producer.key.fenced_out), answered with the winner's stored answer
 * (replayed), or 409 while it is not done. Reads table on conn. */
static void
fenced_out(PGconn *conn, const struct api_config *cfg, const char *table,
    const struct api_key *key, int64_t fence, struct api_response *res)
{
	char q[300];
	producer_metrics_fenced_out(cfg->metrics);
	ob_warn("producer.key.fenced_out", "key=%s scope=%s fence=%" PRId64,
	    ob_log_q(key->sent, q, sizeof(q)), key->scope[0] ? key->scope : "\"\"", fence);
	answer_winner(conn, table, key->stored, res);
}

/* Give up a STARTED key this request holds (its write failed). Logged
 * when it cannot be released (the lease then runs out). */
static void
release_key(PGconn *conn, const char *table, const char *key, int64_t fence)
{
	char err[512];
	if (!ob_pg_broken(conn) &&
	    ob_keyclaim_release(conn, table, key, fence, err, sizeof(err)) != OB_OK)
		ob_warn("producer.key.release_failed", "fence=%" PRId64, fence);
}

/* The fused final write failed (r, its error in err): answered by its
 * SQLSTATE (413 payload too large, 422 key reused in the outbox, 400 for
 * values the database refused, else 503 naming what), r cleared, and the
 * request's key released (logged when it cannot be: the lease then runs
 * out). */
static void
write_failed(PGconn *conn, const char *table, const struct api_key *key, int64_t fence,
    PGresult *r, const char *err, const char *what, struct api_response *res)
{
	/* What the client must change, by SQLSTATE (nothing was stored) ... */
	const char *state = ob_pg_sqlstate(r);
	if (ob_sqlstate_is(state, OB_SQLSTATE_PROGRAM_LIMIT_EXCEEDED))
		api_error(res, 413, "payload_too_large", err);
	else if (ob_sqlstate_is(state, OB_SQLSTATE_KEY_REUSED))
		api_error(res, 422, "idempotency_key_reused",
		    "the outbox already holds a message of this topic with this key and a"
		    " different payload (its key record has expired); use a new key");
	else if (ob_sqlstate_bad_input(state))
		api_error(res, 400, "invalid_body", err);
	else /* ... or the database failed */
		api_unavailable(res, what, err);
	PQclear(r);
	release_key(conn, table, key->stored, fence);
}

/* w under claim c (PROCEED), and its answer. */
static void
final_write(PGconn *conn, const struct api_config *cfg, const struct api_final_write *w,
    const struct api_key *key, const struct ob_key_claim *c, const char *const *params,
    struct api_response *res)
{
	char err[512], fence[24];
	const char *p[API_FINAL_WRITE_PARAMS_MAX];

	note_takeover(cfg, key, c);
	api_fault_crash(cfg, w->crash_at);
	api_fault_slow(cfg);

	snprintf(fence, sizeof(fence), "%" PRId64, c->fence);
	memcpy(p, params, (size_t)w->nparams * sizeof(*p));
	p[w->fence_param] = fence;
	PGresult *r = ob_pg_exec_prepared(conn, w->stmt, w->sql, w->nparams, p, NULL, NULL);
	if (ob_pg_check(r, PGRES_TUPLES_OK, w->context, err, sizeof(err)) != OB_OK) {
		write_failed(conn, w->table, key, c->fence, r, err, w->what, res);
		return;
	}
	if (PQntuples(r) == 0) {
		/* Taken over while we were slow: nothing of ours was written. */
		PQclear(r);
		fenced_out(conn, cfg, w->table, key, c->fence, res);
		return;
	}
	api_created(cfg, PQgetvalue(r, 0, w->body_col), res);
	PQclear(r);
}

void
api_claimed_create(PGconn *conn, const struct api_config *cfg,
    const struct api_final_write *w, const struct api_key *key, const char *canonical,
    size_t len, const char *const *params, struct api_response *res)
{
	char err[512];
	struct ob_key_claim c;
	if (ob_keyclaim_claim(conn, w->table, key->stored, canonical, len, cfg->lease_ms, &c, err,
	        sizeof(err)) != OB_OK) {
		api_unavailable(res, "claim", err);
		return;
	}
	if (claim_verdict(&c, res))
		final_write(conn, cfg, w, key, &c, params, res);
	ob_keyclaim_result_fini(&c);
}
