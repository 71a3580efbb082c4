/*
 * httpd.c - the deadline-keeping HTTP/1.1 server (see httpd.h for what it
 * guarantees and why nng's server could not be used).
 *
 * Design, the smallest that keeps the guarantees provable:
 *   - ONE thread runs an epoll loop over the listening socket, an eventfd
 *     (answers from other threads) and every connection. Nothing on it
 *     blocks: sockets are non-blocking and the handler must not block.
 *   - Each connection has one state (enum conn_state) and one deadline,
 *     both set only by conn_set_state: IDLE (idle deadline), HEAD and BODY
 *     (deadlines counted from the request's first byte, so no trickle of
 *     bytes moves them), HANDLER (no deadline: the program's own work; the
 *     socket is out of epoll, nothing is read), WRITE (write deadline),
 *     LINGER (after a closing response: input drained a moment so that the
 *     client sees the answer instead of a reset). The loop scans the
 *     deadlines every OB_HTTPD_TICK_MS.
 *   - Parsing is libhttp-parser's. Received bytes are appended to one
 *     buffer per connection and never moved while a request is parsed, so
 *     the parser's callbacks only record offsets (a field split over two
 *     reads is two adjacent pieces); they are NUL-terminated in place once
 *     the parser is past them. Bytes after a complete request (pipelining)
 *     stay in the buffer for the next one.
 *   - Answers from other threads go through a mutex-protected list and the
 *     eventfd; only the loop thread touches a connection's socket.
 *   - HTTPS (cfg.tls, httpd_tls.c: OpenSSL): every socket read and write
 *     goes through conn_recv / conn_send, which hand it to OpenSSL when
 *     the connection has a TLS session. A TLS connection starts IDLE like
 *     any other (idle deadline, evictable at the cap: nothing received);
 *     its first byte moves it to HANDSHAKE, whose deadline is the header
 *     deadline counted from that byte, so a client that stalls the
 *     handshake is cut off exactly like one that stalls its headers. The
 *     handshake is driven one non-blocking step per socket event
 *     (WANT_READ / WANT_WRITE pick the epoll interest); when it is done
 *     the connection is IDLE again and HTTP begins. Bytes OpenSSL already
 *     holds are invisible to epoll, so they are read before the loop
 *     waits (after_write, conn_handshake). Over HTTPS the 503 at the cap
 *     cannot be written before a handshake: that connection is closed at
 *     once instead.
 *
 * Never: block the loop, log per byte or per scrape (one line per
 * connection cut off, cap and descriptor warnings at most every
 * OB_HTTPD_LOG_EVERY_MS), read a body before its Content-Length passed
 * max_body.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <http_parser.h>
#include <nng/nng.h>

#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/httpd.h"
#include "outbox/httpd_tls.h"
#include "outbox/log.h"
#include "outbox/url.h"

#define OB_HTTPD_TICK_MS 50          /* deadline scan period */
#define OB_HTTPD_LINGER_MS 1000      /* drain input after a closing answer */
#define OB_HTTPD_BACKLOG 511
#define OB_HTTPD_READ_CHUNK 16384
#define OB_HTTPD_EVENTS 64
#define OB_HTTPD_LOG_EVERY_MS 10000  /* cap / descriptor warnings */
#define OB_HTTPD_ACCEPT_PAUSE_MS 100 /* out of descriptors: retry accept after */
#define OB_HTTPD_DRAIN_MAX 65536     /* bytes drained before closing a refused socket */
#define OB_HTTPD_STOP_FLUSH_MS 1000  /* on stop: answers still being written get this long */

#define NS_PER_MS ((int64_t)1000000)

enum conn_state {
	CONN_IDLE = 0, /* no request in progress */
	CONN_HANDSHAKE, /* TLS handshake in progress (header deadline) */
	CONN_HEAD,     /* reading a request's line and headers */
	CONN_BODY,     /* reading its body */
	CONN_HANDLER,  /* handed to the handler; socket out of epoll */
	CONN_WRITE,    /* writing the answer */
	CONN_LINGER,   /* answered with close: draining input, then close */
	CONN_CLOSED,   /* socket closed; freed at the end of the loop pass */
};

/* Why a connection was closed by the server (metric label, log field). */
enum close_reason {
	CLOSE_IDLE = 0,
	CLOSE_EVICTED,
	CLOSE_HEADER_TIMEOUT,
	CLOSE_BODY_TIMEOUT,
	CLOSE_WRITE_TIMEOUT,
	CLOSE_TLS_HANDSHAKE, /* registered only for an HTTPS server */
	CLOSE_N,
};
static const char *const close_names[CLOSE_N] = { "idle", "evicted", "header_timeout",
	"body_timeout", "write_timeout", "tls_handshake" };

/* Why a request was refused by the server itself. */
enum refuse_reason {
	REFUSE_MALFORMED = 0,
	REFUSE_SMUGGLING,
	REFUSE_CHUNKED,
	REFUSE_NUL,
	REFUSE_HEADER_TOO_LARGE,
	REFUSE_BODY_TOO_LARGE,
	REFUSE_N,
};
static const char *const refuse_names[REFUSE_N] = { "malformed", "smuggling", "chunked",
	"nul", "header_too_large", "body_too_large" };

struct hdr_span {
	size_t noff, nlen, voff, vlen;
	bool has_value;
};

struct conn {
	struct ob_httpd *s;
	int fd;
	enum conn_state st;
	int64_t deadline_ns;   /* 0 = none */
	int64_t since_ns;      /* entered the current state */
	bool in_epoll;
	uint32_t ep_events;    /* the interest now registered */
	char peer[64];
	struct ob_httpd_tls_conn *tls; /* NULL: plain HTTP */
	bool tls_ready;        /* handshake done */
	struct conn *prev, *next; /* s->conns */
	struct conn *done_next;   /* s->done */

	/* input: buf[0..len) received, buf[start..parsed) fed to the parser
	 * for the current request */
	char *buf;
	size_t len, cap, start, parsed;
	http_parser p;
	int last_cb;           /* 0 none, 1 field, 2 value (split detection) */
	size_t url_off, url_len;
	bool has_url;
	struct hdr_span hdr[OB_HTTPD_HEADERS_MAX];
	int nhdr;
	size_t body_off, body_len;
	bool complete;
	bool keepalive;
	bool body_follows;     /* headers done, a body follows: conn_feed moves to BODY */
	bool expect_continue;  /* ... and answers 100 Continue first */
	int refuse_status;     /* set by a callback that stops the parser */
	enum refuse_reason refuse_reason;
	const char *refuse_why;
	char saved;            /* the byte after the body, overwritten by its NUL */
	struct ob_httpd_req req;

