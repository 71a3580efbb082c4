/*
 * testsupport.c - helpers shared by the Check suites (see testsupport.h).
 *
 * Tests run in a forked child per case (CK_FORK): everything here is
 * process-local, and the per-test database gives isolation between cases
 * and between test programs that ctest runs in parallel.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#include "outbox/err.h"
#include "outbox/migrate.h"
#include "testsupport.h"

extern char **environ;

int
ts_run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

int64_t
ts_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

char *
ts_read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return NULL;
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	size_t n;
	while (buf != NULL && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		len += n;
		if (cap - len < 2) {
			char *nb = realloc(buf, cap *= 2);
			if (nb == NULL) {
				free(buf);
				buf = NULL;
			} else
				buf = nb;
		}
	}
	fclose(f);
	if (buf != NULL)
		buf[len] = '\0';
	return buf;
}

void
ts_write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ck_assert_msg(f != NULL, "cannot write %s", path);
	ck_assert(fputs(text, f) >= 0);
	ck_assert_int_eq(fclose(f), 0);
}

const char *
ts_server_conninfo(void)
{
	static char conninfo[TS_CONNINFO_MAX];
	if (conninfo[0])
		return conninfo;
	const char *path = getenv("OUTBOX_TEST_PGENV");
	ck_assert_msg(path != NULL, "OUTBOX_TEST_PGENV is not set (run the test through ctest)");
	char *env = ts_read_file(path);
	ck_assert_msg(env != NULL, "cannot read %s: is the pg fixture running?", path);
	char *line = strstr(env, "OUTBOX_PG_CONNINFO='");
	ck_assert_msg(line != NULL, "no OUTBOX_PG_CONNINFO in %s", path);
	line += strlen("OUTBOX_PG_CONNINFO='");
	char *end = strchr(line, '\'');
	ck_assert(end != NULL);
	*end = '\0';
	snprintf(conninfo, sizeof(conninfo), "%s", line);
	free(env);
	return conninfo;
}

static void
ignore_notice(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
}

PGconn *
ts_connect(const char *conninfo)
{
	PGconn *c = PQconnectdb(conninfo);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "connect %s: %s", conninfo,
	    PQerrorMessage(c));
	PQsetNoticeProcessor(c, ignore_notice, NULL);
	return c;
}

void
ts_exec(PGconn *conn, const char *sql)
{
	PGresult *r = PQexec(conn, sql);
	ExecStatusType st = PQresultStatus(r);
	ck_assert_msg(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "%s: %s", sql,
	    PQresultErrorMessage(r));
	PQclear(r);
}

int64_t
ts_exec_state(PGconn *conn, const char *sql, char *state, size_t statelen, char *msg,
    size_t msglen)
{
	PGresult *r = PQexec(conn, sql);
	ExecStatusType st = PQresultStatus(r);
	int64_t n = 0;
	state[0] = '\0';
	if (msg != NULL)
		msg[0] = '\0';
	if (st == PGRES_TUPLES_OK) {
		n = PQntuples(r);
	} else if (st == PGRES_COMMAND_OK) {
		n = strtoll(PQcmdTuples(r), NULL, 10);
	} else {
		const char *s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
		const char *m = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
		snprintf(state, statelen, "%s", s ? s : "?????");
		if (msg != NULL)
			snprintf(msg, msglen, "%s", m ? m : PQresultErrorMessage(r));
	}
	PQclear(r);
	return n;
}

void
ts_role_create(const char *tag, const char *group, char *name)
{
	char sql[256];
	snprintf(name, 64, "%.40s_%d", tag, (int)getpid());
	PGconn *admin = ts_connect(ts_server_conninfo());
	snprintf(sql, sizeof(sql), "DROP ROLE IF EXISTS %s", name);
	ts_exec(admin, sql);
	snprintf(sql, sizeof(sql), "CREATE ROLE %s LOGIN%s%s", name, group ? " IN ROLE " : "",
	    group ? group : "");
	ts_exec(admin, sql);
	PQfinish(admin);
}

void
ts_role_drop(const char *name)
{
	char sql[128];
	PGconn *admin = ts_connect(ts_server_conninfo());
	snprintf(sql, sizeof(sql), "DROP ROLE IF EXISTS %s", name);
	ts_exec(admin, sql);
	PQfinish(admin);
}

void
ts_conninfo_as(const char *db, const char *role, char *out, size_t outlen)
{
	/* a later keyword wins: db's own user= is overridden */
	int n = snprintf(out, outlen, "%s user=%s", db, role);
	ck_assert_msg(n > 0 && (size_t)n < outlen, "conninfo too long");
}

