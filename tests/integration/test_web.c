/*
 * test_web.c - `outboxctl web` against a real PostgreSQL: messages
 * enqueued on three topics, delivered (topic a) and dead-lettered (topic
 * b: the consumer rejects them) by a real relay, topic c enqueued after (pending);
 * then the view, run with the read-only role outbox_viewer as --db (and an
 * outbox_admin role for requeue), started on port 0. Asserted as a user
 * would check them: /api/overview's counts equal psql's (outbox.topic_stats),
 * requeue refused without or with a wrong token (401), without
 * --token-file (403), for a dead letter older than the dedup retention
 * (409, the CLI's reason), done with the token (the row back in
 * outbox.retries); 404/405/413 with nothing written; the CSP header; keys
 * and payloads holding markup come back JSON-escaped with no '<' or '>';
 * payloads hidden without the token when --payloads-need-token; the
 * consumer panel from a real consumer (duplicate, key reuse); a poll
 * stuck behind a lock cancelled by --statement-timeout; and one
 * poller: many concurrent requests cost no extra transactions
 * (pg_stat_database.xact_commit).
 */
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testsupport.h"
#include "ts_consumer.h"
#include "ts_relay.h"
#include "ts_web.h"

#define TOKEN "web-test-token-0123456789"
#define WAIT_MS 60000
#define XSS_KEY "\"><img src=x onerror=alert(1)>"
#define XSS_KEY2 "<script>alert(1)</script>"

static char db[TS_CONNINFO_MAX], viewer_db[TS_CONNINFO_MAX], admin_db[TS_CONNINFO_MAX];
static char viewer[64], admin[64], token_file[256];
static PGconn *conn;

#define assert_has(text, needle) \
	ck_assert_msg(strstr((text), (needle)) != NULL, "missing <%s> in:\n%.2000s", (needle), (text))

static json_t *
parse(const char *text)
{
	json_error_t e;
	json_t *j = json_loads(text, 0, &e);
	ck_assert_msg(j != NULL, "bad JSON (%s) in:\n%.2000s", e.text, text);
	return j;
}

/* The topic object T of an overview, or NULL. */
static json_t *
topic_of(json_t *ov, const char *t)
{
	size_t i;
	json_t *o;
	json_array_foreach(json_object_get(ov, "topics"), i, o)
		if (strcmp(json_string_value(json_object_get(o, "topic")), t) == 0)
			return o;
	return NULL;
}

static json_t *
by_id(json_t *ov, const char *list, long long id)
{
	size_t i;
	json_t *o;
	json_array_foreach(json_object_get(ov, list), i, o)
		if (json_integer_value(json_object_get(o, "id")) == id)
			return o;
	return NULL;
}

/* topic_stats as psql shows it: "pending,in_flight,delivered,dead" of t. */
static void
psql_counts(const char *t, char *out, size_t outlen)
{
	char sql[256];
	snprintf(sql, sizeof sql, "SELECT concat_ws(',', pending, in_flight, delivered, dead)"
	    " FROM outbox.topic_stats('%s')", t);
	PGresult *r = PQexec(conn, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQresultErrorMessage(r));
	snprintf(out, outlen, "%s", PQntuples(r) == 1 ? PQgetvalue(r, 0, 0) : "none");
	PQclear(r);
}

static void
view_counts(json_t *ov, const char *t, char *out, size_t outlen)
{
	json_t *o = topic_of(ov, t);
	if (o == NULL) {
		snprintf(out, outlen, "none");
		return;
	}
	snprintf(out, outlen, "%lld,%lld,%lld,%lld",
	    (long long)json_integer_value(json_object_get(o, "pending")),
	    (long long)json_integer_value(json_object_get(o, "inflight")),
	    (long long)json_integer_value(json_object_get(o, "delivered")),
	    (long long)json_integer_value(json_object_get(o, "dead")));
}

