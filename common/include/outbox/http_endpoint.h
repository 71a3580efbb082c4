/*
 * http_endpoint.h - the operator's HTTP endpoint of a program: GET /metrics
 * (Prometheus text of a metrics registry), /healthz (200 "ok" while the
 * process serves) and /readyz (200 "ready" or 503 "not ready", from a
 * caller-supplied callback or the registry's ready flag). Other paths get
 * 404, other methods 405, unless an extra route (ob_http_endpoint_start_with)
 * answers them.
 *
 * Served from one thread of its own (outbox/httpd.h); a request reads
 * atomics only, so a scrape never blocks or slows the program's own work.
 * Limits (constants below, the same in every program): at most
 * OB_HTTP_ENDPOINT_MAX_CONNS connections open (at the cap the idlest is
 * closed, else 503), idle ones closed after OB_HTTP_ENDPOINT_IDLE_MS, a
 * request must arrive whole within OB_HTTP_ENDPOINT_REQUEST_MS of its
 * first byte. The connection counters go into the served registry
 * (outbox_http_connections_*{server="metrics"}).
 *
 * fork(): nng's state does not survive fork(). A process that forks
 * workers (the relay supervisor) must not start the endpoint itself before
 * forking; it can serve the shared registry (ob_metrics_new_shared) from a
 * dedicated child instead, which sees every worker's counts because they
 * share the mapping.
 */
#ifndef OUTBOX_HTTP_ENDPOINT_H
#define OUTBOX_HTTP_ENDPOINT_H

#include <stdbool.h>
#include <stddef.h>

#include "outbox/metrics.h"

struct ob_httpd_req; /* outbox/httpd.h */

#define OB_HTTP_ENDPOINT_URL_MAX 300

#define OB_HTTP_ENDPOINT_MAX_CONNS 64      /* open connections */
#define OB_HTTP_ENDPOINT_IDLE_MS 10000     /* keep-alive idle timeout */
#define OB_HTTP_ENDPOINT_REQUEST_MS 5000   /* first byte -> whole request */
#define OB_HTTP_ENDPOINT_WRITE_MS 10000    /* to write one response */
#define OB_HTTP_ENDPOINT_MAX_HEADER 8192   /* request line + headers */
#define OB_HTTP_ENDPOINT_MAX_BODY 4096     /* a GET with a body: read, ignored */

/* Readiness callback, called on the endpoint's thread for each GET /readyz: must be
 * thread-safe and must not block. */
typedef bool (*ob_ready_fn)(void *arg);

struct ob_http_endpoint;

/* Turn a --metrics value into an nng URL in out: "HOST:PORT",
 * "http://HOST:PORT", ":PORT" (all interfaces) or "[::1]:PORT"; port
 * 0..65535 (0 = any free port); no path other than "/". OB_OK, or OB_EINVAL
 * with one line in err. */
int ob_http_endpoint_url(const char *addr, char *out, size_t outlen, char *err,
    size_t errlen);

/* Start serving m on addr (syntax above). ready: NULL means "use
 * ob_metrics_ready(m)". m (borrowed) must outlive the endpoint. On success
 * *out is owned by the caller (ob_http_endpoint_stop). OB_EINVAL (bad
 * address), OB_ENET (cannot listen, e.g. port in use) or OB_ENOMEM, with
 * one line in err. Blocks only to bind. */
int ob_http_endpoint_start(const char *addr, struct ob_metrics *m,
    ob_ready_fn ready, void *arg, struct ob_http_endpoint **out, char *err,
    size_t errlen);

/* An extra route, tried first for every request (on the endpoint's
 * thread, the same rules as the endpoint's own: no blocking): true when it
 * answered req (exactly one ob_httpd_respond), false to let the endpoint
 * answer (404 for a path it does not know). outbox/demo_admin.h is one. */
typedef bool (*ob_endpoint_route_fn)(void *arg, struct ob_httpd_req *req);

/* ob_http_endpoint_start with an extra route (route_arg borrowed; must
 * outlive the endpoint). */
int ob_http_endpoint_start_with(const char *addr, struct ob_metrics *m,
    ob_ready_fn ready, void *arg, ob_endpoint_route_fn route, void *route_arg,
    struct ob_http_endpoint **out, char *err, size_t errlen);

/* The TCP port actually bound (useful with port 0), or -1. */
int ob_http_endpoint_port(const struct ob_http_endpoint *e);

/* Stop serving and free e (waits for requests in progress). NULL is ok. */
void ob_http_endpoint_stop(struct ob_http_endpoint *e);

#endif
