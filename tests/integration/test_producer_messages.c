/*
 * test_producer_messages.c - POST /v1/messages and its lookup against a
 * real PostgreSQL and a real `outbox-producer serve`: create (one outbox
 * message, keyed by the client's key, the ordering key kept), replay with
 * Idempotent-Replayed, 422 for another body, the lookup (200, 404, 404
 * in progress), every kind of bad input (400/405/413, nothing stored), a
 * key held by a request in progress (409 + Retry-After, then the replay),
 * a slow request taken over after its lease (fencing on: one message, both
 * callers the same id), keys per token scope (two scopes' same key:
 * two messages, "~a/k" and "~b/k", each lookup its own), and a token's
 * topics= list (403 for another topic, nothing stored). In a database
 * migrated without the demo (no schema app): messages are served and
 * their keys expire; /v1/reports answers 404 not_installed.
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "outbox/migrate.h"
#include "testsupport.h"
#include "ts_producer.h"

#define MSG_BODY "{\"topic\":\"notify.email\",\"payload\":{\"to\":\"ops@example.com\",\"text\":\"disk full\"}}"

static PGconn *
fresh_db(char *db, size_t dblen)
{
	ts_db_create("prodmsg", "outbox", db, dblen);
	return ts_connect(db);
}

static void
post_msg(const char *url, const char *key, const char *body, struct ts_producer_reply *r)
{
	ts_producer_http(url, "POST", "/v1/messages", key, body, strlen(body), r);
}

static long long
message_id(const char *body)
{
	char v[32];
	const char *p = strstr(body, "\"message_id\":");
	if (p == NULL)
		return 0;
	snprintf(v, sizeof(v), "%s", p + strlen("\"message_id\":"));
	return atoll(v);
}

START_TEST(test_create_replay_mismatch_lookup)
{
	char db[TS_CONNINFO_MAX], v[64];
	PGconn *c = fresh_db(db, sizeof(db));
	struct ts_producer_server s;
	struct ts_producer_reply r;
	ts_producer_serve(db, NULL, &s);

	post_msg(s.url, "n-1", MSG_BODY, &r);
	ck_assert_int_eq(r.status, 201);
	ck_assert(!r.replayed);
	long long id = message_id(r.body);
	ck_assert_int_gt(id, 0);
	ck_assert_str_eq(ts_producer_json_str(r.body, "idempotency_key", v, sizeof(v)), "n-1");
	ck_assert_str_eq(ts_producer_json_str(r.body, "topic", v, sizeof(v)), "notify.email");
	/* The same request, members in another order, null ordering key: a replay. */
	post_msg(s.url, "n-1", "{\"ordering_key\":null,\"payload\":{\"text\":\"disk full\","
	    "\"to\":\"ops@example.com\"},\"topic\":\"notify.email\"}", &r);
	ck_assert_int_eq(r.status, 201);
	ck_assert(r.replayed);
	ck_assert_int_eq(message_id(r.body), id);
	/* Another body under the key: 422, nothing new. */
	post_msg(s.url, "n-1", "{\"topic\":\"notify.email\",\"payload\":{\"to\":\"x\"}}", &r);
	ck_assert_int_eq(r.status, 422);
	ck_assert(strstr(r.body, "idempotency_key_reused") != NULL);
	/* An ordering key is kept on the message. */
	post_msg(s.url, "n-2", "{\"topic\":\"notify.sms\",\"payload\":[1,2],\"ordering_key\":"
	    "\"user-7\"}", &r);
	ck_assert_int_eq(r.status, 201);
	ck_assert_str_eq(ts_producer_json_str(r.body, "ordering_key", v, sizeof(v)), "user-7");

	ts_producer_http(s.url, "GET", "/v1/messages?idempotency_key=n-1", NULL, NULL, 0, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(message_id(r.body), id);
	ts_producer_http(s.url, "GET", "/v1/messages?idempotency_key=nope", NULL, NULL, 0, &r);
	ck_assert_int_eq(r.status, 404);
	ck_assert(strstr(r.body, "not_found") != NULL);
	/* A report's key is not a message's: separate key tables. */
	ts_producer_post(s.url, "n-1", TS_PRODUCER_BODY, &r);
	ck_assert_int_eq(r.status, 201);
	ck_assert(!r.replayed);

	/* In the database: the message keyed by the client's key, the key done. */
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages WHERE topic ="
	    " 'notify.email' AND idempotency_key = 'n-1' AND payload->>'to' = 'ops@example.com'"
	    " AND ordering_key IS NULL"), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages WHERE topic ="
	    " 'notify.sms' AND idempotency_key = 'n-2' AND ordering_key = 'user-7'"), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages"), 3);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.message_keys WHERE state ="
	    " 'done' AND response_status = 201"), 2);
	ts_stop(s.pid, SIGTERM);
	PQfinish(c);
}
END_TEST

