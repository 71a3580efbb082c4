/*
 * matrix.c - `outbox-producer matrix`: the first article's fault matrix,
 * reproduced against a real server and a real PostgreSQL.
 *
 * Rows are server mode / key source, columns are faults; every cell starts
 * its own `outbox-producer serve` (this same binary) with the cell's mode
 * and fault counters, plays the harness (and, for the last two columns, the
 * model) with the real client, and counts the business rows the cell made
 * in app.bug_reports. The table is printed and compared cell for cell with
 * the article's; the exit status says whether they are equal.
 *
 * A cell is (server mode, key source, fault): the article's 25 are five
 * named (mode, source) pairs x the five faults, and --cell plays any one
 * of the 3 x 4 x 5 through the same path (cell_run, play_cell). With
 * --events every step of it is told as a JSON line (matrix_events.c).
 *
 * One harness for every cell: 10 attempts, Full Jitter base 50 ms cap 1 s,
 * Retry-After honoured, 2 s per attempt, enough to outlast a server restart
 * and an expired lease. In the last two columns the harness gives up after
 * one attempt and the model calls the tool again (a new tool_use id; the
 * second time with a reworded title).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "matrix_events.h"
#include "outbox/backoff.h"
#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/pg.h"
#include "producer.h"
#include "producer_rows.h"

#define MATRIX_ROWS 5
#define MATRIX_COLS 5
#define MATRIX_START_TIMEOUT_MS 30000
#define MATRIX_STOP_TIMEOUT_MS 10000
#define MATRIX_LEASE "4s"
#define MATRIX_MAX_PROCESSING "3s"
#define MATRIX_SLOW_MS "1500ms"

/* The article's table (第 5 周, 故障矩阵). */
const int producer_matrix_expected[MATRIX_ROWS][MATRIX_COLS] = {
	{ 2, 2, 2, 2, 2 },
	{ 2, 1, 2, 2, 2 },
	{ 1, 2, 2, 2, 2 },
	{ 1, 1, 1, 2, 2 },
	{ 1, 1, 1, 1, 2 },
};

/* What a cell is made of: the server's mode (serve --idempotency), where
 * the client's key comes from, and the fault. The names are --cell's. */
enum matrix_server { SERVER_NONE, SERVER_SPLIT, SERVER_ATOMIC, MATRIX_SERVERS };
enum matrix_keys { KEYS_NONE, KEYS_PER_ATTEMPT, KEYS_TOOL_CALL, KEYS_BUSINESS, MATRIX_KEYS };
enum matrix_fault { FAULT_LOST, FAULT_CRASH, FAULT_CONCURRENT, FAULT_NEW_ID, FAULT_REWORDED };

static const char *const server_names[MATRIX_SERVERS] = { "none", "split", "atomic" };
/* as the article names them */
static const char *const server_article[MATRIX_SERVERS] = { "naive", "key_split",
	"key_atomic" };
static const char *const keys_names[MATRIX_KEYS] = { "none", "per_attempt", "tool_call",
	"business" };
static const enum client_key_source keys_source[MATRIX_KEYS] = { CLIENT_KEY_NONE,
	CLIENT_KEY_PER_ATTEMPT, CLIENT_KEY_TOOL_CALL, CLIENT_KEY_CONTENT };
static const char *const fault_names[MATRIX_COLS] = { "lost-response", "crash-mid-request",
	"concurrent-dup", "new-tool-call-id", "reworded-title" };

struct cell {
	enum matrix_server server;
	enum matrix_keys keys;
	enum matrix_fault fault;
};

/* The article's rows, in its table's order (its columns are the faults). */
static const struct {
	enum matrix_server server;
	enum matrix_keys keys;
} rows[MATRIX_ROWS] = {
	{ SERVER_NONE, KEYS_NONE },
	{ SERVER_ATOMIC, KEYS_PER_ATTEMPT },
	{ SERVER_SPLIT, KEYS_TOOL_CALL },
	{ SERVER_ATOMIC, KEYS_TOOL_CALL },
	{ SERVER_ATOMIC, KEYS_BUSINESS },
};

/* The article's count for c, or -1 when its server and keys are none of
 * the article's rows. */
