/*
 * testsupport.h - helpers shared by the Check suites: a fresh, migrated
 * database per test on the throwaway PostgreSQL (scripts/pg-tmp.sh, started
 * by the ctest fixture `pg`), child processes of the real programs,
 * polling with generous deadlines, and a real HTTP client (nng's) with a
 * Prometheus text reader for the /metrics tests. Helpers fail the test
 * (ck_assert) rather than return errors.
 */
#ifndef OUTBOX_TESTSUPPORT_H
#define OUTBOX_TESTSUPPORT_H

#include <check.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define TS_CONNINFO_MAX 512

/* Run every suite in s with CK_ENV verbosity; returns the process exit code. */
int ts_run_suite(Suite *s);

/* The conninfo of the fixture's server (its postgres database). */
const char *ts_server_conninfo(void);

/* Flush this session's statistics (pg_stat_user_tables and the like) into
 * the shared counters before the call returns. */
void ts_stats_flush(PGconn *conn);

/* Migrate conn's database: set ("all", "outbox" or "inbox") and, with the
 * outbox side, the demo business (schema app), which the tests' producers
 * write (ck_assert on failure). */
void ts_migrate(PGconn *conn, const char *set);

/* Create a fresh database named after tag (plus pid and a counter), apply
 * the migrations of set ("all", "outbox", "inbox", or NULL for none) as
 * ts_migrate does, and write its conninfo into out. */
void ts_db_create(const char *tag, const char *set, char *out, size_t outlen);

/* Create a fresh database as ts_db_create does, but holding only the
 * numbered migrations of set ("outbox" or "inbox") up to version last, each
 * recorded as the runner records it: the schema a release that stopped
 * there left (without today's schema files). ob_migrate brings it up to
 * date, as an upgrade does. */
void ts_db_create_at(const char *tag, const char *set, int last, char *out, size_t outlen);
/* The number of the last inbox migration (sql/inbox/NNN_*.sql): what a
 * database made by ts_db_create_at(..., last, ...) is migrated up to. */
#define TS_INBOX_LATEST 10

/* Connect (ck_assert on failure). Release with PQfinish. */
PGconn *ts_connect(const char *conninfo);

/* Run sql, expect success; the first column of the first row as an integer
 * (0 when there is no row). */
int64_t ts_query_int(PGconn *conn, const char *sql);

/* Run sql, expect success (any statements, no result wanted). */
void ts_exec(PGconn *conn, const char *sql);

/* Run sql, success or not: its SQLSTATE into state ("" when it succeeded)
 * and the server's primary message into msg (may be NULL; "" on success).
 * Returns the rows it affected or returned (0 when it failed). */
int64_t ts_exec_state(PGconn *conn, const char *sql, char *state, size_t statelen, char *msg,
    size_t msglen);

/* A LOGIN role of the fixture's server named tag_<pid>, into name (room
 * for 64), made a member of group (NULL: of none); dropped first if a
 * role of that name is left over. Roles belong to the server, not to a
 * database: drop it with ts_role_drop. */
void ts_role_create(const char *tag, const char *group, char *name);

/* Drop a role of ts_role_create (it must own nothing and hold no direct
 * grant any more). */
void ts_role_drop(const char *name);

/* conninfo of db (ts_db_create) connecting as role, into out. */
void ts_conninfo_as(const char *db, const char *role, char *out, size_t outlen);

/* Poll sql every 50 ms until it returns want, or timeout_ms passes.
 * Returns the last value seen. */
int64_t ts_wait_value(PGconn *conn, const char *sql, int64_t want, int timeout_ms);
/* The same until it returns want or more (polled every 10 ms). */
int64_t ts_wait_at_least(PGconn *conn, const char *sql, int64_t want, int timeout_ms);

/* Start build/bin/<argv[0]> with argv (NULL-terminated); stdout and stderr
 * go to <tmpdir>/<argv[0]>-<n>.log (path returned through log_out if not
 * NULL, size 256). extra_env: NULL or NULL-terminated "K=V" strings added to
 * the environment, which has no proxy variables (http_proxy, HTTPS_PROXY,
 * no_proxy...) but those extra_env gives. Returns the pid. */
pid_t ts_spawn(char *const argv[], char *const extra_env[], char *log_out);

/* Wait for pid to exit, up to timeout_ms. Returns its exit code, 128+signal
 * when killed, or -1 on timeout (the process is left running). */