/* Every table the view could touch, as text ("nothing written"). */
static char *
tables_text(void)
{
	PGresult *r = PQexec(conn, "SELECT concat("
	    " (SELECT string_agg(x::text, ';' ORDER BY x.id) FROM outbox.dead x), '|',"
	    " (SELECT string_agg(x::text, ';' ORDER BY x.id) FROM outbox.retries x), '|',"
	    " (SELECT string_agg(x::text, ';' ORDER BY x.id) FROM outbox.batches x), '|',"
	    " (SELECT string_agg(x::text, ';') FROM outbox.ordering_blocks x), '|',"
	    " (SELECT count(*) FROM outbox.events))");
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQresultErrorMessage(r));
	char *s = strdup(PQgetvalue(r, 0, 0));
	PQclear(r);
	return s;
}

static void
setup(void)
{
	ts_db_create("web", "all", db, sizeof db);
	conn = ts_connect(db);
	ts_role_create("webview", "outbox_viewer", viewer);
	ts_role_create("webadmin", "outbox_admin", admin);
	ts_conninfo_as(db, viewer, viewer_db, sizeof viewer_db);
	ts_conninfo_as(db, admin, admin_db, sizeof admin_db);
	snprintf(token_file, sizeof token_file, "%s/web-token", ts_tmpdir());
	ts_write_file(token_file, TOKEN "\n");

	/* a: 4 delivered; b: 3 dead (rejected), one keyed with markup; c: 2
	 * pending (no route), one keyed with markup, payloads with markup */
	ts_enqueue_n(conn, "a", "a", 4);
	ts_enqueue_n(conn, "b", "b", 2);
	ts_exec(conn, "SELECT outbox.enqueue('b', '" XSS_KEY "', '{\"n\": 3}')");

	struct ts_fake_consumer ok, no;
	char ok_url[256], no_url[256], route_a[300], route_b[300], log[256];
	ts_fake_consumer_routed(&ok, "web-ok", "a", TS_FAKE_APPLIED, ok_url, sizeof ok_url,
	    route_a, sizeof route_a);
	ts_fake_consumer_routed(&no, "web-no", "b", TS_FAKE_REJECT, no_url, sizeof no_url,
	    route_b, sizeof route_b);
	const char *extra[] = { "--route", route_b, NULL };
	pid_t relay = ts_relay_spawn(log, db, route_a, extra);
	ck_assert_int_eq(ts_wait_value(conn, "SELECT count(*) FROM outbox.messages"
	    " WHERE topic = 'a' AND status = 'delivered'", 4, WAIT_MS), 4);
	ck_assert_int_eq(ts_wait_value(conn, "SELECT count(*) FROM outbox.dead WHERE topic = 'b'",
	    3, WAIT_MS), 3);
	/* stopped: the counts hold still while the view is compared with psql */
	ts_stop(relay, SIGTERM);
	ts_fake_consumer_stop(&ok);
	ts_fake_consumer_stop(&no);
	/* enqueued once the relay is gone (so that no relay has claimed from
	 * it, whatever --unrouted says) */
	ts_exec(conn, "SELECT outbox.enqueue('c', '" XSS_KEY2 "',"
	    " jsonb_build_object('html', '" XSS_KEY2 "', 'attr', '" XSS_KEY "'));"
	    "SELECT outbox.enqueue('c', 'c2', '{\"n\": 2}')");
}

static void
teardown(void)
{
	PQfinish(conn);
	conn = NULL;
	ts_role_drop(viewer);
	ts_role_drop(admin);
}

