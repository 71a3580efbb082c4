/*
 * demo_admin.h - the demo admin endpoint: fault counters armed and broken
 * modes switched at run time over HTTP, for the guided demonstration
 * (`outboxctl web --demo`, issue 17). It exists only in a program started
 * with --demo-admin, only on a metrics listener bound to loopback, and the
 * program says so at warn when it starts (docs/faults.md). The flag's row
 * is OB_CFG_OPT_DEMO_ADMIN (outbox/config_rows.h).
 *
 *   GET  /admin/faults   {"faults": {"NAME": N, ...},
 *                         "modes": {"NAME": "VALUE", ...},
 *                         "choices": {"NAME": ["VALUE", ...], ...}}
 *   POST /admin/faults   {"NAME": N | "VALUE", ...}: each name a fault point
 *                        (N = fires that many more times, 0 disarms,
 *                        0..OB_DEMO_ADMIN_MAX_FIRES) or a mode (one of its
 *                        choices). All checked first: one unknown name or
 *                        bad value is 400 and nothing changes; else 200
 *                        and the state as GET answers it.
 * Other methods 405 (Allow: GET, POST). Served on the endpoint's thread
 * (outbox/http_endpoint.h): fault counters and mode values are atomics the
 * program's serving threads read once per request or batch.
 */
#ifndef OUTBOX_DEMO_ADMIN_H
#define OUTBOX_DEMO_ADMIN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "outbox/fault.h"
#include "outbox/httpd.h"

#define OB_DEMO_ADMIN_PATH "/admin/faults"
#define OB_DEMO_ADMIN_MAX_FIRES OB_FAULT_MAX_FIRES /* the fault flags' own maximum */

/* A mode switched at run time: its value is an index into choices. */
struct ob_demo_mode {
	const char *name;            /* "idempotency", "dedup" */
	const char *const *choices;  /* NULL-ended value names */
	_Atomic int *value;
};

struct ob_demo_admin {
	struct ob_fault *const *faults;   /* NULL-ended */
	const struct ob_demo_mode *modes; /* ended by a NULL name */
};

/* --demo-admin's precondition: metrics_addr (a --metrics value) is set and
 * binds a loopback address (127.0.0.0/8, ::1, localhost). OB_OK, or
 * OB_EINVAL with one line in err. */
int ob_demo_admin_check(const char *metrics_addr, char *err, size_t errlen);

/* The endpoint's extra route (ob_http_endpoint_start_with; arg: a struct
 * ob_demo_admin that outlives the endpoint). Answers OB_DEMO_ADMIN_PATH
 * and returns true; false for every other path. */
bool ob_demo_admin_route(void *arg, struct ob_httpd_req *req);

/* The state as GET answers it: malloc'd JSON text, or NULL (no memory). */
char *ob_demo_admin_state(const struct ob_demo_admin *a);

/* Apply a POST body (rules above). OB_OK, or OB_EINVAL with one line in
 * err and nothing changed. */
int ob_demo_admin_apply(const struct ob_demo_admin *a, const char *body, size_t len,
    char *err, size_t errlen);

/* The warn line at start: "demo.admin.on" with the URL. */
void ob_demo_admin_announce(const char *program, int port);

#endif
