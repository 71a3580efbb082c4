/*
 * test_producer_openapi.c - docs/openapi.json against a running `serve`:
 * every answer's status must be documented for its operation and its body
 * must match the documented schema, and every documented (operation,
 * status) must be produced here at least once.
 *
 * Three servers: one with two slow requests (the 409s), one with one
 * serving thread, a queue of one and a slow request (a 503 on every
 * operation), one with tokens (401, 403). The schema check is the subset
 * the document uses (type, required, properties, enum, additionalProperties
 * false, oneOf of types, nullable), resolving $ref.
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "testsupport.h"
#include "ts_producer.h"

#define MSG "{\"topic\":\"notify.email\",\"payload\":{\"to\":\"ops@example.com\"}}"
#define SEEN_MAX 64

static json_t *doc;
static char seen[SEEN_MAX][64]; /* "METHOD TEMPLATE STATUS" */
static int nseen;

static json_t *
deref(json_t *v)
{
	const char *ref = json_string_value(json_object_get(v, "$ref"));
	if (ref == NULL)
		return v;
	ck_assert_msg(strncmp(ref, "#/", 2) == 0, "unsupported $ref %s", ref);
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", ref + 2);
	json_t *o = doc;
	char *save = NULL;
	for (char *p = strtok_r(buf, "/", &save); p != NULL; p = strtok_r(NULL, "/", &save))
		o = json_object_get(o, p);
	ck_assert_msg(o != NULL, "dangling $ref %s", ref);
	return deref(o);
}

static bool
type_is(const char *type, json_t *v)
{
	return (strcmp(type, "object") == 0 && json_is_object(v)) ||
	    (strcmp(type, "array") == 0 && json_is_array(v)) ||
	    (strcmp(type, "string") == 0 && json_is_string(v)) ||
	    (strcmp(type, "integer") == 0 && json_is_integer(v)) ||
	    (strcmp(type, "boolean") == 0 && json_is_boolean(v));
}

/* v against schema; the first mismatch into why. */
static bool
valid(json_t *schema, json_t *v, char *why, size_t whylen)
{
	schema = deref(schema);
	if (json_is_null(v) && json_is_true(json_object_get(schema, "nullable")))
		return true;
	json_t *one = json_object_get(schema, "oneOf");
	if (one != NULL) {
		size_t i;
		json_t *alt;
		json_array_foreach(one, i, alt)
			if (valid(alt, v, why, whylen))
				return true;
		snprintf(why, whylen, "matches no oneOf");
		return false;
	}
	const char *type = json_string_value(json_object_get(schema, "type"));
	if (type != NULL && !type_is(type, v)) {
		snprintf(why, whylen, "not a%s %s", type[0] == 'i' || type[0] == 'o' || type[0] == 'a'
		    ? "n" : "", type);
		return false;
	}
	json_t *en = json_object_get(schema, "enum");
	if (en != NULL) {
		bool in = false;
		size_t i;
		json_t *e;
		json_array_foreach(en, i, e)
			in = in || json_equal(e, v);
		if (!in) {
			snprintf(why, whylen, "not one of the enum");
			return false;
		}
	}
	if (!json_is_object(v))
		return true;
	size_t i;
	json_t *r;
	json_array_foreach(json_object_get(schema, "required"), i, r)
		if (json_object_get(v, json_string_value(r)) == NULL) {
			snprintf(why, whylen, "member %s missing", json_string_value(r));
			return false;
		}
	json_t *props = json_object_get(schema, "properties");
	const char *k;
	json_t *m;
	json_object_foreach(v, k, m) {
		json_t *ps = json_object_get(props, k);
		if (ps == NULL) {
			if (json_is_false(json_object_get(schema, "additionalProperties"))) {
				snprintf(why, whylen, "member %s not documented", k);
				return false;
			}
			continue;
		}
		char inner[200];
		if (!valid(ps, m, inner, sizeof(inner))) {
			snprintf(why, whylen, "%s: %s", k, inner);
			return false;
		}
	}
	return true;
}