static int
article_count(const struct cell *c)
{
	for (int r = 0; r < MATRIX_ROWS; r++)
		if (rows[r].server == c->server && rows[r].keys == c->keys)
			return producer_matrix_expected[r][c->fault];
	return -1;
}

struct matrix_config {
	char *db;
	char *run_id;
	char *workdir;
	char *cell;
	bool events;
	bool quiet;
};

#define OB_CFG_STRUCT struct matrix_config

static const struct ob_cfg_opt matrix_options[] = {
	OB_CFG_OPT_DB_HELP(db, "PostgreSQL connection string (outbox migrations applied); each"
	    " cell's rows are tagged with the run id in their module"),
	PRODUCER_OPT_RUN_ID(run_id, "tag of this run (default: random); part of every cell's"
	    " keys, so a run id used again finds the keys of the last run"),
	OB_CFG_OPT("workdir", "OUTBOX_WORKDIR", OB_CFG_STRING, NULL, 0, 0, NULL, false, workdir,
	    "directory for the servers' logs and ready files (default: a new temp dir)"),
	OB_CFG_OPT("cell", "OUTBOX_MATRIX_CELL", OB_CFG_STRING, NULL, 0, 0, NULL, false, cell,
	    "play only this cell, FAULT,SERVER,KEYS, any of the 5 x 3 x 4:"
	    " FAULT lost-response|crash-mid-request|concurrent-dup|new-tool-call-id|reworded-title"
	    " (the columns), SERVER none|split|atomic (serve --idempotency; the article's naive,"
	    " key_split, key_atomic), KEYS none|per_attempt|tool_call|business (the client's key:"
	    " none, a new one every attempt, RUN:TOOL_USE_ID, derived from the content). Exit 0"
	    " once it is played, whatever it counts; a bad value exits 2, nothing run"),
	OB_CFG_OPT("events", "OUTBOX_MATRIX_EVENTS", OB_CFG_BOOL, "false", 0, 0, NULL, false,
	    events, "stdout: JSON lines only, one event a line as it happens (the cell, its"
	    " server started/crashed/restarted/stopped, each call, each attempt with the cell's"
	    " app.bug_reports and app.idempotency_keys rows read right after it, the count; after"
	    " the 25 cells the verdict; docs/producer.md), no table"),
	PRODUCER_OPT_QUIET(quiet, "no progress lines on stderr: only the table (or the cell's"
	    " line, or the JSON lines of --events)"),
	OB_CFG_END,
};

/* names joined by '|' into out. */
static const char *
names_join(const char *const *names, int n, char *out, size_t outlen)
{
	size_t len = 0;
	out[0] = '\0';
	for (int i = 0; i < n && len < outlen; i++)
		len += (size_t)snprintf(out + len, outlen - len, "%s%s", i > 0 ? "|" : "", names[i]);
	return out;
}

/* The index of word (len bytes) in names, or -1. */
static int
name_index(const char *const *names, int n, const char *word, size_t len)
{
	for (int i = 0; i < n; i++)
		if (strlen(names[i]) == len && strncmp(names[i], word, len) == 0)
			return i;
	return -1;
}

/* --cell FAULT,SERVER,KEYS into *out. OB_OK, or OB_EINVAL with one line in
 * err naming every allowed value. */
