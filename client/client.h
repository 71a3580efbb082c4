/*
 * client.h - the agent-side client of the producer API (a bug report,
 * POST /v1/reports, or a generic message, POST /v1/messages): one logical call
 * (one key, fixed before the first attempt and reused on every retry),
 * bounded retries with Full Jitter, and ONE observation for the agent that
 * never turns "no answer" into "failed".
 *
 * Retried: connection errors, timeouts, 409, 429, 500, 502, 503, 504
 * (honouring Retry-After). Never retried: any other 4xx. When an attempt
 * may have been applied and no later answer settled it, the outcome is
 * SIDE_EFFECT_UNCERTAIN: do not resubmit, look the key up first.
 */
#ifndef OUTBOX_CLIENT_CLIENT_H
#define OUTBOX_CLIENT_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "outbox/token_bucket.h"

#define CLIENT_MAX_RESPONSE (1024 * 1024) /* larger answers are refused */

/* Exit statuses of submit / lookup. */
enum client_exit {
	CLIENT_EXIT_OK = 0,
	CLIENT_EXIT_FAILED = 1,     /* permanent, or definitely not applied */
	CLIENT_EXIT_USAGE = 2,
	CLIENT_EXIT_UNCERTAIN = 3,  /* may have been applied: look up first */
};

/* What a call creates. */
enum client_target {
	CLIENT_REPORT = 0,  /* POST /v1/reports: title, module, steps, severity */
	CLIENT_MESSAGE,     /* POST /v1/messages: topic, payload, ordering_key */
};

enum client_key_source {
	CLIENT_KEY_FIXED = 0,    /* --key K */
	CLIENT_KEY_TOOL_CALL,    /* --key-from tool-call RUN:TOOL_USE_ID */
	CLIENT_KEY_CONTENT,      /* --key-from content: digest of run + module + title (a
	                          * report) or run + topic + payload + ordering key */
	CLIENT_KEY_PER_ATTEMPT,  /* BROKEN (demo): a new UUID on every attempt */
	CLIENT_KEY_NONE,         /* BROKEN (demo): no Idempotency-Key at all */
};

/* What the client does with a key whose last ledger state is uncertain
 * (or started: a crash) and which the lookup does not find: the tool's
 * declared replay policy, as the second article's ledger has it. */
enum client_replay {
	CLIENT_REPLAY_AUTO = 0, /* post it again (the key makes that safe) */
	CLIENT_REPLAY_ASK,      /* only with approved (the user said so): else
	                         * SIDE_EFFECT_UNCERTAIN, saying what to confirm */
	CLIENT_REPLAY_NEVER,    /* never by the client: SIDE_EFFECT_UNCERTAIN */
};

struct client_http_reply; /* below: one HTTP exchange's outcome */

struct client_opts {
	const char *url;          /* base, http://HOST:PORT */
	enum client_target target;
	const char *title, *module, *steps, *severity; /* REPORT; steps may be NULL */
	const char *topic, *payload, *ordering_key; /* MESSAGE; payload: JSON object or
	                          * array text; ordering_key may be NULL */
	enum client_key_source key_source;
	const char *key;          /* FIXED: the key; TOOL_CALL: RUN:TOOL_USE_ID */
	const char *run;          /* CONTENT: the run id */
	int attempts;             /* >= 1 */
	int64_t base_ms, cap_ms;  /* Full Jitter */
	int64_t timeout_ms;       /* per attempt */
	int64_t max_retry_after_ms; /* longest Retry-After honoured */
	const char *ledger;       /* NULL = no ledger */
	const char *token;        /* sent as Authorization: Bearer; NULL = none */
	struct ob_token_bucket *retry_budget; /* pays for each retry (outbox/
	                          * token_bucket.h); NULL = none: up to attempts */
	/* The ledger's account of the call (ledger.h; all may be NULL/0) */
	const char *tool_name;    /* the tool as the agent called it; NULL: the
	                           * target's (submit_bug_report, send_notification) */
	const char *run_id, *step_id; /* the agent's run and step */
	enum client_replay replay; /* after an uncertain attempt the lookup did not find */
	bool approved;            /* the user approved posting again (replay ask) */
	/* replay ask, not approved: ask the user now (question in words);
	 * true when they approve. NULL: the call answers SIDE_EFFECT_UNCERTAIN.
	 * The MCP server asks through elicitation (mcp.h). */
	bool (*approve)(void *arg, const char *question);
	void *approve_arg;
	/* Told of every attempt of client_submit, right after its HTTP
	 * exchange and before the backoff sleep (NULL: not called; nothing
	 * else changes): attempt from 1, key the Idempotency-Key sent ("" when
	 * none), reply its outcome, status, replayed, body and why, borrowed
	 * for the call. Called on the thread that runs client_submit: an
	 * observer shared by calls on several threads serializes itself. */
	void (*on_attempt)(void *arg, int attempt, const char *key,
	    const struct client_http_reply *reply);
	void *on_attempt_arg;
};

