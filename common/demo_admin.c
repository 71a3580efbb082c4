/*
 * demo_admin.c - the demo admin endpoint (outbox/demo_admin.h): GET and
 * POST /admin/faults on the metrics listener of a program started with
 * --demo-admin. JSON through jansson.
 *
 * Runs on the endpoint's thread: reads and writes atomics only. Unlike a
 * scrape, a POST that changes something logs one warn line per change:
 * arming a fault is rare and an operator must be able to see who did what.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <nng/nng.h>

#include "outbox/demo_admin.h"
#include "outbox/err.h"
#include "outbox/http_endpoint.h"
#include "outbox/log.h"
#include "outbox/url.h"

#define JSON_TYPE "application/json"
#define NO_STORE "Cache-Control: no-store\r\n"
#define ERR_MAX 300

int
ob_demo_admin_check(const char *metrics_addr, char *err, size_t errlen)
{
	char url[OB_HTTP_ENDPOINT_URL_MAX], why[ERR_MAX];
	nng_url *u = NULL;
	if (metrics_addr == NULL || metrics_addr[0] == '\0') {
		snprintf(err, errlen, "--demo-admin needs --metrics 127.0.0.1:PORT (the admin"
		    " endpoint is served on the metrics listener)");
		return OB_EINVAL;
	}
	if (ob_http_endpoint_url(metrics_addr, url, sizeof(url), why, sizeof(why)) != OB_OK) {
		snprintf(err, errlen, "--metrics: %s", why);
		return OB_EINVAL;
	}
	if (ob_url_parse(&u, url) != 0) {
		snprintf(err, errlen, "--metrics '%s' is not HOST:PORT", metrics_addr);
		return OB_EINVAL;
	}
	const char *h = u->u_hostname;
	unsigned char a[16];
	bool loop = strcmp(h, "localhost") == 0 || strcmp(h, "::1") == 0 ||
	    (inet_pton(AF_INET, h, a) == 1 && a[0] == 127);
	nng_url_free(u);
	if (!loop) {
		snprintf(err, errlen, "--demo-admin refuses --metrics %s: the admin endpoint arms"
		    " faults without authentication, so its listener must be loopback"
		    " (127.0.0.1:PORT or [::1]:PORT)", metrics_addr);
		return OB_EINVAL;
	}
	return OB_OK;
}

static struct ob_fault *
find_fault(const struct ob_demo_admin *a, const char *name)
{
	for (struct ob_fault *const *f = a->faults; f != NULL && *f != NULL; f++)
		if (strcmp((*f)->name, name) == 0)
			return *f;
	return NULL;
}

static const struct ob_demo_mode *
find_mode(const struct ob_demo_admin *a, const char *name)
{
	for (const struct ob_demo_mode *m = a->modes; m != NULL && m->name != NULL; m++)
		if (strcmp(m->name, name) == 0)
			return m;
	return NULL;
}

static int
choice_of(const struct ob_demo_mode *m, const char *value)
{
	for (int i = 0; m->choices[i] != NULL; i++)
		if (strcmp(m->choices[i], value) == 0)
			return i;
	return -1;
}

char *
ob_demo_admin_state(const struct ob_demo_admin *a)
{
	json_t *root = json_object(), *faults = json_object(), *modes = json_object(),
	       *choices = json_object();
	char *text = NULL;
	if (root == NULL || faults == NULL || modes == NULL || choices == NULL)
		goto out;
	for (struct ob_fault *const *f = a->faults; f != NULL && *f != NULL; f++)
		json_object_set_new(faults, (*f)->name,
		    json_integer((json_int_t)atomic_load(&(*f)->remaining)));
	for (const struct ob_demo_mode *m = a->modes; m != NULL && m->name != NULL; m++) {
		json_t *list = json_array();
		for (int i = 0; m->choices[i] != NULL; i++)
			json_array_append_new(list, json_string(m->choices[i]));
		json_object_set_new(choices, m->name, list);
		json_object_set_new(modes, m->name, json_string(m->choices[atomic_load(m->value)]));
	}
	json_object_set(root, "faults", faults);
	json_object_set(root, "modes", modes);
	json_object_set(root, "choices", choices);
	text = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
out:
	json_decref(faults);
	json_decref(modes);
	json_decref(choices);
	json_decref(root);
	return text;
}

/* Check one member; OB_OK or OB_EINVAL with the reason. */
static int
check_member(const struct ob_demo_admin *a, const char *name, json_t *v, char *err,
    size_t errlen)
{
	const struct ob_demo_mode *m;
	if (find_fault(a, name) != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > OB_DEMO_ADMIN_MAX_FIRES) {
			snprintf(err, errlen, "fault %s: want an integer 0..%d (fires that many more"
			    " times; 0 disarms)", name, OB_DEMO_ADMIN_MAX_FIRES);
			return OB_EINVAL;
		}
		return OB_OK;
	}
	if ((m = find_mode(a, name)) != NULL) {
		if (!json_is_string(v) || choice_of(m, json_string_value(v)) < 0) {
			char list[200] = "";
			size_t n = 0;
			for (int i = 0; m->choices[i] != NULL && n < sizeof(list); i++)
				n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s", i ? "|" : "",
				    m->choices[i]);
			snprintf(err, errlen, "mode %s: want one of %s (a string)", name, list);
			return OB_EINVAL;
		}
		return OB_OK;
	}
	char q[100];
	snprintf(err, errlen, "no fault point or mode named %s (GET " OB_DEMO_ADMIN_PATH
	    " lists them)", ob_log_q(name, q, sizeof(q)));
	return OB_EINVAL;
}

