/*
 * mcp_cmd.c - `outbox-producer mcp`: the MCP tool server (mcp.h) on stdio,
 * as an MCP host starts it: one JSON-RPC message per line on stdin, one
 * per line on stdout, logs on stderr (stdout carries nothing else). Ends
 * with 0 at the end of stdin, with 1 once a write to stdout failed (the
 * host stopped reading: nothing more can be answered).
 *
 * The run id, half of every tool key: `--run-id`, or else derived from
 * the process that started us (boot id, parent pid and the parent's start
 * time): a host that restarts this server after a crash gets the same run
 * id, so its retry of a call keeps the call's key; a new host process
 * (a new session) gets a new one.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uuid/uuid.h>

#include "auth.h"
#include "client.h"
#include "client_flags.h"
#include "mcp.h"
#include "outbox/err.h"
#include "outbox/log.h"
#include "outbox/program.h"
#include "producer.h"
#include "producer_rows.h"

#define MCP_MESSAGE_MIN 1024
#define MCP_MESSAGE_MAX (64 * 1024 * 1024)

struct mcp_config {
	char *url;
	char *run_id;
	int64_t attempts;
	int64_t backoff_base;
	int64_t backoff_cap;
	int64_t timeout_ms;
	int64_t max_retry_after;
	int64_t max_message;
	char *replay;
	char *ledger;
	char *retry_budget;
	char *api_token_file;
	char *log_level;
};

#define OB_CFG_STRUCT struct mcp_config

static const struct ob_cfg_opt mcp_options[] = {
	CLIENT_OPT_URL(url),
	PRODUCER_OPT_RUN_ID(run_id, "the run the tool keys belong to (1..128 printable"
	    " characters); default: derived from the host process (kept across restarts of"
	    " this server by the same host)"),
	CLIENT_RETRY_OPTIONS,
	OB_CFG_OPT("replay", "OUTBOX_REPLAY", OB_CFG_ENUM, "auto", 0, 0, "auto|ask|never", false,
	    replay, "the tools' replay policy, for a key the --ledger left uncertain that the"
	    " lookup does not find: auto posts it again, ask asks the user first (elicitation,"
	    " when the host supports it; else SIDE_EFFECT_UNCERTAIN), never leaves it to a"
	    " person"),
	OB_CFG_OPT("max-message", "OUTBOX_MCP_MAX_MESSAGE", OB_CFG_SIZE, "1m", MCP_MESSAGE_MIN,
	    MCP_MESSAGE_MAX, NULL, false, max_message,
	    "longest JSON-RPC message (one line) read; a longer one is answered with a parse"
	    " error and skipped"),
	CLIENT_OPT_TOKEN_FILE(api_token_file, "its scope on the server holds the tools' keys"),
	OB_CFG_OPT_LOG_LEVEL(log_level),
	OB_CFG_END,
};

static const struct ob_program program = { .events = "mcp",
	.config = PRODUCER_PROGRAM("mcp",
    "[--url URL] [--run-id RUN] [options]",
    "An MCP tool server on stdio (JSON-RPC 2.0, one message per line) for"
    " agent hosts, with the tools submit_bug_report and lookup_by_key. Each call's"
    " idempotency key is made by this server from the run id and the call's"
    " normalized arguments (never by the model; a key in the request's"
    " _meta.idempotency_key wins), so a retried call is answered from the first"
    " result. Logs go to stderr.",
    mcp_options) };

static int
check_run_id(const char *s, char *err, size_t errlen)
{
	size_t n = strlen(s);
	if (n == 0 || n > MCP_RUN_ID_MAX) {
		snprintf(err, errlen, "--run-id: 1..%d characters", MCP_RUN_ID_MAX);
		return OB_EINVAL;
	}
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x21 || s[i] > 0x7e) {
			snprintf(err, errlen, "--run-id: printable ASCII without spaces only");
			return OB_EINVAL;
		}
	return OB_OK;
}

/* The parent's start time in clock ticks since boot (field 22 of
 * /proc/PID/stat, after the parenthesised command name). */
static int
parent_start(pid_t ppid, unsigned long long *out)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)ppid);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return OB_EINVAL;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	if (p == NULL)
		return OB_EINVAL;
	/* after ") ": state is field 3; starttime is field 22 */
	p++;
	for (int field = 2; field < 22 && p != NULL; field++)
		p = strchr(p + 1, ' ');
	if (p == NULL || sscanf(p, " %llu", out) != 1)
		return OB_EINVAL;
	return OB_OK;
}