	/* output */
	char *wbuf;
	size_t wlen, woff;
	bool close_after, drop;
	bool tls_dead;         /* a TLS write is stuck half-done: close, write nothing */
};

struct ob_httpd {
	struct ob_httpd_config cfg;
	char name[32];
	int lfd, epfd, evfd;
	pthread_t thread;
	bool started;
	_Atomic bool stop;
	struct conn *conns;
	int nconns;
	bool listen_in_epoll;
	int64_t accept_resume_ns; /* 0 = accepting */
	int64_t last_cap_log_ns, last_fd_log_ns;
	uint64_t rejected_since_log;
	int port;
	pthread_mutex_t mtx; /* guards done */
	struct conn *done;
	struct conn *dead;   /* closed this loop pass (events may still name them) */
	http_parser_settings settings;
	/* metrics (NULL when none) */
	struct ob_httpd_tls *tls; /* borrowed (cfg.tls); NULL: plain HTTP */
	struct ob_metric *m_open, *m_accepted, *m_rejected;
	struct ob_metric *m_closed[CLOSE_N];
	struct ob_metric *m_refused[REFUSE_N];
};

static void conn_set_state(struct conn *c, enum conn_state st);
static void conn_close(struct conn *c);
static void conn_feed(struct conn *c);
static void conn_read(struct conn *c);

static const char *
reason_phrase(int status)
{
	switch (status) {
	case 100: return "Continue";
	case 200: return "OK";
	case 201: return "Created";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 411: return "Length Required";
	case 413: return "Content Too Large";
	case 422: return "Unprocessable Content";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	default: return status < 300 ? "OK" : status < 500 ? "Bad Request" : "Server Error";
	}
}

/* ---- epoll membership ------------------------------------------------ */

static void
ep_set(struct conn *c, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = c };
	if (events == 0) {
		if (c->in_epoll)
			epoll_ctl(c->s->epfd, EPOLL_CTL_DEL, c->fd, NULL);
		c->in_epoll = false;
		c->ep_events = 0;
		return;
	}
	if (c->in_epoll && c->ep_events == events)
		return;
	if (epoll_ctl(c->s->epfd, c->in_epoll ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &ev) == 0) {
		c->in_epoll = true;
		c->ep_events = events;
	}
}

/* The one place a connection changes state: deadline and epoll interest
 * follow from the state. HEAD and BODY count from the request's first
 * byte (req.t0_ns), never from the last byte received. */
static void
conn_set_state(struct conn *c, enum conn_state st)
{
	const struct ob_httpd_limits *l = &c->s->cfg.limits;
	int64_t now = ob_mono_ns();
	c->st = st;
	c->since_ns = now;
	switch (st) {
	case CONN_IDLE:
		c->deadline_ns = l->idle_timeout_ms > 0 ? now + l->idle_timeout_ms * NS_PER_MS : 0;
		ep_set(c, EPOLLIN | EPOLLRDHUP);
		break;
	case CONN_HANDSHAKE:
	case CONN_HEAD:
		c->deadline_ns = c->req.t0_ns + l->header_timeout_ms * NS_PER_MS;
		ep_set(c, EPOLLIN | EPOLLRDHUP);
		break;
	case CONN_BODY:
		c->deadline_ns = c->req.t0_ns + l->request_timeout_ms * NS_PER_MS;
		ep_set(c, EPOLLIN | EPOLLRDHUP);
		break;
	case CONN_HANDLER:
		c->deadline_ns = 0;
		ep_set(c, 0);
		break;
	case CONN_WRITE:
		c->deadline_ns = now + l->write_timeout_ms * NS_PER_MS;
		ep_set(c, EPOLLOUT);
		break;
	case CONN_LINGER:
		c->deadline_ns = now + OB_HTTPD_LINGER_MS * NS_PER_MS;
		ep_set(c, EPOLLIN | EPOLLRDHUP);
		break;
	case CONN_CLOSED:
		c->deadline_ns = 0;
		ep_set(c, 0);
		break;
	}
}

/* ---- parser callbacks (offsets only; see the top of the file) -------- */

static int
on_message_begin(http_parser *p)
{
	struct conn *c = p->data;
	c->last_cb = 0;
	c->has_url = false;
	c->url_off = c->url_len = 0;
	c->nhdr = 0;
	c->body_off = c->body_len = 0;
	c->complete = false;
	return 0;
}

static int refuse_in_cb(struct conn *c, int status, enum refuse_reason r, const char *why);

static int
on_url(http_parser *p, const char *at, size_t n)
{
	struct conn *c = p->data;
	if (!c->has_url) {
		c->url_off = (size_t)(at - c->buf);
		c->has_url = true;
	} else if ((size_t)(at - c->buf) != c->url_off + c->url_len) {
		return refuse_in_cb(c, 400, REFUSE_MALFORMED, "malformed request target");
	}
	c->url_len += n;
	return 0;
}

static int
refuse_in_cb(struct conn *c, int status, enum refuse_reason r, const char *why)
{
	c->refuse_status = status;
	c->refuse_reason = r;
	c->refuse_why = why;
	return -1;
}

static int
on_header_field(http_parser *p, const char *at, size_t n)
{
	struct conn *c = p->data;
	if (c->last_cb == 1) {
		struct hdr_span *h = &c->hdr[c->nhdr - 1];
		if ((size_t)(at - c->buf) != h->noff + h->nlen)
			return refuse_in_cb(c, 400, REFUSE_MALFORMED, "malformed header field");
		h->nlen += n;
		return 0;
	}
	if (c->nhdr == OB_HTTPD_HEADERS_MAX)
		return refuse_in_cb(c, 431, REFUSE_HEADER_TOO_LARGE, "too many header fields");
	c->hdr[c->nhdr++] = (struct hdr_span){ .noff = (size_t)(at - c->buf), .nlen = n };
	c->last_cb = 1;
	return 0;
}

