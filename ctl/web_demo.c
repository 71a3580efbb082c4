/*
 * web_demo.c - the demonstration's engine (web_demo.h): reads the config
 * file scripts/demo.sh --web writes, keeps each job's state (the guided
 * steps', the tools') and the pipeline's events behind one mutex, runs one
 * job at a time on a thread of its own and renders the state as JSON
 * (jansson). The steps are in web_demo_steps.c, the tools in
 * web_demo_tools.c.
 *
 * A job's result is built in place while it runs (its log grows line by
 * line), always under the lock, so the page shows progress; the thread
 * that ran the last job is joined when the next one starts, or at close.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "outbox/err.h"
#include "outbox/pg.h"
#include "web_demo.h"
#include "web_demo_steps.h"

#define DEMO_CONF_LINE_MAX 2048  /* longest line of the config file */
#define DEMO_CONF_LINES_MAX 64   /* most lines read */
#define DEMO_LOG_LINES_MAX 200   /* a step's log keeps its first lines */
#define DEMO_LINE_MAX 600        /* one log line or summary */
#define DEMO_STATEMENT_TIMEOUT "5s" /* the facts' queries */
#define DEMO_APPNAME "outboxctl web demo"
#define DEMO_EVENTS_MAX 60       /* the pipeline's newest events kept */
#define DEMO_RESULT_ITEMS_MAX 400 /* items of one array of a tool's result */

enum step_status { STEP_IDLE = 0, STEP_RUNNING, STEP_DONE, STEP_FAILED };
static const char *const status_names[] = { "idle", "running", "done", "failed" };

struct step_state {
	enum step_status status;
	json_t *result; /* NULL, or {summary, facts, highlight{keys, ids}, log} */
};

struct web_demo {
	pthread_mutex_t mu;
	struct demo_conf conf;
	char *db, *inbox_db;
	int running;        /* the job running + 1, 0 when none */
	bool joinable;      /* thread ran a job and was not joined yet */
	pthread_t thread;
	unsigned runs;      /* jobs started, for the stamps */
	_Atomic bool closing; /* web_demo_close: the running job ends early */
	struct demo_run run;
	struct step_state *jobs; /* demo_nsteps steps, then demo_ntools tools */
	json_t *params;     /* the tools' last parameters, by name */
	json_t *events;     /* the newest DEMO_EVENTS_MAX events */
	json_int_t event_seq;
};

#define NJOBS (demo_nsteps + demo_ntools)

/* --- the config file --------------------------------------------------- */

static const struct conf_key {
	const char *name;
	size_t off, len;
	bool optional;
} conf_keys[] = {
#define K(f, opt) { #f, offsetof(struct demo_conf, f), sizeof(((struct demo_conf *)0)->f), opt }
	K(producer_url, false), K(producer_admin, false), K(consumer_admin, false),
	K(consumer_listen, false), K(relay_db, false), K(bin_dir, false), K(work_dir, false),
	K(matrix_faults, true),
#undef K
};
#define NKEYS (sizeof(conf_keys) / sizeof(conf_keys[0]))

