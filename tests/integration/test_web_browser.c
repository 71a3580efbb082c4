/*
 * test_web_browser.c - `outboxctl web` in a real browser (issue 17, part 3):
 * Debian's chromium driven by playwright-core (tests/browser/web_view.mjs).
 *
 * The data is made by the real programs: a relay delivers topic web.ok to a
 * real consumer (its dedup records in the same database) and topic web.bad
 * to a consumer that rejects everything (dead letters, one with a key of
 * markup); then, the relay stopped, web.wait gets messages nobody claims,
 * two with keys and payloads of markup. The web view is started on port 0
 * (its URL read back from --ready-file) with a token file, reading as a
 * role with outbox_viewer's grants only (requeue through --requeue-db), and
 * the script
 * checks in the browser, against psql: the counts shown after a refresh,
 * the markup shown as text and nothing run (CSP header, no dialog,
 * window.__pwned unset), requeue refused without the token and done with
 * it, one older than the dedup retention refused with its reason,
 * hide-payloads. Then this test checks the database again: exactly the
 * one dead letter requeued.
 *
 * Screenshots: build/tests/artifacts/web-view*.png (docs/img/web-view.png,
 * shown in the README, is the first, copied by hand when the page changes).
 * Skipped (77) without chromium or tests/browser/node_modules, except
 * under OUTBOX_TEST_STRICT=1, where that fails. Adds 10-24 s to the suite (ctest -R
 * '^(pg_start|test_web_browser|pg_stop)$' on the shared 2-core box, five
 * runs: 9.5 to 24.1 s, the browser script nearly all of it: it waits for
 * the view's polls, 1 s apart).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "testsupport.h"
#include "ts_browser.h"
#include "ts_consumer.h"
#include "ts_relay.h"
#include "ts_web.h"

#define NODE_TIMEOUT_MS 180000 /* the whole browser script */
#define SETTLE_MS 60000        /* the relay's deliveries and dead letters */
#define TOKEN "web-browser-test-token-0001"
#define OK_N 5

/* Keys and payloads a producer could send that are markup. */
#define XSS_SCRIPT "<script>window.__pwned=1</script>"
#define XSS_IMG "\"><img src=x onerror=\"window.__pwned=2\">"

static int64_t
status_is(PGconn *c, int64_t id, const char *status)
{
	char sql[256];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM outbox.messages WHERE id = %lld AND"
	    " status = '%s'", (long long)id, status);
	return ts_query_int(c, sql);
}

