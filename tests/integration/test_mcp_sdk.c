/*
 * test_mcp_sdk.c - `outbox-producer mcp` driven by a real MCP client that
 * nobody here wrote: the official SDK (@modelcontextprotocol/sdk, pinned in
 * tests/mcp/package.json, installed by scripts/setup-deps.sh --tests),
 * tests/mcp/sdk_client.mjs, against a real `serve` that loses the first
 * response after committing (--fault-lose-response 1).
 *
 * What a user would check: the tools and their annotations as the SDK
 * parsed them; a lost response retried under the same key (one report,
 * one notification, each `replayed`); a host's retry of the same call (members in another order)
 * answered from the first report; a new call a new report; the host's
 * _meta key used as given; the lookup; bad arguments a tool error the
 * model can read; an unknown tool a protocol error. Rows counted in the
 * database. Once without tokens, once through a scoped bearer token that
 * the MCP server sends (--api-token-file).
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "ledger.h"
#include "outbox/err.h"
#include "testsupport.h"
#include "ts_producer.h"

#define RUN_ID "run-test-mcp-1"
#define NODE_TIMEOUT_MS 120000

/* o's member at a dotted path (tests/support's one walker) */
static json_t *
get(json_t *o, const char *path)
{
	return ts_json_at(o, path);
}

static const char *
get_s(json_t *o, const char *path)
{
	return json_string_value(get(o, path));
}

static json_t *
tool_named(json_t *tools, const char *name)
{
	size_t i;
	json_t *t;
	json_array_foreach(tools, i, t)
		if (strcmp(get_s(t, "name"), name) == 0)
			return t;
	return NULL;
}

/* Run the SDK client against a fresh database's serve (with the token
 * files when not NULL: the server's, and the one token the MCP server
 * sends) and check everything it got. */
