/*
 * test_web_demo_browser.c - the guided demonstration clicked through in a
 * real browser (issue 17, part 3): the stack of scripts/demo.sh --web
 * (ts_demo: producer serve and consumer with --demo-admin, the demo's
 * relay), `outboxctl web --demo` on port 0, and
 * tests/browser/web_demo.mjs in Debian's chromium, which enters the token,
 * clicks each step's run button, waits for it to be done and checks what
 * the page shows against psql: step 1 one report, replayed; step 2 (dedup
 * of the producer off) two reports; step 3 the consumer's duplicate answer
 * and one effect (#consumer's duplicates 1, from its /metrics); step 4 the stale worker fenced out, the takeover's fence
 * above the stale one's and equal to the message's in the database; step
 * 5 (the consumer's dedup off) two effects; step 6 both fault matrices
 * (two of the relay/consumer matrix's columns, as test_web_demo) pass, the
 * producer's 25 cells equal to the article's. The rows steps 1-5 changed
 * are highlighted; a screenshot per step
 * (build/tests/artifacts/demo-step-N.png).
 *
 * Skipped (77) without chromium or tests/browser/node_modules, except
 * under OUTBOX_TEST_STRICT=1, where that fails. Adds 60-81 s to the suite (ctest -R
 * '^(pg_start|test_web_demo_browser|pg_stop)$' on the shared 2-core box,
 * three runs: 59.9, 66.5 and 81.4 s; steps 1-5 take about 20 s, step 6's
 * matrices the rest).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "testsupport.h"
#include "ts_browser.h"
#include "ts_demo.h"
#include "ts_web.h"

#define NODE_TIMEOUT_MS 540000 /* six steps against the real processes */
#define TOKEN "web-demo-browser-token-0001"

/* {"db": db, "sql": sql} */
static json_t *
q(const char *db, const char *sql)
{
	return json_pack("{s:s, s:s}", "db", db, "sql", sql);
}

/* {"db": db, "sql": sql, "want": want} */
static json_t *
qwant(const char *db, const char *sql, const char *want)
{
	return json_pack("{s:s, s:s, s:s}", "db", db, "sql", sql, "want", want);
}

static json_t *
steps(const struct ts_demo_stack *s)
{
	const char *P = s->db, *I = s->idb;
	json_t *a = json_array();
	/* 1: the response lost, the retry answered from the stored one */
	json_array_append_new(a, json_pack("{s:i, s:{s:s, s:s}, s:{s:o}, s:b}", "n", 1,
	    "facts", "replayed", "true", "attempts", "2",
	    "facts_from_psql", "reports", q(P, "SELECT count(*) FROM app.bug_reports"
	    " WHERE title LIKE 'Lost response, step 1 %'"),
	    "highlighted", 1));
	/* 2: the broken mode: two reports */
	json_array_append_new(a, json_pack("{s:i, s:{s:s, s:s}, s:{s:o}, s:b}", "n", 2,
	    "facts", "replayed", "false", "reports", "2",
	    "facts_from_psql", "reports", q(P, "SELECT count(*) FROM app.bug_reports"
	    " WHERE title LIKE 'Lost response, step 2 %'"),
	    "highlighted", 1));
	/* 3: the relay died after sending: the redelivery answered duplicate */
	json_array_append_new(a, json_pack("{s:i, s:{s:s, s:s}, s:[o, o], s:b, s:b, s:{s:s}}",
	    "n", 3,
	    "facts", "duplicates", "1", "effects", "1",
	    "psql", qwant(I, "SELECT count(*) FROM inbox.notifications WHERE idempotency_key = $KEY",
	    "1"), qwant(P, "SELECT count(*) FROM outbox.messages WHERE idempotency_key = $KEY"
	    " AND status = 'delivered'", "1"),
	    "highlighted", 1, "highlight_key", 1,
	    /* the view reads it from the consumer's /metrics: the first duplicate */
	    "consumer", "duplicates", "1"));
	/* 4: the stale worker's write refused with the fence numbers */
	json_array_append_new(a, json_pack("{s:i, s:{s:s, s:s}, s:{s:o}, s:[[s, s]], s:[o], s:b, s:b}",
	    "n", 4, "facts", "fenced_out", "true", "effects", "1",
	    "facts_from_psql", "fence_after", q(P, "SELECT max(fence) FROM outbox.messages WHERE"
	    " idempotency_key = $KEY"),
	    "greater", "fence_after", "fence_before",
	    "psql", qwant(I, "SELECT count(*) FROM inbox.notifications WHERE idempotency_key = $KEY",
	    "1"),
	    "highlighted", 1, "highlight_key", 1));
	/* 5: the consumer without dedup: the duplicate effect */
	json_array_append_new(a, json_pack("{s:i, s:{s:s}, s:[o], s:b, s:b}", "n", 5,
	    "facts", "effects", "2",
	    "psql", qwant(I, "SELECT count(*) FROM inbox.notifications WHERE idempotency_key = $KEY",
	    "2"),
	    "highlighted", 1, "highlight_key", 1));
	/* 6: both matrices live (two of the fault matrix's columns, as
	 * test_web_demo), the producer's next to the article's table */
	json_array_append_new(a, json_pack("{s:i, s:{s:s, s:s, s:s, s:s, s:s, s:s, s:s}}", "n", 6,
	    "facts", "fault_matrix", "pass", "fault_cells", "6", "full_row_cells", "2",
	    "full_row_ones", "2", "producer_matrix", "equal to the article", "producer_cells", "25",
	    "producer_equal_article", "25"));
	return a;
}

START_TEST(test_demo_in_chromium)
{
	struct ts_demo_stack s;
	ts_demo_start(&s, "webdemobr", "none,relay-die-after-send");

	char tokens[512];
	snprintf(tokens, sizeof(tokens), "%s/web.token", ts_tmpdir());
	ts_write_file(tokens, TOKEN "\n");
	char metrics[96];
	snprintf(metrics, sizeof(metrics), "%s/metrics", s.cadmin);
	const char *const wargs[] = { "--inbox-db", s.idb, "--consumer-metrics", metrics,
		"--token-file", tokens, "--demo", s.conf, NULL };
	struct ts_web web;
	ts_web_start(s.db, wargs, &web);
	const char *url = web.url;

	json_t *arg = json_pack("{s:s, s:s, s:s, s:o}", "url", url, "token", TOKEN, "artifacts",
	    ts_browser_artifacts(), "steps", steps(&s));
	ck_assert_ptr_nonnull(arg);
	json_t *r = ts_browser_run("web_demo.mjs", arg, NODE_TIMEOUT_MS);
	ck_assert_int_eq((int)json_array_size(json_object_get(r, "steps")), 6);

	/* the steps' messages all delivered: none left for the demo's relay */
	ck_assert_int_eq(ts_query_int(s.pconn, "SELECT count(*) FROM outbox.messages"
	    " WHERE topic LIKE 'demo.%' AND status <> 'delivered'"), 0);

	ts_web_stop(&web);
	json_decref(r);
	json_decref(arg);
	ts_demo_stop(&s);
}
END_TEST

int
main(void)
{
	int gate = ts_browser_gate("test_web_demo_browser");
	if (gate != 0)
		return gate;
	Suite *s = suite_create("web_demo_browser");
	TCase *tc = tcase_create("web_demo_browser");
	tcase_set_timeout(tc, 580);
	tcase_add_test(tc, test_demo_in_chromium);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
