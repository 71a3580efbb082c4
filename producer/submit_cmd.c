/*
 * submit_cmd.c - `outbox-producer submit` (a bug report), `send` (a generic
 * message) and `lookup`: the agent-side tool, one code path for both
 * (client.c; here only their flags). Prints ONE JSON observation on
 * stdout; the exit status says ok (0), failed (1), usage (2) or uncertain
 * (3).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "auth.h"
#include "client.h"
#include "client_flags.h"
#include "ledger.h"
#include "outbox/err.h"
#include "producer.h"
#include "producer_rows.h"

#define SUBMIT_MAX_ARGS 256
#define SEND_MAX_PAYLOAD (1024 * 1024) /* bytes of --payload @FILE (the API's largest) */

/* The flags of submit and send (each table uses its own and the shared). */
struct submit_config {
	char *url;
	char *title;
	char *module;
	char *steps;
	char *severity;
	char *topic;
	char *payload;
	char *ordering_key;
	char *key;
	char *key_from;
	char *run;
	int64_t attempts;
	int64_t backoff_base;
	int64_t backoff_cap;
	int64_t timeout_ms;
	int64_t max_retry_after;
	char *ledger;
	char *retry_budget;
	char *api_token_file;
	char *step;
	char *replay;
	bool approved;
};

#define OB_CFG_STRUCT struct submit_config

/* The flags submit and send share: where, the key, retries, the ledger. */
#define CALL_OPTIONS \
	CLIENT_OPT_URL(url), \
	PRODUCER_OPT_KEY(key, false, \
	    "the idempotency key of this logical call (1..255 printable ASCII)"), \
	OB_CFG_OPT("key-from", "OUTBOX_KEY_FROM", OB_CFG_STRING, NULL, 0, 0, NULL, false, \
	    key_from, "derive the key: 'tool-call RUN:TOOL_USE_ID', 'content' (a digest of" \
	    " --run and the call's content: module + title, or topic + payload + ordering key);" \
	    " BROKEN demos: 'per-attempt', 'none'"), \
	OB_CFG_OPT("run", "OUTBOX_RUN", OB_CFG_STRING, NULL, 0, 0, NULL, false, run, \
	    "run id (for --key-from content, and the ledger's run; with --key-from tool-call" \
	    " the RUN part by default)"), \
	OB_CFG_OPT("step", "OUTBOX_STEP", OB_CFG_STRING, NULL, 0, 0, NULL, false, step, \
	    "the ledger's step id (with --key-from tool-call the TOOL_USE_ID by default)"), \
	OB_CFG_OPT("replay", "OUTBOX_REPLAY", OB_CFG_ENUM, "auto", 0, 0, "auto|ask|never", \
	    false, replay, "the tool's replay policy, for a key the ledger left uncertain that" \
	    " the lookup does not find: auto posts it again (the key makes that safe), ask" \
	    " only with --approved (the user confirmed), never leaves it to a person"), \
	OB_CFG_OPT("approved", "OUTBOX_APPROVED", OB_CFG_BOOL, "false", 0, 0, NULL, false, \
	    approved, "the user approved posting again (--replay ask); recorded in the ledger"), \
	CLIENT_RETRY_OPTIONS, \
	CLIENT_OPT_TOKEN_FILE(api_token_file, "the server's file decides the token's scope," \
	    " whose keys are the only ones this call can replay or look up")

static const struct ob_cfg_opt submit_options[] = {
	OB_CFG_OPT("title", "OUTBOX_TITLE", OB_CFG_STRING, NULL, 0, 0, NULL, true, title,
	    "report title (1..200 characters)"),
	OB_CFG_OPT("module", "OUTBOX_MODULE", OB_CFG_STRING, NULL, 0, 0, NULL, true, module,
	    "module the report is about (1..100 characters)"),
	OB_CFG_OPT("steps", "OUTBOX_STEPS", OB_CFG_STRING, NULL, 0, 0, NULL, false, steps,
	    "steps to reproduce"),
	OB_CFG_OPT("severity", "OUTBOX_SEVERITY", OB_CFG_STRING, "medium", 0, 0, NULL, false,
	    severity, "low | medium | high | critical"),
	CALL_OPTIONS,
	OB_CFG_END,
};

