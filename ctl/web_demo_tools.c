/*
 * web_demo_tools.c - the demonstration's tools (web_demo_steps.h): jobs the
 * page starts with parameters, each by running the program that does the
 * work, so that every number on the page is that program's:
 *
 *   herd     the first article's herd simulator: outbox-herd (tools/herd)
 *            for one strategy and client count, one run, with the arrival
 *            histogram of its write requests (--histogram-bins).
 *   cell     the idempotency stepper: one fault x server implementation x
 *            key source, any of the 60, played by `outbox-producer matrix
 *            --cell ... --events` against a real server of its own; every
 *            request with the rows right after it, which the page steps
 *            through one by one.
 *   matrix   the article's 25 combinations at once: `outbox-producer
 *            matrix --events`, cell by cell as each completes, next to the
 *            article's table.
 *
 * The parameters are checked on the web server's thread before anything
 * starts (unknown members and values out of range are refused with one
 * line); the programs run on the demo's thread (demo_stream), their output
 * and logs in the work directory.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "outbox/err.h"
#include "outbox/proc.h"
#include "web_demo_steps.h"

#define HERD_CLIENTS_MAX 1000   /* outbox-herd's own bound */
#define HERD_SEED_MAX 2147483647
#define HERD_BINS "100"         /* the histogram's bars: enough to show the clumps */
#define HERD_RUN_MS (60 * 1000) /* one simulated run, however slow the strategy */
#define CELL_RUN_MS (3 * 60 * 1000)      /* one cell: a server restart at most */
#define MATRIX_RUN_MS (20 * 60 * 1000)   /* 25 cells */

static const char *const herd_strategies[] = { "none", "expo", "expo-10pct", "equal", "full",
	"decorrelated", NULL };
static const char *const cell_faults[] = { "lost-response", "crash-mid-request",
	"concurrent-dup", "new-tool-call-id", "reworded-title", NULL };
static const char *const cell_servers[] = { "none", "split", "atomic", NULL };
static const char *const cell_keys[] = { "none", "per_attempt", "tool_call", "business", NULL };

/* --- the parameters ------------------------------------------------------ */

/* Refuse members of params not in names. */
static int
only_members(json_t *params, const char *const *names, char *err, size_t errlen)
{
	const char *k;
	json_t *v;
	json_object_foreach(params, k, v) {
		bool known = false;
		for (int i = 0; names[i] != NULL; i++)
			known = known || strcmp(names[i], k) == 0;
		if (!known) {
			snprintf(err, errlen, "unknown parameter '%.64s'", k);
			return OB_EINVAL;
		}
	}
	return OB_OK;
}

/* params[name]: one of allowed, or def when absent (set into params). */
static int
choice(json_t *params, const char *name, const char *def, const char *const *allowed,
    char *err, size_t errlen)
{
	json_t *v = json_object_get(params, name);
	if (v == NULL)
		return json_object_set_new(params, name, json_string(def)) == 0 ? OB_OK : OB_ENOMEM;
	for (int i = 0; json_is_string(v) && allowed[i] != NULL; i++)
		if (strcmp(json_string_value(v), allowed[i]) == 0)
			return OB_OK;
	size_t n = (size_t)snprintf(err, errlen, "%s must be one of", name);
	for (int i = 0; allowed[i] != NULL && n < errlen; i++)
		n += (size_t)snprintf(err + n, errlen - n, "%s%s", i ? ", " : " ", allowed[i]);
	return OB_EINVAL;
}

/* params[name]: an integer in [min, max], or def when absent. */
static int
integer(json_t *params, const char *name, json_int_t def, json_int_t min, json_int_t max,
    char *err, size_t errlen)
{
	json_t *v = json_object_get(params, name);
	if (v == NULL)
		return json_object_set_new(params, name, json_integer(def)) == 0 ? OB_OK : OB_ENOMEM;
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
		snprintf(err, errlen, "%s must be an integer from %" JSON_INTEGER_FORMAT " to %"
		    JSON_INTEGER_FORMAT, name, min, max);
		return OB_EINVAL;
	}
	return OB_OK;
}

static const char *
pstr(const struct demo_run *r, const char *name)
{
	return json_string_value(json_object_get(r->params, name));
}

static json_int_t
pint(const struct demo_run *r, const char *name)
{
	return json_integer_value(json_object_get(r->params, name));
}

