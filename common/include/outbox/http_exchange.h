/*
 * http_exchange.h - one HTTP request and its response over a new
 * connection, in two steps (connect, then the exchange), so that a
 * failure tells whether the request may have reached the server: the
 * consumer's webhook call (consumer/handler_webhook.c) and the agent-side
 * client's attempt (client/client.c) both need to know.
 *
 * nng's nng_http_client_transact does the same two steps in one and
 * reports only the error; the split costs nothing (it is one connection
 * per call either way).
 */
#ifndef OUTBOX_HTTP_EXCHANGE_H
#define OUTBOX_HTTP_EXCHANGE_H

#include <stdbool.h>
#include <stdint.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

/* One request/response over a new connection to client's server, within
 * timeout_ms in all. Returns 0 or an nng error; *connected says whether the
 * connection was established before it failed (the request may then have
 * reached the server, in part or whole). client, req and res are borrowed;
 * the connection is closed before it returns. Blocks. */
int ob_http_exchange(nng_http_client *client, nng_http_req *req, nng_http_res *res,
    int64_t timeout_ms, bool *connected);

#endif
