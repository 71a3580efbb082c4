/*
 * api.c - the producer's HTTP API, one request at a time on the caller's
 * database connection (see api.h): the dispatch and the report endpoints.
 * POST and GET /v1/messages are api_messages.c's; what both use is in
 * modules that call neither: api_reply.c (the answers), api_claim.c (a
 * key claim and the final write under it), api_fault.c (the fault points)
 * and api_query.c (the query string).
 *
 * The create path is where the three modes differ, and where the faults
 * fire. Atomic is the article's key_atomic: the claim commits on its own so
 * that a concurrent duplicate sees it (409); the report, its outbox record
 * and "key done" then commit together, and only while the key still carries
 * this request's fencing token. Split and none exist so that every fault
 * test can first show the duplicate they let through.
 *
 * Speed: atomic's final write is ONE statement in autocommit (one round
 * trip, one commit) instead of BEGIN / insert / complete / COMMIT: it locks
 * the key row only if it still carries this request's token (FOR UPDATE
 * re-checks the newest version, so a takeover that committed meanwhile
 * makes it match nothing), inserts the report and its outbox record only
 * behind that lock, and marks the key DONE with the 201 body, which is
 * built in SQL because it carries the new ids. It is the same transition
 * ob_keyclaim_complete makes (started -> done, same token), fused with
 * the business write from keyclaim.h's own SQL fragments
 * (OB_KEYCLAIM_HELD_CTE, OB_KEYCLAIM_DONE_CTE): common/keyclaim.c owns every
 * write of a key table. The statement is prepared once per connection.
 *
 * Scopes: a request made with a token of a named scope (auth.h) has its
 * key stored as SCOPE 0x1f KEY (report_input.h, report_scoped_key), in the
 * key table and on the report alike, so another scope's same key is
 * another key: a new request, never a replay, a 422 or a lookup of the
 * other client's report. Everything a client reads back shows the key it
 * sent (PRODUCER_CLIENT_KEY_SQL), and a report is found by id only in the
 * scope that made it. The default scope's keys are stored as sent.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "api.h"
#include "api_claim.h"
#include "api_fault.h"
#include "api_key.h"
#include "api_messages.h"
#include "api_reply.h"
#include "enqueue.h"
#include "outbox/err.h"
#include "outbox/keyclaim.h"
#include "outbox/log.h"
#include "outbox/pg.h"
#include "report_input.h"

#define REPORT_JSON                                                              \
	"json_build_object('report_id', id, 'title', title, 'module', module,"   \
	" 'steps', steps, 'severity', severity, 'idempotency_key', "             \
	PRODUCER_CLIENT_KEY_SQL("idempotency_key") ", 'created_at', created_at)::text"

/* Each mode's name as --idempotency spells it: one table for both ways. */
static const char *const mode_names[] = {
	[PRODUCER_MODE_NONE] = "none",
	[PRODUCER_MODE_SPLIT] = "split",
	[PRODUCER_MODE_ATOMIC] = "atomic",
};
#define MODE_COUNT (sizeof(mode_names) / sizeof(mode_names[0]))

int
producer_mode_parse(const char *s, enum producer_mode *out)
{
	for (size_t m = 0; m < MODE_COUNT; m++) {
		if (strcmp(s, mode_names[m]) == 0) {
			*out = (enum producer_mode)m;
			return OB_OK;
		}
	}
	return OB_EINVAL;
}

const char *
producer_mode_name(enum producer_mode m)
{
	return (unsigned)m < MODE_COUNT ? mode_names[m] : "unknown";
}

/* The 201 body: the new report's ids and what was stored. Owned. */
static char *
created_body(int64_t report_id, int64_t message_id, const char *key,
    const struct bug_report *r)
{
	json_t *o = json_pack("{s:I,s:I,s:s?,s:s,s:s,s:s}", "report_id", (json_int_t)report_id,
	    "message_id", (json_int_t)message_id, "idempotency_key", key, "title", r->title,
	    "module", r->module, "severity", r->severity);
	char *s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return s;
}

