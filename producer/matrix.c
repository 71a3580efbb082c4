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

static const struct {
	const char *label, *mode;
	enum client_key_source source;
} rows[MATRIX_ROWS] = {
	{ "naive / none", "none", CLIENT_KEY_NONE },
	{ "key_atomic / per_attempt", "atomic", CLIENT_KEY_PER_ATTEMPT },
	{ "key_split / tool_call", "split", CLIENT_KEY_TOOL_CALL },
	{ "key_atomic / tool_call", "atomic", CLIENT_KEY_TOOL_CALL },
	{ "key_atomic / business", "atomic", CLIENT_KEY_CONTENT },
};

enum column { COL_LOST, COL_CRASH, COL_CONCURRENT, COL_NEW_ID, COL_REWORDED };

static const char *const col_labels[MATRIX_COLS] = { "lost-response", "crash-mid-request",
	"concurrent-dup", "new-tool-call-id", "reworded-title" };

struct matrix_config {
	char *db;
	char *run_id;
	char *workdir;
	bool quiet;
};

#define OB_CFG_STRUCT struct matrix_config

static const struct ob_cfg_opt matrix_options[] = {
	OB_CFG_OPT_DB_HELP(db, "PostgreSQL connection string (outbox migrations applied); each"
	    " cell's rows are tagged with the run id in their module"),
	PRODUCER_OPT_RUN_ID(run_id, "tag of this run (default: random)"),
	OB_CFG_OPT("workdir", "OUTBOX_WORKDIR", OB_CFG_STRING, NULL, 0, 0, NULL, false, workdir,
	    "directory for the servers' logs and ready files (default: a new temp dir)"),
	PRODUCER_OPT_QUIET(quiet, "print only the table"),
	OB_CFG_END,
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

struct call {
	struct client_opts o;
	struct client_result r;
	pthread_t thread;
	_Atomic bool done;
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

static void
call_init(struct call *c, int row, const char *url, const char *run, const char *module,
    const char *title, const char *tool_use_id)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->key, sizeof(c->key), "%s:%s", run, tool_use_id);
	c->o = (struct client_opts){
		.url = url,
		.title = title,
		.module = module,
		.steps = "1. open a file 2. save",
		.severity = "high",
		.key_source = rows[row].source,
		.key = rows[row].source == CLIENT_KEY_TOOL_CALL ? c->key : NULL,
		.run = run,
		.attempts = 10,
		.base_ms = 50,
		.cap_ms = 1000,
		.timeout_ms = 2000,
		.max_retry_after_ms = 5000,
	};
}

/* Play one cell. 0, or -1 when the scenario could not be set up. */
static int
play_cell(const char *db, const char *workdir, int row, int col, const char *run,
    const char *module, int *serial)
{
	struct cell_server s = { 0 };
	char *lose[] = { "--fault-lose-response", "1", NULL };
	char *crash[] = { "--fault-crash", "1", NULL };
	char *slow[] = { "--fault-slow", "2", NULL };
	char *const *faults = col == COL_CRASH ? crash : col == COL_CONCURRENT ? slow : lose;
	const char *title = "Crash on save";
	struct call a, b;
	int rc = 0;

	if (server_start(db, workdir, rows[row].mode, faults, 0, (*serial)++, &s) != 0)
		return -1;
	call_init(&a, row, s.url, run, module, title, "toolu_01");
	switch (col) {
	case COL_LOST:
		client_submit(&a.o, &a.r);
		client_result_fini(&a.r);
		break;
	case COL_CRASH: {
		/* The first attempt kills the server; it comes back on the same
		 * port (as systemd would restart it) while the harness retries. */
		pthread_create(&a.thread, NULL, call_main, &a);
		bool died = false;
		while (!died && !atomic_load(&a.done)) {
			died = waitpid(s.pid, NULL, WNOHANG) == s.pid;
			ob_sleep_ms(5);
		}
		if (died) {
			s.pid = 0;
			if (server_start(db, workdir, rows[row].mode, NULL, s.port, (*serial)++, &s) != 0)
				rc = -1;
		} else {
			rc = -1; /* the fault did not fire */
		}
		pthread_join(a.thread, NULL);
		client_result_fini(&a.r);
		break;
	}
	case COL_CONCURRENT: {
		/* The harness runs the same tool call twice at once: the second
		 * starts while the first sits in the slow point after its claim. */
		call_init(&b, row, s.url, run, module, title, "toolu_01");
		pthread_create(&a.thread, NULL, call_main, &a);
		int64_t deadline = ob_mono_ms() + MATRIX_START_TIMEOUT_MS;
		while (!log_has_slow(s.log, 1) && ob_mono_ms() < deadline)
			ob_sleep_ms(5);
		pthread_create(&b.thread, NULL, call_main, &b);
		pthread_join(a.thread, NULL);
		pthread_join(b.thread, NULL);
		client_result_fini(&a.r);
		client_result_fini(&b.r);
		break;
	}
	case COL_NEW_ID:
	case COL_REWORDED:
		/* The harness gives up after one attempt (the response was lost);
		 * the model calls the tool again: a new tool_use id. */
		a.o.attempts = 1;
		client_submit(&a.o, &a.r);
		client_result_fini(&a.r);
		call_init(&b, row, s.url, run, module,
		    col == COL_REWORDED ? "Editor crashes when saving a file" : title, "toolu_02");
		client_submit(&b.o, &b.r);
		client_result_fini(&b.r);
		break;
	}
	server_stop(&s);
	return rc;
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
    "--db CONNINFO",
    "Reproduce the fault matrix of the article \"Week 5: it timed out, is it safe to send"
    " again?\" (docs/producer.md): 5 server-mode/key-source rows x 5"
    " fault columns, each cell a real server + the real client, counting business rows"
    " in the database. Exit 0 when every cell equals the article's table.",
    matrix_options);

