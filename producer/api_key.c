/*
 * api_key.c - a request's Idempotency-Key, from its header or its query
 * (see api_key.h).
 */
#include "api_key.h"
#include "api_query.h"
#include "api_reply.h"
#include "outbox/err.h"
#include "outbox/pg.h"

bool
api_key_from_header(const struct api_request *req, char *key, char *stored,
    struct api_response *res)
{
	char err[512];
	if (req->key_header == NULL) {
		api_error(res, 400, "idempotency_key_required",
		    "the Idempotency-Key header is required: 1..255 printable ASCII characters,"
		    " one value per logical operation, reused on every retry");
		return false;
	}
	if (report_parse_key(req->key_header, key, PRODUCER_KEY_MAX + 1, err, sizeof(err)) !=
	        OB_OK ||
	    report_scoped_key(req->scope, key, stored, PRODUCER_KEY_MAX + 1, err, sizeof(err)) !=
	        OB_OK) {
		api_error(res, 400, "invalid_idempotency_key", err);
		return false;
	}
	return true;
}

bool
api_key_from_query(const struct api_request *req, char *stored, struct api_response *res)
{
	char key[PRODUCER_KEY_MAX + 2], err[512]; /* + 2: a key one byte too long is seen */
	if (req->query == NULL ||
	    api_query_param(req->query, "idempotency_key", key, sizeof(key)) != OB_OK) {
		api_error(res, 400, "idempotency_key_required",
		    "query parameter idempotency_key is required (1..255 printable ASCII,"
		    " percent-encoded)");
		return false;
	}
	/* Looked up as stored in the caller's scope: another scope's same key
	 * is another key (404 unless the caller made one). */
	if (report_check_key(key, err, sizeof(err)) != OB_OK ||
	    report_scoped_key(req->scope, key, stored, PRODUCER_KEY_MAX + 1, err, sizeof(err)) !=
	        OB_OK) {
		api_error(res, 400, "invalid_idempotency_key", err);
		return false;
	}
	return true;
}

PGresult *
api_key_lookup(PGconn *conn, const struct api_request *req, const char *sql,
    const char *context, const char *what, struct api_response *res)
{
	char stored[PRODUCER_KEY_MAX + 1], err[512];
	if (!api_key_from_query(req, stored, res))
		return NULL;
	const char *params[1] = { stored };
	PGresult *r = ob_pg_rows(conn, sql, 1, params, context, err, sizeof(err));
	if (r == NULL)
		api_unavailable(res, what, err);
	return r;
}