/* A line of a program's output that is a JSON object, else NULL. */
static json_t *
json_line(const char *line)
{
	if (line[0] != '{')
		return NULL;
	json_t *j = json_loads(line, 0, NULL);
	if (j != NULL && !json_is_object(j)) {
		json_decref(j);
		return NULL;
	}
	return j;
}

/* The command line of a, as text (for the page: run it yourself). */
static json_t *
command_of(const struct ob_argv *a)
{
	char text[1024];
	size_t n = 0;
	text[0] = '\0';
	for (int i = 0; a->argv[i] != NULL && n < sizeof(text); i++)
		n += (size_t)snprintf(text + n, sizeof(text) - n, "%s%s", i ? " " : "", a->argv[i]);
	return json_string(text);
}

/* --- herd ------------------------------------------------------------------ */

static int
herd_check(json_t *params, char *err, size_t errlen)
{
	static const char *const names[] = { "strategy", "clients", "seed", NULL };
	int rc = only_members(params, names, err, errlen);
	if (rc == OB_OK)
		rc = choice(params, "strategy", "full", herd_strategies, err, errlen);
	if (rc == OB_OK)
		rc = integer(params, "clients", 100, 1, HERD_CLIENTS_MAX, err, errlen);
	if (rc == OB_OK)
		rc = integer(params, "seed", 1, 0, HERD_SEED_MAX, err, errlen);
	return rc;
}

static void
herd_line(struct demo_run *r, const char *line, void *arg)
{
	json_t **out = arg;
	json_t *j = json_line(line);
	if (j == NULL)
		return;
	json_decref(*out);
	*out = j;
}

static int
herd_run(struct demo_run *r)
{
	struct ob_argv a;
	char clients[24], seed[24], log[DEMO_PATH_MAX + 100];
	json_t *table = NULL;
	snprintf(clients, sizeof(clients), "%" JSON_INTEGER_FORMAT, pint(r, "clients"));
	snprintf(seed, sizeof(seed), "%" JSON_INTEGER_FORMAT, pint(r, "seed"));
	ob_argv_init(&a, "outbox-herd");
	ob_argv_add2(&a, "--strategy", pstr(r, "strategy"));
	ob_argv_add2(&a, "--clients", clients);
	ob_argv_add2(&a, "--runs", "1");
	ob_argv_add2(&a, "--seed", seed);
	ob_argv_add(&a, "--json");
	ob_argv_add2(&a, "--histogram-bins", HERD_BINS);
	demo_result_set(r, "command", command_of(&a));
	snprintf(log, sizeof(log), "%s/demo-herd-%s.log", r->conf->work_dir, r->stamp);
	demo_event(r, DEMO_NODE_AGENT, "%s clients write one row, retrying with %s backoff",
	    clients, pstr(r, "strategy"));
	int rc = demo_stream(r, &a, log, HERD_RUN_MS, herd_line, &table);
	if (rc != OB_OK)
		goto out;
	/* {"strategies": [{"cells": [{"histogram": {...}}]}]} */
	json_t *cell = json_array_get(json_object_get(json_array_get(json_object_get(table,
	    "strategies"), 0), "cells"), 0);
	json_t *hist = json_object_get(cell, "histogram");
	if (!json_is_object(hist)) {
		snprintf(r->err, sizeof(r->err), "outbox-herd printed no histogram; see %s", log);
		rc = OB_EINVAL;
		goto out;
	}
	json_int_t calls = json_integer_value(json_object_get(hist, "calls"));
	double ms = json_number_value(json_object_get(hist, "ms"));
	demo_result_set(r, "herd", json_incref(table));
	demo_fact_int(r, "calls", calls);
	demo_fact_int(r, "ms", (int64_t)(ms + 0.5));
	demo_event(r, DEMO_NODE_PRODUCER, "%" JSON_INTEGER_FORMAT " write requests arrived; the"
	    " last client was done at %.0f ms", calls, ms);
	demo_summary(r, "%s, %s clients, seed %s: %" JSON_INTEGER_FORMAT " write requests, done"
	    " in %.0f ms", pstr(r, "strategy"), clients, seed, calls, ms);
out:
	json_decref(table);
	return rc;
}

/* --- outbox-producer matrix --events, for the stepper and the 25 ------------- */

/* Run `outbox-producer matrix [--cell cell] --events` on the relay's
 * database, its run id and work directory named after what and the run's
 * stamp, each line to fn; the command (without --db: it holds the
 * connection string) into the result. *log gets the log's path. */