static int
cell_parse(const char *text, struct cell *out, char *err, size_t errlen)
{
	char faults[200], servers[100], keys[100], what[200] = "";
	const char *part[3] = { text, NULL, NULL };
	size_t len[3] = { 0 };
	int idx[3] = { -1, -1, -1 }, n = 0;
	for (const char *p = text;; p++) {
		if (*p == ',' || *p == '\0') {
			if (n < 3)
				len[n] = (size_t)(p - part[n]);
			n++;
			if (*p == '\0')
				break;
			if (n < 3)
				part[n] = p + 1;
		}
	}
	if (text[0] == '\0') {
		snprintf(what, sizeof(what), "it is empty");
	} else if (n != 3) {
		snprintf(what, sizeof(what), "it has %d part%s, not 3", n, n == 1 ? "" : "s");
	} else {
		static const char *const kinds[3] = { "fault", "server mode", "key source" };
		const char *const *names[3] = { fault_names, server_names, keys_names };
		const int counts[3] = { MATRIX_COLS, MATRIX_SERVERS, MATRIX_KEYS };
		for (int i = 0; i < 3 && what[0] == '\0'; i++)
			if ((idx[i] = name_index(names[i], counts[i], part[i], len[i])) < 0)
				snprintf(what, sizeof(what), "'%.*s' is not a %s", (int)(len[i] < 60 ? len[i] : 60),
				    part[i], kinds[i]);
	}
	if (what[0] != '\0') {
		snprintf(err, errlen, "--cell '%.100s': %s; want FAULT,SERVER,KEYS with FAULT %s,"
		    " SERVER %s, KEYS %s", text, what, names_join(fault_names, MATRIX_COLS, faults,
		    sizeof(faults)), names_join(server_names, MATRIX_SERVERS, servers, sizeof(servers)),
		    names_join(keys_names, MATRIX_KEYS, keys, sizeof(keys)));
		return OB_EINVAL;
	}
	*out = (struct cell){ (enum matrix_server)idx[1], (enum matrix_keys)idx[2],
		(enum matrix_fault)idx[0] };
	return OB_OK;
}

/* What every cell of a run shares. */
struct matrix_env {
	const char *db, *workdir;
	PGconn *conn;               /* counts the rows (and, with --events, reads them) */
	struct matrix_events *ev;   /* NULL without --events */
	bool quiet;
	bool keep_logs;             /* a cell failed: leave the work directory */
	int serial;                 /* numbers the servers' files */
};

struct cell_server {
	pid_t pid;
	int port;
	char url[64];
	char log[600];
};

/* Start `serve` for a cell; port 0 picks one, a restart reuses it. */
static int
server_start(const char *db, const char *workdir, const char *mode, char *const faults[],
    int port, int n, struct cell_server *s)
{
	char self[512], http[64], ready[600];
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len <= 0)
		return -1;
	self[len] = '\0';
	snprintf(http, sizeof(http), "http://127.0.0.1:%d", port);
	snprintf(ready, sizeof(ready), "%s/ready-%d", workdir, n);
	snprintf(s->log, sizeof(s->log), "%s/server-%d.log", workdir, n);
	unlink(ready);
	char *argv[32] = { self, "serve", "--db", (char *)db, "--http", http, "--ready-file", ready,
		"--idempotency", (char *)mode, "--lease", MATRIX_LEASE, "--max-processing",
		MATRIX_MAX_PROCESSING, "--threads", "4", "--fault-slow-ms", MATRIX_SLOW_MS };
	int argc = 18;
	for (int i = 0; faults != NULL && faults[i] != NULL && argc < 30; i++)
		argv[argc++] = faults[i];
	argv[argc] = NULL;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open(s->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		execv(self, argv);
		_exit(127);
	}
	s->pid = pid;
	int64_t deadline = ob_mono_ms() + MATRIX_START_TIMEOUT_MS;
	while (ob_mono_ms() < deadline) {
		FILE *f = fopen(ready, "r");
		if (f != NULL) {
			bool ok = fgets(s->url, sizeof(s->url), f) != NULL;
			fclose(f);
			if (ok) {
				s->url[strcspn(s->url, "\n")] = '\0';
				s->port = atoi(strrchr(s->url, ':') + 1);
				return 0;
			}
		}
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			s->pid = 0;
			return -1;
		}
		ob_sleep_ms(10);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	s->pid = 0;
	return -1;
}

static void
server_stop(struct cell_server *s)
{
	if (s->pid <= 0)
		return;
	kill(s->pid, SIGTERM);
	int64_t deadline = ob_mono_ms() + MATRIX_STOP_TIMEOUT_MS;
	while (ob_mono_ms() < deadline) {
		if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
			s->pid = 0;
			return;
		}
		ob_sleep_ms(10);
	}
	kill(s->pid, SIGKILL);
	waitpid(s->pid, NULL, 0);
	s->pid = 0;
}

/* Whether the server's log shows the slow fault firing n times. */
static bool
log_has_slow(const char *path, int n)
{
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return false;
	char line[2048];
	int seen = 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strstr(line, "fault.fired") != NULL && strstr(line, "producer.slow") != NULL)
			seen++;
	fclose(f);
	return seen >= n;
}