static int
conf_read(const char *path, struct demo_conf *c, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char line[DEMO_CONF_LINE_MAX];
	bool seen[NKEYS] = { false };
	int lineno = 0, rc = OB_EINVAL;
	if (f == NULL) {
		snprintf(err, errlen, "--demo %s: %s", path, strerror(errno));
		return OB_EINVAL;
	}
	memset(c, 0, sizeof(*c));
	while (fgets(line, sizeof(line), f) != NULL) {
		size_t n = strlen(line);
		if (++lineno > DEMO_CONF_LINES_MAX) {
			snprintf(err, errlen, "--demo %s: more than %d lines", path, DEMO_CONF_LINES_MAX);
			goto out;
		}
		if (n > 0 && line[n - 1] != '\n' && !feof(f)) {
			snprintf(err, errlen, "--demo %s:%d: line longer than %d bytes", path, lineno,
			    DEMO_CONF_LINE_MAX - 2);
			goto out;
		}
		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = '\0';
		if (line[0] == '\0' || line[0] == '#')
			continue;
		char *eq = strchr(line, '=');
		if (eq == NULL) {
			snprintf(err, errlen, "--demo %s:%d: want key=value", path, lineno);
			goto out;
		}
		*eq = '\0';
		size_t k;
		for (k = 0; k < NKEYS && strcmp(conf_keys[k].name, line) != 0; k++)
			;
		if (k == NKEYS) {
			snprintf(err, errlen, "--demo %s:%d: unknown key '%.64s' (web_demo.h lists"
			    " the keys)", path, lineno, line);
			goto out;
		}
		if (seen[k] || eq[1] == '\0' || strlen(eq + 1) >= conf_keys[k].len) {
			snprintf(err, errlen, "--demo %s:%d: %s is %s", path, lineno, line,
			    seen[k] ? "given twice" : eq[1] == '\0' ? "empty" : "too long");
			goto out;
		}
		seen[k] = true;
		snprintf((char *)c + conf_keys[k].off, conf_keys[k].len, "%s", eq + 1);
	}
	for (size_t k = 0; k < NKEYS; k++) {
		if (!seen[k] && !conf_keys[k].optional) {
			snprintf(err, errlen, "--demo %s: %s is missing", path, conf_keys[k].name);
			goto out;
		}
	}
	rc = OB_OK;
out:
	fclose(f);
	return rc;
}

/* --- state --------------------------------------------------------------- */

int
web_demo_open(const char *config_path, const char *db, const char *inbox_db,
    struct web_demo **out, char *err, size_t errlen)
{
	struct web_demo *d = calloc(1, sizeof(*d));
	int rc;
	if (d == NULL || (d->jobs = calloc((size_t)NJOBS, sizeof(*d->jobs))) == NULL ||
	    (d->params = json_object()) == NULL || (d->events = json_array()) == NULL) {
		if (d != NULL) {
			free(d->jobs);
			json_decref(d->params);
		}
		free(d);
		snprintf(err, errlen, "out of memory");
		return OB_ENOMEM;
	}
	if ((rc = conf_read(config_path, &d->conf, err, errlen)) != OB_OK)
		goto fail;
	if (db == NULL || db[0] == '\0') {
		snprintf(err, errlen, "the demonstration needs --db");
		rc = OB_EINVAL;
		goto fail;
	}
	d->db = strdup(db);
	d->inbox_db = inbox_db != NULL && inbox_db[0] != '\0' ? strdup(inbox_db) : NULL;
	if (d->db == NULL || (inbox_db != NULL && inbox_db[0] != '\0' && d->inbox_db == NULL)) {
		snprintf(err, errlen, "out of memory");
		rc = OB_ENOMEM;
		goto fail;
	}
	pthread_mutex_init(&d->mu, NULL);
	*out = d;
	return OB_OK;
fail:
	free(d->db);
	free(d->inbox_db);
	free(d->jobs);
	json_decref(d->params);
	json_decref(d->events);
	free(d);
	return rc;
}