/* One answer of method on template: documented, body as documented. */
static void
check(const char *method, const char *tmpl, const struct ts_producer_reply *r)
{
	char st[8], lower[8], key[64];
	ck_assert_msg(r->rv == 0, "%s %s: no answer (nng %d)", method, tmpl, r->rv);
	snprintf(st, sizeof(st), "%d", r->status);
	snprintf(lower, sizeof(lower), "%s", method);
	for (char *p = lower; *p; p++)
		*p = (char)(*p - 'A' + 'a');
	json_t *op = json_object_get(json_object_get(json_object_get(doc, "paths"), tmpl), lower);
	ck_assert_msg(op != NULL, "%s %s is not in docs/openapi.json", method, tmpl);
	json_t *resp = json_object_get(json_object_get(op, "responses"), st);
	ck_assert_msg(resp != NULL, "%s %s answered %d, not documented: %s", method, tmpl, r->status,
	    r->body);
	resp = deref(resp);
	json_t *schema = json_object_get(json_object_get(json_object_get(resp, "content"),
	    "application/json"), "schema");
	if (schema != NULL) {
		json_error_t jerr;
		json_t *body = json_loads(r->body, 0, &jerr);
		ck_assert_msg(body != NULL, "%s %s %d: body not JSON (%s): %s", method, tmpl, r->status,
		    jerr.text, r->body);
		char why[300];
		ck_assert_msg(valid(schema, body, why, sizeof(why)), "%s %s %d: %s: %s", method, tmpl,
		    r->status, why, r->body);
		json_decref(body);
	}
	snprintf(key, sizeof(key), "%s %s %d", lower, tmpl, r->status);
	for (int i = 0; i < nseen; i++)
		if (strcmp(seen[i], key) == 0)
			return;
	ck_assert_int_lt(nseen, SEEN_MAX);
	snprintf(seen[nseen++], sizeof(seen[0]), "%s", key);
}

static void
req(const char *url, const char *method, const char *path, const char *tmpl, const char *key,
    const char *body, struct ts_producer_reply *r)
{
	ts_producer_http(url, method, path, key, body, body != NULL ? strlen(body) : 0, r);
	check(method, tmpl, r);
}

/* A raw request with an Authorization header (or none): its status. */
static void
req_auth(int port, const char *method, const char *path, const char *tmpl, const char *key,
    const char *token, const char *body)
{
	char raw[4096], out[8192], lines[512] = "";
	if (key != NULL)
		snprintf(lines, sizeof(lines), "Idempotency-Key: %s\r\n", key);
	if (token != NULL) {
		size_t n = strlen(lines);
		snprintf(lines + n, sizeof(lines) - n, "Authorization: Bearer %s\r\n", token);
	}
	int n = snprintf(raw, sizeof(raw), "%s %s HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n"
	    "Content-Length: %zu\r\n\r\n%s", method, path, lines, body ? strlen(body) : 0,
	    body ? body : "");
	struct ts_producer_reply r = { 0 };
	r.status = ts_http_raw(port, raw, (size_t)n, out, sizeof(out), 10000);
	const char *b = strstr(out, "\r\n\r\n");
	snprintf(r.body, sizeof(r.body), "%s", b != NULL ? b + 4 : "");
	check(method, tmpl, &r);
}