static const struct ob_cfg_opt send_options[] = {
	OB_CFG_OPT("topic", "OUTBOX_TOPIC", OB_CFG_STRING, NULL, 0, 0, NULL, true, topic,
	    "the message's topic (1..255 printable ASCII characters without spaces)"),
	OB_CFG_OPT("payload", "OUTBOX_PAYLOAD", OB_CFG_STRING, NULL, 0, 0, NULL, true, payload,
	    "the message: a JSON object or array, or @FILE to read it from FILE"),
	OB_CFG_OPT("ordering-key", "OUTBOX_ORDERING_KEY", OB_CFG_STRING, NULL, 0, 0, NULL, false,
	    ordering_key, "deliver the messages of this key in order (1..255 bytes)"),
	CALL_OPTIONS,
	OB_CFG_END,
};

/* Accept the documented two-word form `--key-from tool-call RUN:ID` by
 * folding it into `--key-from tool-call:RUN:ID` before parsing. */
static int
fold_args(int argc, char **argv, char **out, char *buf, size_t buflen)
{
	int n = 0;
	for (int i = 0; i < argc && n < SUBMIT_MAX_ARGS - 1; i++) {
		if (strcmp(argv[i], "--key-from") == 0 && i + 2 < argc &&
		    strcmp(argv[i + 1], "tool-call") == 0 && argv[i + 2][0] != '-') {
			snprintf(buf, buflen, "tool-call:%s", argv[i + 2]);
			out[n++] = argv[i];
			out[n++] = buf;
			i += 2;
			continue;
		}
		out[n++] = argv[i];
	}
	out[n] = NULL;
	return n;
}

static int
parse_key_from(const struct submit_config *cfg, struct client_opts *o, char *err, size_t errlen)
{
	const char *kf = cfg->key_from;
	if (kf == NULL) {
		if (cfg->key == NULL) {
			snprintf(err, errlen, "give --key K or --key-from tool-call RUN:TOOL_USE_ID |"
			    " content");
			return OB_EINVAL;
		}
		o->key_source = CLIENT_KEY_FIXED;
		o->key = cfg->key;
		return OB_OK;
	}
	if (cfg->key != NULL) {
		snprintf(err, errlen, "--key and --key-from exclude each other");
		return OB_EINVAL;
	}
	if (strncmp(kf, "tool-call:", 10) == 0) {
		o->key_source = CLIENT_KEY_TOOL_CALL;
		o->key = kf + 10;
	} else if (strcmp(kf, "content") == 0) {
		o->key_source = CLIENT_KEY_CONTENT;
	} else if (strcmp(kf, "per-attempt") == 0) {
		o->key_source = CLIENT_KEY_PER_ATTEMPT;
	} else if (strcmp(kf, "none") == 0) {
		o->key_source = CLIENT_KEY_NONE;
	} else {
		snprintf(err, errlen, "--key-from: '%s' is not tool-call RUN:TOOL_USE_ID, content,"
		    " per-attempt or none", kf);
		return OB_EINVAL;
	}
	return OB_OK;
}

static const struct ob_cfg_program submit_program = PRODUCER_PROGRAM("submit",
    "--title T --module M (--key K | --key-from tool-call"
    " RUN:TOOL_USE_ID | --key-from content --run RUN) [options]",
    "Submit a bug report as an agent tool would: one key per logical call,"
    " reused on every retry (Full Jitter; Retry-After honoured). Prints ONE JSON"
    " observation {ok, code, content, metadata}. Exit 0 ok, 1 failed (nothing"
    " created), 2 usage, 3 SIDE_EFFECT_UNCERTAIN (may have been created: look the"
    " key up, do not resubmit).",
    submit_options);

static const struct ob_cfg_program send_program = PRODUCER_PROGRAM("send",
    "--topic T --payload JSON|@FILE [--ordering-key K]"
    " (--key K | --key-from tool-call RUN:TOOL_USE_ID | --key-from content --run RUN)"
    " [options]",
    "Send a message (POST /v1/messages) as an agent tool would, with the"
    " retries, ledger and observation of submit: one key per logical call, reused on"
    " every retry. Exit 0 ok (metadata.messageId), 1 failed (nothing sent), 2 usage,"
    " 3 SIDE_EFFECT_UNCERTAIN (may have been sent: `outbox-producer lookup --kind"
    " message --key K`, do not send again).",
    send_options);