/* What the events have told of a crash cell's server so far. */
enum server_told { TOLD_UP = 0, TOLD_CRASHED, TOLD_RESTARTED };

/* One logical call: the harness's (A) or the model's or the duplicate's
 * (B), with the real client. */
struct call {
	struct client_opts o;
	struct client_result r;
	pthread_t thread;
	_Atomic bool done;
	const char *name;          /* "A", "B" */
	const char *tool_use_id;
	struct matrix_events *ev;  /* NULL: no events */
	_Atomic int *told;         /* a crash cell's enum server_told, else NULL */
	char key[128];
};

static void *
call_main(void *arg)
{
	struct call *c = arg;
	client_submit(&c->o, &c->r);
	atomic_store(&c->done, true);
	return NULL;
}

/* client_opts.on_attempt: the attempt's event. In a crash cell, first
 * what happened to the server before it: an attempt without an answer
 * waits (up to 2 s) until the death it ran into is told, an answer after
 * the death until the restart is. The main thread sees both only by
 * polling, later than the client does. */
static void
call_attempted(void *arg, int attempt, const char *key, const struct client_http_reply *reply)
{
	struct call *c = arg;
	if (c->told != NULL) {
		bool answered = reply->outcome == CLIENT_HTTP_ANSWERED;
		int64_t deadline = ob_mono_ms() + (answered ? MATRIX_START_TIMEOUT_MS : 2000);
		while (ob_mono_ms() < deadline) {
			int told = atomic_load(c->told);
			if (answered ? told != TOLD_CRASHED : told != TOLD_UP)
				break;
			ob_sleep_ms(1);
		}
	}
	matrix_events_attempt(c->ev, c->name, attempt, key, reply);
}

static void
call_init(struct call *c, const char *name, const struct cell *cell, const char *url,
    const char *run, const char *module, const char *title, const char *tool_use_id,
    struct matrix_events *ev)
{
	memset(c, 0, sizeof(*c));
	c->name = name;
	c->tool_use_id = tool_use_id;
	c->ev = ev;
	snprintf(c->key, sizeof(c->key), "%s:%s", run, tool_use_id);
	enum client_key_source source = keys_source[cell->keys];
	c->o = (struct client_opts){
		.url = url,
		.title = title,
		.module = module,
		.steps = "1. open a file 2. save",
		.severity = "high",
		.key_source = source,
		.key = source == CLIENT_KEY_TOOL_CALL ? c->key : NULL,
		.run = run,
		.attempts = 10,
		.base_ms = 50,
		.cap_ms = 1000,
		.timeout_ms = 2000,
		.max_retry_after_ms = 5000,
		.on_attempt = ev != NULL ? call_attempted : NULL,
		.on_attempt_arg = c,
	};
}

/* The call starts (its event), why: a short sentence. */
static void
call_begins(const struct call *c, const char *why)
{
	if (c->ev != NULL)
		matrix_events_call(c->ev, c->name, c->tool_use_id, c->o.title, why);
}

static void
server_event(struct matrix_env *env, const char *what, int port)
{
	if (env->ev != NULL)
		matrix_events_server(env->ev, what, port);
}

/* Whether the server refused the call outright (a 4xx that is not
 * retried: a keyed mode and no key), before any fault point. */
static bool
call_refused(const struct client_result *r)
{
	int st = r->last_status;
	return r->exit_code == CLIENT_EXIT_FAILED && st >= 400 && st < 500 && st != 409 &&
	    st != 429;
}

/* Play cell with its own server: the harness's call, then what the fault
 * adds. 0, or -1 when the scenario could not be set up. */