static void
run_and_check(const char *server_tokens, const char *client_token)
{
	char db[TS_CONNINFO_MAX], dir[512], script[600], bin[600];
	const char *src = getenv("OUTBOX_SOURCE_DIR");
	const char *bindir = getenv("OUTBOX_BIN_DIR");
	ck_assert_ptr_nonnull(src);
	ck_assert_ptr_nonnull(bindir);
	snprintf(dir, sizeof(dir), "%s/tests/mcp/node_modules/@modelcontextprotocol/sdk", src);
	ck_assert_msg(access(dir, R_OK) == 0,
	    "%s is missing: run scripts/setup-deps.sh --tests (it runs npm ci in tests/mcp)", dir);
	snprintf(script, sizeof(script), "%s/tests/mcp/sdk_client.mjs", src);
	snprintf(bin, sizeof(bin), "%s/outbox-producer", bindir);

	ts_db_create("mcpsdk", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	struct ts_producer_server s;
	/* Two lost responses: the first report's, the first notification's
	 * (the fault fires on the first two creating requests). */
	char *extra[] = { "--fault-lose-response", "2", NULL, NULL, NULL };
	if (server_tokens != NULL) {
		extra[2] = "--api-token-file";
		extra[3] = (char *)server_tokens;
	}
	ts_producer_serve(db, extra, &s);

	static char out[1 << 20];
	char *argv[] = { "/usr/bin/env", "node", script, bin, s.url, RUN_ID, (char *)client_token,
		NULL };
	int code = ts_run(argv, NULL, out, sizeof(out), NODE_TIMEOUT_MS);
	ck_assert_msg(code == 0, "the SDK client exited %d:\n%s", code, out);
	char *line = strstr(out, "RESULT ");
	ck_assert_msg(line != NULL, "no RESULT line:\n%s", out);
	line += strlen("RESULT ");
	line[strcspn(line, "\n")] = '\0';
	json_error_t jerr;
	json_t *r = json_loads(line, 0, &jerr);
	ck_assert_msg(r != NULL, "RESULT is not JSON (%s): %s", jerr.text, line);

	/* The tools as the SDK parsed them. */
	ck_assert_str_eq(get_s(r, "server.name"), "outbox-producer");
	json_t *tools = get(r, "tools");
	ck_assert_int_eq((int)json_array_size(tools), 3);
	json_t *send = tool_named(tools, "send_notification");
	ck_assert_ptr_nonnull(send);
	ck_assert(json_is_true(get(send, "annotations.idempotentHint")));
	json_t *submit = tool_named(tools, "submit_bug_report");
	json_t *lookup = tool_named(tools, "lookup_by_key");
	ck_assert_ptr_nonnull(submit);
	ck_assert_ptr_nonnull(lookup);
	ck_assert(json_is_true(get(submit, "annotations.idempotentHint")));
	ck_assert(json_is_false(get(submit, "annotations.readOnlyHint")));
	ck_assert(json_is_true(get(lookup, "annotations.readOnlyHint")));
	ck_assert_str_eq(get_s(submit, "inputSchema.type"), "object");

	/* The first call: created, its answer lost, retried under the same
	 * key and answered from the stored response. */
	ck_assert(json_is_false(get(r, "first.isError")));
	ck_assert(json_is_true(get(r, "first.structuredContent.ok")));
	ck_assert(json_is_true(get(r, "first.structuredContent.metadata.replayed")));
	ck_assert_int_eq((int)json_integer_value(get(r, "first.structuredContent.metadata.attempts")),
	    2);
	const char *key = get_s(r, "first.structuredContent.metadata.idempotencyKey");
	ck_assert_ptr_nonnull(key);
	ck_assert_msg(strncmp(key, "mcp-", 4) == 0, "key %s", key);
	json_int_t id = json_integer_value(get(r, "first.structuredContent.metadata.reportId"));
	ck_assert_int_gt(id, 0);

	/* The host's retry: the same key, the same report, replayed. */
	ck_assert_str_eq(get_s(r, "again.structuredContent.metadata.idempotencyKey"), key);
	ck_assert_int_eq(json_integer_value(get(r, "again.structuredContent.metadata.reportId")), id);
	ck_assert(json_is_true(get(r, "again.structuredContent.metadata.replayed")));

	/* A new call: another key, another report. */
	const char *other = get_s(r, "other.structuredContent.metadata.idempotencyKey");
	ck_assert_ptr_nonnull(other);
	ck_assert_str_ne(other, key);
	ck_assert_int_ne(json_integer_value(get(r, "other.structuredContent.metadata.reportId")), id);
	ck_assert(json_is_true(get(r, "other.structuredContent.ok")));

	/* The host's key, used as given. */
	ck_assert_str_eq(get_s(r, "hostKey.structuredContent.metadata.idempotencyKey"),
	    "host-key-0001");
	ck_assert(json_is_true(get(r, "hostKey.structuredContent.ok")));

	/* SEP-3182: the capability advertised; params.idempotencyKey used as
	 * given, replayed the second time; with other arguments the conflict,
	 * named, and nothing created; two different host keys refused. */
	/* (the SDK's parser keeps only the capabilities it knows: the raw
	 * initialize answer is read below) */
	ck_assert_str_eq(get_s(r, "sep.structuredContent.metadata.idempotencyKey"), "sep-key-0001");
	ck_assert(json_is_true(get(r, "sep.structuredContent.ok")));
	json_int_t sep_id = json_integer_value(get(r, "sep.structuredContent.metadata.reportId"));
	ck_assert_int_gt(sep_id, 0);
	ck_assert(json_is_true(get(r, "sepAgain.structuredContent.metadata.replayed")));
	ck_assert_int_eq(json_integer_value(get(r, "sepAgain.structuredContent.metadata.reportId")),
	    sep_id);
	ck_assert(json_is_true(get(r, "sepConflict.isError")));
	ck_assert_str_eq(get_s(r, "sepConflict.structuredContent.code"), "IDEMPOTENCY_CONFLICT");
	ck_assert_msg(strstr(get_s(r, "sepConflict.structuredContent.content"),
	                  "already used for a different") != NULL, "%s", line);
	ck_assert_int_eq((int)json_integer_value(get(r, "sepTwoKeys.code")), -32602);
	ck_assert_msg(strstr(get_s(r, "sepTwoKeys.message"), "two different keys") != NULL, "%s",
	    line);

	/* The lookup finds the first report; an unused key is NOT_FOUND. */
	ck_assert(json_is_true(get(r, "lookup.structuredContent.ok")));
	ck_assert_int_eq(json_integer_value(get(r, "lookup.structuredContent.metadata.reportId")), id);
	ck_assert(json_is_true(get(r, "missing.isError")));
	ck_assert_str_eq(get_s(r, "missing.structuredContent.code"), "NOT_FOUND");

	/* Bad arguments: a tool error with words; an unknown tool: a protocol
	 * error (-32602, invalid params). */
	ck_assert(json_is_true(get(r, "badArgs.isError")));
	ck_assert_str_eq(get_s(r, "badArgs.structuredContent.code"), "INVALID_ARGUMENTS");
	ck_assert_msg(strstr(get_s(r, "badArgs.structuredContent.content"), "colour") != NULL,
	    "%s", line);
	ck_assert_int_eq((int)json_integer_value(get(r, "unknownTool.code")), -32602);

	/* The notification: lost response retried, the host's retry replayed,
	 * the lookup without a kind finds the message. */
	ck_assert_msg(json_is_true(get(r, "note.structuredContent.ok")), "%s", line);
	ck_assert(json_is_true(get(r, "note.structuredContent.metadata.replayed")));
	ck_assert_int_eq((int)json_integer_value(get(r, "note.structuredContent.metadata.attempts")),
	    2);
	const char *note_key = get_s(r, "note.structuredContent.metadata.idempotencyKey");
	json_int_t mid = json_integer_value(get(r, "note.structuredContent.metadata.messageId"));
	ck_assert_int_gt(mid, 0);
	ck_assert_str_eq(get_s(r, "noteAgain.structuredContent.metadata.idempotencyKey"), note_key);
	ck_assert_int_eq(json_integer_value(get(r, "noteAgain.structuredContent.metadata.messageId")),
	    mid);
	ck_assert(json_is_true(get(r, "noteLookup.structuredContent.ok")));
	ck_assert_int_eq(json_integer_value(get(r, "noteLookup.structuredContent.metadata.messageId")),
	    mid);
	ck_assert(json_is_true(get(r, "noteBad.isError")));
	ck_assert_str_eq(get_s(r, "noteBad.structuredContent.code"), "INVALID_ARGUMENTS");
	char msql[512];
	snprintf(msql, sizeof(msql), "SELECT count(*) FROM outbox.messages WHERE topic ="
	    " 'notify.chat' AND id = %lld AND payload->>'text' = 'deploy done' AND"
	    " idempotency_key IN ('%s', '~mcp/%s')", (long long)mid, note_key, note_key);
	ck_assert_int_eq(ts_query_int(c, msql), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages WHERE topic ="
	    " 'notify.chat'"), 1);

	/* In the database: four reports (first, other, hostKey, sep), one
	 * outbox message each, the keys as the tools reported them. */
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.bug_reports"), 4);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages WHERE topic ="
	    " 'report.created'"), 4);
	char sql[1024];
	snprintf(sql, sizeof(sql),
	    "SELECT count(*) FROM app.idempotency_keys WHERE idempotency_key IN ('%s', '%s',"
	    " 'host-key-0001', 'sep-key-0001')", key, other);
	/* A scoped token's keys are stored with the scope in front. */
	ck_assert_int_eq(ts_query_int(c, sql), server_tokens != NULL ? 0 : 4);
	snprintf(sql, sizeof(sql),
	    "SELECT count(*) FROM app.idempotency_keys WHERE idempotency_key IN ('%s', '%s',"
	    " 'host-key-0001', 'sep-key-0001') OR idempotency_key IN ('mcp' || chr(31) || '%s',"
	    " 'mcp' || chr(31) || '%s', 'mcp' || chr(31) || 'host-key-0001', 'mcp' || chr(31) ||"
	    " 'sep-key-0001')", key, other, key, other);
	ck_assert_int_eq(ts_query_int(c, sql), 4);

	json_decref(r);

	/* The raw initialize answer: capabilities.tools.idempotency (SEP-3182) */
	char cmd[1400];
	snprintf(cmd, sizeof(cmd), "printf '%%s\\n' '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
	    "\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
	    "\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}' | '%s' mcp --url '%s'"
	    " --run-id raw --log-level warn", bin, s.url);
	char *sh[] = { "/bin/sh", "-c", cmd, NULL };
	ck_assert_int_eq(ts_run(sh, NULL, out, sizeof(out), NODE_TIMEOUT_MS), 0);
	json_t *init = json_loads(out, JSON_DISABLE_EOF_CHECK, &jerr);
	ck_assert_msg(init != NULL, "initialize: %s", out);
	ck_assert_msg(json_is_object(get(init, "result.capabilities.tools.idempotency")), "%s", out);
	json_decref(init);
	ts_stop(s.pid, SIGTERM);
	PQfinish(c);
}

