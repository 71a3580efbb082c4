/*
 * test_mcp_stdio.c - `outbox-producer mcp` spoken to line by line on its
 * stdio pipes, as a host does, for the edges the SDK client cannot reach
 * in order (test_mcp_sdk keeps the official client's view).
 *
 * Every exchange is ordered by what the server wrote: a message sent while
 * the server waits for the user's answer is sent only after the
 * elicitation/create request was read from its stdout, never after a
 * sleep. Each wait for a line or for the exit is bounded (READ_MS,
 * EXIT_MS), so a server that hangs fails the test instead of stalling it.
 *
 * What a host would check: a host key empty, over 255 bytes or not a
 * string refused with -32602 naming the limit and nothing created, 255
 * bytes accepted; while a question is open, a request answered busy (and
 * not acted on), a notification not answered, and the question still
 * answerable; the host gone (stdin closed) during the question: the call
 * answered SIDE_EFFECT_UNCERTAIN, nothing posted, the ledger left
 * uncertain, exit 0; the host no longer reading (stdout closed) during the
 * question (or before it): nothing posted even when the "user" approves
 * after, exit 1.
 *
 * OUTBOX_TEST_VALGRIND=1 runs the server under valgrind (leaks and memory
 * errors fail it through its exit code); an ASan build fails it the same
 * way (LeakSanitizer's exit code, UBSan aborts).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "ledger.h"
#include "mcp.h"
#include "outbox/err.h"
#include "testsupport.h"
#include "ts_producer.h"

#define RUN_ID "run-test-mcp-stdio"
#define READ_MS 30000  /* one line from the server */
#define EXIT_MS 60000  /* the server's exit after its stdin closed */
#define KEY_MAX MCP_KEY_MAX /* bytes of a host's key */

struct mcp_proc {
	pid_t pid;
	int in;  /* the server's stdin: we write */
	int out; /* the server's stdout: we read; -1 once closed */
	char log[300];
	char buf[1 << 17];
	size_t len;
};

/* Start `outbox-producer mcp --url url --run-id RUN_ID` with extra flags
 * (NULL-ended), its stdin and stdout piped to us, stderr into p->log. */