START_TEST(test_web_view_in_chromium)
{
	char db[TS_CONNINFO_MAX], curl[256], route[300], rurl[256], rroute[300];
	char clog[256], rlog[256];
	ts_db_create("webbr", "all", db, sizeof(db));
	PGconn *c = ts_connect(db);

	/* web.ok delivered to a real consumer, web.bad rejected: dead. */
	ts_ipc_url("webbr-consumer", curl, sizeof(curl));
	pid_t consumer = ts_consumer_spawn(clog, db, curl, NULL);
	struct ts_fake_consumer rej;
	ts_fake_consumer_routed(&rej, "webbr-reject", "web.bad", TS_FAKE_REJECT, rurl, sizeof(rurl),
	    rroute, sizeof(rroute));
	snprintf(route, sizeof(route), "web.ok=%s", curl);
	const char *rargs[] = { "--route", rroute, "--poll-ms", "100", NULL };
	pid_t relay = ts_relay_spawn(rlog, db, route, rargs);
	ts_enqueue_n(c, "web.ok", "ok", OK_N);
	int64_t plain = ts_enqueue_one(c, "web.bad", "bad-plain", "{\"n\": 1}");
	int64_t dead_xss = ts_enqueue_one(c, "web.bad", XSS_IMG, "{\"n\": 2}");
	int64_t old = ts_enqueue_one(c, "web.bad", "bad-old", "{\"n\": 3}");
	ck_assert_int_eq(ts_wait_value(c, "SELECT delivered FROM outbox.topic_stats('web.ok')", OK_N,
	    SETTLE_MS), OK_N);
	ck_assert_int_eq(ts_wait_value(c, "SELECT dead FROM outbox.topic_stats('web.bad')", 3,
	    SETTLE_MS), 3);
	ts_stop(relay, SIGTERM);
	ts_fake_consumer_stop(&rej);
	ts_stop(consumer, SIGTERM);

	/* web.wait: nobody claims these; two hold markup in key and payload. */
	int64_t x1 = ts_enqueue_one(c, "web.wait", XSS_SCRIPT, "{\"note\": \"" "\\\"><img src=x"
	    " onerror=\\\"window.__pwned=2\\\">" "\"}");
	int64_t x2 = ts_enqueue_one(c, "web.wait", XSS_IMG, "{\"note\": \"" XSS_SCRIPT "\"}");
	ts_enqueue_n(c, "web.wait", "wait", 2);

	/* bad-old: created longer ago than the dedup retention (7 days by
	 * default, of the consumer and the view): requeue refuses it. */
	char sql[256];
	snprintf(sql, sizeof(sql), "UPDATE outbox.dead SET created_at = now() - interval '30 days'"
	    " WHERE id = %lld", (long long)old);
	ts_exec(c, sql);

	char role[64], viewer[TS_CONNINFO_MAX];
	ts_role_create("webbr_viewer", "outbox_viewer", role);
	ts_conninfo_as(db, role, viewer, sizeof(viewer));
	/* the view as it is meant to run: reading as a role of outbox_viewer's
	 * grants only (outbox 017, inbox 007), requeueing through --requeue-db */
	char tokens[512];
	snprintf(tokens, sizeof(tokens), "%s/web.token", ts_tmpdir());
	ts_write_file(tokens, TOKEN "\n");
	const char *const wargs[] = { "--inbox-db", viewer, "--requeue-db", db, "--token-file",
		tokens, NULL };
	struct ts_web web;
	ts_web_start(viewer, wargs, &web);
	const char *url = web.url;

	json_t *arg = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:[{s:I, s:s, s:[s]}, {s:I, s:s,"
	    " s:[s]}], s:[{s:I, s:s}]}",
	    "url", url, "token", TOKEN, "db", db, "inbox_db", db, "artifacts",
	    ts_browser_artifacts(), "requeue_id", (json_int_t)plain, "old_id", (json_int_t)old,
	    "hostile", "id", (json_int_t)x1, "key", XSS_SCRIPT, "payload_has",
	    "<img src=x onerror=", "id", (json_int_t)x2, "key", XSS_IMG, "payload_has",
	    XSS_SCRIPT,
	    "dead_hostile", "id", (json_int_t)dead_xss, "key", XSS_IMG);
	ck_assert_ptr_nonnull(arg);
	json_t *r = ts_browser_run("web_view.mjs", arg, NODE_TIMEOUT_MS);

	/* The database after the page: the one dead letter requeued, the other
	 * still dead, nothing else moved. */
	ck_assert_int_eq(status_is(c, plain, "pending"), 1);
	ck_assert_int_eq(status_is(c, dead_xss, "dead"), 1);
	ck_assert_int_eq(status_is(c, old, "dead"), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT delivered FROM outbox.topic_stats('web.ok')"),
	    OK_N);
	ck_assert_int_eq(ts_query_int(c, "SELECT pending FROM outbox.topic_stats('web.wait')"), 4);
	ck_assert_int_eq(status_is(c, x1, "pending") + status_is(c, x2, "pending"), 2);

	ts_web_stop(&web);
	ts_role_drop(role);
	json_decref(r);
	json_decref(arg);
	PQfinish(c);
}
END_TEST

int
main(void)
{
	int gate = ts_browser_gate("test_web_browser");
	if (gate != 0)
		return gate;
	Suite *s = suite_create("web_browser");
	TCase *tc = tcase_create("web_browser");
	tcase_set_timeout(tc, 280);
	tcase_add_test(tc, test_web_view_in_chromium);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