/* The atomic final write (see the top of the file). $1..$4 the report,
 * $5 the key as stored, $6 the fence, $7 true = fencing OFF (test-only
 * broken switch: the key is marked done whoever holds it, even after a
 * takeover), $8 the key as the client sent it (for the 201 body).
 * Returns one row (report id, message id, body, keys completed) when the
 * token still held, none when it was fenced out. */
#define CREATE_ATOMIC_STMT "producer_create_atomic"
static const char create_atomic_sql[] =
    OB_KEYCLAIM_HELD_CTE(PRODUCER_KEY_TABLE, "$5::text", "$6::bigint", "$7::bool")
    " r AS ("
    "  INSERT INTO app.bug_reports (title, module, steps, severity, idempotency_key)"
    "  SELECT $1::text, $2::text, $3::text, $4::text, $5::text FROM k RETURNING *),"
    " m AS ("
    "  SELECT r.id, r.title, r.module, r.severity,"
    "         outbox.enqueue('" PRODUCER_TOPIC_REPORT_CREATED "', "
    PRODUCER_REPORT_KEY_SQL ", " PRODUCER_REPORT_PAYLOAD_SQL ") AS mid"
    "    FROM r),"
    " b AS ("
    "  SELECT m.id, m.mid, json_build_object('report_id', m.id, 'message_id', m.mid,"
    "         'idempotency_key', $8::text, 'title', m.title, 'module', m.module,"
    "         'severity', m.severity)::text AS body"
    "    FROM m),"
    OB_KEYCLAIM_DONE_CTE(PRODUCER_KEY_TABLE, "$5::text")
    " SELECT b.id, b.mid, b.body, (SELECT count(*) FROM d) FROM b";

static const struct api_final_write create_atomic_write = {
	.table = PRODUCER_KEY_TABLE, .stmt = CREATE_ATOMIC_STMT, .sql = create_atomic_sql,
	.nparams = 8, .fence_param = 5, .body_col = 2, .crash_at = "producer.atomic.after_claim",
	.context = "create", .what = "create",
};

static void
create_atomic(PGconn *conn, const struct api_config *cfg, const struct api_key *key,
    const struct report_input *in, struct api_response *res)
{
	const char *params[8] = { in->r.title, in->r.module, in->r.steps ? in->r.steps : "",
		in->r.severity, key->stored, NULL /* the claim's fence */,
		cfg->fencing ? "false" : "true", key->sent };
	api_claimed_create(conn, cfg, &create_atomic_write, key, in->canonical, in->canonical_len,
	    params, res);
}

/* The report and its message in one transaction, outside any key claim
 * (the broken modes split and none): false with res answered (400 for a
 * body the database refuses, 503 when it is unavailable). */
static bool
enqueue_report(PGconn *conn, const struct report_input *in, const char *stored_key,
    int64_t *rid, int64_t *mid, struct api_response *res)
{
	char err[512];
	int rc = producer_enqueue_report(conn, &in->r, stored_key, rid, mid, err, sizeof(err));
	if (rc == OB_OK)
		return true;
	if (rc == OB_EINVAL)
		api_error(res, 400, "invalid_body", err);
	else
		api_unavailable(res, "create", err);
	return false;
}

/* Split (BROKEN): check the key, insert the report (transaction 1), record
 * the key (transaction 2). A crash between the two, or two concurrent
 * requests that both pass the check, make a second report. */
