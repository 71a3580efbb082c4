/*
 * api_reply.c - the answers the API's endpoints build (see api_reply.h):
 * JSON error bodies, the 503 that names a failed database step (logged
 * here, once), the 409 of a key still in progress with its polling hint,
 * and the 201 of a create, where the lose-response fault fires.
 *
 * Never: touch the database or the key tables (api_claim.c and the
 * endpoints do).
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api.h"
#include "api_fault.h"
#include "api_reply.h"
#include "outbox/backoff.h"
#include "outbox/err.h"
#include "outbox/log.h"
#include "outbox/pg.h"
#include "outbox/sqlstate.h"

/* Retry-After of a 409: poll again this soon (rounded up to whole seconds,
 * then spread: ob_retry_after_spread_s). */
#define API_BUSY_RETRY_AFTER_MS 1000

void
api_response_fini(struct api_response *res)
{
	free(res->body);
	res->body = NULL;
}

void
api_error(struct api_response *res, int status, const char *code, const char *message)
{
	json_t *o = json_pack("{s:s,s:s}", "error", code, "message", message);
	free(res->body);
	res->body = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	res->status = status;
}

bool
api_body_parsed(int rc, const char *err, struct api_response *res)
{
	if (rc == OB_OK)
		return true;
	api_error(res, rc == OB_EINVAL ? 400 : 500, "invalid_body", err);
	return false;
}

void
api_unavailable(struct api_response *res, const char *what, const char *err)
{
	char q[600];
	/* A table the request needs is not in this database: the demo's
	 * /v1/reports where `outboxctl migrate --demo` was not run. Not a
	 * passing outage: no retry helps until it is installed. */
	if (ob_sqlstate_is(ob_pg_failed_sqlstate(), OB_SQLSTATE_UNDEFINED_TABLE)) {
		ob_warn("producer.not_installed", "what=%s err=%s", what,
		    ob_log_q(err, q, sizeof(q)));
		api_error(res, 404, "not_installed", "this resource's tables are not in the"
		    " database: /v1/reports is the demo's, installed by outboxctl migrate --demo");
		return;
	}
	ob_warn("producer.db_error", "what=%s err=%s", what, ob_log_q(err, q, sizeof(q)));
	api_error(res, 503, "unavailable", "the database is unavailable; retry later");
	res->retry_after_s = ob_retry_after_spread_s(1);
}

static int64_t
retry_after_s(int64_t ms)
{
	int64_t s = (ms + 999) / 1000;
	return s < 1 ? 1 : s;
}

/* Retry-After is a polling hint (the holder usually finishes well within
 * its lease); the body says how long the lease still runs, after which a
 * retry takes the key over. */
void
api_busy(struct api_response *res, int64_t lease_left_ms)
{
	json_t *o = json_pack("{s:s,s:s,s:I}", "error", "in_progress", "message",
	    "a request with this Idempotency-Key is still in progress; retry after"
	    " Retry-After seconds with the same key and body", "lease_remaining_ms",
	    (json_int_t)lease_left_ms);
	free(res->body);
	res->body = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	res->status = 409;
	res->retry_after_s = ob_retry_after_spread_s(retry_after_s(
	    lease_left_ms < API_BUSY_RETRY_AFTER_MS ? lease_left_ms : API_BUSY_RETRY_AFTER_MS));
}

void
api_created(const struct api_config *cfg, const char *body, struct api_response *res)
{
	if ((res->body = strdup(body)) == NULL) {
		/* Committed; the stored answer is replayed on a retry. */
		api_error(res, 500, "out_of_memory", "created, but the answer could not be built;"
		    " retry with the same Idempotency-Key");
		return;
	}
	res->status = 201;
	res->drop = api_fault_lose(cfg);
}