int ts_wait_exit(pid_t pid, int timeout_ms);

/* Send sig, then wait up to 10 s; SIGKILL if it does not exit. */
void ts_stop(pid_t pid, int sig);

/* Run a program to completion with output captured into out (NUL-terminated,
 * truncated to outlen). Returns the exit code as ts_wait_exit. */
int ts_run(char *const argv[], char *const extra_env[], char *out, size_t outlen,
    int timeout_ms);

/* A unique ipc:// URL in the temp dir for this test process. */
void ts_ipc_url(const char *name, char *out, size_t outlen);

/* A per-process temp directory (created once, removed at exit). */
const char *ts_tmpdir(void);

/* Read a whole file into a malloc'ed NUL-terminated string (NULL if absent). */
char *ts_read_file(const char *path);

/* Write text to the file at path (created or truncated); asserts it worked. */
void ts_write_file(const char *path, const char *text);

/* Milliseconds of a monotonic clock. */
int64_t ts_now_ms(void);

/* --- HTTP (nng's client) and Prometheus text ------------------------- */

#define TS_HTTP_TIMEOUT_MS 5000 /* ts_http_local: no answer by then = status 0 */
#define TS_HTTP_WANT_MAX 4      /* response headers one ts_http can copy out */
#define TS_HTTP_HEADER_MAX 256  /* a copied header value, NUL included (a CSP is long) */

struct ts_http_req {
	const char *method;         /* NULL = "GET" */
	const char *url;            /* the whole URL: "http://127.0.0.1:8080/metrics" */
	const char *const *headers; /* NULL, or "Name", "value", ..., NULL */
	const void *body;           /* NULL = no body */
	size_t body_len;
	int timeout_ms;             /* 0 = TS_HTTP_TIMEOUT_MS */
	const char *const *want;    /* NULL, or response header names, NULL-ended
	                             * (at most TS_HTTP_WANT_MAX) */
};

struct ts_http_res {
	int rv;     /* nng's result: 0 when an answer came (NNG_ETIMEDOUT, ...) */
	int status; /* HTTP status; 0 when no answer came */
	char *body; /* malloc'ed, NUL-terminated; NULL when no answer; free() */
	char got[TS_HTTP_WANT_MAX][TS_HTTP_HEADER_MAX]; /* want[i]'s value, "" if absent */
};

/* One HTTP exchange. Returns res->status (0 when no answer came). */
int ts_http(const struct ts_http_req *req, struct ts_http_res *res);

/* method on http://127.0.0.1:<port><path>, TS_HTTP_TIMEOUT_MS. Returns the
 * status (0 when no answer came); the body (malloc'ed) into *body when
 * body is not NULL (NULL when no answer came). */
int ts_http_local(int port, const char *method, const char *path, char **body);

/* ts_http_local every 100 ms until it answers want, or timeout_ms passes.
 * Returns the last status. */
int ts_http_wait_status(int port, const char *method, const char *path, int want,
    int timeout_ms);

/* GET /metrics on 127.0.0.1:<port>; it must answer 200. Caller frees. */
char *ts_scrape(int port);

/* How many times needle occurs in the file at path (0 when unreadable). */
int ts_log_count(const char *path, const char *needle);

/* The integer after " key=" on the last line of path containing event, or
 * -1 when there is none. */
int64_t ts_log_last_value(const char *path, const char *event, const char *key);

/* Assert that the log at path holds needle within 30 s. */
void ts_assert_logged(const char *path, const char *needle);

/* The NULL-ended lists a then b (either may be NULL) into out, which has
 * room for n entries; NULL-ended; asserts they fit. Returns out. */
const char *const *ts_args_cat(const char **out, size_t n, const char *const *a,
    const char *const *b);

/* Enqueue n messages on topic, keys prefix-1..prefix-n, payload {"n": i}. */
void ts_enqueue_n(PGconn *conn, const char *topic, const char *prefix, int n);

/* Enqueue one message (outbox.enqueue, the strings sent as parameters, so
 * they may hold anything: quotes, markup); payload is JSON text. Returns
 * its id. */
int64_t ts_enqueue_one(PGconn *conn, const char *topic, const char *key, const char *payload);

/* Poll path every 10 ms until needle occurs want times, or timeout_ms
 * passes. Returns the last count. */
int ts_log_wait(const char *path, const char *needle, int want, int timeout_ms);

