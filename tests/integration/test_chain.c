/*
 * test_chain.c - one agent call followed all the way to a downstream
 * notification service, under faults at every hop:
 *
 *   agent (`outbox-producer send`, and an MCP host through `outbox-producer
 *   mcp` with the official SDK client) -> producer HTTP (POST /v1/messages)
 *   -> outbox -> relay -> consumer --handler webhook -> a downstream HTTP
 *   service (tests/support/webhook_target.c) that counts requests per
 *   Idempotency-Key and acts once per key, as a well-behaved notification
 *   API does.
 *
 * Faults: the producer loses its answer after COMMIT (3 times), a relay
 * worker is killed after sending a frame, the consumer is killed right
 * after a downstream call returned (before recording it), the downstream
 * answers 503 three times, and loses its answer after acting twice.
 *
 * Asserted: every agent call answered OK (or SIDE_EFFECT_UNCERTAIN, then
 * resolved by the lookup); exactly one outbox message per logical call,
 * keyed by the call's key; the downstream saw exactly those keys (the SAME
 * key on every attempt: no other key ever reached it) and acted on each
 * once; and what a downstream that ignores the key would have done: more
 * than one request for some keys (docs/guarantees.md warns about it).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "testsupport.h"
#include "ts_consumer.h"
#include "ts_producer.h"
#include "ts_relay.h"
#include "webhook_target.h"

#define SEND_CALLS 24
#define MCP_CALLS 4
#define TOTAL (SEND_CALLS + MCP_CALLS)
#define TOPIC "notify.chat"
#define DELIVER_MS 120000

/* One agent call through `send`; resolves an uncertain outcome by the
 * lookup, as the observation tells an agent to. Returns the message id. */
static long long
agent_send(const char *url, int i, char *key, size_t keylen)
{
	char payload[64], out[4096], tool[64];
	snprintf(payload, sizeof(payload), "{\"n\":%d,\"via\":\"send\"}", i);
	snprintf(tool, sizeof(tool), "run-chain:toolu_%02d", i);
	snprintf(key, keylen, "%s", tool);
	char *argv[] = { "outbox-producer", "send", "--url", (char *)url, "--topic", TOPIC,
		"--payload", payload, "--key-from", "tool-call", tool, NULL };
	int code = ts_run(argv, NULL, out, sizeof(out), 60000);
	if (code == 3) { /* SIDE_EFFECT_UNCERTAIN: look up, never resend blindly */
		char *look[] = { "outbox-producer", "lookup", "--url", (char *)url, "--kind",
			"message", "--key", tool, NULL };
		code = ts_run(look, NULL, out, sizeof(out), 60000);
	}
	ck_assert_msg(code == 0, "call %d: exit %d: %s", i, code, out);
	json_t *o = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
	ck_assert_msg(o != NULL, "call %d: not JSON: %s", i, out);
	long long id = json_integer_value(json_object_get(json_object_get(o, "metadata"),
	    "messageId"));
	json_decref(o);
	ck_assert_int_gt(id, 0);
	return id;
}

/* The broken row first: an agent that makes a new key per attempt (the
 * demo's --key-from per-attempt) against the same lossy producer sends
 * its notification twice whenever an answer is lost: more messages than
 * calls, which the real run below never shows. */
START_TEST(test_broken_agent_key_duplicates)
{
	char db[TS_CONNINFO_MAX], out[4096];
	ts_db_create("chainbad", "outbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	struct ts_producer_server prod;
	char *pargs[] = { "--fault-lose-response", "3", NULL };
	ts_producer_serve(db, pargs, &prod);
	for (int i = 0; i < SEND_CALLS; i++) {
		char payload[64];
		snprintf(payload, sizeof(payload), "{\"n\":%d}", i);
		char *argv[] = { "outbox-producer", "send", "--url", prod.url, "--topic", TOPIC,
			"--payload", payload, "--key-from", "per-attempt", NULL };
		ck_assert_int_eq(ts_run(argv, NULL, out, sizeof(out), 60000), 0);
	}
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.messages"),
	    SEND_CALLS + 3);
	ts_stop(prod.pid, SIGTERM);
	PQfinish(conn);
}
END_TEST