int
producer_cmd_matrix(int argc, char **argv)
{
	struct matrix_config cfg;
	char err[1024], run[64], dir[512], module[160];
	int code, serial = 0;
	bool made_dir = false;
	PGconn *conn = NULL;
	int got[MATRIX_ROWS][MATRIX_COLS];

	if ((code = ob_cfg_load(&matrix_program, &cfg, argc, argv, NULL)) >= 0)
		return code;
	code = 2;
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
	code = 0;
	for (int r = 0; r < MATRIX_ROWS; r++) {
		for (int c = 0; c < MATRIX_COLS; c++) {
			char cellrun[96];
			snprintf(cellrun, sizeof(cellrun), "%s-r%dc%d", run, r + 1, c + 1);
			snprintf(module, sizeof(module), "matrix-%s", cellrun);
			int64_t t0 = ob_mono_ms();
			if (play_cell(cfg.db, dir, r, c, cellrun, module, &serial) != 0) {
				fprintf(stderr, "outbox-producer matrix: cell %s x %s could not be set up;"
				    " server logs in %s\n", rows[r].label, col_labels[c], dir);
				made_dir = false;
				code = 1;
			}
			const char *params[1] = { module };
			PGresult *res = PQexecParams(conn,
			    "SELECT count(*) FROM app.bug_reports WHERE module = $1", 1, NULL, params,
			    NULL, NULL, 0);
			if (ob_pg_check(res, PGRES_TUPLES_OK, "count", err, sizeof(err)) != OB_OK) {
				fprintf(stderr, "outbox-producer matrix: %s\n", err);
				PQclear(res);
				code = 1;
				goto out;
			}
			got[r][c] = (int)ob_pg_int64(res, 0, 0);
			PQclear(res);
			if (!cfg.quiet)
				fprintf(stderr, "matrix: %-26s %-18s -> %d (article: %d) in %" PRId64 " ms\n",
				    rows[r].label, col_labels[c], got[r][c],
				    producer_matrix_expected[r][c], ob_mono_ms() - t0);
		}
	}
	printf("cells = business rows in app.bug_reports (expected 1); run %s\n\n", run);
	printf("%-28s", "server / key source");
	for (int c = 0; c < MATRIX_COLS; c++)
		printf("%19s", col_labels[c]);
	printf("\n");
	int diff = 0;
	for (int r = 0; r < MATRIX_ROWS; r++) {
		printf("%-28s", rows[r].label);
		for (int c = 0; c < MATRIX_COLS; c++) {
			char cell[32];
			if (got[r][c] == producer_matrix_expected[r][c])
				snprintf(cell, sizeof(cell), "%d", got[r][c]);
			else
				snprintf(cell, sizeof(cell), "%d (article %d)", got[r][c],
				    producer_matrix_expected[r][c]);
			diff += got[r][c] != producer_matrix_expected[r][c];
			printf("%19s", cell);
		}
		printf("\n");
	}
	if (diff == 0) {
		printf("\nmatrix: all %d cells equal the article's table\n", MATRIX_ROWS * MATRIX_COLS);
	} else {
		printf("\nmatrix: %d of %d cells DIFFER from the article's table (server logs in %s)\n",
		    diff, MATRIX_ROWS * MATRIX_COLS, dir);
		made_dir = false;
		code = 1;
	}
out:
	if (made_dir)
		remove_flat_dir(dir);
	if (conn != NULL)
		PQfinish(conn);
	ob_cfg_free(matrix_options, &cfg);
	return code;
}
