/*
 * api.c - the producer's HTTP API, one request at a time on the caller's
 * database connection (see api.h).
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
 * (OB_KEYCLAIM_HELD_SQL, OB_KEYCLAIM_DONE_SQL): common/keyclaim.c owns every
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
#include "api_internal.h"
#include "enqueue.h"
#include "metrics.h"
#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/keyclaim.h"
#include "outbox/log.h"
#include "outbox/pg.h"
#include "outbox/url.h"
#include "report_input.h"

/* Retry-After of a 409: poll again this soon (rounded up to whole seconds). */
#define API_BUSY_RETRY_AFTER_MS 1000

#define REPORT_JSON                                                              \
	"json_build_object('report_id', id, 'title', title, 'module', module,"   \
	" 'steps', steps, 'severity', severity, 'idempotency_key', "             \
	PRODUCER_CLIENT_KEY_SQL("idempotency_key") ", 'created_at', created_at)::text"

int
producer_mode_parse(const char *s, enum producer_mode *out)
{
	if (strcmp(s, "none") == 0)
		*out = PRODUCER_MODE_NONE;
	else if (strcmp(s, "split") == 0)
		*out = PRODUCER_MODE_SPLIT;
	else if (strcmp(s, "atomic") == 0)
		*out = PRODUCER_MODE_ATOMIC;
	else
		return OB_EINVAL;
	return OB_OK;
}

const char *
producer_mode_name(enum producer_mode m)
{
	switch (m) {
	case PRODUCER_MODE_NONE: return "none";
	case PRODUCER_MODE_SPLIT: return "split";
	case PRODUCER_MODE_ATOMIC: return "atomic";
	}
	return "unknown";
}

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

void
api_unavailable(struct api_response *res, const char *what, const char *err)
{
	char q[600];
	ob_warn("producer.db_error", "what=%s err=%s", what, ob_log_q(err, q, sizeof(q)));
	api_error(res, 503, "unavailable", "the database is unavailable; retry later");
	res->retry_after_s = 1;
}

void
api_fault_slow(const struct api_config *cfg)
{
	if (cfg->faults != NULL && ob_fault_fire(&cfg->faults->slow))
		ob_sleep_ms(cfg->faults->slow_ms);
}

void
api_fault_crash(const struct api_config *cfg, const char *where)
{
	if (cfg->faults != NULL && ob_fault_fire(&cfg->faults->crash))
		ob_fault_die(where);
}

bool
api_fault_lose(const struct api_config *cfg)
{
	return cfg->faults != NULL && ob_fault_fire(&cfg->faults->lose_response);
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

static int64_t
retry_after_s(int64_t ms)
{
	int64_t s = (ms + 999) / 1000;
	return s < 1 ? 1 : s;
}

/* 409 for a key in progress. Retry-After is a polling hint (the holder
 * usually finishes well within its lease); the body says how long the lease
 * still runs, after which a retry takes the key over. */
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
	res->retry_after_s = retry_after_s(lease_left_ms < API_BUSY_RETRY_AFTER_MS
	        ? lease_left_ms : API_BUSY_RETRY_AFTER_MS);
}

/* After being fenced out: answer with the winner's stored result, or 409
 * when the winner is not done yet. */
void
api_answer_winner(PGconn *conn, const char *table, const char *stored_key,
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

/* The atomic final write (see the top of the file). $1..$4 the report,
 * $5 the key as stored, $6 the fence, $7 true = fencing OFF (test-only
 * broken switch: the key is marked done whoever holds it, even after a
 * takeover), $8 the key as the client sent it (for the 201 body).
 * Returns one row (report id, message id, body, keys completed) when the
 * token still held, none when it was fenced out. */
#define CREATE_ATOMIC_STMT "producer_create_atomic"
static const char create_atomic_sql[] =
    "WITH k AS ("
    OB_KEYCLAIM_HELD_SQL(PRODUCER_KEY_TABLE, "$5::text", "$6::bigint", "$7::bool") "),"
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
    " d AS ("
    OB_KEYCLAIM_DONE_SQL(PRODUCER_KEY_TABLE, "$5::text", "201", "(SELECT b.body FROM b)")
    " AND EXISTS (SELECT 1 FROM b) RETURNING 1)"
    " SELECT b.id, b.mid, b.body, (SELECT count(*) FROM d) FROM b";

bool
api_claim_verdict(struct ob_key_claim *c, struct api_response *res)
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
		api_busy(res, c->retry_after_ms);
		return false;
	case OB_KEY_PROCEED:
		break;
	}
	return true;
}

void
api_note_takeover(const struct api_config *cfg, const struct api_key *key,
    const struct ob_key_claim *c)
{
	char q[300];
	if (!c->takeover)
		return;
	producer_metrics_takeover(cfg->metrics);
	ob_info("producer.key.takeover", "key=%s scope=%s fence=%" PRId64,
	    ob_log_q(key->sent, q, sizeof(q)), key->scope[0] ? key->scope : "\"\"", c->fence);
}

