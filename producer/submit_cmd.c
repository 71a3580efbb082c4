/*
 * submit_cmd.c - `outbox-producer submit` and `outbox-producer lookup`: the
 * agent-side tool. Prints ONE JSON observation on stdout; the exit status
 * says ok (0), failed (1), usage (2) or uncertain (3).
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "client.h"
#include "outbox/config.h"
#include "outbox/err.h"
#include "producer.h"

#define SUBMIT_MAX_ATTEMPTS 100
#define SUBMIT_MAX_ARGS 256

struct submit_config {
	char *url;
	char *title;
	char *module;
	char *steps;
	char *severity;
	char *key;
	char *key_from;
	char *run;
	int64_t attempts;
	int64_t backoff_base;
	int64_t backoff_cap;
	int64_t timeout_ms;
	int64_t max_retry_after;
	char *ledger;
	char *api_token_file;
};

#define OPT(name, env, type, def, min, max, choices, req, field, help)      \
	{ name, env, type, def, min, max, choices, req, false,              \
	    offsetof(struct submit_config, field), help }

static const struct ob_cfg_opt submit_options[] = {
	OPT("url", "OUTBOX_URL", OB_CFG_STRING, "http://127.0.0.1:8080", 0, 0, NULL, false, url,
	    "base URL of outbox-producer serve"),
	OPT("title", "OUTBOX_TITLE", OB_CFG_STRING, NULL, 0, 0, NULL, true, title,
	    "report title (1..200 characters)"),
	OPT("module", "OUTBOX_MODULE", OB_CFG_STRING, NULL, 0, 0, NULL, true, module,
	    "module the report is about (1..100 characters)"),
	OPT("steps", "OUTBOX_STEPS", OB_CFG_STRING, NULL, 0, 0, NULL, false, steps,
	    "steps to reproduce"),
	OPT("severity", "OUTBOX_SEVERITY", OB_CFG_STRING, "medium", 0, 0, NULL, false, severity,
	    "low | medium | high | critical"),
	OPT("key", "OUTBOX_KEY", OB_CFG_STRING, NULL, 0, 0, NULL, false, key,
	    "the idempotency key of this logical call (1..255 printable ASCII)"),
	OPT("key-from", "OUTBOX_KEY_FROM", OB_CFG_STRING, NULL, 0, 0, NULL, false, key_from,
	    "derive the key: 'tool-call RUN:TOOL_USE_ID', 'content' (run + module + title,"
	    " needs --run); BROKEN demos: 'per-attempt', 'none'"),
	OPT("run", "OUTBOX_RUN", OB_CFG_STRING, NULL, 0, 0, NULL, false, run,
	    "run id (for --key-from content)"),
	OPT("attempts", "OUTBOX_ATTEMPTS", OB_CFG_INT, "4", 1, SUBMIT_MAX_ATTEMPTS, NULL, false,
	    attempts, "HTTP attempts of this call, the first included"),
	OPT("backoff-base", "OUTBOX_BACKOFF_BASE", OB_CFG_DURATION, "20ms", 1, 60000, NULL, false,
	    backoff_base, "Full Jitter base: sleep = random(0, min(cap, base * 2^attempt))"),
	OPT("backoff-cap", "OUTBOX_BACKOFF_CAP", OB_CFG_DURATION, "200ms", 1, 600000, NULL, false,
	    backoff_cap, "Full Jitter cap"),
	OPT("timeout-ms", "OUTBOX_TIMEOUT_MS", OB_CFG_INT, "2000", 1, 600000, NULL, false,
	    timeout_ms, "per-attempt timeout in milliseconds"),
	OPT("max-retry-after", "OUTBOX_MAX_RETRY_AFTER", OB_CFG_DURATION, "5s", 0, 3600000, NULL,
	    false, max_retry_after, "longest Retry-After honoured between attempts"),
	OPT("ledger", "OUTBOX_LEDGER", OB_CFG_STRING, NULL, 0, 0, NULL, false, ledger,
	    "append-only JSON-lines tool ledger (fsynced); an uncertain key is looked up first"),
	OPT("api-token-file", "OUTBOX_API_TOKEN_FILE", OB_CFG_STRING, NULL, 0, 0, NULL, false,
	    api_token_file, "send Authorization: Bearer with the one token in this file (the"
	    " server's format; the server's file decides the token's scope, whose keys are the"
	    " only ones this call can replay or look up); never printed"),
	OB_CFG_END,
};

/* The submit table, for --help-markdown (main.c). */
const struct ob_cfg_opt *const producer_submit_options = submit_options;

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

static const struct ob_cfg_program submit_program = {
	.name = "outbox-producer submit",
	.synopsis = "outbox-producer submit --title T --module M (--key K | --key-from tool-call"
	    " RUN:TOOL_USE_ID | --key-from content --run RUN) [options]",
	.description = "Submit a bug report as an agent tool would: one key per logical call,"
	    " reused on every retry (Full Jitter; Retry-After honoured). Prints ONE JSON"
	    " observation {ok, code, content, metadata}. Exit 0 ok, 1 failed (nothing"
	    " created), 2 usage, 3 SIDE_EFFECT_UNCERTAIN (may have been created: look the"
	    " key up, do not resubmit).",
	.options = submit_options,
};