START_TEST(test_bad_input_changes_nothing)
{
	char db[TS_CONNINFO_MAX], big[2048], longkey[300], longtopic[300], body[600];
	PGconn *c = fresh_db(db, sizeof(db));
	struct ts_producer_server s;
	struct ts_producer_reply r;
	char *extra[] = { "--max-body", "1k", NULL };
	ts_producer_serve(db, extra, &s);

	static const struct {
		const char *key, *body, *says;
	} bad[] = {
		{ "b-1", "{\"topic\": oops", "not valid JSON" },
		{ "b-2", "[1]", "must be a JSON object" },
		{ "b-3", "{\"payload\":{}}", "'topic' is required" },
		{ "b-4", "{\"topic\":\"a b\",\"payload\":{}}", "printable ASCII without spaces" },
		{ "b-5", "{\"topic\":\"\",\"payload\":{}}", "'topic' must be 1..255" },
		{ "b-6", "{\"topic\":\"t\"}", "'payload' is required" },
		{ "b-7", "{\"topic\":\"t\",\"payload\":\"text\"}", "object or array" },
		{ "b-8", "{\"topic\":\"t\",\"payload\":{},\"ordering_key\":5}", "'ordering_key'" },
		{ "b-9", "{\"topic\":\"t\",\"payload\":{},\"ordering_key\":\"\"}", "'ordering_key'" },
		{ "b-10", "{\"topic\":\"t\",\"payload\":{},\"ordering_key\":\"a\\u0001\"}",
		    "control characters" },
		{ "b-11", "{\"topic\":\"t\",\"payload\":{},\"colour\":1}", "'colour' is not known" },
		{ "b-12", "{\"topic\":\"t\",\"topic\":\"u\",\"payload\":{}}", "not valid JSON" },
		{ "~b", "{\"topic\":\"t\",\"payload\":{}}", "may not start with '~'" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		post_msg(s.url, bad[i].key, bad[i].body, &r);
		ck_assert_msg(r.status == 400 && strstr(r.body, bad[i].says) != NULL,
		    "%s: want 400 with \"%s\", got %d %s", bad[i].body, bad[i].says, r.status, r.body);
	}
	memset(longtopic, 't', 256);
	longtopic[256] = '\0';
	snprintf(body, sizeof(body), "{\"topic\":\"%s\",\"payload\":{}}", longtopic);
	post_msg(s.url, "b-13", body, &r);
	ck_assert_int_eq(r.status, 400);
	ck_assert(strstr(r.body, "got 256 bytes") != NULL);
	ts_producer_http(s.url, "POST", "/v1/messages", NULL, MSG_BODY, strlen(MSG_BODY), &r);
	ck_assert_int_eq(r.status, 400);
	ck_assert(strstr(r.body, "Idempotency-Key header is required") != NULL);
	memset(longkey, 'k', 256);
	longkey[256] = '\0';
	post_msg(s.url, longkey, MSG_BODY, &r);
	ck_assert_int_eq(r.status, 400);
	snprintf(big, sizeof(big), "{\"topic\":\"t\",\"payload\":{\"x\":\"%0*d\"}}", 1100, 0);
	post_msg(s.url, "b-14", big, &r);
	ck_assert_int_eq(r.status, 413);
	ts_producer_http(s.url, "DELETE", "/v1/messages", "k", NULL, 0, &r);
	ck_assert_int_eq(r.status, 405);
	ts_producer_http(s.url, "GET", "/v1/messages?idempotency_key=", NULL, NULL, 0, &r);
	ck_assert_int_eq(r.status, 400);
	ts_producer_http(s.url, "GET", "/v1/messages", NULL, NULL, 0, &r);
	ck_assert_int_eq(r.status, 400);

	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.message_keys"), 0);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages"), 0);
	/* Still serving; a key refused for a bad body is usable afterwards. */
	post_msg(s.url, "b-1", MSG_BODY, &r);
	ck_assert_int_eq(r.status, 201);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages"), 1);
	ts_stop(s.pid, SIGTERM);
	PQfinish(c);
}
END_TEST

