/*
 * http_endpoint.c - /metrics, /healthz and /readyz on the program's own
 * small HTTP server (outbox/httpd.h).
 *
 * Owns one ob_httpd and its one handler, which runs on the server's
 * thread, renders into a private buffer and answers at once; it reads
 * atomics only and takes no lock the program's delivery path could be
 * holding. The server's limits are the OB_HTTP_ENDPOINT_* constants: at
 * most OB_HTTP_ENDPOINT_MAX_CONNS connections, idle ones closed, every
 * request within its deadline, so that a flood on the metrics port cannot
 * take the descriptors the program's real work needs. Unknown paths get
 * 404, other methods 405. An extra route (ob_http_endpoint_start_with: the
 * demo admin endpoint of --demo-admin, outbox/demo_admin.h) is tried first.
 *
 * Never: parse HTTP by hand, block in a handler, or log from a handler
 * (a scrape every few seconds would flood the log).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>

#include "outbox/buf.h"
#include "outbox/err.h"
#include "outbox/http_endpoint.h"
#include "outbox/httpd.h"
#include "outbox/url.h"

#define CONTENT_TYPE_METRICS "text/plain; version=0.0.4; charset=utf-8"
#define CONTENT_TYPE_TEXT "text/plain; charset=utf-8"

#define NO_STORE "Cache-Control: no-store\r\n"

struct ob_http_endpoint {
	struct ob_httpd *srv;
	struct ob_metrics *m;
	ob_ready_fn ready;
	void *arg;
	ob_endpoint_route_fn route; /* NULL, or the extra route (demo admin) */
	void *route_arg;
};

int
ob_http_endpoint_url(const char *addr, char *out, size_t outlen, char *err,
    size_t errlen)
{
	char url[OB_HTTP_ENDPOINT_URL_MAX];
	nng_url *u = NULL;
	const char *rest = addr;
	char *end;
	long port;
	int rc = OB_EINVAL;

	if (addr == NULL || *addr == '\0') {
		snprintf(err, errlen, "metrics address is empty (want HOST:PORT)");
		return OB_EINVAL;
	}
	if (strncmp(addr, "http://", 7) == 0)
		rest = addr + 7;
	else if (strstr(addr, "://") != NULL) {
		snprintf(err, errlen, "metrics address '%s': only http:// is supported", addr);
		return OB_EINVAL;
	}
	/* ":9464" listens on every interface */
	if (snprintf(url, sizeof url, "http://%s%s", rest[0] == ':' ? "0.0.0.0" : "",
	    rest) >= (int)sizeof url) {
		snprintf(err, errlen, "metrics address is too long");
		return OB_EINVAL;
	}
	if (ob_url_parse(&u, url) != 0) {
		snprintf(err, errlen, "metrics address '%s' is not HOST:PORT", addr);
		return OB_EINVAL;
	}
	if (u->u_hostname[0] == '\0' || strchr(u->u_host, ':') == NULL ||
	    (u->u_host[0] == '[' && strstr(u->u_host, "]:") == NULL)) {
		snprintf(err, errlen, "metrics address '%s' needs HOST:PORT", addr);
		goto out;
	}
	port = strtol(u->u_port, &end, 10);
	if (u->u_port[0] == '\0' || *end != '\0' || port < 0 || port > 65535) {
		snprintf(err, errlen, "metrics address '%s': port must be 0..65535", addr);
		goto out;
	}
	if ((u->u_path[0] != '\0' && strcmp(u->u_path, "/") != 0) || u->u_query != NULL ||
	    u->u_fragment != NULL || u->u_userinfo != NULL) {
		snprintf(err, errlen, "metrics address '%s' must have no path, query or user", addr);
		goto out;
	}
	if (snprintf(out, outlen, "http://%s", u->u_host) >= (int)outlen) {
		snprintf(err, errlen, "metrics address is too long");
		goto out;
	}
	rc = OB_OK;
out:
	nng_url_free(u);
	return rc;
}

static void
reply(struct ob_httpd_req *req, int status, const char *type, const void *body, size_t len,
    const char *headers)
{
	struct ob_httpd_res res = { .status = status, .content_type = type, .body = body,
		.body_len = len, .headers = headers };
	ob_httpd_respond(req, &res);
}