static int
on_header_value(http_parser *p, const char *at, size_t n)
{
	struct conn *c = p->data;
	struct hdr_span *h = &c->hdr[c->nhdr - 1];
	if (c->last_cb == 2) {
		/* A piece that does not follow on is a folded line (obs-fold):
		 * refused, as RFC 9112 section 5.2 allows. */
		if ((size_t)(at - c->buf) != h->voff + h->vlen)
			return refuse_in_cb(c, 400, REFUSE_MALFORMED,
			    "folded header lines (obs-fold) are not accepted");
		h->vlen += n;
		return 0;
	}
	h->voff = (size_t)(at - c->buf);
	h->vlen = n;
	h->has_value = true;
	c->last_cb = 2;
	return 0;
}

static bool
name_is(const struct conn *c, const struct hdr_span *h, const char *name)
{
	size_t n = strlen(name);
	return h->nlen == n && strncasecmp(c->buf + h->noff, name, n) == 0;
}

/* Headers are complete: NUL-terminate what the parser is past, apply the
 * server's own refusals, switch to reading the body. */
static int
on_headers_complete(http_parser *p)
{
	struct conn *c = p->data;
	const struct ob_httpd_limits *l = &c->s->cfg.limits;
	struct ob_httpd_req *r = &c->req;
	bool te = false, cl = false, cont = false;

	if (!c->has_url)
		return refuse_in_cb(c, 400, REFUSE_MALFORMED, "no request target");
	c->buf[c->url_off + c->url_len] = '\0';
	r->nheaders = c->nhdr;
	for (int i = 0; i < c->nhdr; i++) {
		struct hdr_span *h = &c->hdr[i];
		c->buf[h->noff + h->nlen] = '\0';
		r->hname[i] = c->buf + h->noff;
		if (h->has_value) {
			c->buf[h->voff + h->vlen] = '\0';
			r->hvalue[i] = c->buf + h->voff;
		} else {
			r->hvalue[i] = "";
		}
		if (name_is(c, h, "Transfer-Encoding"))
			te = true;
		else if (name_is(c, h, "Content-Length"))
			cl = true;
		else if (name_is(c, h, "Expect") && strcasecmp(r->hvalue[i], "100-continue") == 0)
			cont = true;
	}
	if (te && cl)
		return refuse_in_cb(c, 400, REFUSE_SMUGGLING,
		    "Content-Length and Transfer-Encoding together are refused (request smuggling)");
	if (te)
		return refuse_in_cb(c, 411, REFUSE_CHUNKED,
		    "Transfer-Encoding is not accepted: send the body with a Content-Length");
	char *target = c->buf + c->url_off;
	for (char *q = strchr(target, '%'); q != NULL; q = strchr(q + 1, '%'))
		if (q[1] == '0' && q[2] == '0')
			return refuse_in_cb(c, 400, REFUSE_NUL,
			    "the request target contains %00 (an encoded NUL)");
	if (cl && p->content_length > (uint64_t)l->max_body)
		return refuse_in_cb(c, 413, REFUSE_BODY_TOO_LARGE,
		    "the body is larger than the server accepts");
	r->method = http_method_str((enum http_method)p->method);
	r->path = target;
	char *qm = strchr(target, '?');
	r->query = NULL;
	if (qm != NULL) {
		*qm = '\0';
		r->query = qm + 1;
	}
	c->keepalive = http_should_keep_alive(p) != 0;
	/* Only noted: conn_feed acts on it (100 Continue, BODY) as soon as the
	 * parser returns, so that no callback writes or changes the state. */
	if (cl && p->content_length > 0) {
		c->body_follows = true;
		c->expect_continue = cont;
	}
	return 0;
}

static int
on_body(http_parser *p, const char *at, size_t n)
{
	struct conn *c = p->data;
	if (c->body_len == 0)
		c->body_off = (size_t)(at - c->buf);
	c->body_len += n;
	return 0;
}

static int
on_message_complete(http_parser *p)
{
	struct conn *c = p->data;
	c->complete = true;
	http_parser_pause(p, 1); /* stop here: the rest is the next request */
	return 0;
}

/* ---- metrics and logs ------------------------------------------------ */

static void
count_close(struct conn *c, enum close_reason why)
{
	struct ob_httpd *s = c->s;
	ob_metric_inc(s->m_closed[why]);
	if (why == CLOSE_IDLE || why == CLOSE_EVICTED)
		ob_debug("http.conn.closed", "server=%s reason=%s peer=%s", s->name, close_names[why],
		    c->peer);
	else
		ob_info("http.conn.timeout", "server=%s reason=%s peer=%s bytes=%zu ms=%" PRId64,
		    s->name, close_names[why], c->peer, c->len - c->start,
		    (ob_mono_ns() - (why == CLOSE_WRITE_TIMEOUT ? c->since_ns : c->req.t0_ns)) /
		        NS_PER_MS);
}

/* ---- output ---------------------------------------------------------- */

/* Build the response bytes into c->wbuf. false: out of memory. */
static bool
build_response(struct conn *c, const struct ob_httpd_res *res, bool head)
{
	char top[512];
	const char *type = res->content_type;
	if (type == NULL && res->body_len > 0)
		type = "application/octet-stream";
	int n = snprintf(top, sizeof(top),
	    "HTTP/1.1 %d %s\r\n%s%s%sContent-Length: %zu\r\nConnection: %s\r\n", res->status,
	    res->reason ? res->reason : reason_phrase(res->status), type ? "Content-Type: " : "",
	    type ? type : "", type ? "\r\n" : "", res->body_len,
	    c->close_after ? "close" : "keep-alive");
	if (n < 0 || (size_t)n >= sizeof(top))
		return false;
	size_t extra = res->headers ? strlen(res->headers) : 0;
	size_t body = head ? 0 : res->body_len;
	size_t total = (size_t)n + extra + 2 + body;
	char *w = malloc(total);
	if (w == NULL)
		return false;
	memcpy(w, top, (size_t)n);
	if (extra > 0)
		memcpy(w + n, res->headers, extra);
	memcpy(w + n + extra, "\r\n", 2);
	if (body > 0)
		memcpy(w + n + extra + 2, res->body, body);
	free(c->wbuf);
	c->wbuf = w;
	c->wlen = total;
	c->woff = 0;
	return true;
}