/* A request held in the slow point after its claim: a second with the key
 * gets 409 + Retry-After until the first is done, then the replay. */
START_TEST(test_in_progress_then_replay)
{
	char db[TS_CONNINFO_MAX];
	PGconn *c = fresh_db(db, sizeof(db));
	struct ts_producer_server s;
	char *extra[] = { "--fault-slow", "1", "--fault-slow-ms", "1500ms", NULL };
	ts_producer_serve(db, extra, &s);
	struct ts_producer_poster a = { .url = s.url, .key = "p-1", .path = "/v1/messages",
		.body = MSG_BODY };
	pthread_create(&a.t, NULL, ts_producer_poster_main, &a);
	ts_assert_logged(s.log, "fault=producer.slow");
	struct ts_producer_reply b, look;
	post_msg(s.url, "p-1", MSG_BODY, &b);
	ck_assert_int_eq(b.status, 409);
	/* 1 s, spread to 2 at random (ob_retry_after_spread_s) */
	ck_assert_msg(strcmp(b.retry_after, "1") == 0 || strcmp(b.retry_after, "2") == 0, "%s",
	    b.retry_after);
	ts_producer_http(s.url, "GET", "/v1/messages?idempotency_key=p-1", NULL, NULL, 0, &look);
	ck_assert_int_eq(look.status, 404);
	ck_assert(strstr(look.body, "in_progress") != NULL);
	pthread_join(a.t, NULL);
	ck_assert_int_eq(a.r.status, 201);
	post_msg(s.url, "p-1", MSG_BODY, &b);
	ck_assert_int_eq(b.status, 201);
	ck_assert(b.replayed);
	ck_assert_int_eq(message_id(b.body), message_id(a.r.body));
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages"), 1);
	ts_stop(s.pid, SIGTERM);
	PQfinish(c);
}
END_TEST

/* Lease 0.5 s, the first request asleep 0.8 s after its claim: the second
 * takes the key over and enqueues; the first wakes fenced out and answers
 * with the winner's result. One message, both callers its id. */
START_TEST(test_slow_request_taken_over)
{
	char db[TS_CONNINFO_MAX];
	PGconn *c = fresh_db(db, sizeof(db));
	struct ts_producer_server s;
	char *extra[] = { "--lease", "500ms", "--max-processing", "400ms", "--fault-slow", "1",
		"--fault-slow-ms", "800ms", NULL };
	ts_producer_serve(db, extra, &s);
	struct ts_producer_poster a = { .url = s.url, .key = "slow-1", .path = "/v1/messages",
		.body = MSG_BODY };
	pthread_create(&a.t, NULL, ts_producer_poster_main, &a);
	ts_wait_value(c, "SELECT count(*) FROM outbox.message_keys WHERE state = 'started'"
	    " AND lease_until < clock_timestamp()", 1, 20000);
	struct ts_producer_reply b;
	post_msg(s.url, "slow-1", MSG_BODY, &b);
	pthread_join(a.t, NULL);
	ck_assert_int_eq(b.status, 201);
	ck_assert_msg(!b.replayed, "the second request did not take the key over");
	ck_assert_int_eq(a.r.status, 201);
	ck_assert(a.r.replayed); /* fenced out, answered with the winner's result */
	ck_assert_int_eq(message_id(a.r.body), message_id(b.body));
	ck_assert_int_eq(ts_query_int(c, "SELECT fence FROM outbox.message_keys"), 2);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages"), 1);
	ts_assert_logged(s.log, "producer.key.fenced_out");
	ts_stop(s.pid, SIGTERM);
	PQfinish(c);
}
END_TEST

