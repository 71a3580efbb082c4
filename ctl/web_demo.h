/*
 * web_demo.h - the demonstration behind `outboxctl web --demo FILE` (issue
 * 17, part 2; issue 35): the articles' story run against the real
 * processes of `scripts/demo.sh --web`: the guided steps, and the tools the
 * page starts with parameters (web_demo_tools.c: the herd simulator, the
 * idempotency stepper, the article's 25 combinations).
 *
 * The web server (ctl/web*.c) owns HTTP; this module owns the jobs. One job
 * (a step or a tool) runs at a time, on a thread of the demo's own, so the
 * server never waits: it starts a job and reads the state, which the page
 * polls.
 *
 * The state, as JSON text (web_demo_state_json):
 *   {"running": N or 0 (the step running), "running_tool": NAME or null,
 *    "steps": [{"n": 1, "title": "...", "explain": "one sentence",
 *               "status": "idle|running|done|failed",
 *               "result": null | {"summary": "one line",
 *                                  "facts": {"NAME": number|string, ...},
 *                                  "highlight": {"keys": ["K", ...],
 *                                                "ids": [ID, ...]},
 *                                  "log": ["line", ...]}}, ...],
 *    "tools": {"herd"|"cell"|"matrix": {"name", "title", "params": the last
 *              run's, "status", "result": as a step's, plus the tool's own
 *              members (web_demo_tools.c)}},
 *    "events": [{"seq": N, "node": "agent|producer|outbox|relay|consumer|
 *               downstream", "text": "...", "step": N (0: a tool),
 *               "tool": NAME (a tool's)}, ...] (the newest 60)}
 * Every string in it may come from a producer (keys, error texts): the page
 * renders it as text, never as markup.
 *
 * The config file (--demo FILE; scripts/demo.sh --web writes it): one
 * key=value per line, '#' comments; every key below but the optional one
 * is required, each once;
 * an unknown key, a line over 2046 bytes or more than 64 lines is refused
 * at web_demo_open with the line number.
 *   producer_url=http://127.0.0.1:PORT    the producer API (serve)
 *   producer_admin=http://127.0.0.1:PORT  its --metrics listener, --demo-admin
 *   consumer_admin=http://127.0.0.1:PORT  the consumer's, --demo-admin
 *   consumer_listen=URL                   the consumer's --listen (nng URL)
 *   relay_db=CONNINFO                     --db of the relays the steps start
 *   bin_dir=DIR                           where outbox-relay is
 *   work_dir=DIR                          the steps' relays' logs go here
 *   matrix_faults=COL,COL                 optional: step 6 runs only these
 *                                         columns of the fault matrix
 * db (the web view's --db) must read app.bug_reports and outbox.messages,
 * inbox_db inbox.notifications (steps 3 to 5 need it).
 *
 * The steps (web_demo_steps.c): 1 lost response, replayed; 2 the same in
 * the broken mode (--idempotency none): two reports; 3 a relay dies after
 * sending: duplicate; 4 a relay stalls past its lease: fenced_out; 5 the
 * consumer without dedup: two effects; 6 both fault matrices, run by their
 * own programs (outbox-fault-matrix --format kv, which starts its own
 * throwaway PostgreSQL, and outbox-producer matrix on relay_db), each cell
 * into the log as it completes. Faults and modes are set over the
 * demo admin endpoints (outbox/demo_admin.h) and set back after each step;
 * relay faults start short-lived relays of the step's own (posix_spawn,
 * stopped and reaped by the step).
 */
#ifndef OUTBOX_CTL_WEB_DEMO_H
#define OUTBOX_CTL_WEB_DEMO_H

#include <stdbool.h>
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

/* Whether name is one of the tools (web_demo_tools.c). */
bool web_demo_has_tool(const char *name);

/* Start the tool name with the parameters body (a JSON object, len bytes;
 * len 0: {}): 0 started; OB_EINVAL with one line in err when name is no
 * tool or the parameters are refused (nothing started); OB_EEXIST when a
 * job is running. */
int web_demo_start_tool(struct web_demo *d, const char *name, const char *body, size_t len,
    char *err, size_t errlen);

/* Wait for a running job to end, then free everything. NULL is a no-op. */
void web_demo_close(struct web_demo *d);

#endif