/* The answer is out: close (lingering) or get ready for the next request. */
static void
after_write(struct conn *c)
{
	free(c->wbuf);
	c->wbuf = NULL;
	c->wlen = c->woff = 0;
	if (c->close_after) {
		if (c->tls != NULL)
			ob_httpd_tls_close_notify(c->tls);
		shutdown(c->fd, SHUT_WR);
		conn_set_state(c, CONN_LINGER);
		return;
	}
	/* Keep what followed the request (pipelined bytes) for the next one. */
	if (c->req.body_len > 0 && c->parsed < c->len)
		c->buf[c->body_off + c->body_len] = c->saved;
	memmove(c->buf, c->buf + c->parsed, c->len - c->parsed);
	c->len -= c->parsed;
	c->start = c->parsed = 0;
	http_parser_init(&c->p, HTTP_REQUEST);
	c->p.data = c;
	conn_set_state(c, CONN_IDLE);
	if (c->len > 0)
		conn_feed(c);
	/* What OpenSSL already holds epoll will never report. */
	if (c->tls != NULL && (c->st == CONN_IDLE || c->st == CONN_HEAD || c->st == CONN_BODY) &&
	    ob_httpd_tls_pending(c->tls))
		conn_read(c);
}

/* Send on c's socket, through its TLS session when it has one. Returns
 * the bytes taken (> 0), 0 when the socket is not ready (the epoll
 * interest now waits for what is needed), -1 when the connection is dead. */
static ssize_t
conn_send(struct conn *c, const char *buf, size_t len)
{
	if (c->tls == NULL) {
		for (;;) {
			ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL);
			if (n > 0)
				return n;
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
				ep_set(c, EPOLLOUT);
				return 0;
			}
			return -1;
		}
	}
	size_t put = 0;
	switch (ob_httpd_tls_write(c->tls, buf, len, &put)) {
	case OB_HTTPD_TLS_OK:
		return (ssize_t)put;
	case OB_HTTPD_TLS_WANT_WRITE:
		ep_set(c, EPOLLOUT);
		return 0;
	case OB_HTTPD_TLS_WANT_READ: /* a TLS message of the peer's must be read first */
		ep_set(c, EPOLLIN | EPOLLRDHUP);
		return 0;
	case OB_HTTPD_TLS_CLOSED:
	case OB_HTTPD_TLS_ERROR:
		break;
	}
	return -1;
}

/* Receive into buf, through the TLS session when there is one. Returns
 * the bytes (> 0), 0 when nothing is there now (the interest waits for
 * it), -1 when the peer closed or the connection failed. */
static ssize_t
conn_recv(struct conn *c, char *buf, size_t len)
{
	if (c->tls == NULL) {
		for (;;) {
			ssize_t n = recv(c->fd, buf, len, 0);
			if (n > 0)
				return n;
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				return 0;
			return -1;
		}
	}
	size_t got = 0;
	switch (ob_httpd_tls_read(c->tls, buf, len, &got)) {
	case OB_HTTPD_TLS_OK:
		ep_set(c, EPOLLIN | EPOLLRDHUP);
		return (ssize_t)got;
	case OB_HTTPD_TLS_WANT_READ:
		ep_set(c, EPOLLIN | EPOLLRDHUP);
		return 0;
	case OB_HTTPD_TLS_WANT_WRITE: /* OpenSSL must answer the peer first */
		ep_set(c, EPOLLIN | EPOLLOUT | EPOLLRDHUP);
		return 0;
	case OB_HTTPD_TLS_CLOSED:
	case OB_HTTPD_TLS_ERROR:
		break;
	}
	return -1;
}

static void
conn_write(struct conn *c)
{
	if (c->tls_dead) {
		conn_close(c);
		return;
	}
	while (c->woff < c->wlen) {
		ssize_t n = conn_send(c, c->wbuf + c->woff, c->wlen - c->woff);
		if (n > 0) {
			c->woff += (size_t)n;
			continue;
		}
		if (n == 0)
			return; /* the epoll interest brings us back */
		conn_close(c); /* the client went away */
		return;
	}
	after_write(c);
}

/* Start writing res on c (loop thread). */
static void
conn_answer(struct conn *c, const struct ob_httpd_res *res, bool head)
{
	if (!build_response(c, res, head)) {
		conn_close(c);
		return;
	}
	conn_set_state(c, CONN_WRITE);
	conn_write(c);
}

/* The server itself answers (a refusal or a timeout) and closes. */
static void
conn_refuse(struct conn *c, int status, const char *code, const char *why)
{
	char body[320];
	int n = snprintf(body, sizeof(body), "{\"error\":\"%s\",\"message\":\"%s\"}", code, why);
	struct ob_httpd_res res = { .status = status, .content_type = "application/json",
		.body = body, .body_len = n > 0 && (size_t)n < sizeof(body) ? (size_t)n : 0,
		.close = true };
	c->close_after = true;
	conn_answer(c, &res, false);
}

/* ---- input ----------------------------------------------------------- */

static void
refuse_parse(struct conn *c)
{
	struct ob_httpd *s = c->s;
	enum http_errno e = HTTP_PARSER_ERRNO(&c->p);
	if (c->refuse_status == 0) {
		c->refuse_reason = e == HPE_UNEXPECTED_CONTENT_LENGTH ? REFUSE_SMUGGLING
		    : e == HPE_HEADER_OVERFLOW ? REFUSE_HEADER_TOO_LARGE : REFUSE_MALFORMED;
		c->refuse_status = e == HPE_HEADER_OVERFLOW ? 431 : 400;
		c->refuse_why = e == HPE_UNEXPECTED_CONTENT_LENGTH
		    ? "Content-Length and Transfer-Encoding together, or Content-Length repeated,"
		      " are refused (request smuggling)"
		    : http_errno_description(e);
	}
	ob_metric_inc(s->m_refused[c->refuse_reason]);
	ob_info("http.request.refused", "server=%s reason=%s status=%d peer=%s", s->name,
	    refuse_names[c->refuse_reason], c->refuse_status, c->peer);
	conn_refuse(c, c->refuse_status,
	    c->refuse_status == 413 ? "body_too_large"
	    : c->refuse_status == 431 ? "headers_too_large"
	    : c->refuse_status == 411 ? "length_required" : "bad_request",
	    c->refuse_why);
}

/* A complete request: hand it to the handler. */
static void
dispatch(struct conn *c)
{
	struct ob_httpd_req *r = &c->req;
	if (c->body_len > 0) {
		r->body = c->buf + c->body_off;
		c->saved = c->buf[c->body_off + c->body_len];
		c->buf[c->body_off + c->body_len] = '\0'; /* buf has a spare byte */
	} else {
		r->body = "";
	}
	r->body_len = c->body_len;
	c->close_after = !c->keepalive;
	c->drop = false;
	conn_set_state(c, CONN_HANDLER);
	c->s->cfg.handler(c->s->cfg.arg, r);
}