static int
play_cell(struct matrix_env *env, const struct cell *cell, const char *run, const char *module)
{
	struct cell_server s = { 0 };
	char *lose[] = { "--fault-lose-response", "1", NULL };
	char *crash[] = { "--fault-crash", "1", NULL };
	char *slow[] = { "--fault-slow", "2", NULL };
	char *const *faults = cell->fault == FAULT_CRASH ? crash
	    : cell->fault == FAULT_CONCURRENT          ? slow
	                                               : lose;
	const char *mode = server_names[cell->server];
	const char *title = "Crash on save";
	bool once = cell->fault == FAULT_NEW_ID || cell->fault == FAULT_REWORDED;
	struct call a, b;
	_Atomic int told = TOLD_UP;
	int rc = 0;

	if (server_start(env->db, env->workdir, mode, faults, 0, env->serial++, &s) != 0)
		return -1;
	server_event(env, "started", s.port);
	call_init(&a, "A", cell, s.url, run, module, title, "toolu_01", env->ev);
	call_begins(&a, once ? "the harness calls the tool and gives up after one attempt"
	                     : "the harness calls the tool");
	switch (cell->fault) {
	case FAULT_LOST:
		client_submit(&a.o, &a.r);
		client_result_fini(&a.r);
		break;
	case FAULT_CRASH: {
		/* The first attempt kills the server; it comes back on the same
		 * port (as systemd would restart it) while the harness retries. */
		a.told = &told;
		if (pthread_create(&a.thread, NULL, call_main, &a) != 0) {
			rc = -1;
			break;
		}
		bool died = false;
		while (!died && !atomic_load(&a.done)) {
			died = waitpid(s.pid, NULL, WNOHANG) == s.pid;
			ob_sleep_ms(5);
		}
		if (died) {
			s.pid = 0;
			server_event(env, "crashed", s.port);
			atomic_store(&told, TOLD_CRASHED);
			if (server_start(env->db, env->workdir, mode, NULL, s.port, env->serial++, &s) != 0) {
				rc = -1;
			} else {
				server_event(env, "restarted", s.port);
				atomic_store(&told, TOLD_RESTARTED);
			}
		}
		pthread_join(a.thread, NULL);
		/* the fault did not fire, though the call reached the server */
		if (!died && !call_refused(&a.r))
			rc = -1;
		client_result_fini(&a.r);
		break;
	}
	case FAULT_CONCURRENT: {
		/* The harness runs the same tool call twice at once: the second
		 * starts while the first sits in the slow point after its claim
		 * (or once the first ended, refused before it). */
		call_init(&b, "B", cell, s.url, run, module, title, "toolu_01", env->ev);
		if (pthread_create(&a.thread, NULL, call_main, &a) != 0) {
			rc = -1;
			break;
		}
		int64_t deadline = ob_mono_ms() + MATRIX_START_TIMEOUT_MS;
		while (!log_has_slow(s.log, 1) && !atomic_load(&a.done) && ob_mono_ms() < deadline)
			ob_sleep_ms(5);
		call_begins(&b, "the harness runs the same call again at once (concurrent duplicate)");
		if (pthread_create(&b.thread, NULL, call_main, &b) != 0) {
			rc = -1;
		} else {
			pthread_join(b.thread, NULL);
			client_result_fini(&b.r);
		}
		pthread_join(a.thread, NULL);
		client_result_fini(&a.r);
		break;
	}
	case FAULT_NEW_ID:
	case FAULT_REWORDED:
		/* The harness gives up after one attempt (the response was lost);
		 * the model calls the tool again: a new tool_use id. */
		a.o.attempts = 1;
		client_submit(&a.o, &a.r);
		client_result_fini(&a.r);
		call_init(&b, "B", cell, s.url, run, module,
		    cell->fault == FAULT_REWORDED ? "Editor crashes when saving a file" : title,
		    "toolu_02", env->ev);
		call_begins(&b, cell->fault == FAULT_REWORDED
		        ? "the model calls the tool again with a new tool_use id and a reworded title"
		        : "the model calls the tool again with a new tool_use id");
		client_submit(&b.o, &b.r);
		client_result_fini(&b.r);
		break;
	}
	if (s.pid > 0) {
		server_stop(&s);
		server_event(env, "stopped", s.port);
	}
	return rc;
}

/* Play one cell and count what it made, the one path of the 25-cell run
 * and of --cell: its events (with --events), its progress line on stderr
 * (unless quiet), its count into *got. 0; 1 when the scenario could not
 * be set up (counted all the same, its server logs kept); -1 when the
 * count could not be read (said on stderr). */