START_TEST(test_overview_counts)
{
	struct ts_web w;
	const char *extra[] = { "--inbox-db", viewer_db, "--poll-interval", "200ms", NULL };
	ts_web_start(viewer_db, extra, &w);
	const char *topics[] = { "a", "b", "c" };
	for (size_t i = 0; i < 3; i++) {
		char want[128], got[128] = "";
		psql_counts(topics[i], want, sizeof want);
		int64_t end = ts_now_ms() + WAIT_MS;
		/* the snapshot is at most a poll old: poll for agreement */
		while (ts_now_ms() < end) {
			char *body = ts_web_overview(&w, NULL, WAIT_MS);
			json_t *ov = parse(body);
			view_counts(ov, topics[i], got, sizeof got);
			json_decref(ov);
			free(body);
			if (strcmp(got, want) == 0)
				break;
			usleep(50 * 1000);
		}
		ck_assert_msg(strcmp(got, want) == 0, "topic %s: view %s, psql %s", topics[i], got,
		    want);
	}
	char *body = ts_web_overview(&w, NULL, WAIT_MS);
	json_t *ov = parse(body);
	/* the dead letters, with the view's requeue verdict; the newest messages */
	ck_assert_int_eq((int)json_array_size(json_object_get(ov, "dead")), 3);
	ck_assert_int_eq((int)json_array_size(json_object_get(ov, "messages")),
	    (int)ts_query_int(conn, "SELECT least(count(*), 50) FROM outbox.messages"));
	/* the same newest messages, in the same states, as psql sees them */
	char got[4096] = "";
	size_t i;
	json_t *m;
	json_array_foreach(json_object_get(ov, "messages"), i, m) {
		size_t n = strlen(got);
		snprintf(got + n, sizeof got - n, "%s%lld:%s", i ? "," : "",
		    (long long)json_integer_value(json_object_get(m, "id")),
		    json_string_value(json_object_get(m, "status")));
	}
	PGresult *pr = PQexec(conn, "SELECT string_agg(id || ':' || outbox.message_state(x), ','"
	    " ORDER BY id DESC) FROM (SELECT * FROM outbox.messages m ORDER BY id DESC LIMIT 50) x");
	ck_assert_int_eq(PQresultStatus(pr), PGRES_TUPLES_OK);
	ck_assert_str_eq(got, PQgetvalue(pr, 0, 0));
	PQclear(pr);
	ck_assert(json_is_true(json_object_get(ov, "payloads_visible")));
	json_t *c = json_object_get(ov, "consumer");
	ck_assert(json_is_object(c));
	ck_assert_int_eq(json_integer_value(json_object_get(c, "applied")),
	    ts_query_int(conn, "SELECT count(*) FROM inbox.processed WHERE outcome = 'applied'"));
	ck_assert(json_array_size(json_object_get(ov, "series")) >= 1);
	json_decref(ov);
	free(body);
	/* the viewer role wrote nothing and could not have */
	char state[8], msg[256];
	PGconn *v = ts_connect(viewer_db);
	ts_exec_state(v, "DELETE FROM outbox.dead", state, sizeof state, msg, sizeof msg);
	ck_assert_str_eq(state, "42501");
	PQfinish(v);
	ts_web_stop(&w);
}
END_TEST