/* The server's thread: render and answer at once (atomics only). */
static void
on_request(void *arg, struct ob_httpd_req *req)
{
	struct ob_http_endpoint *e = arg;
	bool get = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;
	bool metrics = strcmp(req->path, "/metrics") == 0;
	bool healthz = strcmp(req->path, "/healthz") == 0;
	bool readyz = strcmp(req->path, "/readyz") == 0;

	if (e->route != NULL && e->route(e->route_arg, req))
		return;
	if (!metrics && !healthz && !readyz) {
		reply(req, 404, CONTENT_TYPE_TEXT, "not found\n", 10, NO_STORE);
	} else if (!get) {
		reply(req, 405, CONTENT_TYPE_TEXT, "method not allowed\n", 19,
		    NO_STORE "Allow: GET, HEAD\r\n");
	} else if (metrics) {
		struct ob_buf b = OB_BUF_INIT;
		if (ob_metrics_render(e->m, &b) != OB_OK) {
			ob_buf_fini(&b);
			reply(req, 500, CONTENT_TYPE_TEXT, "out of memory\n", 14, NO_STORE);
			return;
		}
		reply(req, 200, CONTENT_TYPE_METRICS, b.data ? b.data : "", b.len, NO_STORE);
		ob_buf_fini(&b);
	} else if (healthz) {
		reply(req, 200, CONTENT_TYPE_TEXT, "ok\n", 3, NO_STORE);
	} else if (e->ready ? e->ready(e->arg) : ob_metrics_ready(e->m)) {
		reply(req, 200, CONTENT_TYPE_TEXT, "ready\n", 6, NO_STORE);
	} else {
		reply(req, 503, CONTENT_TYPE_TEXT, "not ready\n", 10, NO_STORE);
	}
}

int
ob_http_endpoint_start(const char *addr, struct ob_metrics *m, ob_ready_fn ready,
    void *arg, struct ob_http_endpoint **out, char *err, size_t errlen)
{
	return ob_http_endpoint_start_with(addr, m, ready, arg, NULL, NULL, out, err, errlen);
}

int
ob_http_endpoint_start_with(const char *addr, struct ob_metrics *m, ob_ready_fn ready,
    void *arg, ob_endpoint_route_fn route, void *route_arg, struct ob_http_endpoint **out,
    char *err, size_t errlen)
{
	char url[OB_HTTP_ENDPOINT_URL_MAX];
	struct ob_http_endpoint *e;
	int rc;

	if (m == NULL) {
		snprintf(err, errlen, "metrics endpoint needs a registry");
		return OB_EINVAL;
	}
	if ((rc = ob_http_endpoint_url(addr, url, sizeof url, err, errlen)) != OB_OK)
		return rc;
	if ((e = malloc(sizeof *e)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return OB_ENOMEM;
	}
	*e = (struct ob_http_endpoint){
		.m = m, .ready = ready, .arg = arg, .route = route, .route_arg = route_arg,
	};
	struct ob_httpd_config cfg = {
		.url = url,
		.name = "metrics",
		.limits = {
			.max_conns = OB_HTTP_ENDPOINT_MAX_CONNS,
			.idle_timeout_ms = OB_HTTP_ENDPOINT_IDLE_MS,
			.header_timeout_ms = OB_HTTP_ENDPOINT_REQUEST_MS,
			.request_timeout_ms = OB_HTTP_ENDPOINT_REQUEST_MS,
			.write_timeout_ms = OB_HTTP_ENDPOINT_WRITE_MS,
			.max_header = OB_HTTP_ENDPOINT_MAX_HEADER,
			.max_body = OB_HTTP_ENDPOINT_MAX_BODY,
		},
		.handler = on_request,
		.arg = e,
		.metrics = m,
	};
	char why[400];
	if ((rc = ob_httpd_start(&cfg, &e->srv, why, sizeof why)) != OB_OK) {
		snprintf(err, errlen, "metrics endpoint %s", why);
		free(e);
		return rc;
	}
	*out = e;
	return OB_OK;
}

int
ob_http_endpoint_port(const struct ob_http_endpoint *e)
{
	return e ? ob_httpd_port(e->srv) : -1;
}

void
ob_http_endpoint_stop(struct ob_http_endpoint *e)
{
	if (e == NULL)
		return;
	ob_httpd_stop(e->srv);
	free(e);
}