/* --payload: the text itself, or @FILE's contents (at most
 * SEND_MAX_PAYLOAD bytes); a JSON object or array. Owned into *out. */
static int
read_payload(const char *arg, char **out, char *err, size_t errlen)
{
	char *text = NULL;
	if (arg[0] == '@') {
		FILE *f = fopen(arg + 1, "rb");
		if (f == NULL) {
			snprintf(err, errlen, "--payload: cannot open %s: %s", arg + 1, strerror(errno));
			return OB_EINVAL;
		}
		text = malloc(SEND_MAX_PAYLOAD + 1);
		size_t n = text != NULL ? fread(text, 1, SEND_MAX_PAYLOAD + 1, f) : 0;
		bool bad = ferror(f) != 0;
		fclose(f);
		if (text == NULL || bad || n > SEND_MAX_PAYLOAD) {
			snprintf(err, errlen, "--payload: %s %s", arg + 1,
			    text == NULL ? "cannot be read (out of memory)"
			    : bad        ? "cannot be read"
			                 : "is larger than 1 MiB");
			free(text);
			return OB_EINVAL;
		}
		text[n] = '\0';
	} else if ((text = strdup(arg)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return OB_ENOMEM;
	}
	json_error_t jerr;
	json_t *v = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
	bool ok = json_is_object(v) || json_is_array(v);
	json_decref(v);
	if (!ok) {
		if (v == NULL)
			snprintf(err, errlen, "--payload is not JSON: %s (line %d, column %d)", jerr.text,
			    jerr.line, jerr.column);
		else
			snprintf(err, errlen, "--payload must be a JSON object or array");
		free(text);
		return OB_EINVAL;
	}
	*out = text;
	return OB_OK;
}

/* The call's one JSON observation on stdout, written out before the
 * process ends; returns its exit code and releases res. */
static int
print_observation(struct client_result *res)
{
	int code = res->exit_code;

	printf("%s\n", res->observation != NULL ? res->observation : "{}");
	fflush(stdout);
	client_result_fini(res);
	return code;
}

/* submit and send: the flags into one call of client.c, its observation
 * on stdout. */
static int
run_call(const struct ob_cfg_program *prog, const struct ob_cfg_opt *options,
    enum client_target target, int argc, char **argv)
{
	struct submit_config cfg;
	char err[1024], foldbuf[512], token[PRODUCER_TOKEN_MAX + 1];
	char *args[SUBMIT_MAX_ARGS], *payload = NULL;
	int code;

	int n = fold_args(argc, argv, args, foldbuf, sizeof(foldbuf));
	if ((code = ob_cfg_load(prog, &cfg, n, args, NULL)) >= 0)
		return code;
	code = CLIENT_EXIT_USAGE;
	struct client_opts o = {
		.url = cfg.url,
		.target = target,
		.title = cfg.title,
		.module = cfg.module,
		.steps = cfg.steps,
		.severity = cfg.severity,
		.topic = cfg.topic,
		.ordering_key = cfg.ordering_key,
		.run = cfg.run,
		CLIENT_RETRY_FIELDS(cfg),
		.run_id = cfg.run,
		.step_id = cfg.step,
		.replay = client_replay_of(cfg.replay),
		.approved = cfg.approved,
	};
	char run_part[256] = "";
	if (parse_key_from(&cfg, &o, err, sizeof(err)) != OB_OK ||
	    (target == CLIENT_MESSAGE &&
	        read_payload(cfg.payload, &payload, err, sizeof(err)) != OB_OK)) {
		fprintf(stderr, "%s: %s\n", prog->name, err);
		goto out;
	}
	o.payload = payload;
	/* --key-from tool-call RUN:TOOL_USE_ID names the ledger's run and step */
	if (o.key_source == CLIENT_KEY_TOOL_CALL && strchr(o.key, ':') != NULL) {
		const char *colon = strchr(o.key, ':');
		if (o.run_id == NULL) {
			snprintf(run_part, sizeof(run_part), "%.*s", (int)(colon - o.key), o.key);
			o.run_id = run_part;
		}
		if (o.step_id == NULL)
			o.step_id = colon + 1;
	}
	if (producer_token_flag(cfg.api_token_file, token, sizeof(token), &o.token, err,
	        sizeof(err)) != OB_OK) {
		fprintf(stderr, "%s: %s\n", prog->name, err);
		goto out;
	}
	struct client_result res;
	client_submit(&o, &res);
	code = print_observation(&res);
out:
	explicit_bzero(token, sizeof(token));
	free(payload);
	ob_cfg_free(options, &cfg);
	return code;
}

int
producer_cmd_submit(int argc, char **argv)
{
	return run_call(&submit_program, submit_options, CLIENT_REPORT, argc, argv);
}

int
producer_cmd_send(int argc, char **argv)
{
	return run_call(&send_program, send_options, CLIENT_MESSAGE, argc, argv);
}

struct lookup_config {
	char *url;
	char *key;
	char *kind;
	int64_t timeout_ms;
	char *api_token_file;
	char *ledger;
};

#undef OB_CFG_STRUCT
#define OB_CFG_STRUCT struct lookup_config

static const struct ob_cfg_opt lookup_options[] = {
	CLIENT_OPT_URL(url),
	PRODUCER_OPT_KEY(key, true, "the idempotency key to look up"),
	OB_CFG_OPT("kind", "OUTBOX_KIND", OB_CFG_ENUM, "report", 0, 0, "report|message", false,
	    kind, "what the key made: a report (submit, /v1/reports) or a message (send,"
	    " /v1/messages)"),
	CLIENT_OPT_TIMEOUT_MS(timeout_ms, "timeout in milliseconds"),
	CLIENT_OPT_TOKEN_FILE(api_token_file, "the key is looked up in that token's scope"),
	OB_CFG_OPT("ledger", "OUTBOX_LEDGER", OB_CFG_STRING, NULL, 0, 0, NULL, false, ledger,
	    "also print the key's history from this tool ledger (metadata.ledger: every"
	    " state, with its tool, run, step, input hash, policy and result)"),
	OB_CFG_END,
};

static const struct ob_cfg_program lookup_program = PRODUCER_PROGRAM("lookup",
    "--key K [--kind report|message] [--url URL]",
    "Look a report or a message up by its idempotency key (the recovery"
    " step before resubmitting). Prints ONE JSON observation: OK with what the key"
    " made, or NOT_FOUND (exit 1).",
    lookup_options);

/* The key's ledger history into the observation's metadata.ledger. */
static int
with_ledger(struct client_result *res, const char *path, const char *key, char *err,
    size_t errlen)
{
	json_t *entries = ledger_entries(path, key, err, errlen);
	if (entries == NULL)
		return OB_EINVAL;
	json_t *obs = res->observation != NULL ? json_loads(res->observation, 0, NULL) : NULL;
	json_t *meta = json_object_get(obs, "metadata");
	char *text = NULL;
	if (json_is_object(meta) && json_object_set(meta, "ledger", entries) == 0)
		text = json_dumps(obs, JSON_COMPACT);
	json_decref(entries);
	json_decref(obs);
	if (text == NULL) {
		snprintf(err, errlen, "out of memory (the ledger's entries)");
		return OB_ENOMEM;
	}
	free(res->observation);
	res->observation = text;
	return OB_OK;
}

int
producer_cmd_lookup(int argc, char **argv)
{
	struct lookup_config cfg;
	char err[1024], token[PRODUCER_TOKEN_MAX + 1];
	int code;
	const char *bearer;

	if ((code = ob_cfg_load(&lookup_program, &cfg, argc, argv, NULL)) >= 0)
		return code;
	if (producer_token_flag(cfg.api_token_file, token, sizeof(token), &bearer, err,
	        sizeof(err)) != OB_OK) {
		fprintf(stderr, "outbox-producer lookup: %s\n", err);
		ob_cfg_free(lookup_options, &cfg);
		return CLIENT_EXIT_USAGE;
	}
	struct client_result res;
	client_lookup(strcmp(cfg.kind, "message") == 0 ? CLIENT_MESSAGE : CLIENT_REPORT, cfg.url,
	    bearer, cfg.key, cfg.timeout_ms, &res);
	if (cfg.ledger != NULL && with_ledger(&res, cfg.ledger, cfg.key, err, sizeof(err)) != OB_OK) {
		fprintf(stderr, "outbox-producer lookup: %s\n", err);
		client_result_fini(&res);
		ob_cfg_free(lookup_options, &cfg);
		return CLIENT_EXIT_FAILED;
	}
	code = print_observation(&res);
	ob_cfg_free(lookup_options, &cfg);
	return code;
}