char *
web_demo_state_json(struct web_demo *d)
{
	json_t *root = json_object(), *steps = json_array(), *tools = json_object();
	char *text = NULL;
	if (root == NULL || steps == NULL || tools == NULL)
		goto out;
	pthread_mutex_lock(&d->mu);
	int running = d->running - 1;
	json_object_set_new(root, "running", json_integer(running >= 0 && running < demo_nsteps
	        ? running + 1 : 0));
	json_object_set_new(root, "running_tool", running >= demo_nsteps
	        ? json_string(demo_tools[running - demo_nsteps].name) : json_null());
	for (int i = 0; i < NJOBS; i++) {
		const struct step_state *st = &d->jobs[i];
		json_t *s;
		if (i < demo_nsteps) {
			s = json_pack("{s:i, s:s, s:s}", "n", i + 1, "title", demo_steps[i].title,
			    "explain", demo_steps[i].explain);
		} else {
			const struct demo_tool *t = &demo_tools[i - demo_nsteps];
			json_t *p = json_object_get(d->params, t->name);
			s = json_pack("{s:s, s:s, s:O}", "name", t->name, "title", t->title, "params",
			    p != NULL ? p : json_null());
		}
		if (s == NULL)
			continue;
		json_object_set_new(s, "status", json_string(status_names[st->status]));
		json_object_set_new(s, "result", st->result != NULL ? json_deep_copy(st->result)
		        : json_null());
		if (i < demo_nsteps)
			json_array_append_new(steps, s);
		else
			json_object_set_new(tools, demo_tools[i - demo_nsteps].name, s);
	}
	json_object_set_new(root, "events", json_deep_copy(d->events));
	pthread_mutex_unlock(&d->mu);
	json_object_set(root, "steps", steps);
	json_object_set(root, "tools", tools);
	text = json_dumps(root, JSON_COMPACT | JSON_ENSURE_ASCII);
out:
	json_decref(tools);
	json_decref(steps);
	json_decref(root);
	return text;
}

/* The result being built by the running step (call with the lock held). */
static json_t *
live(struct demo_run *r)
{
	return r->d->jobs[r->job].result;
}

static void
vline(char *buf, size_t len, const char *fmt, va_list ap)
{
	vsnprintf(buf, len, fmt, ap);
}

/* A JSON string of s; text that is not UTF-8 (a log line, a cut line) gets
 * '?' for every byte above 0x7f rather than being lost. */
static json_t *
text(char *s)
{
	json_t *j = json_string(s);
	if (j != NULL)
		return j;
	for (char *p = s; *p; p++)
		if ((unsigned char)*p >= 0x80)
			*p = '?';
	return json_string(s);
}

/* fmt into the live run, under the lock: a line of its log (to_log, up to
 * DEMO_LOG_LINES_MAX) or its summary. */
static void
vput(struct demo_run *r, bool to_log, const char *fmt, va_list ap)
{
	char line[DEMO_LINE_MAX];
	vline(line, sizeof(line), fmt, ap);
	pthread_mutex_lock(&r->d->mu);
	if (!to_log) {
		json_object_set_new(live(r), "summary", text(line));
	} else {
		json_t *log = json_object_get(live(r), "log");
		if (json_array_size(log) < DEMO_LOG_LINES_MAX)
			json_array_append_new(log, text(line));
	}
	pthread_mutex_unlock(&r->d->mu);
}

void
demo_log(struct demo_run *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vput(r, true, fmt, ap);
	va_end(ap);
}

void
demo_summary(struct demo_run *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vput(r, false, fmt, ap);
	va_end(ap);
}

static void
fact(struct demo_run *r, const char *name, json_t *v)
{
	pthread_mutex_lock(&r->d->mu);
	json_object_set_new(json_object_get(live(r), "facts"), name, v);
	pthread_mutex_unlock(&r->d->mu);
}

void
demo_fact_int(struct demo_run *r, const char *name, int64_t v)
{
	fact(r, name, json_integer((json_int_t)v));
}

void
demo_fact_str(struct demo_run *r, const char *name, const char *v)
{
	char copy[DEMO_LINE_MAX];
	snprintf(copy, sizeof(copy), "%s", v);
	fact(r, name, text(copy));
}

void
demo_fact_bool(struct demo_run *r, const char *name, bool v)
{
	fact(r, name, json_boolean(v));
}

static void
highlight(struct demo_run *r, const char *list, json_t *v)
{
	pthread_mutex_lock(&r->d->mu);
	json_t *a = json_object_get(json_object_get(live(r), "highlight"), list);
	size_t i;
	json_t *e;
	bool dup = false;
	json_array_foreach(a, i, e) dup = dup || json_equal(e, v);
	if (!dup)
		json_array_append(a, v);
	json_decref(v);
	pthread_mutex_unlock(&r->d->mu);
}