/* "Expect: 100-continue" with a body: say so before the body is read.
 * Nothing else is queued on the socket yet: this fits. Over TLS a record
 * that did not go out whole would have to be retried before any other
 * write: then the answer is not written at all (tls_dead), rather than
 * written corrupt. */
static void
conn_send_continue(struct conn *c)
{
	static const char cont100[] = "HTTP/1.1 100 Continue\r\n\r\n";
	if (c->tls != NULL) {
		size_t put = 0;
		if (ob_httpd_tls_write(c->tls, cont100, sizeof(cont100) - 1, &put) !=
		        OB_HTTPD_TLS_OK || put != sizeof(cont100) - 1)
			c->tls_dead = true;
	} else {
		(void)send(c->fd, cont100, sizeof(cont100) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
}

/* Feed unparsed bytes to the parser; dispatch or refuse as it says. The
 * parser's callbacks only record: every state change and write that
 * follows from them is made here. */
static void
conn_feed(struct conn *c)
{
	const struct ob_httpd_limits *l = &c->s->cfg.limits;
	if (c->st == CONN_IDLE) {
		if (c->parsed == c->len)
			return;
		c->start = c->parsed;
		c->req.t0_ns = ob_mono_ns();
		c->refuse_status = 0;
		c->complete = false; /* message_begin may not come (bare CRLF) */
		conn_set_state(c, CONN_HEAD);
	}
	size_t n = http_parser_execute(&c->p, &c->s->settings, c->buf + c->parsed,
	    c->len - c->parsed);
	c->parsed += n;
	if (c->body_follows) {
		c->body_follows = false;
		if (c->expect_continue)
			conn_send_continue(c);
		conn_set_state(c, CONN_BODY);
	}
	enum http_errno e = HTTP_PARSER_ERRNO(&c->p);
	if (c->complete) {
		dispatch(c);
		return;
	}
	if (e != HPE_OK) {
		refuse_parse(c);
		return;
	}
	if (c->st == CONN_HEAD && c->parsed - c->start > l->max_header) {
		refuse_in_cb(c, 431, REFUSE_HEADER_TOO_LARGE, "the request headers are too large");
		refuse_parse(c);
	}
}

static bool
conn_reserve(struct conn *c, size_t want)
{
	if (c->cap - c->len >= want + 1)
		return true;
	size_t cap = c->cap ? c->cap : 4096;
	while (cap - c->len < want + 1)
		cap *= 2;
	char *b = realloc(c->buf, cap);
	if (b == NULL)
		return false;
	c->buf = b;
	c->cap = cap;
	return true;
}

/* One step of a TLS handshake. The connection's first byte starts it (the
 * header deadline counts from there); done: IDLE, and whatever came with
 * the last handshake bytes is read; failed: closed, counted and logged
 * once. A peer that closes without having sent a byte is an idle close. */
static void
conn_handshake(struct conn *c)
{
	struct ob_httpd *s = c->s;
	char why[160] = "the handshake failed", q[200];
	if (c->st == CONN_IDLE) {
		char b;
		if (recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
			conn_close(c);
			return;
		}
		c->req.t0_ns = ob_mono_ns();
		conn_set_state(c, CONN_HANDSHAKE);
	}
	switch (ob_httpd_tls_handshake(c->tls, why, sizeof(why))) {
	case OB_HTTPD_TLS_OK:
		c->tls_ready = true;
		ob_debug("http.tls.handshake", "server=%s peer=%s version=%s ms=%" PRId64, s->name,
		    c->peer, ob_httpd_tls_version(c->tls), (ob_mono_ns() - c->req.t0_ns) / NS_PER_MS);
		conn_set_state(c, CONN_IDLE);
		conn_read(c);
		return;
	case OB_HTTPD_TLS_WANT_READ:
		ep_set(c, EPOLLIN | EPOLLRDHUP);
		return;
	case OB_HTTPD_TLS_WANT_WRITE:
		ep_set(c, EPOLLOUT | EPOLLRDHUP);
		return;
	case OB_HTTPD_TLS_CLOSED:
	case OB_HTTPD_TLS_ERROR:
		break;
	}
	ob_metric_inc(s->m_closed[CLOSE_TLS_HANDSHAKE]);
	ob_info("http.tls.handshake_failed", "server=%s peer=%s err=%s ms=%" PRId64, s->name,
	    c->peer, ob_log_q(why, q, sizeof(q)), (ob_mono_ns() - c->req.t0_ns) / NS_PER_MS);
	conn_close(c);
}

static void
conn_read(struct conn *c)
{
	const struct ob_httpd_limits *l = &c->s->cfg.limits;
	/* A request never needs more than headers + body (+ one chunk of the
	 * next one, pipelined). */
	size_t limit = l->max_header + l->max_body + OB_HTTPD_READ_CHUNK;
	if (c->tls != NULL && !c->tls_ready) {
		conn_handshake(c);
		return;
	}
	for (;;) {
		size_t room = limit > c->len ? limit - c->len : 0;
		if (room > OB_HTTPD_READ_CHUNK)
			room = OB_HTTPD_READ_CHUNK;
		if (room == 0) {
			refuse_in_cb(c, 431, REFUSE_HEADER_TOO_LARGE, "the request is too large");
			refuse_parse(c);
			return;
		}
		if (!conn_reserve(c, room)) {
			conn_close(c);
			return;
		}
		ssize_t n = conn_recv(c, c->buf + c->len, room);
		if (n == 0)
			return;
		if (n < 0) {
			conn_close(c); /* closed or reset mid-request or while idle */
			return;
		}
		c->len += (size_t)n;
		conn_feed(c);
		if (c->st != CONN_IDLE && c->st != CONN_HEAD && c->st != CONN_BODY)
			return;
	}
}

static void
conn_linger_read(struct conn *c)
{
	char sink[4096];
	for (;;) {
		ssize_t n = recv(c->fd, sink, sizeof(sink), 0);
		if (n > 0)
			continue;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		conn_close(c);
		return;
	}
}

/* ---- connections ----------------------------------------------------- */

/* Close the socket now; the memory goes at the end of the loop pass
 * (free_dead), because an event of the current batch may still point at
 * c. Idempotent. */
static void
conn_close(struct conn *c)
{
	struct ob_httpd *s = c->s;
	if (c->st == CONN_CLOSED)
		return;
	conn_set_state(c, CONN_CLOSED);
	ob_httpd_tls_conn_free(c->tls);
	c->tls = NULL;
	close(c->fd);
	c->fd = -1;
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	c->prev = NULL;
	c->next = s->dead;
	s->dead = c;
	s->nconns--;
	ob_metric_gauge_add(s->m_open, -1);
}

static void
conn_free(struct conn *c)
{
	free(c->buf);
	free(c->wbuf);
	free(c);
}

static void
free_dead(struct ob_httpd *s)
{
	while (s->dead != NULL) {
		struct conn *c = s->dead;
		s->dead = c->next;
		conn_free(c);
	}
}

static void
peer_name(int fd, char *out, size_t outlen)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[48], port[8];
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0 ||
	    getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), port, sizeof(port),
	        NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
		snprintf(out, outlen, "unknown");
		return;
	}
	if (ss.ss_family == AF_INET6)
		snprintf(out, outlen, "[%s]:%s", host, port);
	else
		snprintf(out, outlen, "%s:%s", host, port);
}