START_TEST(test_sdk_client_calls_the_tools)
{
	run_and_check(NULL, NULL);
}
END_TEST

/* The same through a scoped bearer token: the MCP server sends it
 * (--api-token-file), the keys live in the token's scope. */
START_TEST(test_sdk_client_with_a_token)
{
	char server[300], client[300];
	snprintf(server, sizeof(server), "%s/server-tokens", ts_tmpdir());
	snprintf(client, sizeof(client), "%s/mcp-token", ts_tmpdir());
	ts_write_file(server, "scope=mcp tok-mcp-0123456789abcdef\n");
	ts_write_file(client, "tok-mcp-0123456789abcdef\n");
	run_and_check(server, client);
}
END_TEST

/* Replay ask through MCP elicitation (elicit.mjs): two keys the ledger left
 * uncertain, unknown to the API; the host's user is asked before each is
 * posted again, approves the first (posted once, "approved" in the
 * ledger) and declines the second (SIDE_EFFECT_UNCERTAIN, nothing made). */
START_TEST(test_replay_ask_elicits_the_user)
{
	char db[TS_CONNINFO_MAX], ledger[400], script[600], bin[600], err[256];
	const char *src = getenv("OUTBOX_SOURCE_DIR"), *bindir = getenv("OUTBOX_BIN_DIR");
	ck_assert_ptr_nonnull(src);
	ck_assert_ptr_nonnull(bindir);
	snprintf(script, sizeof(script), "%s/tests/mcp/elicit.mjs", src);
	snprintf(bin, sizeof(bin), "%s/outbox-producer", bindir);
	snprintf(ledger, sizeof(ledger), "%s/mcp-ledger-%d.jsonl", ts_tmpdir(), (int)getpid());
	ck_assert_int_eq(ledger_append(ledger, "send_notification", "ask-key-0001", "uncertain",
	                     NULL, err, sizeof(err)), OB_OK);
	ck_assert_int_eq(ledger_append(ledger, "send_notification", "ask-key-0002", "uncertain",
	                     NULL, err, sizeof(err)), OB_OK);
	ts_db_create("mcpask", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	struct ts_producer_server s;
	ts_producer_serve(db, NULL, &s);
	static char out[1 << 18];
	char *argv[] = { "/usr/bin/env", "node", script, bin, s.url, RUN_ID, ledger, NULL };
	int code = ts_run(argv, NULL, out, sizeof(out), NODE_TIMEOUT_MS);
	ck_assert_msg(code == 0, "the SDK client exited %d:\n%s", code, out);
	char *line = strstr(out, "RESULT ");
	ck_assert_msg(line != NULL, "no RESULT line:\n%s", out);
	line += strlen("RESULT ");
	line[strcspn(line, "\n")] = '\0';
	json_t *r = json_loads(line, 0, NULL);
	ck_assert_msg(r != NULL, "%s", line);
	ck_assert_int_eq((int)json_array_size(get(r, "asked")), 2);
	ck_assert_msg(strstr(json_string_value(json_array_get(get(r, "asked"), 0)),
	                  "Post it again?") != NULL, "%s", line);
	ck_assert_msg(json_is_true(get(r, "approved.structuredContent.ok")), "%s", line);
	ck_assert_int_eq((int)json_integer_value(get(r,
	    "approved.structuredContent.metadata.attempts")), 1);
	ck_assert_str_eq(get_s(r, "declined.structuredContent.code"), "SIDE_EFFECT_UNCERTAIN");
	ck_assert_msg(strstr(get_s(r, "declined.structuredContent.content"),
	                  "the user was asked and did not approve") != NULL, "%s", line);
	json_decref(r);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages WHERE"
	    " idempotency_key LIKE '%ask-key-0001'"), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages WHERE"
	    " idempotency_key LIKE '%ask-key-0002'"), 0);
	char last[16];
	ck_assert_int_eq(ledger_last_state(ledger, "ask-key-0001", last, sizeof(last), err,
	                     sizeof(err)), OB_OK);
	ck_assert_str_eq(last, "succeeded");
	json_t *e = ledger_entries(ledger, "ask-key-0001", err, sizeof(err));
	bool approved = false;
	size_t i;
	json_t *x;
	json_array_foreach(e, i, x)
		approved = approved || strcmp(json_string_value(json_object_get(x, "state")),
		    "approved") == 0;
	json_decref(e);
	ck_assert(approved);
	ck_assert_int_eq(ledger_last_state(ledger, "ask-key-0002", last, sizeof(last), err,
	                     sizeof(err)), OB_OK);
	ck_assert_str_eq(last, "uncertain");
	ts_stop(s.pid, SIGTERM);
	PQfinish(c);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("mcp_sdk");
	TCase *tc = tcase_create("sdk");
	tcase_set_timeout(tc, 200);
	tcase_add_test(tc, test_sdk_client_calls_the_tools);
	tcase_add_test(tc, test_sdk_client_with_a_token);
	tcase_add_test(tc, test_replay_ask_elicits_the_user);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