static void
mcp_start(struct mcp_proc *p, const char *url, const char *const *extra)
{
	static int n;
	const char *bindir = getenv("OUTBOX_BIN_DIR");
	char bin[600];
	ck_assert_ptr_nonnull(bindir);
	snprintf(bin, sizeof(bin), "%s/outbox-producer", bindir);
	snprintf(p->log, sizeof(p->log), "%s/mcp-stdio-%d.log", ts_tmpdir(), ++n);
	const char *argv[32];
	int a = 0;
	if (getenv("OUTBOX_TEST_VALGRIND") != NULL && strcmp(getenv("OUTBOX_TEST_VALGRIND"), "1")
	    == 0) {
		argv[a++] = "/usr/bin/valgrind";
		argv[a++] = "--quiet";
		argv[a++] = "--leak-check=full";
		argv[a++] = "--errors-for-leak-kinds=definite,indirect";
		argv[a++] = "--error-exitcode=99";
	}
	argv[a++] = bin;
	argv[a++] = "mcp";
	argv[a++] = "--url";
	argv[a++] = url;
	argv[a++] = "--run-id";
	argv[a++] = RUN_ID;
	argv[a++] = "--attempts";
	argv[a++] = "1";
	for (int i = 0; extra != NULL && extra[i] != NULL; i++) {
		ck_assert_int_lt(a, 30);
		argv[a++] = extra[i];
	}
	argv[a] = NULL;

	int in[2], out[2];
	ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
	fflush(NULL);
	p->pid = fork();
	ck_assert_int_ge(p->pid, 0);
	if (p->pid == 0) {
		int fd = open(p->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		static const char *const proxy_env[] = { "http_proxy", "HTTP_PROXY", "https_proxy",
			"HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY", NULL };
		for (int i = 0; proxy_env[i] != NULL; i++)
			unsetenv(proxy_env[i]);
		execv(argv[0], (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	p->in = in[1];
	p->out = out[0];
	p->len = 0;
}

/* The server's log, for a failure message: its last 3000 bytes (Check
 * refuses longer messages), static. */
static const char *
mcp_log(const struct mcp_proc *p)
{
	static char text[3100];
	char *t = ts_read_file(p->log);
	const char *from = t != NULL ? t : "(no log)";
	size_t n = strlen(from);
	snprintf(text, sizeof(text), "%s%s", n > 3000 ? "...\n" : "",
	    n > 3000 ? from + n - 3000 : from);
	free(t);
	return text;
}

/* Write one message (a line; its newline added) to the server's stdin,
 * in one write() when it fits. */
static void
mcp_send(struct mcp_proc *p, const char *line)
{
	size_t len = strlen(line), off = 0;
	char *buf = malloc(len + 1);
	ck_assert_ptr_nonnull(buf);
	memcpy(buf, line, len);
	buf[len++] = '\n';
	while (off < len) {
		ssize_t w = write(p->in, buf + off, len - off);
		ck_assert_msg(w > 0, "writing to the server: %s\n%s", strerror(errno), mcp_log(p));
		off += (size_t)w;
	}
	free(buf);
}

/* json_pack and send it (the reference to m is taken). */
static void
mcp_send_json(struct mcp_proc *p, json_t *m)
{
	ck_assert_ptr_nonnull(m);
	char *line = json_dumps(m, JSON_COMPACT);
	json_decref(m);
	ck_assert_ptr_nonnull(line);
	mcp_send(p, line);
	free(line);
}

/* The next line the server writes, parsed (owned), within READ_MS; fails
 * the test when none comes, it is not JSON, or stdout closes first. */
static json_t *
mcp_read(struct mcp_proc *p)
{
	int64_t end = ts_now_ms() + READ_MS;
	for (;;) {
		char *nl = memchr(p->buf, '\n', p->len);
		if (nl != NULL) {
			size_t n = (size_t)(nl - p->buf);
			json_error_t jerr;
			json_t *m = json_loadb(p->buf, n, 0, &jerr);
			ck_assert_msg(m != NULL, "not JSON (%s): %.*s", jerr.text, (int)n, p->buf);
			memmove(p->buf, nl + 1, p->len - n - 1);
			p->len -= n + 1;
			return m;
		}
		ck_assert_msg(p->len < sizeof(p->buf), "a line longer than %zu bytes",
		    sizeof(p->buf));
		int64_t left = end - ts_now_ms();
		ck_assert_msg(left > 0, "no line from the server within %d ms\n%s", READ_MS,
		    mcp_log(p));
		struct pollfd pfd = { .fd = p->out, .events = POLLIN };
		int r = poll(&pfd, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		ck_assert_int_ge(r, 0);
		if (r == 0)
			continue;
		ssize_t got = read(p->out, p->buf + p->len, sizeof(p->buf) - p->len);
		ck_assert_msg(got > 0, "the server's stdout closed (%s) before a line\n%s",
		    got < 0 ? strerror(errno) : "EOF", mcp_log(p));
		p->len += (size_t)got;
	}
}

/* Close the server's stdin (the host's end of the session) and wait for its
 * exit within EXIT_MS (killed and failed if it does not); returns its exit
 * status. A sanitizer's or valgrind's report in its log fails the test. */
static int
mcp_finish(struct mcp_proc *p)
{
	if (p->in >= 0)
		close(p->in);
	p->in = -1;
	int code = ts_wait_exit(p->pid, EXIT_MS);
	if (code == -1) {
		kill(p->pid, SIGKILL);
		(void)ts_wait_exit(p->pid, 10000);
	}
	ck_assert_msg(code != -1, "the server did not exit within %d ms of its stdin's end\n%s",
	    EXIT_MS, mcp_log(p));
	if (p->out >= 0)
		close(p->out);
	p->out = -1;
	char *log = ts_read_file(p->log);
	ck_assert_ptr_nonnull(log);
	const char *report = NULL;
	const char *const marks[] = { "Sanitizer", "runtime error", "definitely lost",
		"indirectly lost", "Invalid ", "uninitialised", NULL };
	for (int i = 0; report == NULL && marks[i] != NULL; i++)
		report = strstr(log, marks[i]);
	while (report != NULL && report > log && report[-1] != '\n')
		report--; /* from its line's start */
	char excerpt[2000];
	snprintf(excerpt, sizeof(excerpt), "%s", report != NULL ? report : "");
	free(log);
	ck_assert_msg(report == NULL, "the server's log (%s) has an error report:\n%s", p->log,
	    excerpt);
	return code;
}

/* initialize (with the elicitation capability when elicits), then the
 * initialized notification: the session a host opens. */
static void
mcp_open(struct mcp_proc *p, bool elicits)
{
	json_t *caps = elicits ? json_pack("{s:{}}", "elicitation") : json_object();
	mcp_send_json(p, json_pack("{s:s,s:i,s:s,s:{s:s,s:o,s:{s:s,s:s}}}", "jsonrpc", "2.0", "id",
	    1, "method", "initialize", "params", "protocolVersion", "2025-06-18", "capabilities",
	    caps, "clientInfo", "name", "test-mcp-stdio", "version", "1"));
	json_t *r = mcp_read(p);
	ck_assert_msg(json_is_object(json_object_get(r, "result")), "initialize: %s",
	    json_dumps(r, JSON_COMPACT));
	json_decref(r);
	mcp_send(p, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
}

/* o's member at a dotted path (tests/support's one walker) */
static json_t *
get(json_t *o, const char *path)
{
	return ts_json_at(o, path);
}

static const char *
get_s(json_t *o, const char *path)
{
	const char *s = json_string_value(get(o, path));
	return s != NULL ? s : "";
}

/* A send_notification tools/call of id with the host's key (owned). */
static json_t *
notify_call(int id, const char *key, const char *text)
{
	return json_pack("{s:s,s:i,s:s,s:{s:s,s:{s:s,s:{s:s}},s:s}}", "jsonrpc", "2.0", "id", id,
	    "method", "tools/call", "params", "name", "send_notification", "arguments", "topic",
	    "notify.chat", "payload", "text", text, "idempotencyKey", key);
}

/* The user's yes to the elicitation request req: accept, confirm true. */
static void
accept_question(struct mcp_proc *p, json_t *req)
{
	mcp_send_json(p, json_pack("{s:s,s:O,s:{s:s,s:{s:b}}}", "jsonrpc", "2.0", "id",
	    json_object_get(req, "id"), "result", "action", "accept", "content", "confirm", true));
}

/* Read the server's next line: it must be the question for key. */
static json_t *
read_question(struct mcp_proc *p, const char *key)
{
	json_t *q = mcp_read(p);
	char *text = json_dumps(q, JSON_COMPACT);
	ck_assert_msg(strcmp(get_s(q, "method"), "elicitation/create") == 0 &&
	    json_is_string(get(q, "id")), "not a question: %s", text);
	ck_assert_msg(strstr(get_s(q, "params.message"), key) != NULL &&
	    strstr(get_s(q, "params.message"), "Post it again?") != NULL, "%s", text);
	free(text);
	return q;
}

static int64_t
count_key(PGconn *c, const char *key)
{
	char sql[512];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM outbox.messages WHERE idempotency_key"
	    " = '%s'", key);
	return ts_query_int(c, sql);
}

static void
assert_last_state(const char *ledger, const char *key, const char *want)
{
	char last[16], err[256];
	ck_assert_int_eq(ledger_last_state(ledger, key, last, sizeof(last), err, sizeof(err)),
	    OB_OK);
	ck_assert_msg(strcmp(last, want) == 0, "key %s: ledger says %s, not %s", key, last, want);
}

/* A database, a serve on it, a ledger where each of keys (NULL-ended) is
 * left uncertain by an earlier send_notification, and the server started
 * with --replay ask --ledger on that serve. */
struct ask_fixture {
	char db[TS_CONNINFO_MAX];
	char ledger[400];
	PGconn *c;
	struct ts_producer_server s;
	struct mcp_proc p;
};

static void
ask_start(struct ask_fixture *f, const char *tag, const char *const *keys)
{
	char err[256];
	snprintf(f->ledger, sizeof(f->ledger), "%s/%s-%d.jsonl", ts_tmpdir(), tag, (int)getpid());
	for (int i = 0; keys[i] != NULL; i++)
		ck_assert_int_eq(ledger_append(f->ledger, "send_notification", keys[i], "uncertain",
		                     NULL, err, sizeof(err)), OB_OK);
	ts_db_create(tag, "outbox", f->db, sizeof(f->db));
	f->c = ts_connect(f->db);
	ts_producer_serve(f->db, NULL, &f->s);
	const char *extra[] = { "--replay", "ask", "--ledger", f->ledger, NULL };
	mcp_start(&f->p, f->s.url, extra);
	mcp_open(&f->p, true);
}

static void
ask_stop(struct ask_fixture *f)
{
	ts_stop(f->s.pid, SIGTERM);
	PQfinish(f->c);
}

/* Send a tools/call (submit_bug_report when report, else
 * send_notification) of id with key as params.idempotencyKey, or as
 * params._meta.idempotency_key when in_meta; assert it is answered with
 * -32602 naming the limit. what: the key, for the failure message. */
static void
assert_key_refused(struct mcp_proc *p, int id, bool report, bool in_meta, json_t *key,
    const char *what)
{
	json_t *args = report
	    ? json_pack("{s:s,s:s}", "title", "Crash on save", "module", "editor")
	    : json_pack("{s:s,s:{s:s}}", "topic", "notify.chat", "payload", "text", "hi");
	const char *tool = report ? "submit_bug_report" : "send_notification";
	json_t *params = json_pack("{s:s,s:o}", "name", tool, "arguments", args);
	if (in_meta)
		json_object_set_new(params, "_meta", json_pack("{s:O}", MCP_META_KEY, key));
	else
		json_object_set(params, MCP_SEP_KEY, key);
	mcp_send_json(p, json_pack("{s:s,s:i,s:s,s:o}", "jsonrpc", "2.0", "id", id, "method",
	    "tools/call", "params", params));
	json_t *r = mcp_read(p);
	char *text = json_dumps(r, JSON_COMPACT);
	ck_assert_msg(json_integer_value(get(r, "id")) == id &&
	    json_integer_value(get(r, "error.code")) == -32602 &&
	    strstr(get_s(r, "error.message"), "1.." MCP_KEY_MAX_TEXT " bytes") != NULL,
	    "%s, key %s in %s: not -32602 naming the limit: %s", tool, what,
	    in_meta ? "params._meta" : "params.idempotencyKey", text);
	free(text);
	json_decref(r);
}

/* 1. The host's key: empty, 256 bytes or not a string is a JSON-RPC error
 * -32602 naming the limit, through either field, and creates nothing; 255
 * bytes is used as given. */
START_TEST(test_host_key_bounds)
{
	char db[TS_CONNINFO_MAX], k255[KEY_MAX + 1], k256[KEY_MAX + 2];
	memset(k255, 'k', KEY_MAX);
	k255[KEY_MAX] = '\0';
	memset(k256, 'k', KEY_MAX + 1);
	k256[KEY_MAX + 1] = '\0';
	ts_db_create("mcpkey", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	struct ts_producer_server s;
	ts_producer_serve(db, NULL, &s);
	struct mcp_proc p;
	mcp_start(&p, s.url, NULL);
	mcp_open(&p, false);

	const char *const reports = "SELECT count(*) FROM app.bug_reports";
	const char *const messages = "SELECT count(*) FROM outbox.messages";
	ck_assert_int_eq(ts_query_int(c, reports), 0);
	ck_assert_int_eq(ts_query_int(c, messages), 0);
	json_t *bad[] = { json_string(""), json_string(k256), json_integer(42) };
	const char *const what[] = { "empty", "256 bytes", "a number" };
	int id = 10;
	for (size_t b = 0; b < 3; b++)
		for (int tool = 0; tool < 2; tool++)
			for (int in_meta = 0; in_meta < 2; in_meta++)
				assert_key_refused(&p, ++id, tool == 0, in_meta, bad[b], what[b]);
	for (size_t b = 0; b < 3; b++)
		json_decref(bad[b]);
	ck_assert_int_eq(ts_query_int(c, reports), 0);
	ck_assert_int_eq(ts_query_int(c, messages), 0);

	/* 255 bytes: taken as given, through either field, one row each. */
	mcp_send_json(&p, json_pack("{s:s,s:i,s:s,s:{s:s,s:{s:s,s:s},s:s}}", "jsonrpc", "2.0",
	    "id", ++id, "method", "tools/call", "params", "name", "submit_bug_report",
	    "arguments", "title", "Crash on save", "module", "editor", "idempotencyKey", k255));
	json_t *r = mcp_read(&p);
	char *text = json_dumps(r, JSON_COMPACT);
	ck_assert_msg(json_is_true(get(r, "result.structuredContent.ok")), "%s", text);
	ck_assert_str_eq(get_s(r, "result.structuredContent.metadata.idempotencyKey"), k255);
	free(text);
	json_decref(r);
	k255[0] = 'm'; /* another key for the notification */
	mcp_send_json(&p, json_pack("{s:s,s:i,s:s,s:{s:s,s:{s:s,s:{s:s}},s:{s:s}}}", "jsonrpc",
	    "2.0", "id", ++id, "method", "tools/call", "params", "name", "send_notification",
	    "arguments", "topic", "notify.chat", "payload", "text", "hi", "_meta",
	    "idempotency_key", k255));
	r = mcp_read(&p);
	text = json_dumps(r, JSON_COMPACT);
	ck_assert_msg(json_is_true(get(r, "result.structuredContent.ok")), "%s", text);
	ck_assert_str_eq(get_s(r, "result.structuredContent.metadata.idempotencyKey"), k255);
	free(text);
	json_decref(r);
	ck_assert_int_eq(ts_query_int(c, reports), 1);
	ck_assert_int_eq(ts_query_int(c, messages), 2); /* the report's, the notification */
	ck_assert_int_eq(count_key(c, k255), 1);
	k255[0] = 'k';
	char sql[600];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM app.idempotency_keys WHERE"
	    " idempotency_key = '%s'", k255);
	ck_assert_int_eq(ts_query_int(c, sql), 1);

	ck_assert_int_eq(mcp_finish(&p), 0);
	ts_stop(s.pid, SIGTERM);
	PQfinish(c);
}
END_TEST

/* 2. While the question is open: a request (a tools/call of another key, a
 * ping) is answered busy at once and never acted on; the question is then
 * answered (accept) and the call completes: posted once, approved. */
START_TEST(test_busy_while_asking)
{
	struct ask_fixture f;
	const char *const keys[] = { "ask-busy-0001", NULL };
	ask_start(&f, "mcpbusy", keys);

	mcp_send_json(&f.p, notify_call(2, "ask-busy-0001", "asked"));
	json_t *q = read_question(&f.p, "ask-busy-0001");
	mcp_send_json(&f.p, notify_call(3, "busy-other-0001", "meanwhile"));
	mcp_send(&f.p, "{\"jsonrpc\":\"2.0\",\"id\":\"p-4\",\"method\":\"ping\"}");
	for (int i = 0; i < 2; i++) {
		json_t *r = mcp_read(&f.p);
		char *text = json_dumps(r, JSON_COMPACT);
		ck_assert_msg(i == 0 ? json_integer_value(get(r, "id")) == 3
		                     : strcmp(get_s(r, "id"), "p-4") == 0, "%s", text);
		ck_assert_msg(json_integer_value(get(r, "error.code")) == -32603 &&
		    strstr(get_s(r, "error.message"), "busy") != NULL, "not busy: %s", text);
		free(text);
		json_decref(r);
	}
	accept_question(&f.p, q);
	json_decref(q);
	json_t *r = mcp_read(&f.p);
	char *text = json_dumps(r, JSON_COMPACT);
	ck_assert_msg(json_integer_value(get(r, "id")) == 2 &&
	    json_is_true(get(r, "result.structuredContent.ok")) &&
	    json_integer_value(get(r, "result.structuredContent.metadata.messageId")) > 0, "%s",
	    text);
	free(text);
	json_decref(r);
	/* the session goes on: a ping is answered */
	mcp_send(&f.p, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}");
	r = mcp_read(&f.p);
	ck_assert(json_integer_value(get(r, "id")) == 5 && json_is_object(get(r, "result")));
	json_decref(r);
	ck_assert_int_eq(mcp_finish(&f.p), 0);

	ck_assert_int_eq(count_key(f.c, "ask-busy-0001"), 1);
	ck_assert_int_eq(count_key(f.c, "busy-other-0001"), 0);
	ck_assert_int_eq(ts_query_int(f.c, "SELECT count(*) FROM outbox.messages"), 1);
	assert_last_state(f.ledger, "ask-busy-0001", "succeeded");
	ask_stop(&f);
}
END_TEST

/* 3. The host closes the server's stdin while the question is open: the
 * call is answered SIDE_EFFECT_UNCERTAIN, nothing is posted, the ledger
 * still says uncertain, and the server exits 0 (the end of stdin). */
START_TEST(test_eof_while_asking)
{
	struct ask_fixture f;
	const char *const keys[] = { "ask-eof-0001", NULL };
	ask_start(&f, "mcpeof", keys);

	mcp_send_json(&f.p, notify_call(2, "ask-eof-0001", "asked"));
	json_t *q = read_question(&f.p, "ask-eof-0001");
	json_decref(q);
	close(f.p.in);
	f.p.in = -1;
	json_t *r = mcp_read(&f.p);
	char *text = json_dumps(r, JSON_COMPACT);
	ck_assert_msg(json_integer_value(get(r, "id")) == 2 &&
	    strcmp(get_s(r, "result.structuredContent.code"), "SIDE_EFFECT_UNCERTAIN") == 0, "%s",
	    text);
	free(text);
	json_decref(r);
	ck_assert_int_eq(mcp_finish(&f.p), 0);
	ck_assert_int_eq(ts_log_count(f.p.log, "answered=0 approved=0"), 1);

	ck_assert_int_eq(ts_query_int(f.c, "SELECT count(*) FROM outbox.messages"), 0);
	assert_last_state(f.ledger, "ask-eof-0001", "uncertain");
	char err[256];
	json_t *e = ledger_entries(f.ledger, "ask-eof-0001", err, sizeof(err));
	ck_assert_int_eq((int)json_array_size(e), 1); /* nothing planned, nothing started */
	json_decref(e);
	ask_stop(&f);
}
END_TEST

/* 4. Notifications during the question get no answer and change nothing:
 * the next line the server writes is the busy answer to the ping sent
 * after them, and the question, answered after, completes the call. */
START_TEST(test_notification_while_asking)
{
	struct ask_fixture f;
	const char *const keys[] = { "ask-note-0001", NULL };
	ask_start(&f, "mcpnote", keys);

	mcp_send_json(&f.p, notify_call(2, "ask-note-0001", "asked"));
	json_t *q = read_question(&f.p, "ask-note-0001");
	mcp_send(&f.p, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/roots/list_changed\"}");
	mcp_send(&f.p, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":"
	    "{\"progressToken\":\"t\",\"progress\":1}}");
	mcp_send(&f.p, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}");
	json_t *r = mcp_read(&f.p);
	char *text = json_dumps(r, JSON_COMPACT);
	ck_assert_msg(json_integer_value(get(r, "id")) == 3 &&
	    json_integer_value(get(r, "error.code")) == -32603, "the line after the"
	    " notifications is not the ping's busy answer: %s", text);
	free(text);
	json_decref(r);
	accept_question(&f.p, q);
	json_decref(q);
	r = mcp_read(&f.p);
	text = json_dumps(r, JSON_COMPACT);
	ck_assert_msg(json_integer_value(get(r, "id")) == 2 &&
	    json_is_true(get(r, "result.structuredContent.ok")), "%s", text);
	free(text);
	json_decref(r);
	ck_assert_int_eq(mcp_finish(&f.p), 0);
	ck_assert_int_eq(count_key(f.c, "ask-note-0001"), 1);
	assert_last_state(f.ledger, "ask-note-0001", "succeeded");
	ask_stop(&f);
}
END_TEST

/* 2b. The host stops reading the server's stdout while the question is
 * open, then sends a request: the busy answer cannot be written, and with
 * it no answer to the call could be: the server stops waiting (the call is
 * not approved), says why in its log, and exits 1 (its stdout failed).
 * The "user's" accept sent after changes nothing: nothing is posted, the
 * ledger still says uncertain. */
START_TEST(test_stdout_gone_while_asking)
{
	struct ask_fixture f;
	const char *const keys[] = { "ask-gone-0001", NULL };
	ask_start(&f, "mcpgone", keys);

	mcp_send_json(&f.p, notify_call(2, "ask-gone-0001", "asked"));
	json_t *q = read_question(&f.p, "ask-gone-0001");
	close(f.p.out);
	f.p.out = -1;
	/* the ping and the user's accept in one write (under PIPE_BUF: both
	 * in the pipe at once, in this order), so the server cannot exit
	 * between them and the accept is there to be read if it goes on */
	char both[512];
	snprintf(both, sizeof(both), "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}\n"
	    "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"result\":{\"action\":\"accept\","
	    "\"content\":{\"confirm\":true}}}", get_s(q, "id"));
	mcp_send(&f.p, both);
	json_decref(q);
	int code = mcp_finish(&f.p);
	ck_assert_msg(ts_query_int(f.c, "SELECT count(*) FROM outbox.messages") == 0,
	    "posted on an answer after the busy answer could not be written:\n%s", mcp_log(&f.p));
	assert_last_state(f.ledger, "ask-gone-0001", "uncertain");
	ck_assert_msg(ts_log_count(f.p.log, "event=mcp.elicit.write_failed id=elicit-1 what=busy"
	                  " request=3 err=\"Broken pipe\"") == 1 &&
	    ts_log_count(f.p.log, "event=mcp.stopped reason=stdout_failed") == 1,
	    "the busy answer's failure not handled:\n%s", mcp_log(&f.p));
	ck_assert_int_eq(code, 1);
	ask_stop(&f);
}
END_TEST

/* 2c. The same when the host stopped reading before the question: the
 * question cannot be written, so nobody is asked and nothing is posted;
 * the server says so and exits 1. */
START_TEST(test_stdout_gone_before_asking)
{
	struct ask_fixture f;
	const char *const keys[] = { "ask-gone-0002", NULL };
	ask_start(&f, "mcpgone2", keys);

	close(f.p.out);
	f.p.out = -1;
	mcp_send_json(&f.p, notify_call(2, "ask-gone-0002", "asked"));
	int code = mcp_finish(&f.p);
	ck_assert_int_eq(ts_query_int(f.c, "SELECT count(*) FROM outbox.messages"), 0);
	assert_last_state(f.ledger, "ask-gone-0002", "uncertain");
	ck_assert_msg(ts_log_count(f.p.log, "event=mcp.elicit.write_failed id=elicit-1"
	                  " what=question err=\"Broken pipe\"") == 1 &&
	    ts_log_count(f.p.log, "event=mcp.stopped reason=stdout_failed") == 1,
	    "the question's failure not said:\n%s", mcp_log(&f.p));
	ck_assert_int_eq(code, 1);
	ask_stop(&f);
}
END_TEST

int
main(void)
{
	signal(SIGPIPE, SIG_IGN); /* a server gone: write() fails, the test says so */
	Suite *s = suite_create("mcp_stdio");
	TCase *tc = tcase_create("stdio");
	tcase_set_timeout(tc, 250);
	tcase_add_test(tc, test_host_key_bounds);
	tcase_add_test(tc, test_busy_while_asking);
	tcase_add_test(tc, test_eof_while_asking);
	tcase_add_test(tc, test_notification_while_asking);
	tcase_add_test(tc, test_stdout_gone_while_asking);
	tcase_add_test(tc, test_stdout_gone_before_asking);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