int64_t
ts_query_int(PGconn *conn, const char *sql)
{
	PGresult *r = PQexec(conn, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", sql,
	    PQresultErrorMessage(r));
	int64_t v = 0;
	if (PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
		v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return v;
}

int64_t
ts_wait_value(PGconn *conn, const char *sql, int64_t want, int timeout_ms)
{
	int64_t end = ts_now_ms() + timeout_ms, v;
	for (;;) {
		v = ts_query_int(conn, sql);
		if (v == want || ts_now_ms() >= end)
			return v;
		usleep(50 * 1000);
	}
}

int64_t
ts_wait_at_least(PGconn *conn, const char *sql, int64_t want, int timeout_ms)
{
	int64_t end = ts_now_ms() + timeout_ms, v;
	for (;;) {
		v = ts_query_int(conn, sql);
		if (v >= want || ts_now_ms() >= end)
			return v;
		usleep(10 * 1000);
	}
}

/* This session's statistics into the shared counters now. A backend
 * otherwise flushes them when it exits, after it has left pg_stat_activity
 * (PostgreSQL 15 runs the two exit hooks in that order), so a test that
 * waits for the migration's backends to leave could still see the
 * migration's counts (its index builds are sequential scans) arrive later.
 * The flush happens when the session goes idle, before the reply. */
void
ts_stats_flush(PGconn *conn)
{
	ts_exec(conn, "SELECT pg_stat_force_next_flush()");
}

void
ts_db_create(const char *tag, const char *set, char *out, size_t outlen)
{
	static int counter;
	char name[64], sql[128];
	snprintf(name, sizeof(name), "t_%.30s_%d_%d", tag, (int)getpid(), ++counter);
	for (char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')))
			*p = '_';
	PGconn *admin = ts_connect(ts_server_conninfo());
	snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s", name);
	ts_exec(admin, sql);
	snprintf(sql, sizeof(sql), "CREATE DATABASE %s", name);
	ts_exec(admin, sql);
	PQfinish(admin);
	snprintf(out, outlen, "%s dbname=%s", ts_server_conninfo(), name);
	if (set != NULL) {
		PGconn *c = ts_connect(out);
		ts_migrate(c, set);
		ts_stats_flush(c);
		PQfinish(c);
	}
}

void
ts_migrate(PGconn *conn, const char *set)
{
	char err[512];
	struct ob_migrate_report applied;
	const struct ob_migrate_opts o = { .set = set, .demo = strcmp(set, "inbox") != 0 };
	ck_assert_msg(ob_migrate(conn, &o, &applied, err, sizeof(err)) == OB_OK, "migrate %s: %s",
	    set, err);
}

void
ts_db_create_at(const char *tag, const char *set, int last, char *out, size_t outlen)
{
	char sql[256];
	int applied = 0;
	ts_db_create(tag, NULL, out, outlen);
	PGconn *c = ts_connect(out);
	ts_exec(c, "BEGIN");
	/* the runner's table, as every release created it */
	ts_exec(c, "CREATE TABLE public.outbox_schema_migrations ("
	    " schema_set text NOT NULL, version integer NOT NULL, name text NOT NULL,"
	    " applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (schema_set, version))");
	for (const struct ob_migration *m = ob_migrations; m->set != NULL; m++) {
		if (strcmp(m->set, set) != 0 || m->version > last)
			continue;
		ts_exec(c, m->sql);
		snprintf(sql, sizeof(sql), "INSERT INTO public.outbox_schema_migrations"
		    " (schema_set, version, name) VALUES ('%s', %d, '%s')", m->set, m->version,
		    m->name);
		ts_exec(c, sql);
		applied++;
	}
	ts_exec(c, "COMMIT");
	ts_stats_flush(c);
	PQfinish(c);
	ck_assert_msg(applied > 0, "no migration of set %s up to %d", set, last);
}

static char tmpdir[256];

static void
remove_tmpdir(void)
{
	if (tmpdir[0] == '\0' || getenv("OUTBOX_TEST_KEEP") != NULL)
		return;
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
}

const char *
ts_tmpdir(void)
{
	static pid_t owner;
	if (tmpdir[0] && owner == getpid())
		return tmpdir;
	/* Short path: ipc:// socket paths are limited to ~100 bytes. */
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/obt.XXXXXX");
	ck_assert(mkdtemp(tmpdir) != NULL);
	chmod(tmpdir, 0755);
	owner = getpid();
	atexit(remove_tmpdir);
	return tmpdir;
}

void
ts_ipc_url(const char *name, char *out, size_t outlen)
{
	snprintf(out, outlen, "ipc://%s/%s.ipc", ts_tmpdir(), name);
}

pid_t
ts_spawn(char *const argv[], char *const extra_env[], char *log_out)
{
	static int n;
	const char *bindir = getenv("OUTBOX_BIN_DIR");
	char path[512], log[256];
	if (strchr(argv[0], '/') == NULL && bindir != NULL)
		snprintf(path, sizeof(path), "%s/%s", bindir, argv[0]);
	else
		snprintf(path, sizeof(path), "%s", argv[0]);
	const char *base = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	snprintf(log, sizeof(log), "%s/%s-%d.log", ts_tmpdir(), base, ++n);
	if (log_out != NULL)
		snprintf(log_out, 256, "%s", log);
	fflush(NULL);
	pid_t pid = fork();
	ck_assert(pid >= 0);
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		/* the machine's proxy is not the test's: the consumer's webhook
		 * (libcurl) would take it; a test that wants one passes it */
		static const char *const proxy_env[] = { "http_proxy", "HTTP_PROXY", "https_proxy",
			"HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY", NULL };
		for (int i = 0; proxy_env[i] != NULL; i++)
			unsetenv(proxy_env[i]);
		for (int i = 0; extra_env != NULL && extra_env[i] != NULL; i++)
			putenv(extra_env[i]);
		execv(path, argv);
		fprintf(stderr, "exec %s: %s\n", path, strerror(errno));
		_exit(127);
	}
	return pid;
}

int
ts_wait_exit(pid_t pid, int timeout_ms)
{
	int64_t end = ts_now_ms() + timeout_ms;
	for (;;) {
		int st;
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		if (r < 0)
			return -1;
		if (ts_now_ms() >= end)
			return -1;
		usleep(10 * 1000);
	}
}

void
ts_stop(pid_t pid, int sig)
{
	if (pid <= 0)
		return;
	kill(pid, sig);
	if (ts_wait_exit(pid, 10000) < 0) {
		kill(pid, SIGKILL);
		ts_wait_exit(pid, 10000);
	}
}

int
ts_run(char *const argv[], char *const extra_env[], char *out, size_t outlen,
    int timeout_ms)
{
	char log[256];
	pid_t pid = ts_spawn(argv, extra_env, log);
	int code = ts_wait_exit(pid, timeout_ms);
	if (code < 0)
		ts_stop(pid, SIGKILL);
	if (out != NULL && outlen > 0) {
		char *text = ts_read_file(log);
		snprintf(out, outlen, "%s", text ? text : "");
		free(text);
	}
	return code;
}

int
ts_http(const struct ts_http_req *q, struct ts_http_res *r)
{
	nng_url *url = NULL;
	nng_http_client *cli = NULL;
	nng_http_req *req = NULL;
	nng_http_res *res = NULL;
	nng_aio *aio = NULL;

	memset(r, 0, sizeof(*r));
	ck_assert_msg(nng_url_parse(&url, q->url) == 0, "bad URL %s", q->url);
	ck_assert_int_eq(nng_http_client_alloc(&cli, url), 0);
	ck_assert_int_eq(nng_http_req_alloc(&req, url), 0);
	ck_assert_int_eq(nng_http_res_alloc(&res), 0);
	ck_assert_int_eq(nng_aio_alloc(&aio, NULL, NULL), 0);
	ck_assert_int_eq(nng_http_req_set_method(req, q->method ? q->method : "GET"), 0);
	for (const char *const *h = q->headers; h != NULL && h[0] != NULL; h += 2)
		ck_assert_int_eq(nng_http_req_set_header(req, h[0], h[1]), 0);
	if (q->body != NULL)
		ck_assert_int_eq(nng_http_req_copy_data(req, q->body, q->body_len), 0);
	nng_aio_set_timeout(aio, q->timeout_ms > 0 ? q->timeout_ms : TS_HTTP_TIMEOUT_MS);
	nng_http_client_transact(cli, req, res, aio);
	nng_aio_wait(aio);
	if ((r->rv = nng_aio_result(aio)) == 0) {
		void *data = NULL;
		size_t len = 0;

		r->status = nng_http_res_get_status(res);
		nng_http_res_get_data(res, &data, &len);
		r->body = calloc(1, len + 1);
		ck_assert_ptr_nonnull(r->body);
		if (len > 0)
			memcpy(r->body, data, len);
		for (int i = 0; q->want != NULL && q->want[i] != NULL; i++) {
			ck_assert_int_lt(i, TS_HTTP_WANT_MAX);
			const char *v = nng_http_res_get_header(res, q->want[i]);
			snprintf(r->got[i], sizeof(r->got[i]), "%s", v ? v : "");
		}
	}
	nng_aio_free(aio);
	nng_http_res_free(res);
	nng_http_req_free(req);
	nng_http_client_free(cli);
	nng_url_free(url);
	return r->status;
}

int
ts_http_local(int port, const char *method, const char *path, char **body)
{
	char u[128];
	struct ts_http_res r;

	snprintf(u, sizeof(u), "http://127.0.0.1:%d%s", port, path);
	struct ts_http_req q = { .method = method, .url = u };
	ts_http(&q, &r);
	if (body != NULL)
		*body = r.body;
	else
		free(r.body);
	return r.status;
}

int
ts_http_wait_status(int port, const char *method, const char *path, int want,
    int timeout_ms)
{
	int64_t end = ts_now_ms() + timeout_ms;
	int st;

	while ((st = ts_http_local(port, method, path, NULL)) != want && ts_now_ms() < end)
		usleep(100 * 1000);
	return st;
}

int
ts_log_count(const char *path, const char *needle)
{
	char *text = ts_read_file(path);
	int n = 0;
	for (const char *p = text; p != NULL && (p = strstr(p, needle)) != NULL; p++)
		n++;
	free(text);
	return n;
}

int
ts_log_wait(const char *path, const char *needle, int want, int timeout_ms)
{
	int64_t end = ts_now_ms() + timeout_ms;
	int n;
	while ((n = ts_log_count(path, needle)) < want && ts_now_ms() < end)
		usleep(10 * 1000);
	return n;
}

/* key's value on one log line of event (NUL-terminated) into out: text
 * `event=E ... key=V` or `key="V"`, json `"event":"E",..."key":"V"`. */
static bool
line_field(const char *line, const char *event, const char *key, char *out, size_t outlen)
{
	char pat[200];
	snprintf(pat, sizeof(pat), " event=%s ", event);
	bool text = strstr(line, pat) != NULL;
	snprintf(pat, sizeof(pat), "\"event\":\"%s\"", event);
	if (!text && strstr(line, pat) == NULL)
		return false;
	snprintf(pat, sizeof(pat), text ? " %s=" : "\"%s\":\"", key);
	const char *v = strstr(line, pat);
	if (v == NULL)
		return false;
	v += strlen(pat);
	const char *stop = text ? " " : "\"";
	if (text && *v == '"') {
		v++;
		stop = "\"";
	}
	snprintf(out, outlen, "%.*s", (int)strcspn(v, stop), v);
	return true;
}

/* The value of key on the last line of event in the file; false if none.
 * Only whole lines count: the last one may still be being written. */
static bool
log_field(const char *path, const char *event, const char *key, char *out, size_t outlen)
{
	char *text = ts_read_file(path), *eol;
	bool found = false;
	for (char *line = text; line != NULL && (eol = strchr(line, '\n')) != NULL;
	    line = eol + 1) {
		*eol = '\0';
		found |= line_field(line, event, key, out, outlen);
	}
	free(text);
	return found;
}

void
ts_log_wait_field(const char *path, const char *event, const char *key, char *out,
    size_t outlen, int timeout_ms)
{
	int64_t end = ts_now_ms() + timeout_ms;
	bool found;
	while (!(found = log_field(path, event, key, out, outlen)) && ts_now_ms() < end)
		usleep(10 * 1000);
	ck_assert_msg(found, "no %s line with %s= in %s after %d ms", event, key, path,
	    timeout_ms);
}

int
ts_log_wait_port(const char *path, const char *event, int timeout_ms)
{
	char v[32], *rest;
	ts_log_wait_field(path, event, "port", v, sizeof(v), timeout_ms);
	long port = strtol(v, &rest, 10);
	ck_assert_msg(*v != '\0' && *rest == '\0' && port >= 1 && port <= 65535,
	    "%s in %s: port=%s is not a bound port", event, path, v);
	return (int)port;
}

char *
ts_wait_ready_file(const char *path, pid_t pid, const char *log, int timeout_ms)
{
	int64_t end = ts_now_ms() + timeout_ms;
	char *u;
	while ((u = ts_read_file(path)) == NULL && ts_now_ms() < end) {
		ck_assert_msg(ts_wait_exit(pid, 0) < 0, "exited before writing %s; log %s", path,
		    log);
		usleep(10 * 1000);
	}
	ck_assert_msg(u != NULL, "no %s after %d ms; log %s", path, timeout_ms, log);
	u[strcspn(u, "\n")] = '\0';
	return u;
}

bool
ts_promtool_check(const char *who, const char *text)
{
	const char *promtool = getenv("OUTBOX_PROMTOOL");
	if (promtool == NULL || access(promtool, X_OK) != 0)
		promtool = access("/usr/bin/promtool", X_OK) == 0 ? "/usr/bin/promtool" : NULL;
	if (promtool == NULL) {
		fprintf(stderr, "%s: promtool check SKIPPED: no promtool at $OUTBOX_PROMTOOL"
		    " (%s) or /usr/bin; run scripts/get-promtool.sh\n", who,
		    getenv("OUTBOX_PROMTOOL") ? getenv("OUTBOX_PROMTOOL") : "unset");
		return false;
	}
	static int seq;
	char path[512], outpath[530], cmd[1800];
	snprintf(path, sizeof(path), "%s/promtool-%d-%d.txt", ts_tmpdir(), (int)getpid(), ++seq);
	snprintf(outpath, sizeof(outpath), "%s.out", path);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "'%s' check metrics < '%s' > '%s' 2>&1", promtool, path,
	    outpath);
	int rc = system(cmd);
	char *out = ts_read_file(outpath);
	ck_assert_msg(rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0,
	    "promtool check metrics: %s\non:\n%s", out ? out : "", text);
	free(out);
	return true;
}