void
demo_highlight_key(struct demo_run *r, const char *key)
{
	char copy[DEMO_LINE_MAX];
	snprintf(copy, sizeof(copy), "%s", key);
	highlight(r, "keys", text(copy));
}

void
demo_highlight_id(struct demo_run *r, int64_t id)
{
	highlight(r, "ids", json_integer((json_int_t)id));
}

static const char *const node_names[] = { "agent", "producer", "outbox", "relay",
	"consumer", "downstream" };

void
demo_event(struct demo_run *r, enum demo_node node, const char *fmt, ...)
{
	char line[DEMO_LINE_MAX];
	va_list ap;
	va_start(ap, fmt);
	vline(line, sizeof(line), fmt, ap);
	va_end(ap);
	demo_log(r, "%s: %s", node_names[node], line);
	pthread_mutex_lock(&r->d->mu);
	json_t *e = json_pack("{s:I, s:s, s:o, s:i}", "seq", ++r->d->event_seq, "node",
	    node_names[node], "text", text(line), "step", r->n);
	if (e != NULL) {
		if (r->n == 0)
			json_object_set_new(e, "tool", json_string(demo_tools[r->job - demo_nsteps].name));
		json_array_append_new(r->d->events, e);
		while (json_array_size(r->d->events) > DEMO_EVENTS_MAX)
			json_array_remove(r->d->events, 0);
	}
	pthread_mutex_unlock(&r->d->mu);
}

void
demo_result_set(struct demo_run *r, const char *name, json_t *v)
{
	pthread_mutex_lock(&r->d->mu);
	json_object_set_new(live(r), name, v);
	pthread_mutex_unlock(&r->d->mu);
}

void
demo_result_append(struct demo_run *r, const char *name, json_t *v)
{
	pthread_mutex_lock(&r->d->mu);
	json_t *a = json_object_get(live(r), name);
	if (a == NULL && json_object_set_new(live(r), name, json_array()) == 0)
		a = json_object_get(live(r), name);
	if (json_array_size(a) < DEMO_RESULT_ITEMS_MAX)
		json_array_append(a, v);
	json_decref(v);
	pthread_mutex_unlock(&r->d->mu);
}

bool
demo_cancelled(const struct demo_run *r)
{
	return atomic_load(&r->d->closing);
}

/* --- the step thread ----------------------------------------------------- */

/* Connect with a statement timeout: the facts' queries never hang a step. */
static int
connect_reader(const char *conninfo, PGconn **out, char *err, size_t errlen)
{
	int rc = ob_pg_connect(conninfo, DEMO_APPNAME, out, err, errlen);
	if (rc == OB_OK && (rc = ob_pg_exec(*out, "SET statement_timeout = '"
	        DEMO_STATEMENT_TIMEOUT "'", "set statement_timeout", err, errlen)) != OB_OK) {
		PQfinish(*out);
		*out = NULL;
	}
	return rc;
}

