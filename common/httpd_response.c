/*
 * httpd_response.c - the bytes of an answer: status line, Content-Type,
 * Content-Length, Connection, the caller's extra header lines, the body
 * (none for HEAD), built into the connection's write buffer in one piece.
 *
 * Runs on the loop thread, or on the thread that calls ob_httpd_respond
 * (the connection is then in CONN_HANDLER, owned by that caller). Never
 * writes to a socket: httpd_conn.c does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httpd_int.h"

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

bool
httpd_response_build(struct conn *c, const struct ob_httpd_res *res, bool head)
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