char *
ts_scrape(int port)
{
	char *body = NULL;
	int status = ts_http_local(port, "GET", "/metrics", &body);

	ck_assert_msg(status == 200, "GET /metrics: status %d", status);
	return body;
}

double
ts_metric_value(const char *text, const char *series)
{
	size_t n = strlen(series);

	for (const char *p = text; p != NULL && *p != '\0'; p = strchr(p, '\n'), p = p ? p + 1 : p)
		if (strncmp(p, series, n) == 0 && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return -1;
}

double
ts_metric(int port, const char *series)
{
	char *text = ts_scrape(port);
	double v = ts_metric_value(text, series);

	free(text);
	return v;
}

double
ts_wait_metric(int port, const char *series, double want, int timeout_ms)
{
	int64_t end = ts_now_ms() + timeout_ms;
	double v;

	while ((v = ts_metric(port, series)) != want && ts_now_ms() < end)
		usleep(100 * 1000);
	return v;
}

/* A TCP socket bound to 127.0.0.1:0; its port into *port. */
static int
bound_local(int *port)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

int
ts_listen_local(int *port)
{
	int fd = bound_local(port);

	ck_assert_int_eq(listen(fd, 1), 0);
	return fd;
}

int
ts_refusing_local(int *port)
{
	return bound_local(port);
}

/* The integer after "key=" on the last line containing event, or -1. */
int64_t
ts_log_last_value(const char *path, const char *event, const char *key)
{
	char *text = ts_read_file(path);
	int64_t v = -1;
	const char *p = text, *line = NULL;
	while (p != NULL && (p = strstr(p, event)) != NULL)
		line = p++;
	if (line != NULL) {
		const char *eol = strchr(line, '\n');
		char k[64];
		snprintf(k, sizeof(k), " %s=", key);
		const char *kv = strstr(line, k);
		if (kv != NULL && (eol == NULL || kv < eol))
			v = strtoll(kv + strlen(k), NULL, 10);
	}
	free(text);
	return v;
}

/* Enqueue n messages on topic with keys prefix-0..n-1. */
void
ts_enqueue_n(PGconn *conn, const char *topic, const char *prefix, int n)
{
	char sql[512];
	snprintf(sql, sizeof(sql),
	    "SELECT count(outbox.enqueue('%s', '%s-' || g, jsonb_build_object('n', g)))"
	    " FROM generate_series(1, %d) g", topic, prefix, n);
	ts_exec(conn, sql);
}

int64_t
ts_enqueue_one(PGconn *conn, const char *topic, const char *key, const char *payload)
{
	const char *params[] = { topic, key, payload };
	PGresult *res = PQexecParams(conn, "SELECT outbox.enqueue($1, $2, $3::jsonb)", 3, NULL,
	    params, NULL, NULL, 0);
	ck_assert_msg(PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1,
	    "enqueue on %s: %s", topic, PQresultErrorMessage(res));
	int64_t id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return id;
}

void
ts_assert_logged(const char *path, const char *needle)
{
	ck_assert_msg(ts_log_wait(path, needle, 1, 30000) >= 1, "%s never logged %s", path,
	    needle);
}

const char *const *
ts_args_cat(const char **out, size_t n, const char *const *a, const char *const *b)
{
	size_t k = 0;
	for (const char *const *l = a; l != NULL && *l != NULL; l++) {
		ck_assert_uint_lt(k, n - 1);
		out[k++] = *l;
	}
	for (const char *const *l = b; l != NULL && *l != NULL; l++) {
		ck_assert_uint_lt(k, n - 1);
		out[k++] = *l;
	}
	out[k] = NULL;
	return out;
}

/* --- raw TCP ---------------------------------------------------------- */

int
ts_tcp_connect(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_msg(fd >= 0, "socket: %s", strerror(errno));
	ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0,
	    "connect 127.0.0.1:%d: %s", port, strerror(errno));
	return fd;
}