static void *
job_main(void *arg)
{
	struct web_demo *d = arg;
	struct demo_run *r = &d->run;
	int rc = connect_reader(d->db, &r->db, r->err, sizeof(r->err));
	if (rc == OB_OK && d->inbox_db != NULL)
		rc = connect_reader(d->inbox_db, &r->inbox, r->err, sizeof(r->err));
	if (rc == OB_OK)
		rc = r->job < demo_nsteps ? demo_steps[r->job].run(r)
		                          : demo_tools[r->job - demo_nsteps].run(r);
	if (rc != OB_OK) {
		demo_log(r, "failed: %s", r->err);
		demo_summary(r, "failed: %s", r->err);
	}
	if (r->db != NULL)
		PQfinish(r->db);
	if (r->inbox != NULL)
		PQfinish(r->inbox);
	r->db = r->inbox = NULL;
	pthread_mutex_lock(&d->mu);
	d->jobs[r->job].status = rc == OB_OK ? STEP_DONE : STEP_FAILED;
	d->running = 0;
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

/* Start job (0-based) with params (stolen; NULL for a step). */
static int
job_start(struct web_demo *d, int job, json_t *params)
{
	pthread_mutex_lock(&d->mu);
	if (d->running != 0) {
		pthread_mutex_unlock(&d->mu);
		json_decref(params);
		return OB_EEXIST;
	}
	if (d->joinable) {
		/* it ended (running is 0): joining does not wait */
		pthread_join(d->thread, NULL);
		d->joinable = false;
	}
	json_t *res = json_pack("{s:s, s:{}, s:{s:[], s:[]}, s:[]}", "summary", "running",
	    "facts", "highlight", "keys", "ids", "log");
	if (res == NULL) {
		pthread_mutex_unlock(&d->mu);
		json_decref(params);
		return OB_ENOMEM;
	}
	json_decref(d->jobs[job].result);
	d->jobs[job].result = res;
	d->jobs[job].status = STEP_RUNNING;
	memset(&d->run, 0, sizeof(d->run));
	d->run.d = d;
	d->run.conf = &d->conf;
	d->run.job = job;
	d->run.n = job < demo_nsteps ? job + 1 : 0;
	if (params != NULL) {
		/* the page shows what its last run was asked; the run reads it */
		json_object_set_new(d->params, demo_tools[job - demo_nsteps].name, params);
		d->run.params = params;
	}
	snprintf(d->run.stamp, sizeof(d->run.stamp), "%lld-%u", (long long)time(NULL), ++d->runs);
	d->running = job + 1;
	if (pthread_create(&d->thread, NULL, job_main, d) != 0) {
		d->running = 0;
		d->jobs[job].status = STEP_FAILED;
		json_object_set_new(res, "summary", json_string("failed: cannot start a thread"));
		pthread_mutex_unlock(&d->mu);
		return OB_ENOMEM;
	}
	d->joinable = true;
	pthread_mutex_unlock(&d->mu);
	return OB_OK;
}

int
web_demo_start(struct web_demo *d, int n)
{
	if (n < 1 || n > demo_nsteps)
		return OB_EINVAL;
	return job_start(d, n - 1, NULL);
}

static int
tool_index(const char *name)
{
	for (int k = 0; k < demo_ntools; k++)
		if (strcmp(demo_tools[k].name, name) == 0)
			return k;
	return -1;
}

bool
web_demo_has_tool(const char *name)
{
	return tool_index(name) >= 0;
}

int
web_demo_start_tool(struct web_demo *d, const char *name, const char *body, size_t len,
    char *err, size_t errlen)
{
	int k = tool_index(name);
	if (k < 0) {
		snprintf(err, errlen, "no such tool");
		return OB_EINVAL;
	}
	json_error_t jerr;
	json_t *params = len == 0 ? json_object() : json_loadb(body, len, JSON_REJECT_DUPLICATES,
	    &jerr);
	if (params == NULL || !json_is_object(params)) {
		snprintf(err, errlen, "the body must be a JSON object%s%s", params == NULL ? ": " : "",
		    params == NULL ? jerr.text : "");
		json_decref(params);
		return OB_EINVAL;
	}
	int rc = demo_tools[k].check(params, err, errlen);
	if (rc != OB_OK) {
		json_decref(params);
		return rc;
	}
	return job_start(d, demo_nsteps + k, params);
}

void
web_demo_close(struct web_demo *d)
{
	if (d == NULL)
		return;
	atomic_store(&d->closing, true);
	if (d->joinable)
		pthread_join(d->thread, NULL); /* a running job stops waiting at once */
	for (int i = 0; i < NJOBS; i++)
		json_decref(d->jobs[i].result);
	json_decref(d->params);
	json_decref(d->events);
	pthread_mutex_destroy(&d->mu);
	free(d->jobs);
	free(d->db);
	free(d->inbox_db);
	free(d);
}
