/*
 * web_demo_steps.h - between the demonstration's engine (web_demo.c: the
 * config file, the state, the step thread) and its steps
 * (web_demo_steps.c: what each step does to the real processes).
 *
 * A step runs on the demo's thread; everything it reports goes through the
 * demo_* calls below, which take the demo's lock, so the web server can
 * render the state at any moment.
 */
#ifndef OUTBOX_CTL_WEB_DEMO_STEPS_H
#define OUTBOX_CTL_WEB_DEMO_STEPS_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

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

/* One run of one step. */
struct demo_run {
	struct web_demo *d;
	const struct demo_conf *conf;
	int n;             /* 1-based */
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

/* What a step reports (each takes the demo's lock). */
void demo_log(struct demo_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void demo_summary(struct demo_run *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void demo_fact_int(struct demo_run *r, const char *name, int64_t v);
void demo_fact_str(struct demo_run *r, const char *name, const char *v);
void demo_fact_bool(struct demo_run *r, const char *name, bool v);
void demo_highlight_key(struct demo_run *r, const char *key);
void demo_highlight_id(struct demo_run *r, int64_t id);

/* True once web_demo_close was called: a step's waits end at once (with
 * OB_ECLOSED), its relays and matrices are stopped on its way out. */
bool demo_cancelled(const struct demo_run *r);

#endif