/* Poll path every 10 ms until a line of event (text `event=NAME`, or json
 * `"event":"NAME"`) carries key (`key=value` / `"key":"value"`), up to
 * timeout_ms; the value on the last such line into out (quotes removed,
 * truncated to outlen). Asserts it appeared, naming the log. */
void ts_log_wait_field(const char *path, const char *event, const char *key, char *out,
    size_t outlen, int timeout_ms);

/* The TCP port a program logged it bound: the `port=N` of the last line of
 * event (ts_log_wait_field), asserted 1..65535. Start every listener on
 * port 0 (`--metrics 127.0.0.1:0`) and read its port back with this: a
 * port found free a moment ago may be someone else's by the time the
 * program binds it. */
int ts_log_wait_port(const char *path, const char *event, int timeout_ms);

/* Poll every 10 ms for the --ready-file at path that the process pid
 * writes once it serves, up to timeout_ms; asserts pid is still running
 * meanwhile and the file appeared (naming log, pid's output, when not).
 * Returns its first line without the newline (malloc'ed, free()). */
char *ts_wait_ready_file(const char *path, pid_t pid, const char *log, int timeout_ms);

/* `promtool check metrics` on an exposition text: asserts it passes. The
 * promtool is $OUTBOX_PROMTOOL (scripts/get-promtool.sh), else
 * /usr/bin/promtool. Without one it says "who: promtool check SKIPPED" on
 * stderr and returns false; true when the check ran. */
bool ts_promtool_check(const char *who, const char *text);

/* The value of one series ("name" or "name{labels}", exactly as exposed)
 * in a Prometheus exposition text, or -1 when it is absent. */
double ts_metric_value(const char *exposition, const char *series);

/* One scrape of port: the value of series (-1 when absent). */
double ts_metric(int port, const char *series);

/* Scrape every 100 ms until series == want, or timeout_ms passes. Returns
 * the last value. */
double ts_wait_metric(int port, const char *series, double want, int timeout_ms);

/* A TCP socket listening on 127.0.0.1 (a port in use): returns the fd
 * (close it), its port into *port. */
int ts_listen_local(int *port);

/* A TCP port on 127.0.0.1 that refuses connections: a socket bound to it
 * but never listening, held until the returned fd is closed, so nothing
 * else can listen there meanwhile (unlike a fixed "unused" port). Its port
 * into *port. */
int ts_refusing_local(int *port);

/* --- raw TCP to a local server (slow and hostile clients) ------------ */

/* A connected TCP socket to 127.0.0.1:port (blocking; asserts). */
int ts_tcp_connect(int port);

/* Send all of len bytes on fd (asserts it could). */
void ts_tcp_send(int fd, const void *buf, size_t len);

/* Read from fd into out until the peer closes, outlen-1 bytes, or
 * timeout_ms passes; NUL-terminated. Returns the bytes read; *closed (may
 * be NULL) tells whether the peer closed (EOF or reset) within the time. */
size_t ts_tcp_read_all(int fd, char *out, size_t outlen, int timeout_ms, bool *closed);

/* Read one HTTP response from fd into out (NUL-terminated): until its
 * headers and Content-Length body are in, the peer closes, or timeout_ms
 * passes. Returns its status (0: none), the connection left open. */
int ts_tcp_read_response(int fd, char *out, size_t outlen, int timeout_ms);

/* Poll fd until the peer closes it (EOF or reset; bytes before are
 * discarded), up to timeout_ms. Returns the milliseconds it took, or -1
 * when still open at the deadline. */
int64_t ts_tcp_wait_closed(int fd, int timeout_ms);

/* The status of the first "HTTP/1.x NNN" line in a raw response, 0 when
 * none. */
int ts_http_raw_status(const char *response);

/* Connect, send the whole raw request, read the answer until the server
 * closes or timeout_ms passes (into out, NUL-terminated), close. Returns
 * the status of the first response (0: none). */
int ts_http_raw(int port, const char *request, size_t len, char *out, size_t outlen,
    int timeout_ms);

/* The member of JSON o at a dotted path ("result.content"), or NULL when
 * any step is missing (borrowed). */
struct json_t *ts_json_at(struct json_t *o, const char *path);

/* Set this process's soft RLIMIT_NOFILE to n (capped at the hard limit;
 * children started after inherit it). Returns the limit now in force. */
long ts_set_nofile(long n);

#endif
