/*
 * test_producer_client.c - the agent-side client against a real server:
 * a lost response retried with a stable key replays (and on a server
 * without keys makes a duplicate), a 400 is not retried and not stored, a
 * timeout whose outcome stays unknown is SIDE_EFFECT_UNCERTAIN (exit 3),
 * the ledger makes the next call look the key up before posting, an
 * unreachable service is a failure with nothing created, and the CLI
 * prints ONE JSON observation. `send` (a generic message, the same code):
 * a lost response replayed under the same key, one message; the CLI with
 * --payload @FILE, --key-from content, lookup --kind message; bad payloads
 * exit 2 with nothing sent.
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <jansson.h>
#include <nng/nng.h>

#include "client.h"
#include "ledger.h"
#include "outbox/err.h"
#include "testsupport.h"
#include "ts_producer.h"

static struct client_opts
opts(const char *url, enum client_key_source src, const char *key)
{
	return (struct client_opts){ .url = url, .title = "Crash on save", .module = "editor",
		.severity = "high", .key_source = src, .key = key, .run = "run-1", .attempts = 4,
		.base_ms = 20, .cap_ms = 200, .timeout_ms = 2000, .max_retry_after_ms = 5000 };
}

static int64_t
lost_response_run(const char *mode, enum client_key_source src, struct client_result *res)
{
	char db[TS_CONNINFO_MAX];
	ts_db_create("prodcli", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	struct ts_producer_server s;
	char *extra[] = { "--idempotency", (char *)mode, "--fault-lose-response", "1", NULL };
	ts_producer_serve(db, extra, &s);
	struct client_opts o = opts(s.url, src, "run-042:toolu_01");
	client_submit(&o, res);
	int64_t n = ts_query_int(c, "SELECT count(*) FROM app.bug_reports");
	if (res->created_id > 0) {
		char sql[128];
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM app.bug_reports WHERE id = %lld",
		    (long long)res->created_id);
		ck_assert_int_eq(ts_query_int(c, sql), 1); /* the id returned exists */
	}
	ts_stop(s.pid, SIGTERM);
	PQfinish(c);
	return n;
}

START_TEST(test_lost_response_retry)
{
	struct client_result r;
	/* Broken first: no keys, the retry makes a second report. */
	ck_assert_int_eq(lost_response_run("none", CLIENT_KEY_NONE, &r), 2);
	ck_assert(r.ok);
	ck_assert_int_eq(r.attempts, 2);
	client_result_fini(&r);
	/* Atomic with the tool-call key: the retry replays the first result. */
	ck_assert_int_eq(lost_response_run("atomic", CLIENT_KEY_TOOL_CALL, &r), 1);
	ck_assert(r.ok);
	ck_assert_int_eq(r.attempts, 2);
	ck_assert(r.replayed);
	ck_assert_str_eq(r.key, "run-042:toolu_01");
	ck_assert_int_eq(r.exit_code, CLIENT_EXIT_OK);
	client_result_fini(&r);
}
END_TEST

START_TEST(test_invalid_not_retried_not_stored)
{
	char db[TS_CONNINFO_MAX];
	ts_db_create("prodcli", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	struct ts_producer_server s;
	ts_producer_serve(db, NULL, &s);
	struct client_opts o = opts(s.url, CLIENT_KEY_FIXED, "bad-1");
	o.module = ""; /* missing field */
	struct client_result r;
	client_submit(&o, &r);
	ck_assert(!r.ok);
	ck_assert_str_eq(r.code, "INVALID_ARGUMENTS");
	ck_assert_int_eq(r.attempts, 1);
	ck_assert_int_eq(r.exit_code, CLIENT_EXIT_FAILED);
	ck_assert(strstr(r.observation, "'module'") != NULL);
	client_result_fini(&r);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.bug_reports"), 0);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.idempotency_keys"), 0);
	ts_stop(s.pid, SIGTERM);
	PQfinish(c);
}
END_TEST

static char *
ledger_states(const char *path, const char *key)
{
	static char out[256];
	char *s = ts_read_file(path);
	out[0] = '\0';
	for (char *line = s ? strtok(s, "\n") : NULL; line; line = strtok(NULL, "\n")) {
		json_t *o = json_loads(line, 0, NULL);
		if (o != NULL && strcmp(json_string_value(json_object_get(o, "key")), key) == 0) {
			strcat(out, json_string_value(json_object_get(o, "state")));
			strcat(out, " ");
		}
		json_decref(o);
	}
	free(s);
	return out;
}