static int
cell_run(struct matrix_env *env, const struct cell *cell, const char *run, int *got)
{
	char module[160], label[64], article_text[16], err[1024];
	int article = article_count(cell), rc = 0;
	snprintf(module, sizeof(module), "matrix-%s", run);
	snprintf(label, sizeof(label), "%s / %s", server_article[cell->server],
	    keys_names[cell->keys]);
	if (env->ev != NULL)
		matrix_events_cell(env->ev, fault_names[cell->fault], server_names[cell->server],
		    keys_names[cell->keys], run, module, article);
	int64_t t0 = ob_mono_ms();
	if (play_cell(env, cell, run, module) != 0) {
		fprintf(stderr, "outbox-producer matrix: cell %s x %s could not be set up;"
		    " server logs in %s\n", label, fault_names[cell->fault], env->workdir);
		env->keep_logs = true;
		rc = 1;
	}
	/* every call has ended: the connection is this thread's again */
	const char *params[1] = { module };
	PGresult *res = ob_pg_rows(env->conn, "SELECT count(*) FROM app.bug_reports WHERE module = $1",
	    1, params, "count", err, sizeof(err));
	if (res == NULL) {
		fprintf(stderr, "outbox-producer matrix: %s\n", err);
		return -1;
	}
	*got = (int)ob_pg_int64(res, 0, 0);
	PQclear(res);
	if (env->ev != NULL)
		matrix_events_result(env->ev, *got, article);
	if (article >= 0)
		snprintf(article_text, sizeof(article_text), "%d", article);
	else
		snprintf(article_text, sizeof(article_text), "none");
	if (!env->quiet)
		fprintf(stderr, "matrix: %-26s %-18s -> %d (article: %s) in %" PRId64 " ms\n", label,
		    fault_names[cell->fault], *got, article_text, ob_mono_ms() - t0);
	return rc;
}

/* --cell: the one cell. 0 played, 1 not set up or not counted. */
static int
play_one(struct matrix_env *env, const struct cell *cell, const char *run_id)
{
	char run[160];
	int got;
	snprintf(run, sizeof(run), "%s-%s-%s-%s", run_id, fault_names[cell->fault],
	    server_names[cell->server], keys_names[cell->keys]);
	int rc = cell_run(env, cell, run, &got);
	if (rc < 0)
		return 1;
	if (env->ev == NULL) {
		int article = article_count(cell);
		printf("cell %s,%s,%s: %d business row%s in app.bug_reports (module matrix-%s); ",
		    fault_names[cell->fault], server_names[cell->server], keys_names[cell->keys], got,
		    got == 1 ? "" : "s", run);
		if (article >= 0)
			printf("the article: %d\n", article);
		else
			printf("not one of the article's rows\n");
	}
	return rc;
}

/* The 25 cells of the article's table, then the table (or, with
 * --events, the verdict's line). 0 when every cell equals the article's. */
static int
play_all(struct matrix_env *env, const char *run_id)
{
	int got[MATRIX_ROWS][MATRIX_COLS], code = 0;
	for (int r = 0; r < MATRIX_ROWS; r++) {
		for (int c = 0; c < MATRIX_COLS; c++) {
			char run[96];
			struct cell cell = { rows[r].server, rows[r].keys, (enum matrix_fault)c };
			snprintf(run, sizeof(run), "%s-r%dc%d", run_id, r + 1, c + 1);
			int rc = cell_run(env, &cell, run, &got[r][c]);
			if (rc < 0)
				return 1;
			if (rc != 0)
				code = 1;
		}
	}
	int diff = 0;
	for (int r = 0; r < MATRIX_ROWS; r++)
		for (int c = 0; c < MATRIX_COLS; c++)
			diff += got[r][c] != producer_matrix_expected[r][c];
	if (diff != 0) {
		env->keep_logs = true;
		code = 1;
	}
	if (env->ev != NULL) {
		matrix_events_matrix(env->ev, MATRIX_ROWS * MATRIX_COLS - diff,
		    MATRIX_ROWS * MATRIX_COLS);
		return code;
	}
	printf("cells = business rows in app.bug_reports (expected 1); run %s\n\n", run_id);
	printf("%-28s", "server / key source");
	for (int c = 0; c < MATRIX_COLS; c++)
		printf("%19s", fault_names[c]);
	printf("\n");
	for (int r = 0; r < MATRIX_ROWS; r++) {
		char label[64];
		snprintf(label, sizeof(label), "%s / %s", server_article[rows[r].server],
		    keys_names[rows[r].keys]);
		printf("%-28s", label);
		for (int c = 0; c < MATRIX_COLS; c++) {
			char cell[32];
			if (got[r][c] == producer_matrix_expected[r][c])
				snprintf(cell, sizeof(cell), "%d", got[r][c]);
			else
				snprintf(cell, sizeof(cell), "%d (article %d)", got[r][c],
				    producer_matrix_expected[r][c]);
			printf("%19s", cell);
		}
		printf("\n");
	}
	if (diff == 0)
		printf("\nmatrix: all %d cells equal the article's table\n", MATRIX_ROWS * MATRIX_COLS);
	else
		printf("\nmatrix: %d of %d cells DIFFER from the article's table (server logs in %s)\n",
		    diff, MATRIX_ROWS * MATRIX_COLS, env->workdir);
	return code;
}