static int
matrix_program(struct demo_run *r, const char *what, const char *cell, int64_t max_ms,
    demo_line_fn fn, void *arg, char *log, size_t loglen)
{
	struct ob_argv a;
	char dir[DEMO_PATH_MAX + 100], run[64];
	snprintf(dir, sizeof(dir), "%s/demo-%s-%s", r->conf->work_dir, what, r->stamp);
	snprintf(log, loglen, "%s.log", dir);
	snprintf(run, sizeof(run), "%c%s", what[0], r->stamp);
	ob_argv_init(&a, "outbox-producer");
	ob_argv_add(&a, "matrix");
	if (cell != NULL)
		ob_argv_add2(&a, "--cell", cell);
	ob_argv_add(&a, "--events");
	ob_argv_add2(&a, "--run-id", run);
	ob_argv_add2(&a, "--workdir", dir);
	demo_result_set(r, "command", command_of(&a));
	ob_argv_add2(&a, "--db", r->conf->relay_db);
	return demo_stream(r, &a, log, max_ms, fn, arg);
}

/* --- cell: the idempotency stepper ------------------------------------------ */

static int
cell_check(json_t *params, char *err, size_t errlen)
{
	static const char *const names[] = { "fault", "server", "keys", NULL };
	int rc = only_members(params, names, err, errlen);
	if (rc == OB_OK)
		rc = choice(params, "fault", "lost-response", cell_faults, err, errlen);
	if (rc == OB_OK)
		rc = choice(params, "server", "atomic", cell_servers, err, errlen);
	if (rc == OB_OK)
		rc = choice(params, "keys", "tool_call", cell_keys, err, errlen);
	return rc;
}

struct cell_tally {
	json_int_t reports, article; /* -1: not seen, or null */
	bool done;
};

/* One line of `outbox-producer matrix --cell --events`: kept for the
 * stepper, and told to the picture. */
static void
cell_event(struct demo_run *r, json_t *e)
{
	const char *ev = json_string_value(json_object_get(e, "event"));
	const char *call = json_string_value(json_object_get(e, "call"));
	if (ev == NULL)
		return;
	demo_result_append(r, "events", json_incref(e));
	if (strcmp(ev, "server") == 0) {
		demo_event(r, DEMO_NODE_PRODUCER, "the cell's server %s",
		    json_string_value(json_object_get(e, "what")));
	} else if (strcmp(ev, "call") == 0) {
		demo_event(r, DEMO_NODE_AGENT, "call %s: %s", call,
		    json_string_value(json_object_get(e, "why")));
	} else if (strcmp(ev, "attempt") == 0) {
		const char *key = json_string_value(json_object_get(e, "key"));
		const char *outcome = json_string_value(json_object_get(e, "outcome"));
		json_t *status = json_object_get(e, "status");
		char said[64];
		if (json_is_integer(status))
			snprintf(said, sizeof(said), "%" JSON_INTEGER_FORMAT "%s",
			    json_integer_value(status),
			    json_is_true(json_object_get(e, "replayed")) ? " (replayed)" : "");
		else
			snprintf(said, sizeof(said), "%s", outcome != NULL ? outcome : "?");
		demo_event(r, DEMO_NODE_AGENT, "call %s attempt %" JSON_INTEGER_FORMAT
		    ": Idempotency-Key %s -> %s", call, json_integer_value(json_object_get(e,
		    "attempt")), key != NULL ? key : "(none)", said);
		demo_event(r, DEMO_NODE_OUTBOX, "%zu report row(s), %zu key row(s)",
		    json_array_size(json_object_get(e, "reports")),
		    json_array_size(json_object_get(e, "keys")));
	}
}

static void
cell_line(struct demo_run *r, const char *line, void *arg)
{
	struct cell_tally *t = arg;
	json_t *e = json_line(line);
	if (e == NULL)
		return;
	const char *ev = json_string_value(json_object_get(e, "event"));
	cell_event(r, e);
	if (ev != NULL && strcmp(ev, "cell") == 0)
		demo_result_set(r, "cell", json_incref(e));
	if (ev != NULL && strcmp(ev, "result") == 0) {
		json_t *art = json_object_get(e, "article");
		t->reports = json_integer_value(json_object_get(e, "reports"));
		t->article = json_is_integer(art) ? json_integer_value(art) : -1;
		t->done = true;
	}
	json_decref(e);
}

