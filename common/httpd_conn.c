/*
 * httpd_conn.c - the connection state machine: what happens to a
 * connection from accept to close, on the loop thread only.
 *
 * Each connection has one state (enum conn_state, httpd_int.h) and one
 * deadline, both set only by conn_set_state: IDLE (idle deadline), HEAD
 * and BODY (deadlines counted from the request's first byte, so no
 * trickle of bytes moves them), HANDLER (no deadline: the program's own
 * work; the socket is out of epoll, nothing is read), WRITE (write
 * deadline), LINGER (after a closing response: input drained a moment so
 * that the client sees the answer instead of a reset), CLOSED (freed at
 * the end of the loop pass). Every transition is made in this file; the
 * other pieces bring events in (httpd_conn_ready, _read, _expired,
 * _answered, _close) and never set a state themselves.
 *
 * TLS: a TLS connection starts IDLE like any other (idle deadline,
 * evictable at the cap: nothing received); its first byte moves it to
 * HANDSHAKE, whose deadline is the header deadline counted from that
 * byte, so a client that stalls the handshake is cut off exactly like one
 * that stalls its headers. The handshake is driven one non-blocking step
 * per socket event (WANT_READ / WANT_WRITE pick the epoll interest); when
 * it is done the connection is IDLE again and HTTP begins. Bytes OpenSSL
 * already holds are invisible to epoll, so they are read before the loop
 * waits (after_write, conn_handshake).
 *
 * Pipelining: bytes after a complete request stay in the buffer for the
 * next one (after_write).
 *
 * Never: block, log per byte (one line per connection cut off or
 * refused), read a body before its Content-Length passed max_body
 * (httpd_parse.c refuses it first).
 */
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "httpd_int.h"
#include "outbox/clock.h"
#include "outbox/log.h"

static void conn_feed(struct conn *c);

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
		httpd_ep_set(c, EPOLLIN | EPOLLRDHUP);
		break;
	case CONN_HANDSHAKE:
	case CONN_HEAD:
		c->deadline_ns = c->req.t0_ns + l->header_timeout_ms * NS_PER_MS;
		httpd_ep_set(c, EPOLLIN | EPOLLRDHUP);
		break;
	case CONN_BODY:
		c->deadline_ns = c->req.t0_ns + l->request_timeout_ms * NS_PER_MS;
		httpd_ep_set(c, EPOLLIN | EPOLLRDHUP);
		break;
	case CONN_HANDLER:
	case CONN_CLOSED:
		/* a handler has it, or it is done: no deadline, no events */
		c->deadline_ns = 0;
		httpd_ep_set(c, 0);
		break;
	case CONN_WRITE:
		c->deadline_ns = now + l->write_timeout_ms * NS_PER_MS;
		httpd_ep_set(c, EPOLLOUT);
		break;
	case CONN_LINGER:
		c->deadline_ns = now + OB_HTTPD_LINGER_MS * NS_PER_MS;
		httpd_ep_set(c, EPOLLIN | EPOLLRDHUP);
		break;
	}
}

/* ---- output ---------------------------------------------------------- */

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
		httpd_conn_read(c);
}

static void
conn_write(struct conn *c)
{
	if (c->tls_dead) {
		httpd_conn_close(c);
		return;
	}
	while (c->woff < c->wlen) {
		ssize_t n = httpd_conn_send(c, c->wbuf + c->woff, c->wlen - c->woff);
		if (n > 0) {
			c->woff += (size_t)n;
			continue;
		}
		if (n == 0)
			return; /* the epoll interest brings us back */
		httpd_conn_close(c); /* the client went away */
		return;
	}
	after_write(c);
}

