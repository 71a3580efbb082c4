/*
 * api_key.h - a request's Idempotency-Key as both resources read it: from
 * the header of a create, or from the idempotency_key query parameter of
 * a lookup, checked and put in the caller's scope (report_scoped_key). A
 * missing or bad key is answered 400 here, with the same codes and texts
 * for reports and messages.
 */
#ifndef OUTBOX_PRODUCER_API_KEY_H
#define OUTBOX_PRODUCER_API_KEY_H

#include <libpq-fe.h>
#include <stdbool.h>

#include "api.h"
#include "report_input.h"

/* The Idempotency-Key header into key and its stored form into stored
 * (PRODUCER_KEY_MAX + 1 bytes each). false, with res answered 400
 * (idempotency_key_required / invalid_idempotency_key), when the header
 * is missing or bad. */
bool api_key_from_header(const struct api_request *req, char *key, char *stored,
    struct api_response *res);

/* The idempotency_key query parameter's stored form into stored
 * (PRODUCER_KEY_MAX + 1 bytes); false with res answered 400 as above. */
bool api_key_from_query(const struct api_request *req, char *stored, struct api_response *res);

/* A lookup by key (GET ...?idempotency_key=K): sql run on conn with $1 the
 * key's stored form (api_key_from_query). Its rows (owned, release with
 * PQclear), or NULL with res answered: 400 as above, or 503 when the query
 * fails (api_unavailable; context names the step for ob_pg_rows, what for
 * api_unavailable). */
PGresult *api_key_lookup(PGconn *conn, const struct api_request *req, const char *sql,
    const char *context, const char *what, struct api_response *res);

#endif