/* Remove the work directory (flat: logs and ready files only). */
static void
remove_flat_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[1024];
	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(dir);
}

static const struct ob_cfg_program matrix_program = PRODUCER_PROGRAM("matrix",
    "--db CONNINFO [--cell FAULT,SERVER,KEYS] [--events]",
    "Reproduce the fault matrix of the article \"Week 5: it timed out, is it safe to send"
    " again?\" (docs/producer.md): 5 server-mode/key-source rows x 5"
    " fault columns, each cell a real server + the real client, counting business rows"
    " in the database. Exit 0 when every cell equals the article's table. --cell plays one"
    " cell of any server mode, key source and fault instead (exit 0 once played, 1 when it"
    " could not be set up); --events tells every request and the rows after it as JSON"
    " lines.",
    matrix_options);

int
producer_cmd_matrix(int argc, char **argv)
{
	struct matrix_config cfg;
	struct matrix_events events;
	struct cell one;
	char err[1024], run[64], dir[512];
	int code;
	bool made_dir = false, events_made = false;
	PGconn *conn = NULL;

	if ((code = ob_cfg_load(&matrix_program, &cfg, argc, argv, NULL)) >= 0)
		return code;
	code = 2;
	if (cfg.cell != NULL && cell_parse(cfg.cell, &one, err, sizeof(err)) != OB_OK) {
		fprintf(stderr, "outbox-producer matrix: %s\n", err);
		goto out;
	}
	if (cfg.run_id != NULL) {
		snprintf(run, sizeof(run), "%.40s", cfg.run_id);
	} else {
		uint64_t seed = ob_rand_seed();
		snprintf(run, sizeof(run), "m%08" PRIx64, ob_rand_next(&seed) & 0xffffffffu);
	}
	if (cfg.workdir != NULL) {
		snprintf(dir, sizeof(dir), "%s", cfg.workdir);
		mkdir(dir, 0755);
	} else {
		snprintf(dir, sizeof(dir), "/tmp/outbox-matrix-XXXXXX");
		if (mkdtemp(dir) == NULL) {
			fprintf(stderr, "outbox-producer matrix: mkdtemp: %s\n", strerror(errno));
			goto out;
		}
		made_dir = true;
	}
	if (ob_pg_connect(cfg.db, "outbox-producer-matrix", &conn, err, sizeof(err)) != OB_OK) {
		fprintf(stderr, "outbox-producer matrix: %s\n", err);
		goto out;
	}
	code = 1;
	if (cfg.events) {
		if (matrix_events_init(&events, conn) != OB_OK) {
			fprintf(stderr, "outbox-producer matrix: events: out of memory\n");
			goto out;
		}
		events_made = true;
	}
	struct matrix_env env = {
		.db = cfg.db,
		.workdir = dir,
		.conn = conn,
		.ev = events_made ? &events : NULL,
		.quiet = cfg.quiet,
	};
	code = cfg.cell != NULL ? play_one(&env, &one, run) : play_all(&env, run);
	if (env.keep_logs)
		made_dir = false;
out:
	if (made_dir)
		remove_flat_dir(dir);
	if (events_made)
		matrix_events_fini(&events);
	if (conn != NULL)
		PQfinish(conn);
	ob_cfg_free(matrix_options, &cfg);
	return code;
}