int
ob_demo_admin_apply(const struct ob_demo_admin *a, const char *body, size_t len, char *err,
    size_t errlen)
{
	json_error_t je;
	json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
	const char *name;
	json_t *v;
	int rc = OB_EINVAL;
	if (root == NULL) {
		snprintf(err, errlen, "body is not JSON: %s", je.text);
		return OB_EINVAL;
	}
	if (!json_is_object(root) || json_object_size(root) == 0) {
		snprintf(err, errlen, "body must be a non-empty object {\"NAME\": N | \"VALUE\"}");
		goto out;
	}
	json_object_foreach(root, name, v) {
		if (check_member(a, name, v, err, errlen) != OB_OK)
			goto out;
	}
	json_object_foreach(root, name, v) {
		struct ob_fault *f = find_fault(a, name);
		if (f != NULL) {
			ob_fault_arm(f, (int64_t)json_integer_value(v));
			ob_warn("demo.admin.armed", "fault=%s fires=%lld", name,
			    (long long)json_integer_value(v));
		} else {
			const struct ob_demo_mode *m = find_mode(a, name);
			atomic_store(m->value, choice_of(m, json_string_value(v)));
			ob_warn("demo.admin.mode", "mode=%s value=%s", name, json_string_value(v));
		}
	}
	rc = OB_OK;
out:
	json_decref(root);
	return rc;
}

static void
reply_json(struct ob_httpd_req *req, int status, const char *body, const char *headers)
{
	struct ob_httpd_res res = { .status = status, .content_type = JSON_TYPE, .body = body,
		.body_len = strlen(body), .headers = headers };
	ob_httpd_respond(req, &res);
}

static void
reply_error(struct ob_httpd_req *req, int status, const char *msg, const char *headers)
{
	json_t *o = json_pack("{s:s}", "error", msg);
	char *text = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
	reply_json(req, status, text != NULL ? text : "{\"error\":\"out of memory\"}", headers);
	free(text);
	json_decref(o);
}

bool
ob_demo_admin_route(void *arg, struct ob_httpd_req *req)
{
	const struct ob_demo_admin *a = arg;
	char err[ERR_MAX];
	if (strcmp(req->path, OB_DEMO_ADMIN_PATH) != 0)
		return false;
	bool get = strcmp(req->method, "GET") == 0;
	if (!get && strcmp(req->method, "POST") != 0) {
		reply_error(req, 405, "method not allowed (GET, POST)",
		    NO_STORE "Allow: GET, POST\r\n");
		return true;
	}
	if (!get && ob_demo_admin_apply(a, req->body, req->body_len, err, sizeof(err)) != OB_OK) {
		reply_error(req, 400, err, NO_STORE);
		return true;
	}
	char *state = ob_demo_admin_state(a);
	if (state == NULL)
		reply_error(req, 500, "out of memory", NO_STORE);
	else
		reply_json(req, 200, state, NO_STORE);
	free(state);
	return true;
}

void
ob_demo_admin_announce(const char *program, int port)
{
	ob_warn("demo.admin.on", "program=%s url=http://127.0.0.1:%d" OB_DEMO_ADMIN_PATH
	    " risk=\"faults and broken modes can be switched over HTTP without"
	    " authentication: demos only\"", program, port);
}