/* Two scopes' same key: two messages, each keyed in its scope, each lookup
 * its own; the default scope's bare key stays as sent. */
START_TEST(test_keys_per_scope)
{
	char db[TS_CONNINFO_MAX], path[300], out[8192], req[4096], extra_h[256];
	PGconn *c = fresh_db(db, sizeof(db));
	snprintf(path, sizeof(path), "%s/tokens", ts_tmpdir());
	ts_write_file(path, "scope=alpha tok-alpha-0123456789ab\nscope=beta tok-beta-0123456789abc\n");
	struct ts_producer_server s;
	char *extra[] = { "--api-token-file", path, NULL };
	ts_producer_serve(db, extra, &s);
	int port = ts_producer_port(&s);
	const char *tokens[2] = { "tok-alpha-0123456789ab", "tok-beta-0123456789abc" };
	for (int i = 0; i < 2; i++) {
		snprintf(extra_h, sizeof(extra_h), "Authorization: Bearer %s\r\nConnection: close\r\n",
		    tokens[i]);
		int n = snprintf(req, sizeof(req), "POST /v1/messages HTTP/1.1\r\nHost: x\r\n"
		    "Idempotency-Key: same-1\r\nContent-Type: application/json\r\n%s"
		    "Content-Length: %zu\r\n\r\n%s", extra_h, strlen(MSG_BODY), MSG_BODY);
		ck_assert_int_eq(ts_http_raw(port, req, (size_t)n, out, sizeof(out), 10000), 201);
		ck_assert_msg(strstr(out, "Idempotent-Replayed") == NULL, "scope %d replayed: %s", i,
		    out);
		ck_assert_msg(strstr(out, "\"idempotency_key\":\"same-1\"") != NULL, "%s", out);
	}
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages WHERE"
	    " idempotency_key IN ('~alpha/same-1', '~beta/same-1')"), 2);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages"), 2);
	/* Each scope's lookup answers its own message. */
	long long ids[2];
	for (int i = 0; i < 2; i++) {
		int n = snprintf(req, sizeof(req), "GET /v1/messages?idempotency_key=same-1 HTTP/1.1\r\n"
		    "Host: x\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", tokens[i]);
		ck_assert_int_eq(ts_http_raw(port, req, (size_t)n, out, sizeof(out), 10000), 200);
		ids[i] = message_id(strstr(out, "\r\n\r\n"));
		ck_assert_int_gt(ids[i], 0);
	}
	ck_assert_int_ne(ids[0], ids[1]);
	ts_stop(s.pid, SIGTERM);
	PQfinish(c);
}
END_TEST

/* A token's topics= list: 403 for another topic, nothing stored (not even
 * the key: the same key is usable for an allowed topic after); a token
 * without a list may send anywhere. */