void
api_fenced_out(PGconn *conn, const struct api_config *cfg, const char *table,
    const struct api_key *key, int64_t fence, struct api_response *res)
{
	char q[300];
	producer_metrics_fenced_out(cfg->metrics);
	ob_warn("producer.key.fenced_out", "key=%s scope=%s fence=%" PRId64,
	    ob_log_q(key->sent, q, sizeof(q)), key->scope[0] ? key->scope : "\"\"", fence);
	api_answer_winner(conn, table, key->stored, res);
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

void
api_write_failed(PGconn *conn, const char *table, const struct api_key *key, int64_t fence,
    PGresult *r, const char *err, const char *what, struct api_response *res)
{
	/* What the client must change, by SQLSTATE (nothing was stored) ... */
	const char *state = ob_pg_sqlstate(r);
	if (strcmp(state, "54000") == 0) /* outbox.max_payload_bytes() */
		api_error(res, 413, "payload_too_large", err);
	else if (strcmp(state, "OB002") == 0) /* outbox.check_same_payload */
		api_error(res, 422, "idempotency_key_reused",
		    "the outbox already holds a message of this topic with this key and a"
		    " different payload (its key record has expired); use a new key");
	else if (strncmp(state, "22", 2) == 0 || strncmp(state, "23", 2) == 0)
		api_error(res, 400, "invalid_body", err);
	else /* ... or the database failed */
		api_unavailable(res, what, err);
	PQclear(r);
	api_release_key(conn, table, key->stored, fence);
}

void
api_release_key(PGconn *conn, const char *table, const char *key, int64_t fence)
{
	char err[512];
	if (!ob_pg_broken(conn) &&
	    ob_keyclaim_release(conn, table, key, fence, err, sizeof(err)) != OB_OK)
		ob_warn("producer.key.release_failed", "fence=%" PRId64, fence);
}

static void
create_atomic_write(PGconn *conn, const struct api_config *cfg, const struct api_key *key,
    const struct report_input *in, const struct ob_key_claim *c, struct api_response *res)
{
	char err[512], fence[24];

	api_note_takeover(cfg, key, c);
	api_fault_crash(cfg, "producer.atomic.after_claim");
	api_fault_slow(cfg);

	snprintf(fence, sizeof(fence), "%" PRId64, c->fence);
	const char *params[8] = { in->r.title, in->r.module, in->r.steps ? in->r.steps : "",
		in->r.severity, key->stored, fence, cfg->fencing ? "false" : "true", key->sent };
	PGresult *r = ob_pg_exec_prepared(conn, CREATE_ATOMIC_STMT, create_atomic_sql, 8, params, NULL, NULL);
	if (ob_pg_check(r, PGRES_TUPLES_OK, "create", err, sizeof(err)) != OB_OK) {
		api_write_failed(conn, PRODUCER_KEY_TABLE, key, c->fence, r, err, "create", res);
		return;
	}
	if (PQntuples(r) == 0) {
		/* Taken over while we were slow: nothing of ours was written. */
		PQclear(r);
		api_fenced_out(conn, cfg, PRODUCER_KEY_TABLE, key, c->fence, res);
		return;
	}
	api_created(cfg, PQgetvalue(r, 0, 2), res);
	PQclear(r);
}

static void
create_atomic(PGconn *conn, const struct api_config *cfg, const struct api_key *key,
    const struct report_input *in, struct api_response *res)
{
	char err[512];
	struct ob_key_claim c;
	if (ob_keyclaim_claim(conn, PRODUCER_KEY_TABLE, key->stored, in->canonical, in->canonical_len,
	        cfg->lease_ms, &c, err, sizeof(err)) != OB_OK) {
		api_unavailable(res, "claim", err);
		return;
	}
	if (api_claim_verdict(&c, res))
		create_atomic_write(conn, cfg, key, in, &c, res);
	ob_keyclaim_result_fini(&c);
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
	int rc = producer_enqueue_report(conn, &in->r, key->stored, &rid, &mid, err, sizeof(err));
	if (rc != OB_OK) {
		if (rc == OB_EINVAL)
			api_error(res, 400, "invalid_body", err);
		else
			api_unavailable(res, "create", err);
		return;
	}
	api_fault_crash(cfg, "producer.split.before_key_recorded");
	char *body = created_body(rid, mid, key->sent, &in->r);
	rc = ob_keyclaim_record_done(conn, PRODUCER_KEY_TABLE, key->stored, in->canonical,
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
	int rc = producer_enqueue_report(conn, &in->r, stored, &rid, &mid, err, sizeof(err));
	if (rc != OB_OK) {
		if (rc == OB_EINVAL)
			api_error(res, 400, "invalid_body", err);
		else
			api_unavailable(res, "create", err);
		return;
	}
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
	if (req->key_header != NULL) {
		if (report_parse_key(req->key_header, key, sizeof(key), err, sizeof(err)) != OB_OK ||
		    report_scoped_key(scope, key, stored, sizeof(stored), err, sizeof(err)) != OB_OK) {
			api_error(res, 400, "invalid_idempotency_key", err);
			return;
		}
	} else if (mode != PRODUCER_MODE_NONE) {
		api_error(res, 400, "idempotency_key_required",
		    "the Idempotency-Key header is required: 1..255 printable ASCII characters,"
		    " one value per logical operation, reused on every retry");
		return;
	}
	struct report_input in;
	int rc = report_parse_body(req->body != NULL ? req->body : "", req->body_len, &in, err,
	    sizeof(err));
	if (rc != OB_OK) {
		api_error(res, rc == OB_EINVAL ? 400 : 500, "invalid_body", err);
		return;
	}
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

/* The value of name in a query string, percent-decoded into out (RFC 3986;
 * '+' is a literal plus). OB_OK, or OB_EINVAL when absent, malformed,
 * decoding to a NUL, or too long. */
int
api_query_param(const char *query, const char *name, char *out, size_t outlen)
{
	size_t nlen = strlen(name);
	for (const char *p = query; p != NULL && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL) {
		if (strncmp(p, name, nlen) != 0 || p[nlen] != '=')
			continue;
		size_t n = 0;
		for (const char *v = p + nlen + 1; *v && *v != '&'; v++) {
			int c = (unsigned char)*v;
			if (c == '%') {
				int hi = ob_url_hexval((unsigned char)v[1]);
				int lo = hi < 0 ? -1 : ob_url_hexval((unsigned char)v[2]);
				if (lo < 0)
					return OB_EINVAL;
				c = hi * 16 + lo;
				v += 2;
				/* %00 would cut the value short (K%00zzz read as K):
				 * refused (the HTTP server refuses it first, httpd.h). */
				if (c == 0)
					return OB_EINVAL;
			}
			if (n + 1 >= outlen)
				return OB_EINVAL;
			out[n++] = (char)c;
		}
		out[n] = '\0';
		return OB_OK;
	}
	return OB_EINVAL;
}

static void
lookup_by_key(PGconn *conn, const struct api_request *req, struct api_response *res)
{
	char key[PRODUCER_KEY_MAX + 2], stored[PRODUCER_KEY_MAX + 1], err[512];
	if (req->query == NULL || api_query_param(req->query, "idempotency_key", key, sizeof(key)) != OB_OK) {
		api_error(res, 400, "idempotency_key_required",
		    "query parameter idempotency_key is required (1..255 printable ASCII, percent-encoded)");
		return;
	}
	/* Looked up as stored in the caller's scope: another scope's same key
	 * is another key (404 unless the caller made one). */
	if (report_check_key(key, err, sizeof(err)) != OB_OK ||
	    report_scoped_key(req->scope, key, stored, sizeof(stored), err, sizeof(err)) != OB_OK) {
		api_error(res, 400, "invalid_idempotency_key", err);
		return;
	}
	const char *params[1] = { stored };
	PGresult *r = PQexecParams(conn,
	    "SELECT (SELECT " REPORT_JSON " FROM app.bug_reports WHERE idempotency_key = $1"
	    "         ORDER BY id LIMIT 1),"
	    "       (SELECT count(*) FROM app.bug_reports WHERE idempotency_key = $1),"
	    "       (SELECT state FROM " PRODUCER_KEY_TABLE " WHERE idempotency_key = $1)",
	    1, NULL, params, NULL, NULL, 0);
	if (ob_pg_check(r, PGRES_TUPLES_OK, "lookup", err, sizeof(err)) != OB_OK) {
		PQclear(r);
		api_unavailable(res, "lookup", err);
		return;
	}
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
	PGresult *r = PQexecParams(conn, "SELECT " REPORT_JSON " FROM app.bug_reports"
	    " WHERE id = $1 AND " PRODUCER_KEY_SCOPE_SQL("idempotency_key") " = $2",
	    2, NULL, params, NULL, NULL, 0);
	if (ob_pg_check(r, PGRES_TUPLES_OK, "get report", err, sizeof(err)) != OB_OK) {
		PQclear(r);
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

void
api_handle(PGconn *conn, const struct api_config *cfg, const struct api_request *req,
    struct api_response *res)
{
	static const char prefix[] = "/v1/reports/";
	memset(res, 0, sizeof(*res));
	bool get = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;
	if (strcmp(req->path, "/v1/messages") == 0) {
		if (strcmp(req->method, "POST") == 0)
			api_messages_create(conn, cfg, req, res);
		else if (get)
			api_messages_lookup(conn, req, res);
		else
			api_error(res, 405, "method_not_allowed", "use POST or GET");
	} else if (strcmp(req->path, "/v1/reports") == 0) {
		if (strcmp(req->method, "POST") == 0)
			create(conn, cfg, req, res);
		else if (get)
			lookup_by_key(conn, req, res);
		else
			api_error(res, 405, "method_not_allowed", "use POST or GET");
	} else if (strncmp(req->path, prefix, sizeof(prefix) - 1) == 0) {
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