void
ts_tcp_send(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		ck_assert_msg(n > 0, "send: %s", strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}

/* Whether out holds a whole response (headers + Content-Length bytes). */
static bool
response_complete(const char *out, size_t got)
{
	const char *end = strstr(out, "\r\n\r\n");
	if (end == NULL)
		return false;
	const char *cl = strcasestr(out, "\r\nContent-Length:");
	size_t want = cl != NULL && cl < end ? (size_t)strtoul(cl + 17, NULL, 10) : 0;
	return got >= (size_t)(end + 4 - out) + want;
}

/* Read fd into out (NUL-terminated) until done(out, got) says so (NULL:
 * never), the peer closes (*eof), out is full or timeout_ms pass. */
static size_t
read_until(int fd, char *out, size_t outlen, int timeout_ms,
    bool (*done)(const char *, size_t), bool *eof)
{
	int64_t end = ts_now_ms() + timeout_ms;
	size_t got = 0;
	*eof = false;
	out[0] = '\0';
	while (got + 1 < outlen && (done == NULL || !done(out, got))) {
		int64_t left = end - ts_now_ms();
		if (left <= 0)
			break;
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int r = poll(&pfd, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		ssize_t n = recv(fd, out + got, outlen - 1 - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			*eof = true;
			break;
		}
		got += (size_t)n;
		out[got] = '\0';
	}
	return got;
}

size_t
ts_tcp_read_all(int fd, char *out, size_t outlen, int timeout_ms, bool *closed)
{
	bool eof;
	size_t got = read_until(fd, out, outlen, timeout_ms, NULL, &eof);
	if (closed != NULL)
		*closed = eof;
	return got;
}

int
ts_tcp_read_response(int fd, char *out, size_t outlen, int timeout_ms)
{
	bool eof;
	read_until(fd, out, outlen, timeout_ms, response_complete, &eof);
	return ts_http_raw_status(out);
}

int64_t
ts_tcp_wait_closed(int fd, int timeout_ms)
{
	int64_t t0 = ts_now_ms(), end = t0 + timeout_ms;
	char sink[4096];
	for (;;) {
		int64_t left = end - ts_now_ms();
		if (left <= 0)
			return -1;
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int r = poll(&pfd, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		ssize_t n = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
		if (n > 0)
			continue;
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		return ts_now_ms() - t0;
	}
}

int
ts_http_raw_status(const char *response)
{
	const char *p = strstr(response, "HTTP/1.");
	int status = 0;
	if (p != NULL && sscanf(p, "HTTP/1.%*d %d", &status) != 1)
		status = 0;
	return status;
}

int
ts_http_raw(int port, const char *request, size_t len, char *out, size_t outlen,
    int timeout_ms)
{
	int fd = ts_tcp_connect(port);
	ts_tcp_send(fd, request, len);
	ts_tcp_read_all(fd, out, outlen, timeout_ms, NULL);
	close(fd);
	return ts_http_raw_status(out);
}

long
ts_set_nofile(long n)
{
	struct rlimit rl;
	ck_assert(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && (rlim_t)n > rl.rlim_max ? rl.rlim_max
	                                                                      : (rlim_t)n;
	ck_assert_msg(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s", strerror(errno));
	return (long)rl.rlim_cur;
}

json_t *
ts_json_at(json_t *o, const char *path)
{
	char buf[256], *save = NULL;
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = strtok_r(buf, ".", &save); p != NULL && o != NULL;
	     p = strtok_r(NULL, ".", &save))
		o = json_object_get(o, p);
	return o;
}