static int
derive_run_id(char *out, size_t outlen, char *err, size_t errlen)
{
	static const uuid_t run_ns = { 0x6f, 0x75, 0x74, 0x62, 0x6f, 0x78, 0x52, 0x55, 0x8e, 0x4e,
		0x68, 0x6f, 0x73, 0x74, 0x70, 0x31 };
	char boot[64] = "", name[256];
	unsigned long long start = 0;
	pid_t ppid = getppid();

	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
	if (f == NULL || fgets(boot, sizeof(boot), f) == NULL || parent_start(ppid, &start) != OB_OK) {
		if (f != NULL)
			fclose(f);
		snprintf(err, errlen, "cannot derive a run id from /proc (%s): give --run-id",
		    strerror(errno));
		return OB_EINVAL;
	}
	fclose(f);
	boot[strcspn(boot, "\n")] = '\0';
	snprintf(name, sizeof(name), "%s/%d/%llu", boot, (int)ppid, start);
	uuid_t u;
	char s[37];
	uuid_generate_sha1(u, run_ns, name, strlen(name));
	uuid_unparse_lower(u, s);
	snprintf(out, outlen, "host-%s", s);
	return OB_OK;
}

/* The errno of the first failed write to stdout, 0 while it works. */
static int stdout_errno;

/* One message line on stdout (resp released). Once a write failed, stdout
 * stays failed: part of a line may have gone out, so the stream has no
 * framing left, and every later reply fails without writing; the caller
 * that decides what to do logs strerror(stdout_errno). */
static int
reply(json_t *resp)
{
	if (resp == NULL)
		return OB_OK;
	if (stdout_errno != 0) {
		json_decref(resp);
		return OB_EINVAL;
	}
	char *line = json_dumps(resp, JSON_COMPACT);
	json_decref(resp);
	if (line == NULL)
		return OB_ENOMEM;
	errno = 0;
	int bad = fputs(line, stdout) == EOF || fputc('\n', stdout) == EOF || fflush(stdout) != 0;
	free(line);
	if (bad)
		stdout_errno = errno != 0 ? errno : EIO;
	return bad ? OB_EINVAL : OB_OK;
}

/* Why reply() failed with rc, for a log line. */
static const char *
reply_why(int rc)
{
	return rc == OB_ENOMEM ? "out of memory" : strerror(stdout_errno);
}

/* The log's text of a JSON-RPC id (a string or an integer) into buf. */
static const char *
id_text(const json_t *id, char *buf, size_t len)
{
	if (json_is_string(id))
		snprintf(buf, len, "%s", json_string_value(id));
	else if (json_is_integer(id))
		snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(id));
	else
		snprintf(buf, len, "%s", id == NULL ? "none" : "other");
	return buf;
}

/* Ask the host's user (elicitation/create) inside a tools/call: send the
 * request, then read stdin until its answer; a request that comes
 * meanwhile is refused (busy), a notification ignored. true only for
 * "accept" with confirm true. The end of stdin ends the wait: no answer,
 * false. So does a failed write to stdout (the question or a busy
 * answer): the host can be told nothing more, this call's result
 * included, so nothing may be posted on an answer it could never learn
 * the outcome of (false; the ledger keeps the key uncertain for the next
 * session to ask), and the serving loop ends on its next reply (stdout
 * stays failed). arg: the request counter. */