START_TEST(test_requeue)
{
	struct ts_web w;
	const char *extra[] = { "--requeue-db", admin_db, "--token-file", token_file,
		"--poll-interval", "200ms", NULL };
	ts_web_start(viewer_db, extra, &w);
	long long young = ts_query_int(conn, "SELECT min(id) FROM outbox.dead");
	long long old = ts_query_int(conn, "SELECT max(id) FROM outbox.dead");
	ts_exec(conn, "UPDATE outbox.dead SET created_at = now() - interval '9 days'"
	    " WHERE id = (SELECT max(id) FROM outbox.dead)");
	char body[128];
	snprintf(body, sizeof body, "{\"ids\":[%lld]}", young);
	struct ts_http_res r;
	char *before = tables_text();

	static const char *const want_auth[] = { "WWW-Authenticate", NULL };
	ck_assert_int_eq(ts_web_http(&w, "POST", "/api/dead/requeue", NULL, body, want_auth, &r),
	    401);
	ck_assert_str_eq(r.got[0], "Bearer");
	assert_has(r.body, "\"error\"");
	free(r.body);
	ck_assert_int_eq(ts_web_http(&w, "POST", "/api/dead/requeue", "wrong-token-0123456789",
	    body, NULL, &r), 401);
	free(r.body);
	ck_assert_int_eq(ts_web_http(&w, "POST", "/api/dead/requeue", TOKEN " ", body, NULL, &r),
	    401);
	free(r.body);
	char *after = tables_text();
	ck_assert_str_eq(before, after);
	free(after);

	/* older than the dedup retention: refused, as dead requeue refuses it */
	char body_old[128];
	snprintf(body_old, sizeof body_old, "{\"ids\":[%lld]}", old);
	ck_assert_int_eq(ts_web_http(&w, "POST", "/api/dead/requeue", TOKEN, body_old, NULL, &r),
	    409);
	json_t *j = parse(r.body);
	ck_assert_int_eq((int)json_array_size(json_object_get(j, "requeued")), 0);
	json_t *f = json_array_get(json_object_get(j, "refused"), 0);
	ck_assert_int_eq(json_integer_value(json_object_get(f, "id")), old);
	assert_has(json_string_value(json_object_get(f, "reason")),
	    "longer than the consumer's dedup retention (7d)");
	json_decref(j);
	free(r.body);
	after = tables_text();
	ck_assert_str_eq(before, after);
	free(after);
	/* the overview says which ones a requeue would take */
	bool verdict = false;
	for (int64_t end = ts_now_ms() + WAIT_MS; !verdict && ts_now_ms() < end;) {
		/* a snapshot from before the UPDATE may still be served: poll */
		char *ovt = ts_web_overview(&w, NULL, WAIT_MS);
		json_t *ov = parse(ovt);
		verdict = json_is_false(json_object_get(by_id(ov, "dead", old), "requeueable")) &&
		    json_is_true(json_object_get(by_id(ov, "dead", young), "requeueable"));
		json_decref(ov);
		free(ovt);
		if (!verdict)
			usleep(50 * 1000);
	}
	ck_assert_msg(verdict, "the overview never said %lld is too old to requeue", old);

	/* all or nothing, as the CLI: one bad id and nothing moves */
	char mixed[128];
	snprintf(mixed, sizeof mixed, "{\"ids\":[%lld, 999999]}", young);
	ck_assert_int_eq(ts_web_http(&w, "POST", "/api/dead/requeue", TOKEN, mixed, NULL, &r), 409);
	assert_has(r.body, "no message with id 999999");
	free(r.body);
	after = tables_text();
	ck_assert_str_eq(before, after);
	free(after);

	/* with the token: done, the row back to pending as a retry */
	ck_assert_int_eq(ts_web_http(&w, "POST", "/api/dead/requeue", TOKEN, body, NULL, &r), 200);
	j = parse(r.body);
	ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(j, "requeued"), 0)),
	    young);
	ck_assert_int_eq((int)json_array_size(json_object_get(j, "refused")), 0);
	json_decref(j);
	free(r.body);
	char sql[160];
	snprintf(sql, sizeof sql, "SELECT count(*) FROM outbox.retries WHERE id = %lld AND"
	    " attempts = 0", young);
	ck_assert_int_eq(ts_query_int(conn, sql), 1);
	snprintf(sql, sizeof sql, "SELECT count(*) FROM outbox.dead WHERE id = %lld", young);
	ck_assert_int_eq(ts_query_int(conn, sql), 0);
	free(before);

	/* bad bodies: 400, nothing written */
	before = tables_text();
	const char *bad[] = { "", "{", "[]", "{\"ids\":[]}", "{\"ids\":[\"1\"]}", "{\"ids\":[-1]}",
		"{\"ids\":[1],\"all\":true}", NULL };
	for (int i = 0; bad[i] != NULL; i++) {
		ck_assert_msg(ts_web_http(&w, "POST", "/api/dead/requeue", TOKEN, bad[i], NULL, &r)
		    == 400, "body <%s>: %d", bad[i], r.status);
		assert_has(r.body, "\"error\"");
		free(r.body);
	}
	after = tables_text();
	ck_assert_str_eq(before, after);
	free(after);
	free(before);
	ts_web_stop(&w);
	ck_assert_int_ge(ts_log_count(w.log, "event=web.auth.refused"), 3);

	/* no --requeue-db: --db's role (outbox_viewer) cannot requeue, and
	 * the answer says which grant it lacks; nothing written */
	const char *tok_only[] = { "--token-file", token_file, NULL };
	ts_web_start(viewer_db, tok_only, &w);
	before = tables_text();
	ck_assert_int_eq(ts_web_http(&w, "POST", "/api/dead/requeue", TOKEN, body_old, NULL, &r),
	    503);
	assert_has(r.body, "GRANT outbox_admin TO");
	free(r.body);
	after = tables_text();
	ck_assert_str_eq(before, after);
	free(after);
	free(before);
	ts_web_stop(&w);

	/* no --token-file: requeue disabled */
	ts_web_start(viewer_db, NULL, &w);
	ck_assert_int_eq(ts_web_http(&w, "POST", "/api/dead/requeue", TOKEN, body_old, NULL, &r),
	    403);
	assert_has(r.body, "--token-file");
	free(r.body);
	ts_web_stop(&w);
}
END_TEST