/* This process's retry budget (outbox/token_bucket.h), made full on first
 * use: one for every call the process makes (send, submit, each of the
 * MCP server's tools/call). NULL only when it cannot be made. */
struct ob_token_bucket *client_retry_budget(void);

/* The policy named name ("auto", "ask", "never": the --replay flags
 * values); anything else is auto. */
enum client_replay client_replay_of(const char *name);

/* The outcome. observation is owned (free with client_result_fini). */
struct client_result {
	char *observation;        /* {ok, code, content, metadata{...}} */
	int exit_code;            /* enum client_exit */
	bool ok;
	const char *code;         /* static string */
	enum client_target target;
	int64_t created_id;       /* the report's or message's id, 0 when none */
	int attempts;             /* attempts sent (0 when settled by the ledger lookup) */
	int last_status;          /* last HTTP status, 0 when none */
	bool replayed;
	bool budget_spent;        /* a retry was refused: the process's budget is spent */
	char key[256];            /* the key used (last attempt's for per-attempt) */
};

/* Derive the key for opts (FIXED, TOOL_CALL, CONTENT) into out (256
 * bytes). OB_OK or OB_EINVAL with the reason. */
int client_derive_key(const struct client_opts *opts, char *out, size_t outlen, char *err,
    size_t errlen);

/* Run the logical call. Blocks (retries sleep). Never fails: every problem
 * ends up in the observation. */
void client_submit(const struct client_opts *opts, struct client_result *res);

/* GET /v1/reports or /v1/messages ?idempotency_key=key (with token, NULL
 * = none, as Authorization: Bearer; the server looks the key up in that
 * token's scope): OK with what was created, NOT_FOUND, or TOOL_CRASH /
 * TIMEOUT when the service did not answer. */
void client_lookup(enum client_target target, const char *url, const char *token,
    const char *key, int64_t timeout_ms, struct client_result *res);

void client_result_fini(struct client_result *res);

/* One HTTP exchange, as every attempt of client_submit makes it (also used
 * by the guided demonstration, ctl/web_demo.c, for the demo admin
 * endpoints): a fresh connection to base, method on pathq, with
 * Idempotency-Key key and Authorization: Bearer token when not NULL, a
 * JSON body when not NULL, all within timeout_ms. body is owned (free();
 * NULL when no answer, or an answer over CLIENT_MAX_RESPONSE is ""). */
enum client_http_outcome {
	CLIENT_HTTP_NOT_SENT = 0, /* nothing reached the server */
	CLIENT_HTTP_LOST,         /* sent, no answer: it may have been applied */
	CLIENT_HTTP_ANSWERED,
};
struct client_http_reply {
	enum client_http_outcome outcome;
	bool timed_out;
	int status;
	bool replayed;           /* Idempotent-Replayed: true */
	int64_t retry_after_ms;
	char *body;
	char why[128];           /* when not answered */
};
void client_http_call(const char *base, const char *token, const char *method,
    const char *pathq, const char *key, const char *body, int64_t timeout_ms,
    struct client_http_reply *out);

#endif