int
producer_cmd_submit(int argc, char **argv)
{
	struct submit_config cfg;
	char err[1024], foldbuf[512], token[PRODUCER_TOKEN_MAX + 1];
	char *args[SUBMIT_MAX_ARGS];
	int code;

	int n = fold_args(argc, argv, args, foldbuf, sizeof(foldbuf));
	if ((code = ob_cfg_load(&submit_program, &cfg, n, args, NULL)) >= 0)
		return code;
	code = CLIENT_EXIT_USAGE;
	struct client_opts o = {
		.url = cfg.url,
		.title = cfg.title,
		.module = cfg.module,
		.steps = cfg.steps,
		.severity = cfg.severity,
		.run = cfg.run,
		.attempts = (int)cfg.attempts,
		.base_ms = cfg.backoff_base,
		.cap_ms = cfg.backoff_cap,
		.timeout_ms = cfg.timeout_ms,
		.max_retry_after_ms = cfg.max_retry_after,
		.ledger = cfg.ledger,
	};
	if (parse_key_from(&cfg, &o, err, sizeof(err)) != OB_OK) {
		fprintf(stderr, "outbox-producer submit: %s\n", err);
		goto out;
	}
	if (cfg.api_token_file != NULL && cfg.api_token_file[0] != '\0') {
		if (producer_token_read(cfg.api_token_file, token, sizeof(token), err,
		        sizeof(err)) != OB_OK) {
			fprintf(stderr, "outbox-producer submit: %s\n", err);
			goto out;
		}
		o.token = token;
	}
	struct client_result res;
	client_submit(&o, &res);
	printf("%s\n", res.observation != NULL ? res.observation : "{}");
	fflush(stdout);
	code = res.exit_code;
	client_result_fini(&res);
out:
	ob_cfg_free(submit_options, &cfg);
	return code;
}

struct lookup_config {
	char *url;
	char *key;
	int64_t timeout_ms;
	char *api_token_file;
};

static const struct ob_cfg_opt lookup_options[] = {
	{ "url", "OUTBOX_URL", OB_CFG_STRING, "http://127.0.0.1:8080", 0, 0, NULL, false, false,
	    offsetof(struct lookup_config, url), "base URL of outbox-producer serve" },
	{ "key", "OUTBOX_KEY", OB_CFG_STRING, NULL, 0, 0, NULL, true, false,
	    offsetof(struct lookup_config, key), "the idempotency key to look up" },
	{ "timeout-ms", "OUTBOX_TIMEOUT_MS", OB_CFG_INT, "2000", 1, 600000, NULL, false, false,
	    offsetof(struct lookup_config, timeout_ms), "timeout in milliseconds" },
	{ "api-token-file", "OUTBOX_API_TOKEN_FILE", OB_CFG_STRING, NULL, 0, 0, NULL, false,
	    false, offsetof(struct lookup_config, api_token_file),
	    "send Authorization: Bearer with the one token in this file; the key is looked up"
	    " in that token's scope; never printed" },
	OB_CFG_END,
};

/* The lookup table, for --help-markdown (main.c). */
const struct ob_cfg_opt *const producer_lookup_options = lookup_options;

static const struct ob_cfg_program lookup_program = {
	.name = "outbox-producer lookup",
	.synopsis = "outbox-producer lookup --key K [--url URL]",
	.description = "Look a report up by its idempotency key (the recovery step before"
	    " resubmitting). Prints ONE JSON observation: OK with the report, or NOT_FOUND"
	    " (exit 1).",
	.options = lookup_options,
};

int
producer_cmd_lookup(int argc, char **argv)
{
	struct lookup_config cfg;
	char err[1024], token[PRODUCER_TOKEN_MAX + 1];
	int code;

	if ((code = ob_cfg_load(&lookup_program, &cfg, argc, argv, NULL)) >= 0)
		return code;
	if (cfg.api_token_file != NULL && cfg.api_token_file[0] != '\0' &&
	    producer_token_read(cfg.api_token_file, token, sizeof(token), err, sizeof(err)) !=
	        OB_OK) {
		fprintf(stderr, "outbox-producer lookup: %s\n", err);
		ob_cfg_free(lookup_options, &cfg);
		return CLIENT_EXIT_USAGE;
	}
	struct client_result res;
	client_lookup(cfg.url, cfg.api_token_file != NULL && cfg.api_token_file[0] != '\0'
	    ? token : NULL, cfg.key, cfg.timeout_ms, &res);
	printf("%s\n", res.observation != NULL ? res.observation : "{}");
	code = res.exit_code;
	client_result_fini(&res);
	ob_cfg_free(lookup_options, &cfg);
	return code;
}
