/*
 * http_server.h - the producer's HTTP server: outbox/httpd.h for the
 * protocol (connections, deadlines, the cap, the refusals), a pool of
 * serving threads for the blocking work.
 *
 * The server hands over only complete requests (headers and body read
 * within their deadlines); each is queued to one of `threads` serving
 * threads, each with its own PostgreSQL connection, which calls
 * api_handle and hands the response back. A slow client therefore holds a
 * connection slot until its deadline, never a serving thread.
 */
#ifndef OUTBOX_PRODUCER_HTTP_SERVER_H
#define OUTBOX_PRODUCER_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "auth.h"
#include "outbox/httpd.h"

struct ob_httpd_tls;

struct http_server_config {
	const char *url;          /* http://HOST:PORT, or https:// with tls (port 0 = any free port) */
	struct ob_httpd_tls *tls; /* borrowed, outlives the server; NULL = plain HTTP */
	const char *db;           /* conninfo */
	int threads;              /* serving threads = DB connections */
	int max_queue;            /* requests waiting for a thread; more get 503 */
	struct ob_httpd_limits limits; /* --max-body, --read-timeout ... (outbox/httpd.h) */
	struct ob_metrics *conn_metrics; /* connection counters (NULL: none) */
	const struct producer_tokens *tokens; /* NULL: no auth; else Bearer required
	                                       * on every route but GET /healthz, and
	                                       * each request is served in its
	                                       * token's scope (auth.h); borrowed,
	                                       * must outlive the server */
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
