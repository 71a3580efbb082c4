/*
 * ts_browser.c - the browser tests' gate, artifact directory and script
 * runner (ts_browser.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testsupport.h"
#include "ts_browser.h"

#define TS_BROWSER_OUT_MAX (1 << 20) /* a script's output kept (its log and RESULT) */

static const char *
chromium_path(void)
{
	const char *p = getenv("OUTBOX_CHROMIUM");
	return p != NULL && *p != '\0' ? p : "/usr/bin/chromium";
}

/* node on PATH (looked up by hand: this runs before the suite, where the
 * ck_assert of ts_run cannot report). */
static int
node_found(void)
{
	const char *path = getenv("PATH");
	char dir[1024], file[1100];
	while (path != NULL && *path != '\0') {
		size_t n = strcspn(path, ":");
		snprintf(dir, sizeof(dir), "%.*s", (int)n, path);
		snprintf(file, sizeof(file), "%s/node", n > 0 ? dir : ".");
		if (access(file, X_OK) == 0)
			return 1;
		path += n + (path[n] == ':');
	}
	return 0;
}

int
ts_browser_gate(const char *who)
{
	char why[1024] = "";
	char dir[768];
	const char *src = getenv("OUTBOX_SOURCE_DIR");
	snprintf(dir, sizeof(dir), "%s/tests/browser/node_modules/playwright-core",
	    src != NULL ? src : ".");
	if (access(chromium_path(), X_OK) != 0)
		snprintf(why, sizeof(why), "no chromium at %s (apt-get install chromium)",
		    chromium_path());
	else if (access(dir, R_OK) != 0)
		snprintf(why, sizeof(why), "%s is missing (scripts/setup-deps.sh --tests runs npm ci"
		    " in tests/browser)", dir);
	else if (!node_found())
		snprintf(why, sizeof(why), "no node on PATH");
	if (why[0] == '\0')
		return 0;
	const char *strict = getenv("OUTBOX_TEST_STRICT");
	if (strict != NULL && strcmp(strict, "1") == 0) {
		fprintf(stderr, "%s: FAILED: %s; under OUTBOX_TEST_STRICT=1 the browser must be"
		    " there\n", who, why);
		return 1;
	}
	fprintf(stderr, "%s: SKIPPED: %s\n", who, why);
	return TS_BROWSER_SKIP;
}

const char *
ts_browser_artifacts(void)
{
	static char dir[768];
	const char *env = getenv("OUTBOX_TEST_ARTIFACTS");
	const char *bin = getenv("OUTBOX_BIN_DIR");
	if (env != NULL && *env != '\0')
		snprintf(dir, sizeof(dir), "%s", env);
	else
		snprintf(dir, sizeof(dir), "%s/../tests/artifacts", bin != NULL ? bin : ".");
	ck_assert_msg(mkdir(dir, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", dir,
	    strerror(errno));
	return dir;
}

json_t *
ts_browser_run(const char *script, json_t *arg, int timeout_ms)
{
	const char *src = getenv("OUTBOX_SOURCE_DIR");
	ck_assert_ptr_nonnull(src);
	char path[768];
	snprintf(path, sizeof(path), "%s/tests/browser/%s", src, script);
	char *text = json_dumps(arg, JSON_COMPACT);
	ck_assert_ptr_nonnull(text);
	char *out = malloc(TS_BROWSER_OUT_MAX);
	ck_assert_ptr_nonnull(out);
	char *argv[] = { "/usr/bin/env", "node", path, text, NULL };
	int64_t t0 = ts_now_ms();
	int code = ts_run(argv, NULL, out, TS_BROWSER_OUT_MAX, timeout_ms);
	fprintf(stderr, "--- %s (exit %d after %lld ms) ---\n%s--- end of %s ---\n", script, code,
	    (long long)(ts_now_ms() - t0), out, script);
	ck_assert_msg(code == 0, "%s exited %d: %s", script, code,
	    strstr(out, "FAILED: ") != NULL ? strstr(out, "FAILED: ") : out);
	char *line = strstr(out, "RESULT ");
	ck_assert_msg(line != NULL, "%s printed no RESULT line", script);
	line += strlen("RESULT ");
	line[strcspn(line, "\n")] = '\0';
	json_error_t jerr;
	json_t *r = json_loads(line, 0, &jerr);
	ck_assert_msg(r != NULL, "%s: RESULT is not JSON (%s)", script, jerr.text);
	free(out);
	free(text);
	return r;
}
