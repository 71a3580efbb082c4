/*
 * httpd.h - a small HTTP/1.1 server that a slow or hostile client cannot
 * stall: the producer API and every program's metrics endpoint run on it.
 *
 * Why not nng's HTTP server: nng 1.5.2 reads request headers with no
 * deadline, never closes an idle keep-alive connection, has no cap on open
 * connections and gives no way to accept the connections ourselves and
 * hand them to its HTTP code. So this server owns the accepted sockets
 * (one event-loop thread, epoll) and parses with Debian's libhttp-parser
 * (http_parser.h, the parser Node.js used up to v12) instead of a
 * hand-written parser.
 *
 * What it guarantees, per connection:
 *   - idle: a connection with no request in progress (fresh, or between
 *     keep-alive requests) is closed after limits.idle_timeout_ms;
 *   - header deadline: a request's headers must be complete within
 *     header_timeout_ms of its first byte; the whole request (headers and
 *     Content-Length body) within request_timeout_ms of that same byte.
 *     Both are totals, not inactivity timers: a client that sends one byte
 *     a second cannot extend them. Past either: 408, connection closed;
 *   - a response must be written within write_timeout_ms;
 *   - a complete request is handed to the handler only once its body is
 *     in memory: no thread of the program ever waits on a client;
 *   - at most max_conns connections are open: at the cap, the connection
 *     idle the longest is closed to make room; when none is idle, the new
 *     one gets 503 and is closed at once.
 * And per request, answered by the server itself (the handler never sees
 * it), connection closed: malformed HTTP 400; Content-Length together with
 * Transfer-Encoding 400 (request smuggling); Transfer-Encoding alone 411
 * (bodies must carry a Content-Length); a request target containing %00
 * 400; headers over max_header bytes or OB_HTTPD_HEADERS_MAX fields 431;
 * a Content-Length over max_body 413 (the body is not read).
 *
 * HTTPS (cfg.tls set, url https://): the same, over TLS (OpenSSL,
 * outbox/httpd_tls.h), the handshake driven non-blocking by the same
 * thread. A connection's first byte starts its handshake, which must be
 * done by the header deadline counted from that byte (else closed,
 * counted as header_timeout); a failed handshake (plain HTTP sent to the
 * port, a client certificate missing or not from the CA) closes the
 * connection, counted as reason tls_handshake and logged once
 * (http.tls.handshake_failed). At the connection cap with none idle, a
 * new HTTPS connection is closed without the 503 (nothing can be written
 * before a handshake).
 *
 * Threads: the handler runs on the server's thread and must not block; it
 * answers with ob_httpd_respond, at once or later from any thread.
 */
#ifndef OUTBOX_HTTPD_H
#define OUTBOX_HTTPD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "outbox/metrics.h"

/* Header fields kept per request; more get 431. */
#define OB_HTTPD_HEADERS_MAX 64
/* Descriptors a process keeps for everything but its HTTP connections
 * (ob_httpd_reserve_fds). */
#define OB_HTTPD_FD_RESERVE 64

struct ob_httpd_limits {
	int max_conns;              /* open connections; 0 = no cap (unsafe) */
	int64_t idle_timeout_ms;    /* no request in progress; 0 = never closed (unsafe) */
	int64_t header_timeout_ms;  /* first byte -> end of headers; > 0 */
	int64_t request_timeout_ms; /* first byte -> end of body; >= header_timeout_ms */
	int64_t write_timeout_ms;   /* to write one response; > 0 */
	size_t max_header;          /* bytes of request line + headers */
	size_t max_body;            /* largest Content-Length accepted */
};

/* One request, as handed to the handler. Everything is borrowed from the
 * server and valid until ob_httpd_respond is called for it. */
struct ob_httpd_req {
	const char *method;  /* "GET", "POST", ... */
	const char *path;    /* the target up to '?' (not decoded) */
	const char *query;   /* after '?', or NULL */
	const char *body;    /* body_len bytes, NUL-terminated; "" when none */
	size_t body_len;
	int64_t t0_ns;       /* CLOCK_MONOTONIC: the request's first byte */
	const char *hname[OB_HTTPD_HEADERS_MAX];
	const char *hvalue[OB_HTTPD_HEADERS_MAX];
	int nheaders;
};

/* The value of header name (case-insensitive), or NULL. The first one
 * when repeated. */
const char *ob_httpd_req_header(const struct ob_httpd_req *req, const char *name);

/* An answer (all borrowed; copied by ob_httpd_respond). */
struct ob_httpd_res {
	int status;
	const char *reason;       /* NULL: the standard phrase */
	const char *content_type; /* NULL with a body: application/octet-stream */
	const char *body;
	size_t body_len;
	const char *headers;      /* extra "Name: value\r\n" lines, or NULL */
	bool close;               /* Connection: close after this response */
	bool drop;                /* close the connection without writing a byte */
};

/* Called on the server's thread for each complete request; must not block
 * and must make exactly one ob_httpd_respond call for req (now or later,
 * from any thread). */
typedef void (*ob_httpd_handler)(void *arg, struct ob_httpd_req *req);

struct ob_httpd_tls;

struct ob_httpd_config {
	const char *url;            /* http://HOST:PORT, https:// with tls (port 0 = any free port) */
	struct ob_httpd_tls *tls;   /* borrowed, must outlive the server; NULL = plain HTTP */
	const char *name;           /* the `server` label and log field: "api", "metrics" */
	struct ob_httpd_limits limits;
	ob_httpd_handler handler;
	void *arg;
	struct ob_metrics *metrics; /* borrowed, may be NULL: connection counters */
};

struct ob_httpd;

/* Bind, listen and start the server's thread. On OB_OK *out is owned
 * (ob_httpd_stop). OB_EINVAL (bad URL or limits), OB_ENET (cannot listen)
 * or OB_ENOMEM, with one line in err. */
int ob_httpd_start(const struct ob_httpd_config *cfg, struct ob_httpd **out, char *err,
    size_t errlen);

/* The TCP port actually bound. */
int ob_httpd_port(const struct ob_httpd *s);

/* Answer req (see ob_httpd_handler). Thread-safe; never blocks on the
 * client: the response is written by the server's thread. */
void ob_httpd_respond(struct ob_httpd_req *req, const struct ob_httpd_res *res);

/* Stop accepting, finish writing the answers already given (at most a
 * second), then stop the thread, close every connection and free s. Every
 * request handed to the handler must have been answered before. NULL is
 * ok. */
void ob_httpd_stop(struct ob_httpd *s);

/* Make sure this process may open n descriptors: raise the soft
 * RLIMIT_NOFILE up to the hard limit when needed. OB_OK, or OB_EINVAL
 * with the numbers in err when the hard limit is lower. */
int ob_httpd_reserve_fds(int64_t n, char *err, size_t errlen);

#endif
