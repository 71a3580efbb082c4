/*
 * ts_browser.h - what the browser tests share (issue 17): whether Debian's
 * chromium and playwright-core (tests/browser, installed by
 * scripts/setup-deps.sh --tests) are there, where screenshots go, and a
 * tests/browser script run with one JSON argument, its RESULT parsed.
 */
#ifndef OUTBOX_TS_BROWSER_H
#define OUTBOX_TS_BROWSER_H

#include <jansson.h>

#define TS_BROWSER_SKIP 77 /* ctest's SKIP_RETURN_CODE of the browser tests */

/* Whether the browser tests can run here: node on PATH,
 * tests/browser/node_modules/playwright-core, and an executable chromium
 * ($OUTBOX_CHROMIUM, else /usr/bin/chromium). 0 when they can; else says
 * why on stderr and returns TS_BROWSER_SKIP, or 1 under CI=true (CI has
 * them: a missing browser there is a failure, not a skip). For main(),
 * before the suite runs. */
int ts_browser_gate(const char *who);

/* The directory screenshots go to: $OUTBOX_TEST_ARTIFACTS, else
 * tests/artifacts of the build tree (beside $OUTBOX_BIN_DIR); created. */
const char *ts_browser_artifacts(void);

/* Run `node tests/browser/<script> <arg as JSON>` for up to timeout_ms,
 * its output copied to stderr (the test's log); asserts it exited 0 and
 * printed a RESULT line of JSON. Returns that JSON (json_decref it). */
json_t *ts_browser_run(const char *script, json_t *arg, int timeout_ms);

#endif