START_TEST(test_uncertain_then_ledger_lookup)
{
	char db[TS_CONNINFO_MAX], ledger[300];
	ts_db_create("prodcli", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	struct ts_producer_server s;
	/* The first request sits 2.5 s after its claim; the client waits 0.5 s. */
	char *extra[] = { "--fault-slow", "1", "--fault-slow-ms", "2500ms", NULL };
	ts_producer_serve(db, extra, &s);
	snprintf(ledger, sizeof(ledger), "%s/ledger-%d.jsonl", ts_tmpdir(), (int)getpid());
	struct client_opts o = opts(s.url, CLIENT_KEY_TOOL_CALL, "run-7:toolu_09");
	o.run_id = "run-7"; /* the command derives them from --key-from tool-call */
	o.step_id = "toolu_09";
	o.timeout_ms = 500;
	o.attempts = 2;
	o.max_retry_after_ms = 100;
	o.ledger = ledger;
	struct client_result r;
	client_submit(&o, &r);
	ck_assert(!r.ok);
	ck_assert_str_eq(r.code, "SIDE_EFFECT_UNCERTAIN");
	ck_assert_int_eq(r.exit_code, CLIENT_EXIT_UNCERTAIN);
	ck_assert(strstr(r.observation, "Do NOT resubmit") != NULL);
	ck_assert(strstr(r.observation, "\"idempotencyKey\":\"run-7:toolu_09\"") != NULL);
	ck_assert(strstr(r.observation, "\"retryable\":false") != NULL);
	client_result_fini(&r);
	ck_assert_str_eq(ledger_states(ledger, "run-7:toolu_09"), "planned started uncertain ");

	/* The slow request commits after all. The next call looks up first. */
	ts_wait_value(c, "SELECT count(*) FROM app.bug_reports", 1, 20000);
	o.timeout_ms = 2000;
	client_submit(&o, &r);
	ck_assert(r.ok);
	ck_assert_int_eq(r.attempts, 0); /* nothing posted */
	ck_assert_int_gt(r.created_id, 0);
	client_result_fini(&r);
	ck_assert_str_eq(ledger_states(ledger, "run-7:toolu_09"),
	    "planned started uncertain succeeded ");
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.bug_reports"), 1);

	/* An uncertain key the server never saw: looked up, not found, posted. */
	char err[256];
	ck_assert_int_eq(ledger_append(ledger, "submit_bug_report", "run-7:toolu_10", "uncertain",
	                     NULL, err, sizeof(err)), OB_OK);
	o.key = "run-7:toolu_10";
	o.step_id = "toolu_10";
	o.title = "Another bug";
	client_submit(&o, &r);
	ck_assert(r.ok);
	ck_assert_int_eq(r.attempts, 1);
	ck_assert(!r.replayed);
	client_result_fini(&r);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.bug_reports"), 2);

	/* What a ledger line says (the second article's ledger): the tool, its
	 * run and step, the hash of its input, its declared idempotency and
	 * replay policy, and what it made with a reference that reads it. */
	json_t *entries = ledger_entries(ledger, "run-7:toolu_10", err, sizeof(err));
	ck_assert_ptr_nonnull(entries);
	json_t *last = json_array_get(entries, json_array_size(entries) - 1);
	ck_assert_str_eq(json_string_value(json_object_get(last, "state")), "succeeded");
	ck_assert_str_eq(json_string_value(json_object_get(last, "tool")), "submit_bug_report");
	ck_assert_str_eq(json_string_value(json_object_get(last, "run")), "run-7");
	ck_assert_str_eq(json_string_value(json_object_get(last, "step")), "toolu_10");
	ck_assert_str_eq(json_string_value(json_object_get(last, "idempotency")), "idempotent");
	ck_assert_str_eq(json_string_value(json_object_get(last, "replay")), "auto");
	ck_assert_int_eq(strlen(json_string_value(json_object_get(last, "input_hash"))), 7 + 64);
	ck_assert_str_eq(json_string_value(json_object_get(last, "result_ref")),
	    "/v1/reports?idempotency_key=run-7%3Atoolu_10");
	ck_assert_int_gt(json_integer_value(json_object_get(last, "reportId")), 0);
	json_decref(entries);

	/* The replay policy of an uncertain key the lookup does not find:
	 * never and ask (not approved) post nothing and say so; ask approved
	 * posts it, the approval in the ledger. */
	ck_assert_int_eq(ledger_append(ledger, "submit_bug_report", "run-7:toolu_11", "uncertain",
	                     NULL, err, sizeof(err)), OB_OK);
	o.key = "run-7:toolu_11";
	o.title = "A third bug";
	o.step_id = "toolu_11";
	o.replay = CLIENT_REPLAY_NEVER;
	client_submit(&o, &r);
	ck_assert_str_eq(r.code, "SIDE_EFFECT_UNCERTAIN");
	ck_assert_int_eq(r.attempts, 0);
	ck_assert_msg(strstr(r.observation, "replay policy is never") != NULL, "%s", r.observation);
	client_result_fini(&r);
	o.replay = CLIENT_REPLAY_ASK;
	client_submit(&o, &r);
	ck_assert_str_eq(r.code, "SIDE_EFFECT_UNCERTAIN");
	ck_assert_int_eq(r.attempts, 0);
	ck_assert_msg(strstr(r.observation, "ask the user") != NULL, "%s", r.observation);
	client_result_fini(&r);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.bug_reports"), 2);
	o.approved = true;
	client_submit(&o, &r);
	ck_assert_msg(r.ok, "%s", r.observation);
	ck_assert_int_eq(r.attempts, 1);
	client_result_fini(&r);
	ck_assert_str_eq(ledger_states(ledger, "run-7:toolu_11"),
	    "uncertain planned approved started succeeded ");
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.bug_reports"), 3);
	ts_stop(s.pid, SIGTERM);
	PQfinish(c);
}
END_TEST

START_TEST(test_unreachable_is_failure_not_uncertain)
{
	/* A port held by a socket that never listens: every connect is refused. */
	int port, fd = ts_refusing_local(&port);
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	struct client_opts o = opts(url, CLIENT_KEY_FIXED, "k");
	struct client_result r;
	client_submit(&o, &r);
	close(fd);
	ck_assert(!r.ok);
	ck_assert_str_eq(r.code, "TOOL_CRASH");
	ck_assert_int_eq(r.attempts, 4);
	ck_assert_int_eq(r.exit_code, CLIENT_EXIT_FAILED);
	ck_assert(strstr(r.observation, "\"retryable\":true") != NULL);
	client_result_fini(&r);
}
END_TEST

START_TEST(test_cli_prints_one_observation)
{
	char db[TS_CONNINFO_MAX], out[4096];
	ts_db_create("prodcli", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	struct ts_producer_server s;
	ts_producer_serve(db, NULL, &s);
	char *argv[] = { "outbox-producer", "submit", "--url", s.url, "--title", "Crash",
		"--module", "editor", "--key-from", "tool-call", "run-9:toolu_01", NULL };
	ck_assert_int_eq(ts_run(argv, NULL, out, sizeof(out), 30000), 0);
	json_t *o = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
	ck_assert_msg(o != NULL, "not one JSON object: %s", out);
	ck_assert(json_is_true(json_object_get(o, "ok")));
	json_t *meta = json_object_get(o, "metadata");
	ck_assert_str_eq(json_string_value(json_object_get(meta, "idempotencyKey")),
	    "run-9:toolu_01");
	ck_assert_int_gt(json_integer_value(json_object_get(meta, "reportId")), 0);
	json_decref(o);
	char *look[] = { "outbox-producer", "lookup", "--url", s.url, "--key", "run-9:toolu_01",
		NULL };
	ck_assert_int_eq(ts_run(look, NULL, out, sizeof(out), 30000), 0);
	char *miss[] = { "outbox-producer", "lookup", "--url", s.url, "--key", "nope", NULL };
	ck_assert_int_eq(ts_run(miss, NULL, out, sizeof(out), 30000), 1);
	ck_assert(strstr(out, "NOT_FOUND") != NULL);
	char *bad[] = { "outbox-producer", "submit", "--url", s.url, "--title", "x", "--module",
		"m", NULL };
	ck_assert_int_eq(ts_run(bad, NULL, out, sizeof(out), 30000), 2); /* no key given */
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.bug_reports"), 1);
	ts_stop(s.pid, SIGTERM);
	PQfinish(c);
}
END_TEST

/* send: the message path of the same client. A lost response is retried
 * under the same key and replayed: one message, keyed by the call's key. */
START_TEST(test_send_lost_response_and_cli)
{
	char db[TS_CONNINFO_MAX], out[4096], file[300];
	ts_db_create("prodcli", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	struct ts_producer_server s;
	char *extra[] = { "--fault-lose-response", "1", NULL };
	ts_producer_serve(db, extra, &s);
	struct client_opts o = opts(s.url, CLIENT_KEY_TOOL_CALL, "run-5:toolu_77");
	o.target = CLIENT_MESSAGE;
	o.topic = "notify.chat";
	o.payload = "{\"channel\":\"#ops\",\"text\":\"deploy done\"}";
	o.ordering_key = "chan-ops";
	struct client_result r;
	client_submit(&o, &r);
	ck_assert_msg(r.ok, "%s", r.observation);
	ck_assert_int_eq(r.attempts, 2);
	ck_assert(r.replayed);
	ck_assert(strstr(r.observation, "\"messageId\":") != NULL);
	ck_assert(strstr(r.observation, "reportId") == NULL);
	char sql[256];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM outbox.messages WHERE id = %lld AND"
	    " idempotency_key = 'run-5:toolu_77' AND topic = 'notify.chat' AND ordering_key ="
	    " 'chan-ops' AND payload->>'text' = 'deploy done'", (long long)r.created_id);
	ck_assert_int_eq(ts_query_int(c, sql), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages"), 1);
	client_result_fini(&r);

	/* The CLI: --payload @FILE and a content key; the same call again is
	 * the same key (replayed); lookup --kind message finds it. */
	snprintf(file, sizeof(file), "%s/payload.json", ts_tmpdir());
	ts_write_file(file, "{\"to\": \"ops@example.com\", \"text\": \"disk full\"}\n");
	char at[310];
	snprintf(at, sizeof(at), "@%s", file);
	char *send[] = { "outbox-producer", "send", "--url", s.url, "--topic", "notify.email",
		"--payload", at, "--key-from", "content", "--run", "run-5", NULL };
	ck_assert_int_eq(ts_run(send, NULL, out, sizeof(out), 30000), 0);
	json_t *first = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
	ck_assert_msg(first != NULL, "not one JSON object: %s", out);
	const char *key = json_string_value(json_object_get(json_object_get(first, "metadata"),
	    "idempotencyKey"));
	ck_assert_msg(key != NULL && strncmp(key, "content-", 8) == 0, "%s", out);
	ck_assert_int_eq(ts_run(send, NULL, out, sizeof(out), 30000), 0);
	ck_assert_msg(strstr(out, "\"replayed\":true") != NULL, "%s", out);
	ck_assert_msg(strstr(out, key) != NULL, "another key: %s", out);
	char *look[] = { "outbox-producer", "lookup", "--url", s.url, "--kind", "message", "--key",
		(char *)key, NULL };
	ck_assert_int_eq(ts_run(look, NULL, out, sizeof(out), 30000), 0);
	ck_assert_msg(strstr(out, "A message with key") != NULL, "%s", out);
	char *look_report[] = { "outbox-producer", "lookup", "--url", s.url, "--key", (char *)key,
		NULL };
	ck_assert_int_eq(ts_run(look_report, NULL, out, sizeof(out), 30000), 1);
	json_decref(first);

	/* Bad payloads: exit 2, one line, nothing sent. */
	char *not_json[] = { "outbox-producer", "send", "--url", s.url, "--topic", "t",
		"--payload", "{oops", "--key", "k-bad", NULL };
	ck_assert_int_eq(ts_run(not_json, NULL, out, sizeof(out), 30000), 2);
	ck_assert_msg(strstr(out, "--payload is not JSON") != NULL, "%s", out);
	char *scalar[] = { "outbox-producer", "send", "--url", s.url, "--topic", "t",
		"--payload", "[1]x", "--key", "k-bad", NULL };
	ck_assert_int_eq(ts_run(scalar, NULL, out, sizeof(out), 30000), 2);
	char *missing[] = { "outbox-producer", "send", "--url", s.url, "--topic", "t",
		"--payload", "@/nonexistent/p.json", "--key", "k-bad", NULL };
	ck_assert_int_eq(ts_run(missing, NULL, out, sizeof(out), 30000), 2);
	ck_assert_msg(strstr(out, "cannot open /nonexistent/p.json") != NULL, "%s", out);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages"), 2);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.message_keys"), 2);
	ts_stop(s.pid, SIGTERM);
	PQfinish(c);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("producer_client");
	TCase *tc = tcase_create("client");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_lost_response_retry);
	tcase_add_test(tc, test_invalid_not_retried_not_stored);
	tcase_add_test(tc, test_uncertain_then_ledger_lookup);
	tcase_add_test(tc, test_unreachable_is_failure_not_uncertain);
	tcase_add_test(tc, test_cli_prints_one_observation);
	tcase_add_test(tc, test_send_lost_response_and_cli);
	suite_add_tcase(s, tc);
	int rc = ts_run_suite(s);
	nng_fini();
	return rc;
}
