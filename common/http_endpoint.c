/*
 * http_endpoint.c - /metrics, /healthz and /readyz on nng's HTTP server.
 *
 * Owns one nng HTTP server (held by URL) and its three GET handlers. The
 * handlers run on nng's threads, render into a private buffer and hand nng
 * a copy; they read atomics only and take no lock the program's delivery
 * path could be holding. Unknown paths (404) and wrong methods (405) are
 * answered by nng itself.
 *
 * Never: parse HTTP by hand, block in a handler, or log from a handler
 * (a scrape every few seconds would flood the log).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#include "outbox/buf.h"
#include "outbox/err.h"
#include "outbox/http_endpoint.h"

#define CONTENT_TYPE_METRICS "text/plain; version=0.0.4; charset=utf-8"
#define CONTENT_TYPE_TEXT "text/plain; charset=utf-8"

struct ob_http_endpoint {
	nng_http_server *srv;
	struct ob_metrics *m;
	ob_ready_fn ready;
	void *arg;
	int port;
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
	if (nng_url_parse(&u, url) != 0) {
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

static struct ob_http_endpoint *
endpoint_of(nng_aio *aio)
{
	nng_http_handler *h = nng_aio_get_input(aio, 1);
	return nng_http_handler_get_data(h);
}

static void
reply(nng_aio *aio, uint16_t status, const char *type, const void *body, size_t len)
{
	nng_http_res *res;
	int rv;

	if ((rv = nng_http_res_alloc(&res)) != 0) {
		nng_aio_finish(aio, rv);
		return;
	}
	if ((rv = nng_http_res_set_status(res, status)) != 0 ||
	    (rv = nng_http_res_set_header(res, "Content-Type", type)) != 0 ||
	    (rv = nng_http_res_set_header(res, "Cache-Control", "no-store")) != 0 ||
	    (rv = nng_http_res_copy_data(res, body, len)) != 0) {
		nng_http_res_free(res);
		nng_aio_finish(aio, rv);
		return;
	}
	nng_aio_set_output(aio, 0, res);
	nng_aio_finish(aio, 0);
}

static void
on_metrics(nng_aio *aio)
{
	struct ob_http_endpoint *e = endpoint_of(aio);
	struct ob_buf b = OB_BUF_INIT;

	if (ob_metrics_render(e->m, &b) != OB_OK) {
		ob_buf_fini(&b);
		nng_aio_finish(aio, NNG_ENOMEM);
		return;
	}
	reply(aio, NNG_HTTP_STATUS_OK, CONTENT_TYPE_METRICS, b.data ? b.data : "", b.len);
	ob_buf_fini(&b);
}

static void
on_healthz(nng_aio *aio)
{
	reply(aio, NNG_HTTP_STATUS_OK, CONTENT_TYPE_TEXT, "ok\n", 3);
}

static void
on_readyz(nng_aio *aio)
{
	struct ob_http_endpoint *e = endpoint_of(aio);
	bool ready = e->ready ? e->ready(e->arg) : ob_metrics_ready(e->m);

	if (ready)
		reply(aio, NNG_HTTP_STATUS_OK, CONTENT_TYPE_TEXT, "ready\n", 6);
	else
		reply(aio, NNG_HTTP_STATUS_SERVICE_UNAVAILABLE, CONTENT_TYPE_TEXT,
		    "not ready\n", 10);
}

static int
add_handler(struct ob_http_endpoint *e, const char *path, void (*cb)(nng_aio *))
{
	nng_http_handler *h;
	int rv;

	if ((rv = nng_http_handler_alloc(&h, path, cb)) != 0)
		return rv;
	if ((rv = nng_http_handler_set_method(h, "GET")) != 0 ||
	    (rv = nng_http_handler_set_data(h, e, NULL)) != 0 ||
	    (rv = nng_http_server_add_handler(e->srv, h)) != 0) {
		nng_http_handler_free(h);
		return rv;
	}
	return 0; /* the server owns h now */
}

int
ob_http_endpoint_start(const char *addr, struct ob_metrics *m, ob_ready_fn ready,
    void *arg, struct ob_http_endpoint **out, char *err, size_t errlen)
{
	char url[OB_HTTP_ENDPOINT_URL_MAX];
	struct ob_http_endpoint *e;
	nng_url *u = NULL;
	nng_sockaddr sa;
	int rv, rc;

	if (m == NULL) {
		snprintf(err, errlen, "metrics endpoint needs a registry");
		return OB_EINVAL;
	}
	if ((rc = ob_http_endpoint_url(addr, url, sizeof url, err, errlen)) != OB_OK)
		return rc;
	if ((e = calloc(1, sizeof *e)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return OB_ENOMEM;
	}
	e->m = m;
	e->ready = ready;
	e->arg = arg;
	e->port = -1;
	if ((rv = nng_url_parse(&u, url)) != 0 ||
	    (rv = nng_http_server_hold(&e->srv, u)) != 0) {
		snprintf(err, errlen, "metrics endpoint %s: %s", url, nng_strerror(rv));
		nng_url_free(u);
		free(e);
		return rv == NNG_ENOMEM ? OB_ENOMEM : OB_EINVAL;
	}
	nng_url_free(u);
	if ((rv = add_handler(e, "/metrics", on_metrics)) != 0 ||
	    (rv = add_handler(e, "/healthz", on_healthz)) != 0 ||
	    (rv = add_handler(e, "/readyz", on_readyz)) != 0 ||
	    (rv = nng_http_server_start(e->srv)) != 0) {
		snprintf(err, errlen, "metrics endpoint %s: %s", url, nng_strerror(rv));
		nng_http_server_release(e->srv);
		free(e);
		return rv == NNG_ENOMEM ? OB_ENOMEM : OB_ENET;
	}
	if (nng_http_server_get_addr(e->srv, &sa) == 0) {
		if (sa.s_family == NNG_AF_INET)
			e->port = ntohs(sa.s_in.sa_port);
		else if (sa.s_family == NNG_AF_INET6)
			e->port = ntohs(sa.s_in6.sa_port);
	}
	*out = e;
	return OB_OK;
}

int
ob_http_endpoint_port(const struct ob_http_endpoint *e)
{
	return e ? e->port : -1;
}

void
ob_http_endpoint_stop(struct ob_http_endpoint *e)
{
	if (e == NULL)
		return;
	nng_http_server_stop(e->srv);
	nng_http_server_release(e->srv);
	free(e);
}
