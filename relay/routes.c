/*
 * routes.c - parse and look up the relay's route table (routes.h).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>

#include "outbox/err.h"
#include "outbox/wire.h"
#include "outbox/url.h"
#include "routes.h"

static int
find_or_add_url(struct relay_routes *rt, const char *url)
{
	for (int i = 0; i < rt->nurls; i++)
		if (strcmp(rt->urls[i], url) == 0)
			return i;
	char **nu = realloc(rt->urls, (size_t)(rt->nurls + 1) * sizeof(*nu));
	if (nu == NULL)
		return -1;
	rt->urls = nu;
	if ((nu[rt->nurls] = strdup(url)) == NULL)
		return -1;
	return rt->nurls++;
}

static struct relay_route *
find_or_add_route(struct relay_routes *rt, const char *topic)
{
	for (int i = 0; i < rt->nroutes; i++)
		if (strcmp(rt->routes[i].topic, topic) == 0)
			return &rt->routes[i];
	struct relay_route *nr = realloc(rt->routes, (size_t)(rt->nroutes + 1) * sizeof(*nr));
	if (nr == NULL)
		return NULL;
	rt->routes = nr;
	memset(&nr[rt->nroutes], 0, sizeof(*nr));
	if ((nr[rt->nroutes].topic = strdup(topic)) == NULL)
		return NULL;
	return &nr[rt->nroutes++];
}

/* Transports nng 1.5 can dial, checked without creating any nng state (the
 * supervisor parses routes before it forks). */
static const char *const dial_schemes[] = {
	"tcp", "tcp4", "tcp6", "tls+tcp", "tls+tcp4", "tls+tcp6", "ipc", "abstract",
	"ws", "ws4", "ws6", "wss", "wss4", "wss6", NULL,
};

static bool
url_dialable(const nng_url *u, const char **why)
{
	bool known = false;
	for (int i = 0; dial_schemes[i] != NULL && !known; i++)
		known = strcmp(u->u_scheme, dial_schemes[i]) == 0;
	if (!known) {
		*why = "unsupported transport (use tcp://, tls+tcp://, ipc://, ws://, wss://)";
		return false;
	}
	bool needs_host = strncmp(u->u_scheme, "ipc", 3) != 0 &&
	    strcmp(u->u_scheme, "abstract") != 0;
	if (needs_host && (u->u_hostname[0] == '\0' || u->u_port[0] == '\0')) {
		*why = "host and port are required";
		return false;
	}
	if (!needs_host && u->u_path[0] == '\0') {
		*why = "a path is required";
		return false;
	}
	return true;
}

/* One spec into rt. */
static int
parse_one(struct relay_routes *rt, const char *spec, char *err, size_t errlen)
{
	const char *eq = strchr(spec, '=');
	if (eq == NULL || eq == spec || eq[1] == '\0') {
		snprintf(err, errlen, "--route '%s': expected TOPIC=URL (TOPIC may be *)", spec);
		return OB_EINVAL;
	}
	char topic[OB_WIRE_MAX_TOPIC + 1];
	size_t tlen = (size_t)(eq - spec);
	if (tlen > OB_WIRE_MAX_TOPIC) {
		snprintf(err, errlen, "--route '%s': topic longer than %d bytes", spec,
		    OB_WIRE_MAX_TOPIC);
		return OB_EINVAL;
	}
	memcpy(topic, spec, tlen);
	topic[tlen] = '\0';
	const char *url = eq + 1;
	nng_url *u = NULL;
	int rv = ob_url_parse(&u, url);
	if (rv != 0) {
		snprintf(err, errlen, "--route '%s': nng cannot parse URL '%s': %s", spec, url,
		    nng_strerror(rv));
		return OB_EINVAL;
	}
	const char *why = NULL;
	bool ok = url_dialable(u, &why);
	nng_url_free(u);
	if (!ok) {
		snprintf(err, errlen, "--route '%s': nng cannot parse URL '%s': %s", spec, url, why);
		return OB_EINVAL;
	}
	int di = find_or_add_url(rt, url);
	struct relay_route *r = find_or_add_route(rt, topic);
	int *nds = r != NULL ? realloc(r->dests, (size_t)(r->ndests + 1) * sizeof(int)) : NULL;
	if (di < 0 || nds == NULL) {
		snprintf(err, errlen, "out of memory parsing routes");
		return OB_ENOMEM;
	}
	r->dests = nds;
	r->dests[r->ndests++] = di;
	return OB_OK;
}

int
relay_routes_parse(struct relay_routes *rt, char **specs, size_t n, char *err,
    size_t errlen)
{
	if (n == 0) {
		snprintf(err, errlen, "--route: at least one TOPIC=URL is required (or set OUTBOX_ROUTE)");
		return OB_EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		int rc = parse_one(rt, specs[i], err, errlen);
		if (rc != OB_OK) {
			relay_routes_free(rt);
			return rc;
		}
	}
	return OB_OK;
}

void
relay_routes_free(struct relay_routes *rt)
{
	for (int i = 0; i < rt->nurls; i++)
		free(rt->urls[i]);
	for (int i = 0; i < rt->nroutes; i++) {
		free(rt->routes[i].topic);
		free(rt->routes[i].dests);
	}
	free(rt->urls);
	free(rt->routes);
	memset(rt, 0, sizeof(*rt));
}

int
relay_routes_find(const struct relay_routes *rt, const char *topic, size_t len)
{
	int def = -1;
	for (int i = 0; i < rt->nroutes; i++) {
		const char *t = rt->routes[i].topic;
		if (strlen(t) == len && memcmp(t, topic, len) == 0)
			return i;
		if (strcmp(t, "*") == 0)
			def = i;
	}
	return def;
}