/* Start writing res on c. */
static void
conn_answer(struct conn *c, const struct ob_httpd_res *res, bool head)
{
	if (!httpd_response_build(c, res, head)) {
		httpd_conn_close(c);
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

void
httpd_conn_answered(struct conn *c)
{
	if (c->drop) {
		httpd_conn_close(c);
		return;
	}
	conn_set_state(c, CONN_WRITE);
	conn_write(c);
}

/* ---- input ----------------------------------------------------------- */

/* The parser stopped on an error, or a callback refused the request:
 * counted, logged once, answered, closed. */
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
	    httpd_refuse_names[c->refuse_reason], c->refuse_status, c->peer);
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
			httpd_send_continue(c);
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
		httpd_parse_refuse(c, 431, REFUSE_HEADER_TOO_LARGE, "the request headers are too large");
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
			httpd_conn_close(c);
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
		httpd_conn_read(c);
		return;
	case OB_HTTPD_TLS_WANT_READ:
		httpd_ep_set(c, EPOLLIN | EPOLLRDHUP);
		return;
	case OB_HTTPD_TLS_WANT_WRITE:
		httpd_ep_set(c, EPOLLOUT | EPOLLRDHUP);
		return;
	case OB_HTTPD_TLS_CLOSED:
	case OB_HTTPD_TLS_ERROR:
		break;
	}
	ob_metric_inc(s->m_closed[CLOSE_TLS_HANDSHAKE]);
	ob_info("http.tls.handshake_failed", "server=%s peer=%s err=%s ms=%" PRId64, s->name,
	    c->peer, ob_log_q(why, q, sizeof(q)), (ob_mono_ns() - c->req.t0_ns) / NS_PER_MS);
	httpd_conn_close(c);
}

void
httpd_conn_read(struct conn *c)
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
			httpd_parse_refuse(c, 431, REFUSE_HEADER_TOO_LARGE, "the request is too large");
			refuse_parse(c);
			return;
		}
		if (!conn_reserve(c, room)) {
			httpd_conn_close(c);
			return;
		}
		ssize_t n = httpd_conn_recv(c, c->buf + c->len, room);
		if (n == 0)
			return;
		if (n < 0) {
			httpd_conn_close(c); /* closed or reset mid-request or while idle */
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
		httpd_conn_close(c);
		return;
	}
}

/* ---- events from the loop -------------------------------------------- */

void
httpd_conn_ready(struct conn *c)
{
	/* closed by an earlier event of this batch (eviction): CONN_CLOSED,
	 * still allocated until httpd_free_dead */
	switch (c->st) {
	case CONN_IDLE:
	case CONN_HEAD:
	case CONN_BODY:
		httpd_conn_read(c);
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

void
httpd_conn_expired(struct conn *c)
{
	switch (c->st) {
	case CONN_IDLE:
		httpd_count_close(c, CLOSE_IDLE);
		httpd_conn_close(c);
		break;
	case CONN_HANDSHAKE:
		/* no TLS session yet: nothing can be answered */
		httpd_count_close(c, CLOSE_HEADER_TIMEOUT);
		httpd_conn_close(c);
		break;
	case CONN_HEAD:
	case CONN_BODY: {
		bool head = c->st == CONN_HEAD;
		httpd_count_close(c, head ? CLOSE_HEADER_TIMEOUT : CLOSE_BODY_TIMEOUT);
		/* A 408 the client may never read; the write deadline bounds it. */
		conn_refuse(c, 408, "request_timeout", head
		    ? "the request headers did not arrive in time"
		    : "the request body did not arrive in time");
		break;
	}
	case CONN_WRITE:
		httpd_count_close(c, CLOSE_WRITE_TIMEOUT);
		httpd_conn_close(c);
		break;
	case CONN_LINGER:
		httpd_conn_close(c);
		break;
	case CONN_HANDLER:
	case CONN_CLOSED:
		break;
	}
}

/* ---- open and close -------------------------------------------------- */

void
httpd_conn_open(struct ob_httpd *s, int fd)
{
	struct conn *c = calloc(1, sizeof(*c));
	if (c == NULL) {
		close(fd);
		return;
	}
	if (s->tls != NULL && (c->tls = ob_httpd_tls_conn_new(s->tls, fd)) == NULL) {
		free(c);
		close(fd);
		return;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->s = s;
	c->fd = fd;
	httpd_peer_name(fd, c->peer, sizeof(c->peer));
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

/* The memory goes at the end of the loop pass (httpd_free_dead), because
 * an event of the current batch may still point at c. */
void
httpd_conn_close(struct conn *c)
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

void
httpd_free_dead(struct ob_httpd *s)
{
	while (s->dead != NULL) {
		struct conn *c = s->dead;
		s->dead = c->next;
		conn_free(c);
	}
}