START_TEST(test_bad_requests)
{
	struct ts_web w;
	const char *extra[] = { "--token-file", token_file, "--max-body", "1k", "--requeue-max", "2",
		NULL };
	ts_web_start(viewer_db, extra, &w);
	free(ts_web_overview(&w, NULL, WAIT_MS));
	char *before = tables_text();
	struct ts_http_res r;
	static const char *const want[] = { "Content-Security-Policy", "Cache-Control",
		"Allow", "Content-Type", NULL };

	/* the page and its strict CSP; JS and CSS are files, never inline */
	ck_assert_int_eq(ts_web_http(&w, "GET", "/", NULL, NULL, want, &r), 200);
	ck_assert_str_eq(r.got[0], "default-src 'none'; script-src 'self'; style-src 'self';"
	    " connect-src 'self'; img-src 'self'; base-uri 'none'; frame-ancestors 'none'");
	ck_assert_str_eq(r.got[1], "no-store");
	assert_has(r.body, "<script src=\"/app.js\"");
	ck_assert_ptr_null(strstr(r.body, "<script>"));
	ck_assert_ptr_null(strstr(r.body, "style="));
	free(r.body);
	ck_assert_int_eq(ts_web_http(&w, "GET", "/app.js", NULL, NULL, want, &r), 200);
	assert_has(r.got[3], "javascript");
	ck_assert_ptr_null(strstr(r.body, "innerHTML"));
	free(r.body);
	ck_assert_int_eq(ts_web_http(&w, "GET", "/api/overview", NULL, NULL, want, &r), 200);
	ck_assert_str_eq(r.got[1], "no-store");
	ck_assert_str_eq(r.got[3], "application/json");
	free(r.body);

	struct { const char *method, *path; int status; const char *allow; } cases[] = {
		{ "GET", "/nope", 404, "" },
		{ "GET", "/api/overview/", 404, "" },
		{ "GET", "/api/demo", 404, "" }, /* no --demo */
		{ "POST", "/api/demo/step/1", 404, "" },
		{ "POST", "/api/overview", 405, "GET" },
		{ "DELETE", "/", 405, "GET" },
		{ "PUT", "/app.js", 405, "GET" },
		{ "GET", "/api/dead/requeue", 405, "POST" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		ck_assert_msg(ts_web_http(&w, cases[i].method, cases[i].path, NULL, NULL, want, &r)
		    == cases[i].status, "%s %s: %d", cases[i].method, cases[i].path, r.status);
		ck_assert_str_eq(r.got[2], cases[i].allow);
		ck_assert_str_eq(r.got[3], "application/json");
		assert_has(r.body, "\"error\"");
		free(r.body);
	}
	/* over --max-body: 413, the body unread, nothing written */
	char big[2048 + 32];
	int n = snprintf(big, sizeof big, "{\"ids\":[");
	while (n < 2048)
		n += snprintf(big + n, sizeof big - (size_t)n, "1,");
	snprintf(big + n, sizeof big - (size_t)n, "1]}");
	ck_assert_int_eq(ts_web_http(&w, "POST", "/api/dead/requeue", TOKEN, big, NULL, &r), 413);
	assert_has(r.body, "\"error\"");
	free(r.body);
	/* over --requeue-max ids: 400 */
	ck_assert_int_eq(ts_web_http(&w, "POST", "/api/dead/requeue", TOKEN, "{\"ids\":[1,2,3]}",
	    NULL, &r), 400);
	assert_has(r.body, "want 1 to 2 ids, got 3");
	free(r.body);
	char *after = tables_text();
	ck_assert_str_eq(before, after);
	free(after);
	free(before);
	ts_web_stop(&w);
}
END_TEST

START_TEST(test_markup_escaped)
{
	struct ts_web w;
	const char *extra[] = { "--token-file", token_file, "--payloads-need-token", NULL };
	ts_web_start(viewer_db, extra, &w);
	/* with the token: the payloads; text with markup comes back as JSON
	 * strings, every '<' and '>' escaped */
	char *body = ts_web_overview(&w, TOKEN, WAIT_MS);
	ck_assert_ptr_null(strchr(body, '<'));
	ck_assert_ptr_null(strchr(body, '>'));
	assert_has(body, "\\u003cscript\\u003e");
	json_t *ov = parse(body);
	ck_assert(json_is_true(json_object_get(ov, "payloads_visible")));
	bool key_seen = false, payload_seen = false, dead_seen = false;
	size_t i;
	json_t *m;
	json_array_foreach(json_object_get(ov, "messages"), i, m) {
		const char *k = json_string_value(json_object_get(m, "key"));
		if (strcmp(k, XSS_KEY2) == 0) {
			key_seen = true;
			json_t *p = json_object_get(m, "payload");
			payload_seen = p != NULL &&
			    strcmp(json_string_value(json_object_get(p, "html")), XSS_KEY2) == 0 &&
			    strcmp(json_string_value(json_object_get(p, "attr")), XSS_KEY) == 0;
		}
	}
	json_array_foreach(json_object_get(ov, "dead"), i, m)
		dead_seen |= strcmp(json_string_value(json_object_get(m, "key")), XSS_KEY) == 0;
	ck_assert(key_seen && payload_seen && dead_seen);
	json_decref(ov);
	free(body);
	/* without it: no payload at all */
	body = ts_web_overview(&w, NULL, WAIT_MS);
	ov = parse(body);
	ck_assert(json_is_false(json_object_get(ov, "payloads_visible")));
	json_array_foreach(json_object_get(ov, "messages"), i, m)
		ck_assert_ptr_null(json_object_get(m, "payload"));
	ck_assert_ptr_null(strstr(body, "payload\""));
	json_decref(ov);
	free(body);
	ts_web_stop(&w);
}
END_TEST

/* ---- one poller -------------------------------------------------------- */

#define CLIENTS 8
#define REQUESTS_EACH 10
#define POLL_MS 500

struct client {
	const struct ts_web *w;
	pthread_t t;
	int ok;
};

static void *
client_main(void *arg)
{
	struct client *c = arg;
	for (int i = 0; i < REQUESTS_EACH; i++) {
		struct ts_http_res r;
		if (ts_web_http(c->w, "GET", "/api/overview", NULL, NULL, NULL, &r) == 200)
			c->ok++;
		free(r.body);
	}
	return NULL;
}

/* Transactions committed in the test's database so far (as the statistics
 * system has them: each backend reports within a second or so). */
static int64_t
xacts(PGconn *server, const char *dbname)
{
	char sql[256];
	snprintf(sql, sizeof sql, "SELECT xact_commit FROM pg_stat_database WHERE datname = '%s'",
	    dbname);
	return ts_query_int(server, sql);
}

START_TEST(test_one_poller)
{
	struct ts_web w;
	const char *extra[] = { "--poll-interval", "500ms", NULL };
	char dbname[128];
	PGresult *r = PQexec(conn, "SELECT current_database()");
	snprintf(dbname, sizeof dbname, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	ts_web_start(viewer_db, extra, &w);
	free(ts_web_overview(&w, NULL, WAIT_MS));
	PGconn *server = ts_connect(ts_server_conninfo());
	char sql[256];
	snprintf(sql, sizeof sql, "SELECT xact_commit FROM pg_stat_database WHERE datname = '%s'",
	    dbname);
	/* The baseline: once two polls past the first reading are reported,
	 * the start-up's transactions (connect, settings, the protocol check)
	 * are in it, as statistics are reported cumulatively. */
	int64_t first = xacts(server, dbname);
	int64_t x0 = ts_wait_at_least(server, sql, first + 2, WAIT_MS);
	ck_assert_int_ge(x0, first + 2);
	int64_t t0 = ts_now_ms();
	struct client c[CLIENTS];
	for (int i = 0; i < CLIENTS; i++) {
		c[i] = (struct client){ .w = &w };
		ck_assert_int_eq(pthread_create(&c[i].t, NULL, client_main, &c[i]), 0);
	}
	int ok = 0;
	for (int i = 0; i < CLIENTS; i++) {
		pthread_join(c[i].t, NULL);
		ok += c[i].ok;
	}
	ck_assert_int_eq(ok, CLIENTS * REQUESTS_EACH);
	/* A backend reports its commits to the statistics when idle, at most
	 * a second late. Wait until two more of the poller's commits show
	 * (it commits once per poll): by then what the requests might have
	 * cost has been reported too. */
	int64_t polls_during = (ts_now_ms() - t0) / POLL_MS;
	int64_t x_end = xacts(server, dbname);
	ck_assert_int_ge(ts_wait_at_least(server, sql, x_end + 2, WAIT_MS), x_end + 2);
	int64_t x1 = xacts(server, dbname), t1 = ts_now_ms();
	/* one transaction per poll, whatever the requests: every poll of the
	 * window, plus slack (autovacuum); a query per request would be 80 or
	 * more */
	int64_t polls = (t1 - t0) / POLL_MS + 10;
	ck_assert_msg(x1 - x0 <= polls, "%lld transactions for %d requests in %lld ms"
	    " (%lld polls at most; %lld during the requests)", (long long)(x1 - x0),
	    CLIENTS * REQUESTS_EACH, (long long)(t1 - t0), (long long)polls,
	    (long long)polls_during);
	ck_assert_int_lt(polls, CLIENTS * REQUESTS_EACH);
	PQfinish(server);
	ts_web_stop(&w);
}
END_TEST

/* The consumer side: a real consumer answers applied, then duplicate for
 * the same key, then reject for the key reused with another payload; the
 * view shows its counts (its /metrics) and the dedup record (the inbox). */
START_TEST(test_consumer_side)
{
	char url[256], clog[256], murl[128];
	static const char *const cextra[] = { "--metrics", "127.0.0.1:0", NULL };
	ts_ipc_url("web-consumer", url, sizeof url);
	pid_t cons = ts_consumer_spawn(clog, db, url, cextra);
	ck_assert_int_ge(ts_log_wait(clog, "consumer.started", 1, WAIT_MS), 1);
	int mport = ts_log_wait_port(clog, "consumer.metrics.listening", WAIT_MS);
	snprintf(murl, sizeof murl, "http://127.0.0.1:%d/metrics", mport);
	struct ts_consumer_conn cc;
	ts_consumer_open(&cc, url);
	ck_assert_int_eq(ts_consumer_call1(&cc, ts_consumer_msg(900, "d", "k-" XSS_KEY2, "{\"n\":1}"),
	    NULL, 0), OB_WIRE_APPLIED);
	ck_assert_int_eq(ts_consumer_call1(&cc, ts_consumer_msg(900, "d", "k-" XSS_KEY2, "{\"n\":1}"),
	    NULL, 0), OB_WIRE_DUPLICATE);
	ck_assert_int_eq(ts_consumer_call1(&cc, ts_consumer_msg(901, "d", "k-" XSS_KEY2, "{\"n\":2}"),
	    NULL, 0), OB_WIRE_REJECT);
	ts_consumer_close(&cc);

	struct ts_web w;
	const char *extra[] = { "--inbox-db", viewer_db, "--consumer-metrics", murl,
		"--poll-interval", "200ms", NULL };
	ts_web_start(viewer_db, extra, &w);
	int64_t applied = ts_query_int(conn, "SELECT count(*) FROM inbox.processed"
	    " WHERE outcome = 'applied'");
	ck_assert_int_ge(applied, 1);
	int64_t end = ts_now_ms() + WAIT_MS;
	bool ok = false;
	char last[512] = "";
	while (!ok && ts_now_ms() < end) {
		char *body = ts_web_overview(&w, NULL, WAIT_MS);
		json_t *ov = parse(body);
		json_t *c = json_object_get(ov, "consumer");
		json_t *rec = json_array_get(json_object_get(c, "dedup"), 0);
		ok = json_integer_value(json_object_get(c, "applied")) == applied &&
		    json_is_integer(json_object_get(c, "duplicates")) &&
		    json_integer_value(json_object_get(c, "duplicates")) == 1 &&
		    json_integer_value(json_object_get(c, "key_reuse_rejects")) == 1 &&
		    rec != NULL &&
		    strcmp(json_string_value(json_object_get(rec, "key")), "k-" XSS_KEY2) == 0 &&
		    strcmp(json_string_value(json_object_get(rec, "topic")), "d") == 0;
		char *cs = json_dumps(c, JSON_COMPACT);
		snprintf(last, sizeof last, "%s", cs != NULL ? cs : "null");
		free(cs);
		json_decref(ov);
		free(body);
		if (!ok)
			usleep(50 * 1000);
	}
	ck_assert_msg(ok, "consumer panel never showed applied %lld, 1 duplicate, 1 key reuse:"
	    " last %s", (long long)applied, last);
	ts_web_stop(&w);
	ts_stop(cons, SIGTERM);
}
END_TEST

/* --statement-timeout: a poll stuck behind a lock is cancelled, logged
 * once, and the view recovers when the lock goes (the last snapshot served
 * meanwhile). */
START_TEST(test_statement_timeout)
{
	struct ts_web w;
	const char *extra[] = { "--statement-timeout", "200ms", "--poll-interval", "200ms", NULL };
	ts_web_start(viewer_db, extra, &w);
	free(ts_web_overview(&w, NULL, WAIT_MS));
	PGconn *locker = ts_connect(db);
	ts_exec(locker, "BEGIN; LOCK TABLE outbox.dead IN ACCESS EXCLUSIVE MODE");
	ck_assert_int_ge(ts_log_wait(w.log, "event=web.poll.failed", 1, WAIT_MS), 1);
	char *log = ts_read_file(w.log);
	assert_has(log, "canceling statement due to statement timeout");
	free(log);
	/* still serving the last snapshot */
	struct ts_http_res r;
	ck_assert_int_eq(ts_web_http(&w, "GET", "/api/overview", NULL, NULL, NULL, &r), 200);
	free(r.body);
	ts_exec(locker, "COMMIT");
	PQfinish(locker);
	ck_assert_int_ge(ts_log_wait(w.log, "event=web.poll.recovered", 1, WAIT_MS), 1);
	/* one line per outage, not one per failed poll */
	ck_assert_int_eq(ts_log_count(w.log, "event=web.poll.failed"), 1);
	ts_web_stop(&w);
}
END_TEST

/* Bad config: one line, exit 2, nothing opened (no database needed). */
START_TEST(test_bad_config)
{
	char shortf[256], out[4096];
	snprintf(shortf, sizeof shortf, "%s/short-token", ts_tmpdir());
	ts_write_file(shortf, "short\n");
	struct { const char *flag, *value, *want; } cases[] = {
		{ "--http", "ftp://127.0.0.1:0", "--http 'ftp://127.0.0.1:0': want http://HOST:PORT" },
		{ "--token-file", "/nonexistent/token", "--token-file /nonexistent/token: No such file" },
		{ "--token-file", shortf, "want one token of at least 16 characters" },
		{ "--poll-interval", "10ms", "--poll-interval: 10ms is below the minimum 100" },
		{ "--max-body", "10m", "--max-body" },
		{ "--demo", "/nonexistent/demo.conf", "--demo" },
		{ "--consumer-metrics", "http://127.0.0.1:1/metrics", "with --inbox-db" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *argv[] = { "outboxctl", "web", "--db", "dbname=nonexistent",
			(char *)cases[i].flag, (char *)cases[i].value, NULL };
		ck_assert_int_eq(ts_run(argv, NULL, out, sizeof out, 30000), 2);
		assert_has(out, cases[i].want);
		ck_assert_msg(strchr(out, '\n') == strrchr(out, '\n'), "more than one line: %s", out);
	}
}
END_TEST

static Suite *
web_suite(void)
{
	Suite *s = suite_create("web");
	TCase *tc = tcase_create("web");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, test_overview_counts);
	tcase_add_test(tc, test_requeue);
	tcase_add_test(tc, test_bad_requests);
	tcase_add_test(tc, test_markup_escaped);
	tcase_add_test(tc, test_one_poller);
	tcase_add_test(tc, test_consumer_side);
	tcase_add_test(tc, test_statement_timeout);
	suite_add_tcase(s, tc);
	TCase *cfg = tcase_create("config");
	tcase_set_timeout(cfg, 120);
	tcase_add_test(cfg, test_bad_config);
	suite_add_tcase(s, cfg);
	return s;
}

int
main(void)
{
	return ts_run_suite(web_suite());
}