START_TEST(test_topic_allowlist)
{
	char db[TS_CONNINFO_MAX], path[300], out[8192], req[4096];
	PGconn *c = fresh_db(db, sizeof(db));
	snprintf(path, sizeof(path), "%s/tokens-topics", ts_tmpdir());
	ts_write_file(path, "scope=agent topics=notify.*,alerts.pager tok-agent-0123456789ab\n"
	    "scope=ops tok-ops-0123456789abcdef\n");
	struct ts_producer_server s;
	char *extra[] = { "--api-token-file", path, NULL };
	ts_producer_serve(db, extra, &s);
	int port = ts_producer_port(&s);
	static const struct {
		const char *token, *key, *topic;
		int status;
	} cases[] = {
		{ "tok-agent-0123456789ab", "a-1", "notify.email", 201 },
		{ "tok-agent-0123456789ab", "a-2", "alerts.pager", 201 },
		{ "tok-agent-0123456789ab", "a-3", "billing.refund", 403 },
		{ "tok-agent-0123456789ab", "a-4", "alerts.pager.x", 403 },
		{ "tok-agent-0123456789ab", "a-3", "notify.sms", 201 }, /* the refused key, reused */
		{ "tok-ops-0123456789abcdef", "o-1", "billing.refund", 201 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char body[256];
		snprintf(body, sizeof(body), "{\"topic\":\"%s\",\"payload\":{\"n\":%zu}}",
		    cases[i].topic, i);
		int n = snprintf(req, sizeof(req), "POST /v1/messages HTTP/1.1\r\nHost: x\r\n"
		    "Idempotency-Key: %s\r\nAuthorization: Bearer %s\r\nConnection: close\r\n"
		    "Content-Length: %zu\r\n\r\n%s", cases[i].key, cases[i].token, strlen(body), body);
		int st = ts_http_raw(port, req, (size_t)n, out, sizeof(out), 10000);
		ck_assert_msg(st == cases[i].status, "case %zu (%s): %d %s", i, cases[i].topic, st,
		    out);
		if (st == 403)
			ck_assert_msg(strstr(out, "topic_not_allowed") != NULL, "%s", out);
	}
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages"), 4);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages WHERE topic IN"
	    " ('alerts.pager.x') OR (topic = 'billing.refund' AND idempotency_key LIKE '~agent/%')"),
	    0);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.message_keys"), 4);
	ts_stop(s.pid, SIGTERM);
	PQfinish(c);
}
END_TEST

/* Before issue 33 the key sweep stopped at the first table it could not
 * sweep, app.idempotency_keys, so without the demo no message key ever
 * expired: the wait below timed out. */
START_TEST(test_messages_without_the_demo)
{
	char db[TS_CONNINFO_MAX], err[512];
	ts_db_create("prodnodemo", NULL, db, sizeof(db));
	PGconn *c = ts_connect(db);
	struct ob_migrate_report rep;
	ck_assert_msg(ob_migrate(c, &(struct ob_migrate_opts){ .set = "outbox" }, &rep, err,
	                  sizeof(err)) == 0, "migrate: %s", err);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM pg_namespace WHERE nspname = 'app'"),
	    0);
	struct ts_producer_server s;
	struct ts_producer_reply r;
	char *extra[] = { "--key-retention", "1s", "--gc-interval", "100ms", NULL };
	ts_producer_serve(db, extra, &s);

	post_msg(s.url, "nd-1", MSG_BODY, &r);
	ck_assert_msg(r.status == 201, "%d %s", r.status, r.body);
	ts_producer_post(s.url, "nd-2", TS_PRODUCER_BODY, &r);
	ck_assert_msg(r.status == 404 && strstr(r.body, "not_installed") != NULL &&
	        strstr(r.body, "outboxctl migrate --demo") != NULL, "%d %s", r.status, r.body);
	ts_producer_http(s.url, "GET", "/v1/reports/1", NULL, NULL, 0, &r);
	ck_assert_msg(r.status == 404 && strstr(r.body, "not_installed") != NULL, "%d %s",
	    r.status, r.body);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages"), 1);
	/* the message's key expires: the sweep goes past the missing table */
	ck_assert_int_eq(ts_wait_value(c, "SELECT count(*) FROM outbox.message_keys", 0, 30000), 0);
	ts_stop(s.pid, SIGTERM);
	PQfinish(c);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("producer_messages");
	TCase *tc = tcase_create("messages");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_create_replay_mismatch_lookup);
	tcase_add_test(tc, test_bad_input_changes_nothing);
	tcase_add_test(tc, test_in_progress_then_replay);
	tcase_add_test(tc, test_slow_request_taken_over);
	tcase_add_test(tc, test_keys_per_scope);
	tcase_add_test(tc, test_topic_allowlist);
	tcase_add_test(tc, test_messages_without_the_demo);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
