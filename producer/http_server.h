/*
 * http_server.h - the producer's HTTP server: nng's HTTP server for the
 * protocol, a pool of serving threads for the blocking work.
 *
 * nng runs the handler callbacks on its own threads, which must never
 * block; each request is queued to one of `threads` serving threads, each
 * with its own PostgreSQL connection, which reads the body, calls
 * api_handle, and hands the response back to nng.
 */
#ifndef OUTBOX_PRODUCER_HTTP_SERVER_H
#define OUTBOX_PRODUCER_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"

struct http_server_config {
	const char *url;          /* http://HOST:PORT (port 0 = any free port) */
	const char *db;           /* conninfo */
	int threads;              /* serving threads = DB connections */
	int max_queue;            /* requests waiting for a thread; more get 503 */
	int64_t max_body;         /* bytes; a larger Content-Length gets 413 */
	int64_t read_timeout_ms;  /* to read a request body */
	struct api_config api;
};

struct http_server;

/* Connect the serving threads' database connections, start listening.
 * On OB_OK *out is owned (http_server_stop). OB_EDB / OB_ENET / OB_EINVAL
 * with the reason in err. */
int http_server_start(const struct http_server_config *cfg, struct http_server **out,
    char *err, size_t errlen);

/* Ready: at least one serving thread's database connection was usable at
 * its last use (a broken one is reconnected by the next request its thread
 * serves). Atomics only: safe from any thread, never blocks. */
bool http_server_ready(struct http_server *s);

/* The TCP port actually bound (useful with port 0). */
int http_server_port(struct http_server *s);

/* Stop accepting, let the serving threads finish what is queued, close.
 * Frees s. */
void http_server_stop(struct http_server *s);

#endif