START_TEST(test_agent_call_to_downstream_once)
{
	char db[TS_CONNINFO_MAX], url[256], route[300], hook[256], sql[1024];
	char rlog[256], clog[256], clog2[256], keys[TOTAL][128];
	ts_db_create("chain", "all", db, sizeof(db));
	PGconn *conn = ts_connect(db);

	struct wt_target *down = wt_start(hook, sizeof(hook));
	ck_assert_ptr_nonnull(down);
	wt_fail_next(down, 3, 503);
	wt_lose_next(down, 2);

	/* The consumer dies right after its first downstream call returned. */
	ts_ipc_url("chain", url, sizeof(url));
	const char *cfault[] = { "--handler", "webhook", "--webhook-url", hook, "--webhook-lease",
		"2s", "--webhook-timeout", "1s", "--fault-die-after-call", "1", NULL };
	pid_t consumer = ts_consumer_spawn(clog, db, url, cfault);
	snprintf(route, sizeof(route), TOPIC "=%s", url);
	const char *rargs[] = { "--poll-ms", "100", "--backoff-base-ms", "20", "--backoff-cap-ms",
		"300", "--lease-ms", "3s", "--delivery-timeout-ms", "1500", "--fault-die-after-send", "1",
		"--batch", "4", "--no-source", NULL }; /* the key alone downstream */
	pid_t relay = ts_relay_spawn(rlog, db, route, rargs);
	struct ts_producer_server prod;
	char *pargs[] = { "--fault-lose-response", "3", NULL };
	ts_producer_serve(db, pargs, &prod);

	/* The agents. */
	for (int i = 0; i < SEND_CALLS; i++)
		agent_send(prod.url, i, keys[i], sizeof(keys[i]));
	const char *src = getenv("OUTBOX_SOURCE_DIR"), *bindir = getenv("OUTBOX_BIN_DIR");
	ck_assert_ptr_nonnull(src);
	ck_assert_ptr_nonnull(bindir);
	char script[600], bin[600], count[8];
	snprintf(script, sizeof(script), "%s/tests/mcp/notify.mjs", src);
	snprintf(bin, sizeof(bin), "%s/outbox-producer", bindir);
	snprintf(count, sizeof(count), "%d", MCP_CALLS);
	static char out[1 << 18];
	char *node[] = { "/usr/bin/env", "node", script, bin, prod.url, "run-chain-mcp", TOPIC,
		count, NULL };
	ck_assert_msg(ts_run(node, NULL, out, sizeof(out), 120000) == 0, "MCP host: %s", out);
	char *line = strstr(out, "RESULT ");
	ck_assert_msg(line != NULL, "no RESULT: %s", out);
	json_t *res = json_loads(line + 7, JSON_DISABLE_EOF_CHECK, NULL);
	ck_assert_int_eq((int)json_array_size(res), MCP_CALLS);
	for (int i = 0; i < MCP_CALLS; i++) {
		json_t *r = json_array_get(res, (size_t)i);
		ck_assert_msg(json_is_true(json_object_get(r, "ok")), "MCP call %d: %s", i, line);
		snprintf(keys[SEND_CALLS + i], sizeof(keys[0]), "%s", json_string_value(
		    json_object_get(json_object_get(r, "metadata"), "idempotencyKey")));
	}
	json_decref(res);

	/* One outbox message per logical call, keyed by the call's key. */
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.messages"), TOTAL);
	for (int i = 0; i < TOTAL; i++) {
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM outbox.messages WHERE topic = '"
		    TOPIC "' AND idempotency_key = '%.127s'", keys[i]);
		ck_assert_msg(ts_query_int(conn, sql) == 1, "no single message for %s", keys[i]);
	}
	ck_assert_int_ge(ts_log_count(prod.log, "fault=producer.lose_response"), 1);

	/* The consumer died after a downstream call; a new one takes over. */
	ck_assert_int_eq(ts_wait_exit(consumer, 60000), 128 + SIGKILL);
	const char *cplain[] = { "--handler", "webhook", "--webhook-url", hook, "--webhook-lease",
		"2s", "--webhook-timeout", "1s", NULL };
	consumer = ts_consumer_spawn(clog2, db, url, cplain);

	int64_t delivered = ts_wait_value(conn, "SELECT count(*) FROM outbox.messages WHERE"
	    " status = 'delivered'", TOTAL, DELIVER_MS);
	ck_assert_msg(delivered == TOTAL, "%lld of %d delivered", (long long)delivered, TOTAL);
	ts_stop(relay, SIGTERM);
	ts_stop(consumer, SIGTERM);
	ts_stop(prod.pid, SIGTERM);

	/* The faults fired. */
	ck_assert_int_ge(ts_log_count(rlog, "where=relay.after_send"), 1);
	ck_assert_int_ge(ts_log_count(clog, "where=consumer.webhook.after_call"), 1);

	/* Downstream: exactly our keys, each acted on once. */
	ck_assert_int_eq(wt_keys(down), TOTAL);
	int repeated = 0, requests = 0;
	for (int i = 0; i < TOTAL; i++) {
		ck_assert_msg(wt_effects(down, keys[i]) == 1, "%s acted on %d times", keys[i],
		    wt_effects(down, keys[i]));
		int n = wt_requests(down, keys[i]);
		requests += n;
		repeated += n > 1;
	}
	/* A downstream that ignored the key would have acted more than once
	 * for these (the consumer was killed after one call, two answers were
	 * lost after acting, three were 503s). */
	ck_assert_int_ge(repeated, 3);
	ck_assert_int_gt(requests, TOTAL);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.processed"), TOTAL);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.dead"), 0);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.webhook_calls WHERE state"
	    " = 'done' AND response_status BETWEEN 200 AND 299"), TOTAL);
	wt_stop(down);
	PQfinish(conn);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("chain");
	TCase *tc = tcase_create("chain");
	tcase_set_timeout(tc, 280);
	tcase_add_test(tc, test_broken_agent_key_duplicates);
	tcase_add_test(tc, test_agent_call_to_downstream_once);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