static bool
elicit(void *arg, const char *question)
{
	int *next = arg;
	char id[32], q[160];
	snprintf(id, sizeof(id), "elicit-%d", ++*next);
	json_t *req = json_pack("{s:s,s:s,s:s,s:{s:s,s:{s:s,s:{s:{s:s,s:s}},s:[s]}}}",
	    "jsonrpc", "2.0", "id", id, "method", "elicitation/create", "params", "message",
	    question, "requestedSchema", "type", "object", "properties", "confirm", "type",
	    "boolean", "title", "Post it again", "required", "confirm");
	if (req == NULL)
		return false;
	int rc = reply(req);
	if (rc != OB_OK) {
		ob_error("mcp.elicit.write_failed", "id=%s what=question err=%s", id,
		    ob_log_q(reply_why(rc), q, sizeof(q)));
		return false;
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	bool yes = false, answered = false, gone = false;
	while (!answered && !gone && (n = getline(&line, &cap, stdin)) >= 0) {
		json_t *m = json_loadb(line, (size_t)n, 0, NULL);
		const char *mid = json_string_value(json_object_get(m, "id"));
		if (mid != NULL && strcmp(mid, id) == 0 && json_object_get(m, "method") == NULL) {
			json_t *r = json_object_get(m, "result");
			const char *action = json_string_value(json_object_get(r, "action"));
			yes = action != NULL && strcmp(action, "accept") == 0 &&
			    json_is_true(json_object_get(json_object_get(r, "content"), "confirm"));
			answered = true;
		} else if (json_object_get(m, "method") != NULL && json_object_get(m, "id") != NULL) {
			json_t *rid = json_object_get(m, "id");
			rc = reply(json_pack("{s:s,s:O,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", rid,
			    "error", "code", -32603, "message",
			    "busy: waiting for the user's answer to a question"));
			if (rc != OB_OK) {
				char r[64], rq[80];
				ob_error("mcp.elicit.write_failed", "id=%s what=busy request=%s err=%s",
				    id, ob_log_q(id_text(rid, r, sizeof(r)), rq, sizeof(rq)),
				    ob_log_q(reply_why(rc), q, sizeof(q)));
				gone = true;
			}
		}
		json_decref(m);
	}
	free(line);
	ob_info("mcp.elicit", "id=%s answered=%d approved=%d", id, answered, yes);
	return yes;
}

static int
serve_stdio(const struct mcp_server *s, size_t max_message)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = OB_OK;

	while (rc == OB_OK && (n = getline(&line, &cap, stdin)) >= 0) {
		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = '\0';
		if (n == 0)
			continue;
		if ((size_t)n > max_message) {
			rc = reply(mcp_parse_error("message longer than --max-message"));
			continue;
		}
		json_error_t jerr;
		json_t *msg = json_loadb(line, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
		if (msg == NULL) {
			rc = reply(mcp_parse_error(jerr.text));
			continue;
		}
		rc = reply(mcp_handle(s, msg));
		json_decref(msg);
	}
	free(line);
	if (rc != OB_OK) {
		char q[160];
		ob_error("mcp.stdout.failed", "reason=%s",
		    ob_log_q(reply_why(rc), q, sizeof(q)));
		return 1;
	}
	return 0;
}

int
producer_cmd_mcp(int argc, char **argv)
{
	struct mcp_config cfg;
	char err[512], token[PRODUCER_TOKEN_MAX + 1];
	int code;

	if ((code = ob_program_start(&program, &cfg, argc, argv, NULL)) >= 0)
		return code;
	code = 2;
	static int elicit_ids;
	static bool host_elicits;
	struct mcp_server s = {
		.url = cfg.url,
		CLIENT_RETRY_FIELDS(cfg),
		.replay = client_replay_of(cfg.replay),
		.elicit = elicit,
		.elicit_arg = &elicit_ids,
		.host_elicits = &host_elicits,
	};
	int rc = cfg.run_id != NULL ? check_run_id(cfg.run_id, err, sizeof(err))
	                            : derive_run_id(s.run_id, sizeof(s.run_id), err, sizeof(err));
	if (rc != OB_OK) {
		fprintf(stderr, "outbox-producer mcp: %s\n", err);
		goto out;
	}
	if (cfg.run_id != NULL)
		snprintf(s.run_id, sizeof(s.run_id), "%s", cfg.run_id);
	if (producer_token_flag(cfg.api_token_file, token, sizeof(token), &s.token, err,
	        sizeof(err)) != OB_OK) {
		fprintf(stderr, "outbox-producer mcp: %s\n", err);
		goto out;
	}
	ob_info("mcp.started", "url=%s run_id=%s derived=%s", s.url, s.run_id,
	    cfg.run_id != NULL ? "no" : "yes");
	code = serve_stdio(&s, (size_t)cfg.max_message);
	ob_info("mcp.stopped", "reason=%s", code == 0 ? "eof" : "stdout_failed");
out:
	explicit_bzero(token, sizeof(token));
	ob_cfg_free(mcp_options, &cfg);
	return code;
}