/* At the cap: close the connection idle the longest. One whose bytes have
 * arrived but were not read yet is not idle: it is read first (and is in
 * HEAD after). false: none idle. */
static bool
evict_idle(struct ob_httpd *s)
{
	for (;;) {
		struct conn *oldest = NULL;
		char b;
		for (struct conn *c = s->conns; c != NULL; c = c->next)
			if (c->st == CONN_IDLE && c->len == 0 &&
			    (oldest == NULL || c->since_ns < oldest->since_ns))
				oldest = c;
		if (oldest == NULL)
			return false;
		if (recv(oldest->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 1) {
			conn_read(oldest);
			continue;
		}
		count_close(oldest, CLOSE_EVICTED);
		conn_close(oldest);
		return true;
	}
}

/* Over the cap with nothing to evict: 503 at once, best effort, closed. */
static void
reject(struct ob_httpd *s, int fd)
{
	static const char body[] =
	    "{\"error\":\"overloaded\",\"message\":\"too many open connections; retry later\"}";
	char msg[256], sink[4096];
	/* Counted and logged before the client can see the answer. */
	ob_metric_inc(s->m_rejected);
	s->rejected_since_log++;
	int64_t now = ob_mono_ns();
	if (s->last_cap_log_ns == 0 || now - s->last_cap_log_ns >= OB_HTTPD_LOG_EVERY_MS * NS_PER_MS) {
		ob_warn("http.conn.cap_reached", "server=%s max_connections=%d rejected=%" PRIu64,
		    s->name, s->cfg.limits.max_conns, s->rejected_since_log);
		s->last_cap_log_ns = now;
		s->rejected_since_log = 0;
	}
	int n = snprintf(msg, sizeof(msg), "HTTP/1.1 503 Service Unavailable\r\nContent-Type:"
	    " application/json\r\nContent-Length: %zu\r\nRetry-After: 1\r\nConnection: close\r\n"
	    "\r\n%s", sizeof(body) - 1, body);
	/* A new socket's send buffer is empty: this fits. Over HTTPS nothing
	 * can be said before a handshake: just closed. */
	if (s->tls == NULL)
		(void)send(fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
	shutdown(fd, SHUT_WR);
	/* Read what already arrived, so that close() does not reset the
	 * connection before the client saw the answer. */
	for (size_t got = 0; got < OB_HTTPD_DRAIN_MAX;) {
		ssize_t r = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
}

static void
listen_pause(struct ob_httpd *s, bool pause)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	if (pause && s->listen_in_epoll) {
		epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->lfd, NULL);
		s->listen_in_epoll = false;
	} else if (!pause && !s->listen_in_epoll) {
		if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &ev) == 0)
			s->listen_in_epoll = true;
	}
}

static void
do_accept(struct ob_httpd *s)
{
	for (;;) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				/* Out of descriptors: stop accepting a moment rather
				 * than spin on a listener that stays readable. */
				int64_t now = ob_mono_ns();
				listen_pause(s, true);
				s->accept_resume_ns = now + OB_HTTPD_ACCEPT_PAUSE_MS * NS_PER_MS;
				if (s->last_fd_log_ns == 0 ||
				    now - s->last_fd_log_ns >= OB_HTTPD_LOG_EVERY_MS * NS_PER_MS) {
					ob_warn("http.accept.failed", "server=%s err=%s open=%d", s->name,
					    strerror(errno), s->nconns);
					s->last_fd_log_ns = now;
				}
			}
			return;
		}
		if (s->cfg.limits.max_conns > 0 && s->nconns >= s->cfg.limits.max_conns &&
		    !evict_idle(s)) {
			reject(s, fd);
			continue;
		}
		struct conn *c = calloc(1, sizeof(*c));
		if (c == NULL) {
			close(fd);
			continue;
		}
		if (s->tls != NULL && (c->tls = ob_httpd_tls_conn_new(s->tls, fd)) == NULL) {
			free(c);
			close(fd);
			continue;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->s = s;
		c->fd = fd;
		peer_name(fd, c->peer, sizeof(c->peer));
		http_parser_init(&c->p, HTTP_REQUEST);
		c->p.data = c;
		c->next = s->conns;
		if (s->conns != NULL)
			s->conns->prev = c;
		s->conns = c;
		s->nconns++;
		ob_metric_inc(s->m_accepted);
		ob_metric_gauge_add(s->m_open, 1);
		conn_set_state(c, CONN_IDLE);
	}
}

/* Deadlines passed: cut the connection off (HEAD/BODY with a 408). */
static void
scan_deadlines(struct ob_httpd *s)
{
	int64_t now = ob_mono_ns();
	struct conn *next;
	for (struct conn *c = s->conns; c != NULL; c = next) {
		next = c->next;
		if (c->deadline_ns == 0 || now < c->deadline_ns)
			continue;
		switch (c->st) {
		case CONN_IDLE:
			count_close(c, CLOSE_IDLE);
			conn_close(c);
			break;
		case CONN_HANDSHAKE:
			/* no TLS session yet: nothing can be answered */
			count_close(c, CLOSE_HEADER_TIMEOUT);
			conn_close(c);
			break;
		case CONN_HEAD:
		case CONN_BODY: {
			bool head = c->st == CONN_HEAD;
			count_close(c, head ? CLOSE_HEADER_TIMEOUT : CLOSE_BODY_TIMEOUT);
			/* A 408 the client may never read; the write deadline bounds it. */
			conn_refuse(c, 408, "request_timeout", head
			    ? "the request headers did not arrive in time"
			    : "the request body did not arrive in time");
			break;
		}
		case CONN_WRITE:
			count_close(c, CLOSE_WRITE_TIMEOUT);
			conn_close(c);
			break;
		case CONN_LINGER:
			conn_close(c);
			break;
		case CONN_HANDLER:
		case CONN_CLOSED:
			break;
		}
	}
	if (s->accept_resume_ns != 0 && now >= s->accept_resume_ns) {
		s->accept_resume_ns = 0;
		listen_pause(s, false);
	}
}

