/*
 * web_demo_steps.h - between the demonstration's engine (web_demo.c: the
 * config file, the state, the job thread) and its jobs: the guided steps
 * (web_demo_steps.c: what each step does to the real processes) and the
 * tools (web_demo_tools.c: the herd simulator, the idempotency stepper,
 * the article's 25 cells), which take parameters from the page.
 *
 * A job runs on the demo's thread, one at a time; everything it reports
 * goes through the demo_* calls below, which take the demo's lock, so the
 * web server can render the state at any moment.
 */
#ifndef OUTBOX_CTL_WEB_DEMO_STEPS_H
#define OUTBOX_CTL_WEB_DEMO_STEPS_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "outbox/proc.h"

#define DEMO_URL_MAX 256
#define DEMO_PATH_MAX 512
#define DEMO_CONNINFO_MAX 1024

/* The config file's values (web_demo.h lists the keys). */
struct demo_conf {
	char producer_url[DEMO_URL_MAX];     /* the producer API */
	char producer_admin[DEMO_URL_MAX];   /* its --metrics listener (--demo-admin) */
	char consumer_admin[DEMO_URL_MAX];   /* the consumer's (--demo-admin) */
	char consumer_listen[DEMO_PATH_MAX]; /* the consumer's nng URL */
	char relay_db[DEMO_CONNINFO_MAX];    /* the step relays' --db */
	char bin_dir[DEMO_PATH_MAX];         /* where outbox-relay is */
	char work_dir[DEMO_PATH_MAX];        /* the step relays' logs */
	char matrix_faults[DEMO_URL_MAX];    /* optional: step 6's fault columns, "a,b" */
};

struct web_demo;

/* One run of one job (a step or a tool). */
struct demo_run {
	struct web_demo *d;
	const struct demo_conf *conf;
	int job;           /* 0-based: the steps, then the tools */
	int n;             /* a step's number (1-based); 0 for a tool */
	json_t *params;    /* a tool's parameters, checked (owned by the engine) */
	char stamp[40];    /* unique per run: in every key and title it makes */
	PGconn *db;        /* the web view's --db (read: the facts) */
	PGconn *inbox;     /* its --inbox-db, or NULL */
	char err[1400];    /* why the step failed */
};

struct demo_step {
	const char *title;
	const char *explain; /* one sentence */
	int (*run)(struct demo_run *r); /* OB_OK, or an ob_err with r->err */
};

extern const struct demo_step demo_steps[];
extern const int demo_nsteps;

/* A tool: a job the page starts with parameters (POST /api/demo/tool/NAME,
 * a JSON object). check runs on the web server's thread before anything
 * starts: it validates params (and may add defaults to it), OB_OK or
 * OB_EINVAL with one line in err, nothing started. */
struct demo_tool {
	const char *name;
	const char *title;
	int (*check)(json_t *params, char *err, size_t errlen);
	int (*run)(struct demo_run *r);
};

extern const struct demo_tool demo_tools[];
extern const int demo_ntools;

/* Where an event happens on the page's picture of the pipeline. */
enum demo_node {
	DEMO_NODE_AGENT = 0, /* the agent's client: calls, attempts, retries */
	DEMO_NODE_PRODUCER,  /* the producer API */
	DEMO_NODE_OUTBOX,    /* PostgreSQL: business rows, keys, outbox records */
	DEMO_NODE_RELAY,     /* relay workers: claims, leases, fences */
	DEMO_NODE_CONSUMER,  /* the consumer and its inbox (dedup) */
	DEMO_NODE_DOWNSTREAM /* the effect */
};

/* What a step reports (each takes the demo's lock). */
void demo_log(struct demo_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void demo_summary(struct demo_run *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void demo_fact_int(struct demo_run *r, const char *name, int64_t v);
void demo_fact_str(struct demo_run *r, const char *name, const char *v);
void demo_fact_bool(struct demo_run *r, const char *name, bool v);
void demo_highlight_key(struct demo_run *r, const char *key);
/* Something that happened at node, for the picture (the newest
 * DEMO_EVENTS_MAX are kept, numbered) and the job's log. */
void demo_event(struct demo_run *r, enum demo_node node, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A member of a tool's result: set (steals v), or appended to an array
 * member (steals v; at most DEMO_RESULT_ITEMS_MAX items, then dropped). */
void demo_result_set(struct demo_run *r, const char *name, json_t *v);
void demo_result_append(struct demo_run *r, const char *name, json_t *v);

/* Run bin_dir/argv[0] to its end, output (stdout and stderr) in log, each
 * complete line to fn as it appears; a line longer than
 * DEMO_STREAM_LINE_MAX comes in pieces. OB_OK when it exited 0 or 1, else
 * an error with r->err; stopped after max_ms, or when the web view stops. */
typedef void (*demo_line_fn)(struct demo_run *r, const char *line, void *arg);
#define DEMO_STREAM_LINE_MAX 16384
int demo_stream(struct demo_run *r, struct ob_argv *a, const char *log, int64_t max_ms,
    demo_line_fn fn, void *arg);
void demo_highlight_id(struct demo_run *r, int64_t id);

/* True once web_demo_close was called: a step's waits end at once (with
 * OB_ECLOSED), its relays and matrices are stopped on its way out. */
bool demo_cancelled(const struct demo_run *r);

#endif