START_TEST(test_every_documented_status)
{
	char db[TS_CONNINFO_MAX], path[600], big[2048], rpath[64];
	const char *src = getenv("OUTBOX_SOURCE_DIR");
	ck_assert_ptr_nonnull(src);
	snprintf(path, sizeof(path), "%s/docs/openapi.json", src);
	json_error_t jerr;
	doc = json_load_file(path, 0, &jerr);
	ck_assert_msg(doc != NULL, "%s: %s (line %d)", path, jerr.text, jerr.line);
	ck_assert_str_eq(json_string_value(json_object_get(doc, "openapi")), "3.0.3");
	ts_db_create("openapi", "outbox", db, sizeof(db));
	struct ts_producer_reply r;

	/* A: everything but 503, 401 and 403; two slow requests for the 409s. */
	struct ts_producer_server a;
	char *ea[] = { "--fault-slow", "2", "--fault-slow-ms", "1500ms", "--max-body", "1k", NULL };
	ts_producer_serve(db, ea, &a);
	struct ts_producer_poster pm = { .url = a.url, .key = "m-1", .path = "/v1/messages",
		.body = MSG };
	struct ts_producer_poster pr = { .url = a.url, .key = "r-1" };
	pthread_create(&pm.t, NULL, ts_producer_poster_main, &pm);
	ts_assert_logged(a.log, "fault=producer.slow");
	pthread_create(&pr.t, NULL, ts_producer_poster_main, &pr);
	ck_assert_int_eq(ts_log_wait(a.log, "fault=producer.slow", 2, 30000), 2);
	/* Both held after their claims: the same keys again are 409. */
	req(a.url, "POST", "/v1/messages", "/v1/messages", "m-1", MSG, &r);
	ck_assert_int_eq(r.status, 409);
	req(a.url, "POST", "/v1/reports", "/v1/reports", "r-1", TS_PRODUCER_BODY, &r);
	ck_assert_int_eq(r.status, 409);
	pthread_join(pm.t, NULL);
	pthread_join(pr.t, NULL);
	check("POST", "/v1/messages", &pm.r);
	ck_assert_int_eq(pm.r.status, 201);
	req(a.url, "POST", "/v1/messages", "/v1/messages", "m-1", MSG, &r); /* replay */
	ck_assert(r.replayed);
	req(a.url, "POST", "/v1/messages", "/v1/messages", "m-2",
	    "{\"topic\":\"notify.sms\",\"payload\":[1],\"ordering_key\":\"u-1\"}", &r);
	ck_assert_int_eq(r.status, 201);
	req(a.url, "POST", "/v1/messages", "/v1/messages", "m-1", "{\"topic\":\"x\",\"payload\":{}}",
	    &r);
	ck_assert_int_eq(r.status, 422);
	req(a.url, "POST", "/v1/messages", "/v1/messages", "m-3", "{\"topic\":\"x\"}", &r);
	ck_assert_int_eq(r.status, 400);
	snprintf(big, sizeof(big), "{\"topic\":\"t\",\"payload\":{\"x\":\"%0*d\"}}", 1100, 0);
	req(a.url, "POST", "/v1/messages", "/v1/messages", "m-4", big, &r);
	ck_assert_int_eq(r.status, 413);
	req(a.url, "GET", "/v1/messages?idempotency_key=m-1", "/v1/messages", NULL, NULL, &r);
	ck_assert_int_eq(r.status, 200);
	req(a.url, "GET", "/v1/messages?idempotency_key=nope", "/v1/messages", NULL, NULL, &r);
	ck_assert_int_eq(r.status, 404);
	req(a.url, "GET", "/v1/messages", "/v1/messages", NULL, NULL, &r);
	ck_assert_int_eq(r.status, 400);

	check("POST", "/v1/reports", &pr.r);
	long long id = ts_producer_report_id(pr.r.body);
	ck_assert_int_gt(id, 0);
	req(a.url, "POST", "/v1/reports", "/v1/reports", "r-1",
	    "{\"title\":\"Other\",\"module\":\"m\",\"severity\":\"low\"}", &r);
	ck_assert_int_eq(r.status, 422);
	req(a.url, "POST", "/v1/reports", "/v1/reports", "r-2", "{\"title\":\"x\"}", &r);
	ck_assert_int_eq(r.status, 400);
	snprintf(big, sizeof(big), "{\"title\":\"%0*d\",\"module\":\"m\",\"severity\":\"low\"}", 1100,
	    0);
	req(a.url, "POST", "/v1/reports", "/v1/reports", "r-3", big, &r);
	ck_assert_int_eq(r.status, 413);
	req(a.url, "GET", "/v1/reports?idempotency_key=r-1", "/v1/reports", NULL, NULL, &r);
	ck_assert_int_eq(r.status, 200);
	req(a.url, "GET", "/v1/reports?idempotency_key=nope", "/v1/reports", NULL, NULL, &r);
	ck_assert_int_eq(r.status, 404);
	req(a.url, "GET", "/v1/reports", "/v1/reports", NULL, NULL, &r);
	ck_assert_int_eq(r.status, 400);
	snprintf(rpath, sizeof(rpath), "/v1/reports/%lld", id);
	req(a.url, "GET", rpath, "/v1/reports/{id}", NULL, NULL, &r);
	ck_assert_int_eq(r.status, 200);
	req(a.url, "GET", "/v1/reports/999999", "/v1/reports/{id}", NULL, NULL, &r);
	ck_assert_int_eq(r.status, 404);
	req(a.url, "GET", "/healthz", "/healthz", NULL, NULL, &r);
	ck_assert_int_eq(r.status, 200);
	ts_stop(a.pid, SIGTERM);

	/* B: one serving thread, a queue of one, held by a slow request: once
	 * a filler is refused the queue is known full, and every operation
	 * answers 503 until the slow one ends (4 s). */
	struct ts_producer_server b;
	char *eb[] = { "--threads", "1", "--max-queue", "1", "--fault-slow", "1", "--fault-slow-ms",
		"4s", NULL };
	ts_producer_serve(db, eb, &b);
	struct ts_producer_poster slow = { .url = b.url, .key = "b-slow" };
	pthread_create(&slow.t, NULL, ts_producer_poster_main, &slow);
	ts_assert_logged(b.log, "fault=producer.slow");
	struct ts_producer_poster f1 = { .url = b.url, .key = "b-f1" }, f2 = { .url = b.url,
		.key = "b-f2" };
	pthread_create(&f1.t, NULL, ts_producer_poster_main, &f1);
	pthread_create(&f2.t, NULL, ts_producer_poster_main, &f2);
	int64_t deadline = ts_now_ms() + 3000;
	while (!ts_producer_poster_done(&f1) && !ts_producer_poster_done(&f2) &&
	    ts_now_ms() < deadline)
		usleep(10 * 1000);
	ck_assert_msg(ts_producer_poster_done(&f1) || ts_producer_poster_done(&f2),
	    "neither filler was refused");
	req(b.url, "POST", "/v1/messages", "/v1/messages", "b-1", MSG, &r);
	ck_assert_int_eq(r.status, 503);
	req(b.url, "GET", "/v1/messages?idempotency_key=b-1", "/v1/messages", NULL, NULL, &r);
	req(b.url, "POST", "/v1/reports", "/v1/reports", "b-2", TS_PRODUCER_BODY, &r);
	req(b.url, "GET", "/v1/reports?idempotency_key=b-2", "/v1/reports", NULL, NULL, &r);
	req(b.url, "GET", "/v1/reports/1", "/v1/reports/{id}", NULL, NULL, &r);
	req(b.url, "GET", "/healthz", "/healthz", NULL, NULL, &r);
	ck_assert_int_eq(r.status, 503);
	pthread_join(slow.t, NULL);
	pthread_join(f1.t, NULL);
	pthread_join(f2.t, NULL);
	check("POST", "/v1/reports", &f1.r);
	check("POST", "/v1/reports", &f2.r);
	ts_stop(b.pid, SIGTERM);

	/* C: tokens: 401 on every operation but /healthz, 403 for a topic the
	 * token's list does not allow. */
	char tokens[300];
	snprintf(tokens, sizeof(tokens), "%s/openapi-tokens", ts_tmpdir());
	ts_write_file(tokens, "scope=agent topics=notify.* tok-agent-0123456789ab\n");
	struct ts_producer_server c;
	char *ec[] = { "--api-token-file", tokens, NULL };
	ts_producer_serve(db, ec, &c);
	int port = ts_producer_port(&c);
	req_auth(port, "POST", "/v1/messages", "/v1/messages", "c-1", NULL, MSG);
	req_auth(port, "GET", "/v1/messages?idempotency_key=c-1", "/v1/messages", NULL, NULL, NULL);
	req_auth(port, "POST", "/v1/reports", "/v1/reports", "c-2", NULL, TS_PRODUCER_BODY);
	req_auth(port, "GET", "/v1/reports?idempotency_key=c-2", "/v1/reports", NULL, NULL, NULL);
	req_auth(port, "GET", "/v1/reports/1", "/v1/reports/{id}", NULL, NULL, NULL);
	req_auth(port, "POST", "/v1/messages", "/v1/messages", "c-3", "tok-agent-0123456789ab",
	    "{\"topic\":\"billing.refund\",\"payload\":{}}");
	req_auth(port, "POST", "/v1/messages", "/v1/messages", "c-4", "tok-agent-0123456789ab",
	    MSG);
	ts_stop(c.pid, SIGTERM);

	/* Every documented (operation, status) was produced above. */
	const char *tmpl;
	json_t *item;
	int documented = 0;
	json_object_foreach(json_object_get(doc, "paths"), tmpl, item) {
		const char *method;
		json_t *op;
		json_object_foreach(item, method, op) {
			const char *st;
			json_t *resp;
			json_object_foreach(json_object_get(op, "responses"), st, resp) {
				char key[64];
				snprintf(key, sizeof(key), "%s %s %s", method, tmpl, st);
				bool hit = false;
				for (int i = 0; i < nseen; i++)
					hit = hit || strcmp(seen[i], key) == 0;
				ck_assert_msg(hit, "documented but never produced: %s", key);
				documented++;
			}
		}
	}
	ck_assert_int_ge(documented, 30);
	json_decref(doc);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("producer_openapi");
	TCase *tc = tcase_create("openapi");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_every_documented_status);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