static int
cell_run(struct demo_run *r)
{
	char cell[128], log[DEMO_PATH_MAX + 120];
	struct cell_tally t = { -1, -1, false };
	snprintf(cell, sizeof(cell), "%s,%s,%s", pstr(r, "fault"), pstr(r, "server"),
	    pstr(r, "keys"));
	int rc = matrix_program(r, "cell", cell, CELL_RUN_MS, cell_line, &t, log, sizeof(log));
	if (rc != OB_OK)
		return rc;
	if (!t.done) {
		snprintf(r->err, sizeof(r->err), "the cell printed no result; see %s", log);
		return OB_EINVAL;
	}
	demo_fact_int(r, "reports", t.reports);
	if (t.article >= 0)
		demo_fact_int(r, "article", t.article);
	else
		demo_fact_str(r, "article", "not in the article's table");
	demo_summary(r, "%s x %s / %s: %" JSON_INTEGER_FORMAT " report%s%s", pstr(r, "fault"),
	    pstr(r, "server"), pstr(r, "keys"), t.reports, t.reports == 1 ? "" : "s",
	    t.article < 0 ? "" : t.article == t.reports ? ", as in the article" :
	    ", NOT as in the article");
	return OB_OK;
}

/* --- matrix: the article's 25 at once --------------------------------------- */

static int
matrix_check(json_t *params, char *err, size_t errlen)
{
	static const char *const names[] = { NULL };
	return only_members(params, names, err, errlen);
}

struct matrix_tally {
	json_t *cell; /* the current cell's "cell" line */
	int cells, equal;
	bool done;
};

static void
matrix_line(struct demo_run *r, const char *line, void *arg)
{
	struct matrix_tally *t = arg;
	json_t *e = json_line(line);
	if (e == NULL)
		return;
	const char *ev = json_string_value(json_object_get(e, "event"));
	if (ev != NULL && strcmp(ev, "cell") == 0) {
		json_decref(t->cell);
		t->cell = json_incref(e);
	} else if (ev != NULL && strcmp(ev, "result") == 0 && t->cell != NULL) {
		json_t *c = json_pack("{s:O, s:O, s:O, s:O, s:O}", "fault",
		    json_object_get(t->cell, "fault"), "server", json_object_get(t->cell, "server"),
		    "keys", json_object_get(t->cell, "keys"), "reports",
		    json_object_get(e, "reports"), "article", json_object_get(e, "article"));
		if (c != NULL) {
			json_int_t got = json_integer_value(json_object_get(e, "reports"));
			json_t *art = json_object_get(e, "article");
			t->cells++;
			t->equal += json_is_integer(art) && json_integer_value(art) == got;
			demo_event(r, DEMO_NODE_OUTBOX, "%s / %s x %s: %" JSON_INTEGER_FORMAT
			    " report(s), the article %" JSON_INTEGER_FORMAT,
			    json_string_value(json_object_get(c, "server")),
			    json_string_value(json_object_get(c, "keys")),
			    json_string_value(json_object_get(c, "fault")), got,
			    json_integer_value(art));
			demo_result_append(r, "cells", c);
			demo_fact_int(r, "cells", t->cells);
			demo_fact_int(r, "equal", t->equal);
		}
	} else if (ev != NULL && strcmp(ev, "matrix") == 0) {
		t->done = true;
	}
	json_decref(e);
}

static int
matrix_run(struct demo_run *r)
{
	char log[DEMO_PATH_MAX + 120];
	struct matrix_tally t = { 0 };
	int rc = matrix_program(r, "matrix", NULL, MATRIX_RUN_MS, matrix_line, &t, log,
	    sizeof(log));
	json_decref(t.cell);
	if (rc != OB_OK)
		return rc;
	if (!t.done) {
		snprintf(r->err, sizeof(r->err), "the matrix did not finish; see %s", log);
		return OB_EINVAL;
	}
	demo_summary(r, "%d of %d cells as in the article's table", t.equal, t.cells);
	return OB_OK;
}

const struct demo_tool demo_tools[] = {
	{ "herd", "The herd simulator", herd_check, herd_run },
	{ "cell", "The idempotency stepper", cell_check, cell_run },
	{ "matrix", "All 25 combinations", matrix_check, matrix_run },
};
const int demo_ntools = (int)(sizeof(demo_tools) / sizeof(demo_tools[0]));
