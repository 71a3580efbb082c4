/*
 * api_messages.c - the generic message endpoint of the producer API:
 *
 *   POST /v1/messages                    {topic, payload, ordering_key?}
 *                                        with Idempotency-Key (required)
 *   GET  /v1/messages?idempotency_key=K  the recovery lookup
 *
 * For an application with no business row of its own (an agent tool's
 * notification): the same contract as POST /v1/reports in atomic mode,
 * through the same key-claim code (common/keyclaim.c) on a key table of
 * its own (app.message_keys, sql/outbox/015_message_keys.sql). The claim
 * commits on its own (a concurrent duplicate sees it: 409); then ONE
 * statement, in autocommit, locks the key only while it still carries this
 * request's fencing token, enqueues the message and marks the key done
 * with the 201 body. The broken modes (--idempotency split|none) are the
 * report demo's and do not apply here; --no-fencing does.
 *
 * The message's outbox key is the client's key (message_input.h,
 * message_outbox_key: "~SCOPE/KEY" for a scoped token), so a consumer and a
 * downstream see the key the agent sent, the same on every attempt.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_claim.h"
#include "api_key.h"
#include "api_messages.h"
#include "api_reply.h"
#include "auth.h"
#include "message_input.h"
#include "outbox/err.h"
#include "outbox/keyclaim.h"
#include "outbox/log.h"
#include "outbox/pg.h"
#include "report_input.h"

/* $1 topic, $2 payload, $3 ordering key (NULL: none), $4 the request's key
 * as stored, $5 the fence, $6 true = fencing OFF (test-only broken switch),
 * $7 the message's outbox key, $8 the key as the client sent it. One row
 * (message id, body, keys completed) while the token held, none when
 * fenced out. */
#define CREATE_MESSAGE_STMT "producer_create_message"
static const char create_message_sql[] =
    OB_KEYCLAIM_HELD_CTE(PRODUCER_MESSAGE_KEY_TABLE, "$4::text", "$5::bigint", "$6::bool")
    " m AS ("
    "  SELECT outbox.enqueue($1::text, $7::text, $2::jsonb, $3::text) AS mid FROM k),"
    " b AS ("
    "  SELECT m.mid, json_strip_nulls(json_build_object('message_id', m.mid,"
    "         'idempotency_key', $8::text, 'topic', $1::text, 'ordering_key', $3::text))::text"
    "         AS body"
    "    FROM m),"
    OB_KEYCLAIM_DONE_CTE(PRODUCER_MESSAGE_KEY_TABLE, "$4::text")
    " SELECT b.mid, b.body, (SELECT count(*) FROM d) FROM b";

static const struct api_final_write create_message_write = {
	.table = PRODUCER_MESSAGE_KEY_TABLE, .stmt = CREATE_MESSAGE_STMT,
	.sql = create_message_sql, .nparams = 8, .fence_param = 4, .body_col = 1,
	.crash_at = "producer.messages.after_claim", .context = "create message",
	.what = "create_message",
};

void
api_messages_create(PGconn *conn, const struct api_config *cfg, const struct api_request *req,
    struct api_response *res)
{
	char key[PRODUCER_KEY_MAX + 1], stored[PRODUCER_KEY_MAX + 1];
	char outbox_key[PRODUCER_KEY_MAX + 1], err[512];
	const char *scope = req->scope != NULL ? req->scope : "";
	if (!api_key_from_header(req, key, stored, res))
		return;
	if (message_outbox_key(scope, key, outbox_key, sizeof(outbox_key), err, sizeof(err)) !=
	    OB_OK) {
		api_error(res, 400, "invalid_idempotency_key", err);
		return;
	}
	struct message_input in;
	if (!api_body_parsed(message_parse_body(req->body != NULL ? req->body : "", req->body_len,
	        &in, err, sizeof(err)), err, res))
		return;
	/* Before the key is touched: a refused topic stores nothing. */
	if (!producer_topic_allowed(req->topics, in.topic)) {
		api_error(res, 403, "topic_not_allowed", "this token may not send to this topic (its"
		    " topics= list in --api-token-file)");
		message_input_fini(&in);
		return;
	}
	struct api_key k = { key, stored, scope };
	const char *params[8] = { in.topic, in.payload, in.ordering_key, stored,
		NULL /* the claim's fence */, cfg->fencing ? "false" : "true", outbox_key, key };
	api_claimed_create(conn, cfg, &create_message_write, &k, in.canonical, in.canonical_len,
	    params, res);
	message_input_fini(&in);
}

void
api_messages_lookup(PGconn *conn, const struct api_request *req, struct api_response *res)
{
	PGresult *r = api_key_lookup(conn, req,
	    "SELECT state, response_status, response_body FROM " PRODUCER_MESSAGE_KEY_TABLE
	    " WHERE idempotency_key = $1", "lookup message", "lookup_message", res);
	if (r == NULL)
		return;
	if (PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "done") == 0 &&
	    !PQgetisnull(r, 0, 2)) {
		/* The 201's stored body: the message's id, key and topic. */
		res->status = 200;
		res->body = strdup(PQgetvalue(r, 0, 2));
	} else if (PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "started") == 0) {
		api_error(res, 404, "in_progress",
		    "no message with this key yet, but a request with it is in progress");
	} else {
		api_error(res, 404, "not_found", "no message with this Idempotency-Key (or its"
		    " record has expired: --key-retention)");
	}
	PQclear(r);
}
