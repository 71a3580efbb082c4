/*
 * httpd_parse.c - reading a request: libhttp-parser's callbacks, and the
 * refusals the server makes before any handler sees a request.
 *
 * Received bytes stay where they are in the connection's buffer while a
 * request is parsed, so the callbacks only record offsets (a field split
 * over two reads is two adjacent pieces); they are NUL-terminated in
 * place once the parser is past them, and the request handed to the
 * handler (struct ob_httpd_req) points into that buffer.
 *
 * Refused here: Content-Length with Transfer-Encoding (smuggling), any
 * Transfer-Encoding (411), a target with %00, a Content-Length past
 * max_body (before a byte of the body is read), folded header lines, more
 * than OB_HTTPD_HEADERS_MAX fields.
 *
 * Never: write to the socket or change a connection's state. A callback
 * only notes what it found (a refusal, a body to come); conn_feed
 * (httpd_conn.c) acts on it when the parser returns.
 */
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include <http_parser.h>

#include "httpd_int.h"

int
httpd_parse_refuse(struct conn *c, int status, enum refuse_reason r, const char *why)
{
	c->refuse_status = status;
	c->refuse_reason = r;
	c->refuse_why = why;
	return -1;
}

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

static int
on_url(http_parser *p, const char *at, size_t n)
{
	struct conn *c = p->data;
	if (!c->has_url) {
		c->url_off = (size_t)(at - c->buf);
		c->has_url = true;
	} else if ((size_t)(at - c->buf) != c->url_off + c->url_len) {
		return httpd_parse_refuse(c, 400, REFUSE_MALFORMED, "malformed request target");
	}
	c->url_len += n;
	return 0;
}

static int
on_header_field(http_parser *p, const char *at, size_t n)
{
	struct conn *c = p->data;
	if (c->last_cb == 1) {
		struct hdr_span *h = &c->hdr[c->nhdr - 1];
		if ((size_t)(at - c->buf) != h->noff + h->nlen)
			return httpd_parse_refuse(c, 400, REFUSE_MALFORMED, "malformed header field");
		h->nlen += n;
		return 0;
	}
	if (c->nhdr == OB_HTTPD_HEADERS_MAX)
		return httpd_parse_refuse(c, 431, REFUSE_HEADER_TOO_LARGE, "too many header fields");
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
			return httpd_parse_refuse(c, 400, REFUSE_MALFORMED,
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
 * server's own refusals, note whether a body follows. */
static int
on_headers_complete(http_parser *p)
{
	struct conn *c = p->data;
	const struct ob_httpd_limits *l = &c->s->cfg.limits;
	struct ob_httpd_req *r = &c->req;
	bool te = false, cl = false, cont = false;

	if (!c->has_url)
		return httpd_parse_refuse(c, 400, REFUSE_MALFORMED, "no request target");
	/* --max-header, measured here too: conn_feed's check runs only while
	 * the headers are still incomplete after a read, so a request that
	 * arrived in one read would pass it whatever its size */
	size_t head_end = c->url_off + c->url_len;
	for (int i = 0; i < c->nhdr; i++) {
		const struct hdr_span *h = &c->hdr[i];
		size_t end = h->has_value ? h->voff + h->vlen : h->noff + h->nlen;
		if (end > head_end)
			head_end = end;
	}
	if (head_end - c->start > l->max_header)
		return httpd_parse_refuse(c, 431, REFUSE_HEADER_TOO_LARGE,
		    "the request headers are too large");
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
		return httpd_parse_refuse(c, 400, REFUSE_SMUGGLING,
		    "Content-Length and Transfer-Encoding together are refused (request smuggling)");
	if (te)
		return httpd_parse_refuse(c, 411, REFUSE_CHUNKED,
		    "Transfer-Encoding is not accepted: send the body with a Content-Length");
	char *target = c->buf + c->url_off;
	for (char *q = strchr(target, '%'); q != NULL; q = strchr(q + 1, '%'))
		if (q[1] == '0' && q[2] == '0')
			return httpd_parse_refuse(c, 400, REFUSE_NUL,
			    "the request target contains %00 (an encoded NUL)");
	if (cl && p->content_length > (uint64_t)l->max_body)
		return httpd_parse_refuse(c, 413, REFUSE_BODY_TOO_LARGE,
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

void
httpd_parse_settings_init(http_parser_settings *settings)
{
	http_parser_settings_init(settings);
	settings->on_message_begin = on_message_begin;
	settings->on_url = on_url;
	settings->on_header_field = on_header_field;
	settings->on_header_value = on_header_value;
	settings->on_headers_complete = on_headers_complete;
	settings->on_body = on_body;
	settings->on_message_complete = on_message_complete;
}