static void
create_split(PGconn *conn, const struct api_config *cfg, const struct api_key *key,
    const struct report_input *in, struct api_response *res)
{
	char err[512];
	const char *params[3] = { key->stored, in->canonical, NULL };
	int lens[3] = { 0, (int)in->canonical_len, 0 };
	int formats[3] = { 0, 1, 0 };
	PGresult *r = PQexecParams(conn,
	    "SELECT fingerprint = encode(sha256($2::bytea), 'hex'), response_status, response_body"
	    "  FROM " PRODUCER_KEY_TABLE " WHERE idempotency_key = $1",
	    2, NULL, params, lens, formats, 0);
	if (ob_pg_check(r, PGRES_TUPLES_OK, "check key", err, sizeof(err)) != OB_OK) {
		PQclear(r);
		api_unavailable(res, "check_key", err);
		return;
	}
	if (PQntuples(r) == 1) {
		if (PQgetvalue(r, 0, 0)[0] != 't') {
			api_error(res, 422, "idempotency_key_reused",
			    "this Idempotency-Key was already used with a different request body");
		} else {
			res->status = (int)ob_pg_int64(r, 0, 1);
			res->body = PQgetisnull(r, 0, 2) ? NULL : strdup(PQgetvalue(r, 0, 2));
			res->replayed = true;
		}
		PQclear(r);
		return;
	}
	PQclear(r);

	api_fault_slow(cfg);
	int64_t rid, mid;
	if (!enqueue_report(conn, in, key->stored, &rid, &mid, res))
		return;
	api_fault_crash(cfg, "producer.split.before_key_recorded");
	char *body = created_body(rid, mid, key->sent, &in->r);
	int rc = ob_keyclaim_record_done(conn, PRODUCER_KEY_TABLE, key->stored, in->canonical,
	    in->canonical_len, 201, body, err, sizeof(err));
	if (rc != OB_OK) {
		/* The other request recorded the key first: its report and ours
		 * both exist now. This is the duplicate split lets through. */
		ob_warn("producer.split.record_failed", "report_id=%" PRId64 " error=%s", rid,
		    ob_err_name(rc));
		free(body);
		api_error(res, 500, "key_record_failed",
		    "the report was created but its Idempotency-Key could not be recorded");
		return;
	}
	res->status = 201;
	res->body = body;
	res->drop = api_fault_lose(cfg);
}

/* None (BROKEN): every request creates a report, stored with a fresh
 * random key (in the request's scope, so that it is looked up there). */
static void
create_none(PGconn *conn, const struct api_config *cfg, const char *scope,
    const struct report_input *in, struct api_response *res)
{
	char err[512], key[37], stored[PRODUCER_KEY_MAX + 1];
	int64_t rid, mid;
	api_fault_slow(cfg);
	producer_new_key(key);
	/* 36 bytes and a scope name always fit (auth.h, PRODUCER_SCOPE_MAX) */
	if (report_scoped_key(scope, key, stored, sizeof(stored), err, sizeof(err)) != OB_OK) {
		api_error(res, 500, "internal", err);
		return;
	}
	if (!enqueue_report(conn, in, stored, &rid, &mid, res))
		return;
	api_fault_crash(cfg, "producer.none.after_commit");
	res->status = 201;
	res->body = created_body(rid, mid, key, &in->r);
	res->drop = api_fault_lose(cfg);
}

static void
create(PGconn *conn, const struct api_config *cfg, const struct api_request *req,
    struct api_response *res)
{
	char key[PRODUCER_KEY_MAX + 1], stored[PRODUCER_KEY_MAX + 1], err[512];
	const char *scope = req->scope != NULL ? req->scope : "";
	/* One read per request: a switch at run time never splits one. */
	enum producer_mode mode = cfg->live_mode != NULL
	    ? (enum producer_mode)atomic_load(cfg->live_mode) : cfg->mode;
	/* The broken mode none takes a request without a key. */
	if ((req->key_header != NULL || mode != PRODUCER_MODE_NONE) &&
	    !api_key_from_header(req, key, stored, res))
		return;
	struct report_input in;
	if (!api_body_parsed(report_parse_body(req->body != NULL ? req->body : "", req->body_len,
	        &in, err, sizeof(err)), err, res))
		return;
	struct api_key k = { key, stored, scope };
	switch (mode) {
	case PRODUCER_MODE_ATOMIC:
		create_atomic(conn, cfg, &k, &in, res);
		break;
	case PRODUCER_MODE_SPLIT:
		create_split(conn, cfg, &k, &in, res);
		break;
	case PRODUCER_MODE_NONE:
		create_none(conn, cfg, scope, &in, res);
		break;
	}
	report_input_fini(&in);
}

