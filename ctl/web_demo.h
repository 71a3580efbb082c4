/*
 * web_demo.h - the guided demonstration behind `outboxctl web --demo FILE`
 * (issue 17, part 2): the articles' story, step by step, run against the
 * real processes of `scripts/demo.sh --web`.
 *
 * The web server (ctl/web*.c) owns HTTP; this module owns the steps. A step
 * runs on a thread of the demo's own, so the server never waits: it starts
 * a step and reads the state, which the page polls.
 *
 * The state, as JSON text (web_demo_state_json):
 *   {"running": N or 0,
 *    "steps": [{"n": 1, "title": "...", "explain": "one sentence",
 *               "status": "idle|running|done|failed",
 *               "result": null | {"summary": "one line",
 *                                  "facts": {"NAME": number|string, ...},
 *                                  "highlight": {"keys": ["K", ...],
 *                                                "ids": [ID, ...]},
 *                                  "log": ["line", ...]}}, ...]}
 * Every string in it may come from a producer (keys, error texts): the page
 * renders it as text, never as markup.
 */
#ifndef OUTBOX_CTL_WEB_DEMO_H
#define OUTBOX_CTL_WEB_DEMO_H

#include <stddef.h>

struct web_demo;

/* Read the demo's config file (what scripts/demo.sh --web writes: the URLs
 * and paths of the processes it started) and prepare the steps. db and
 * inbox_db are the web view's own connection strings. 0, or an ob_err code
 * with the reason in err. */
int web_demo_open(const char *config_path, const char *db, const char *inbox_db,
    struct web_demo **out, char *err, size_t errlen);

/* The state above, malloc'd NUL-terminated JSON text (NULL: out of memory). */
char *web_demo_state_json(struct web_demo *d);

/* Start step n (1-based) in the background: 0 started; OB_EINVAL when n is
 * no step; OB_EEXIST when a step is already running (nothing started). */
int web_demo_start(struct web_demo *d, int n);

/* Wait for a running step to end, then free everything. NULL is a no-op. */
void web_demo_close(struct web_demo *d);

#endif