/* Answers queued by ob_httpd_respond. */
static void
drain_done(struct ob_httpd *s)
{
	uint64_t v;
	while (read(s->evfd, &v, sizeof(v)) > 0)
		;
	pthread_mutex_lock(&s->mtx);
	struct conn *list = s->done;
	s->done = NULL;
	pthread_mutex_unlock(&s->mtx);
	/* Oldest first is not needed: each connection has one answer. */
	while (list != NULL) {
		struct conn *c = list;
		list = c->done_next;
		c->done_next = NULL;
		if (c->drop) {
			conn_close(c);
			continue;
		}
		conn_set_state(c, CONN_WRITE);
		conn_write(c);
	}
}

static void *
loop_main(void *arg)
{
	struct ob_httpd *s = arg;
	struct epoll_event evs[OB_HTTPD_EVENTS];
	int64_t last_scan = ob_mono_ns();
	int64_t flush_until = 0;
	for (;;) {
		if (atomic_load(&s->stop)) {
			/* Stopping: accept nothing more, finish writing the answers
			 * already given (the handler's threads were stopped first),
			 * for at most OB_HTTPD_STOP_FLUSH_MS. */
			int64_t now = ob_mono_ns();
			if (flush_until == 0) {
				flush_until = now + OB_HTTPD_STOP_FLUSH_MS * NS_PER_MS;
				listen_pause(s, true);
				s->accept_resume_ns = 0;
			}
			bool writing = false;
			for (struct conn *c = s->conns; c != NULL && !writing; c = c->next)
				writing = c->st == CONN_WRITE;
			pthread_mutex_lock(&s->mtx);
			writing = writing || s->done != NULL;
			pthread_mutex_unlock(&s->mtx);
			if (!writing || now >= flush_until)
				break;
		}
		int n = epoll_wait(s->epfd, evs, OB_HTTPD_EVENTS, OB_HTTPD_TICK_MS);
		bool accept_ready = false;
		/* Connections first, new ones last: bytes that arrived before a
		 * new connection are read before the cap picks one to evict. */
		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;
			if (p == NULL) {
				accept_ready = true;
			} else if (p == (void *)s) {
				drain_done(s);
			} else {
				struct conn *c = p;
				/* closed by an earlier event of this batch (eviction):
				 * CONN_CLOSED, still allocated until free_dead */
				switch (c->st) {
				case CONN_IDLE:
				case CONN_HEAD:
				case CONN_BODY:
					conn_read(c);
					break;
				case CONN_HANDSHAKE:
					conn_handshake(c);
					break;
				case CONN_WRITE:
					conn_write(c);
					break;
				case CONN_LINGER:
					conn_linger_read(c);
					break;
				case CONN_HANDLER:
				case CONN_CLOSED:
					break;
				}
			}
		}
		if (accept_ready)
			do_accept(s);
		int64_t now = ob_mono_ns();
		if (now - last_scan >= OB_HTTPD_TICK_MS * NS_PER_MS) {
			scan_deadlines(s);
			last_scan = now;
		}
		free_dead(s);
	}
	return NULL;
}

/* ---- the API --------------------------------------------------------- */

const char *
ob_httpd_req_header(const struct ob_httpd_req *req, const char *name)
{
	for (int i = 0; i < req->nheaders; i++)
		if (strcasecmp(req->hname[i], name) == 0)
			return req->hvalue[i];
	return NULL;
}

void
ob_httpd_respond(struct ob_httpd_req *req, const struct ob_httpd_res *res)
{
	struct conn *c = (struct conn *)((char *)req - offsetof(struct conn, req));
	struct ob_httpd *s = c->s;
	/* The connection is in CONN_HANDLER: only this caller touches it
	 * until it is on the done list (the mutex orders the writes). */
	c->drop = res->drop;
	c->close_after = c->close_after || res->close;
	if (!c->drop && !build_response(c, res, strcmp(req->method, "HEAD") == 0))
		c->drop = true; /* out of memory: close rather than hang */
	pthread_mutex_lock(&s->mtx);
	c->done_next = s->done;
	s->done = c;
	pthread_mutex_unlock(&s->mtx);
	uint64_t one = 1;
	ssize_t w = write(s->evfd, &one, sizeof(one));
	(void)w; /* a full counter (EAGAIN) still wakes the loop */
}

static int
bind_listen(struct ob_httpd *s, char *err, size_t errlen)
{
	nng_url *u = NULL;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
		.ai_flags = AI_PASSIVE | AI_NUMERICSERV }, *ai = NULL;
	int rv, rc = OB_ENET;
	const char *scheme = s->tls != NULL ? "https" : "http";
	if ((rv = ob_url_parse(&u, s->cfg.url)) != 0 || strcmp(u->u_scheme, scheme) != 0 ||
	    u->u_port[0] == '\0') {
		snprintf(err, errlen, "%s: not an %s://HOST:PORT URL%s", s->cfg.url, scheme,
		    s->tls != NULL ? " (a TLS configuration was given)" : "");
		nng_url_free(u);
		return OB_EINVAL;
	}
	const char *host = u->u_hostname[0] != '\0' ? u->u_hostname : NULL;
	if ((rv = getaddrinfo(host, u->u_port, &hints, &ai)) != 0) {
		snprintf(err, errlen, "%s: %s", s->cfg.url, gai_strerror(rv));
		nng_url_free(u);
		return OB_EINVAL;
	}
	int saved = 0;
	for (struct addrinfo *a = ai; a != NULL; a = a->ai_next) {
		int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    a->ai_protocol);
		if (fd < 0) {
			saved = errno;
			continue;
		}
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, OB_HTTPD_BACKLOG) != 0) {
			saved = errno;
			close(fd);
			continue;
		}
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
			s->port = ntohs(ss.ss_family == AF_INET6
			        ? ((struct sockaddr_in6 *)&ss)->sin6_port
			        : ((struct sockaddr_in *)&ss)->sin_port);
		s->lfd = fd;
		rc = OB_OK;
		break;
	}
	if (rc != OB_OK)
		snprintf(err, errlen, "%s: cannot listen: %s", s->cfg.url, strerror(saved));
	freeaddrinfo(ai);
	nng_url_free(u);
	return rc;
}