static void
lookup_by_key(PGconn *conn, const struct api_request *req, struct api_response *res)
{
	PGresult *r = api_key_lookup(conn, req,
	    "SELECT (SELECT " REPORT_JSON " FROM app.bug_reports WHERE idempotency_key = $1"
	    "         ORDER BY id LIMIT 1),"
	    "       (SELECT count(*) FROM app.bug_reports WHERE idempotency_key = $1),"
	    "       (SELECT state FROM " PRODUCER_KEY_TABLE " WHERE idempotency_key = $1)",
	    "lookup", "lookup", res);
	if (r == NULL)
		return;
	if (!PQgetisnull(r, 0, 0)) {
		res->status = 200;
		res->body = strdup(PQgetvalue(r, 0, 0));
		if (ob_pg_int64(r, 0, 1) > 1)
			ob_warn("producer.lookup.duplicates", "count=%s", PQgetvalue(r, 0, 1));
	} else if (!PQgetisnull(r, 0, 2) && strcmp(PQgetvalue(r, 0, 2), "started") == 0) {
		api_error(res, 404, "in_progress",
		    "no report with this key yet, but a request with it is in progress");
	} else {
		api_error(res, 404, "not_found", "no report with this Idempotency-Key");
	}
	PQclear(r);
}

/* A report by id, only in the caller's scope (by its stored key's scope):
 * ids are sequential, so without this any client could read every other
 * client's reports. */
static void
get_by_id(PGconn *conn, const char *id, const char *scope, struct api_response *res)
{
	char err[512];
	size_t n = strlen(id);
	if (n == 0 || n > 18 || strspn(id, "0123456789") != n) {
		api_error(res, 404, "not_found", "no such report (ids are positive integers)");
		return;
	}
	const char *params[2] = { id, scope != NULL ? scope : "" };
	PGresult *r = ob_pg_rows(conn, "SELECT " REPORT_JSON " FROM app.bug_reports"
	    " WHERE id = $1 AND " PRODUCER_KEY_SCOPE_SQL("idempotency_key") " = $2",
	    2, params, "get report", err, sizeof(err));
	if (r == NULL) {
		api_unavailable(res, "get", err);
		return;
	}
	if (PQntuples(r) == 1) {
		res->status = 200;
		res->body = strdup(PQgetvalue(r, 0, 0));
	} else {
		api_error(res, 404, "not_found", "no such report");
	}
	PQclear(r);
}

static void
healthz(PGconn *conn, struct api_response *res)
{
	char err[512];
	if (ob_pg_exec(conn, "SELECT 1", "healthz", err, sizeof(err)) != OB_OK) {
		api_unavailable(res, "healthz", err);
		return;
	}
	res->status = 200;
	res->body = strdup("{\"status\":\"ok\"}");
}

/* The collections created in under an Idempotency-Key: POST creates, GET
 * (and HEAD) ?idempotency_key=K looks the key up. One row a collection. */
static const struct keyed_collection {
	const char *path;
	void (*create)(PGconn *conn, const struct api_config *cfg, const struct api_request *req,
	    struct api_response *res);
	void (*lookup)(PGconn *conn, const struct api_request *req, struct api_response *res);
} keyed_collections[] = {
	{ "/v1/messages", api_messages_create, api_messages_lookup },
	{ "/v1/reports", create, lookup_by_key },
};

void
api_handle(PGconn *conn, const struct api_config *cfg, const struct api_request *req,
    struct api_response *res)
{
	static const char prefix[] = "/v1/reports/";
	memset(res, 0, sizeof(*res));
	bool get = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;
	for (size_t i = 0; i < sizeof(keyed_collections) / sizeof(keyed_collections[0]); i++) {
		const struct keyed_collection *k = &keyed_collections[i];
		if (strcmp(req->path, k->path) != 0)
			continue;
		if (strcmp(req->method, "POST") == 0)
			k->create(conn, cfg, req, res);
		else if (get)
			k->lookup(conn, req, res);
		else
			api_error(res, 405, "method_not_allowed", "use POST or GET");
		return;
	}
	if (strncmp(req->path, prefix, sizeof(prefix) - 1) == 0) {
		if (get)
			get_by_id(conn, req->path + sizeof(prefix) - 1, req->scope, res);
		else
			api_error(res, 405, "method_not_allowed", "use GET");
	} else if (strcmp(req->path, "/healthz") == 0) {
		if (get)
			healthz(conn, res);
		else
			api_error(res, 405, "method_not_allowed", "use GET");
	} else {
		api_error(res, 404, "not_found", "no such resource");
	}
}
