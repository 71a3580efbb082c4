/*
 * api_messages.h - the generic message endpoint of the producer API
 * (api_messages.c), dispatched to by api_handle (api.c). Same rules as
 * api_handle: conn is the caller's, not inside a transaction; res is
 * always filled; blocks on the database and the slow fault.
 */
#ifndef OUTBOX_PRODUCER_API_MESSAGES_H
#define OUTBOX_PRODUCER_API_MESSAGES_H

#include <libpq-fe.h>

#include "api.h"

/* POST /v1/messages: {topic, payload, ordering_key?} with Idempotency-Key
 * (required), checked against the token's topics. */
void api_messages_create(PGconn *conn, const struct api_config *cfg,
    const struct api_request *req, struct api_response *res);

/* GET /v1/messages?idempotency_key=K: the recovery lookup. */
void api_messages_lookup(PGconn *conn, const struct api_request *req,
    struct api_response *res);

#endif