static void
register_metrics(struct ob_httpd *s)
{
	struct ob_metrics *m = s->cfg.metrics;
	const char *lab[] = { "server", s->name, NULL };
	if (m == NULL)
		return;
	s->m_open = ob_metrics_gauge(m, "outbox_http_connections_open",
	    "HTTP connections open now", lab);
	s->m_accepted = ob_metrics_counter(m, "outbox_http_connections_accepted_total",
	    "HTTP connections accepted", lab);
	s->m_rejected = ob_metrics_counter(m, "outbox_http_connections_rejected_total",
	    "HTTP connections answered 503 and closed at once: the connection cap was reached"
	    " and none was idle", lab);
	for (int i = 0; i < CLOSE_N; i++) {
		const char *l[] = { "server", s->name, "reason", close_names[i], NULL };
		if (i == CLOSE_TLS_HANDSHAKE && s->tls == NULL)
			continue; /* plain HTTP: no such series */
		s->m_closed[i] = ob_metrics_counter(m, "outbox_http_connections_closed_total",
		    "HTTP connections closed by the server: idle timeout, evicted at the cap,"
		    " header/body deadline (408; a TLS handshake not done by the header deadline"
		    " counts as header_timeout), write deadline, or a failed TLS handshake", l);
	}
	for (int i = 0; i < REFUSE_N; i++) {
		const char *l[] = { "server", s->name, "reason", refuse_names[i], NULL };
		s->m_refused[i] = ob_metrics_counter(m, "outbox_http_requests_refused_total",
		    "HTTP requests refused by the server before any handler (4xx, connection"
		    " closed)", l);
	}
}

int
ob_httpd_start(const struct ob_httpd_config *cfg, struct ob_httpd **out, char *err,
    size_t errlen)
{
	const struct ob_httpd_limits *l = &cfg->limits;
	if (l->max_conns < 0 || l->idle_timeout_ms < 0 || l->header_timeout_ms <= 0 ||
	    l->request_timeout_ms < l->header_timeout_ms || l->write_timeout_ms <= 0 ||
	    l->max_header < 256 || cfg->handler == NULL) {
		snprintf(err, errlen, "http server %s: invalid limits", cfg->url);
		return OB_EINVAL;
	}
	struct ob_httpd *s = calloc(1, sizeof(*s));
	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		return OB_ENOMEM;
	}
	s->cfg = *cfg;
	s->tls = cfg->tls;
	snprintf(s->name, sizeof(s->name), "%s", cfg->name ? cfg->name : "http");
	s->lfd = s->epfd = s->evfd = -1;
	pthread_mutex_init(&s->mtx, NULL);
	http_parser_settings_init(&s->settings);
	s->settings.on_message_begin = on_message_begin;
	s->settings.on_url = on_url;
	s->settings.on_header_field = on_header_field;
	s->settings.on_header_value = on_header_value;
	s->settings.on_headers_complete = on_headers_complete;
	s->settings.on_body = on_body;
	s->settings.on_message_complete = on_message_complete;
	int rc = bind_listen(s, err, errlen);
	if (rc != OB_OK)
		goto fail;
	rc = OB_ENET;
	struct epoll_event lev = { .events = EPOLLIN, .data.ptr = NULL };
	struct epoll_event wev = { .events = EPOLLIN, .data.ptr = s };
	if ((s->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
	    (s->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
	    epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &lev) != 0 ||
	    epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->evfd, &wev) != 0) {
		snprintf(err, errlen, "http server %s: %s", cfg->url, strerror(errno));
		goto fail;
	}
	s->listen_in_epoll = true;
	register_metrics(s);
	if (pthread_create(&s->thread, NULL, loop_main, s) != 0) {
		snprintf(err, errlen, "http server %s: cannot start its thread", cfg->url);
		goto fail;
	}
	s->started = true;
	*out = s;
	return OB_OK;
fail:
	ob_httpd_stop(s);
	return rc;
}

int
ob_httpd_port(const struct ob_httpd *s)
{
	return s != NULL ? s->port : -1;
}

void
ob_httpd_stop(struct ob_httpd *s)
{
	if (s == NULL)
		return;
	if (s->started) {
		atomic_store(&s->stop, true);
		uint64_t one = 1;
		ssize_t w = write(s->evfd, &one, sizeof(one));
		(void)w;
		pthread_join(s->thread, NULL);
	}
	/* every connection, answered-but-unwritten ones included, is on conns */
	while (s->conns != NULL)
		conn_close(s->conns);
	free_dead(s);
	if (s->lfd >= 0)
		close(s->lfd);
	if (s->epfd >= 0)
		close(s->epfd);
	if (s->evfd >= 0)
		close(s->evfd);
	pthread_mutex_destroy(&s->mtx);
	free(s);
}

int
ob_httpd_reserve_fds(int64_t n, char *err, size_t errlen)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
		snprintf(err, errlen, "getrlimit(RLIMIT_NOFILE): %s", strerror(errno));
		return OB_EINVAL;
	}
	if (rl.rlim_cur != RLIM_INFINITY && (int64_t)rl.rlim_cur >= n)
		return OB_OK;
	if (rl.rlim_cur == RLIM_INFINITY)
		return OB_OK;
	if (rl.rlim_max != RLIM_INFINITY && (int64_t)rl.rlim_max < n) {
		snprintf(err, errlen, "needs %" PRId64 " open files but the hard RLIMIT_NOFILE is %llu"
		    " (raise it, e.g. LimitNOFILE= or ulimit -Hn, or lower --max-connections)", n,
		    (unsigned long long)rl.rlim_max);
		return OB_EINVAL;
	}
	rl.rlim_cur = (rlim_t)n;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
		snprintf(err, errlen, "setrlimit(RLIMIT_NOFILE, %" PRId64 "): %s", n, strerror(errno));
		return OB_EINVAL;
	}
	return OB_OK;
}
