/*
 * test_demo_page_browser.c - the demonstration's page in a real browser
 * (issue 35, items 3 and 4): the stack of scripts/demo.sh --web
 * (ts_demo), `outboxctl web --demo` on port 0, and
 * tests/browser/demo_page.mjs in Debian's chromium, which opens the page
 * with the token in the address's fragment and checks that the
 * demonstration leads the page on the picture of the pipeline, that the
 * tool endpoints refuse bad input and start nothing, the picture's
 * figures against psql, guided step 1's attempts and rows and step 4's
 * claim and takeover fences on the picture against psql, the herd simulator's
 * numbers and every bar of its histogram against outbox-herd run with the
 * same flags, the idempotency stepper stepped through three combinations
 * against psql, the article's 25 combinations against psql and the
 * article, and every exercise answered wrong and then right (the right
 * answer derived from what the programs printed, not read from the page).
 * Its screenshot build/tests/artifacts/demo-page.png is the README's
 * picture (docs/img/demo-page.png).
 *
 * Skipped (77) without chromium or tests/browser/node_modules, except
 * under OUTBOX_TEST_STRICT=1, where that fails.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "testsupport.h"
#include "ts_browser.h"
#include "ts_demo.h"
#include "ts_web.h"

#define NODE_TIMEOUT_MS 1500000 /* the 25 combinations dominate */
#define TOKEN "demo-page-browser-token-0001"

START_TEST(test_demo_page_in_chromium)
{
	struct ts_demo_stack s;
	ts_demo_start(&s, "demopage", NULL);

	char tokens[512];
	snprintf(tokens, sizeof(tokens), "%s/web.token", ts_tmpdir());
	ts_write_file(tokens, TOKEN "\n");
	char metrics[96];
	snprintf(metrics, sizeof(metrics), "%s/metrics", s.cadmin);
	const char *const wargs[] = { "--inbox-db", s.idb, "--consumer-metrics", metrics,
		"--token-file", tokens, "--demo", s.conf, NULL };
	struct ts_web web;
	ts_web_start(s.db, wargs, &web);

	const char *bindir = getenv("OUTBOX_BIN_DIR");
	ck_assert_ptr_nonnull(bindir);
	json_t *arg = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "url", web.url, "token", TOKEN,
	    "artifacts", ts_browser_artifacts(), "bin_dir", bindir, "db", s.db, "inbox_db", s.idb);
	ck_assert_ptr_nonnull(arg);
	json_t *r = ts_browser_run("demo_page.mjs", arg, NODE_TIMEOUT_MS);
	ck_assert_int_eq((int)json_array_size(json_object_get(r, "cells")), 3);

	/* the tools' programs are gone: no matrix connected any more */
	ck_assert_int_eq(ts_query_int(s.pconn, "SELECT count(*) FROM pg_stat_activity WHERE"
	    " application_name = 'outbox-producer-matrix'"), 0);

	ts_web_stop(&web);
	json_decref(r);
	json_decref(arg);
	ts_demo_stop(&s);
}
END_TEST

int
main(void)
{
	int gate = ts_browser_gate("test_demo_page_browser");
	if (gate != 0)
		return gate;
	Suite *s = suite_create("demo_page_browser");
	TCase *tc = tcase_create("demo_page_browser");
	tcase_set_timeout(tc, 1560);
	tcase_add_test(tc, test_demo_page_in_chromium);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
