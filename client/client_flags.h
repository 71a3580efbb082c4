/*
 * client_flags.h - the flags of every command that calls the producer API
 * through the agent-side client (client.h): submit, send (submit_cmd.c)
 * and mcp (mcp_cmd.c), and lookup for the first and the last below. Each
 * macro expands to rows of a config table (OB_CFG_OPT), so the including
 * file's OB_CFG_STRUCT must have the fields they name: CLIENT_RETRY_OPTIONS
 * attempts, backoff_base, backoff_cap, timeout_ms, max_retry_after, ledger
 * and retry_budget, which CLIENT_RETRY_FIELDS hands on to a struct
 * client_opts (the including file has string.h and client.h).
 */
#ifndef OUTBOX_CLIENT_CLIENT_FLAGS_H
#define OUTBOX_CLIENT_CLIENT_FLAGS_H

#define CLIENT_MAX_ATTEMPTS 100

/* --url: where outbox-producer serve answers. */
#define CLIENT_OPT_URL(field)                                                            \
	OB_CFG_OPT("url", "OUTBOX_URL", OB_CFG_STRING, "http://127.0.0.1:8080", 0, 0, NULL,    \
	    false, field, "base URL of outbox-producer serve")

/* --api-token-file (producer_token_flag); scope: what the token's scope
 * (the server's file decides it) means for this command. */
#define CLIENT_OPT_TOKEN_FILE(field, scope)                                              \
	OB_CFG_OPT("api-token-file", "OUTBOX_API_TOKEN_FILE", OB_CFG_STRING, NULL, 0, 0, NULL,  \
	    false, field, "send Authorization: Bearer with the one token in this file (the"      \
	    " server's format); " scope "; never printed")

/* --timeout-ms of one HTTP attempt; help: what it bounds in this command. */
#define CLIENT_OPT_TIMEOUT_MS(field, help)                                               \
	OB_CFG_OPT("timeout-ms", "OUTBOX_TIMEOUT_MS", OB_CFG_INT, "2000", 1, 600000, NULL,      \
	    false, field, help)

#define CLIENT_RETRY_OPTIONS                                                             \
	OB_CFG_OPT("attempts", "OUTBOX_ATTEMPTS", OB_CFG_INT, "4", 1, CLIENT_MAX_ATTEMPTS, NULL, \
	    false, attempts, "HTTP attempts of each call, the first included"),              \
	OB_CFG_OPT("backoff-base", "OUTBOX_BACKOFF_BASE", OB_CFG_DURATION, "20ms", 1, 60000,    \
	    NULL, false, backoff_base,                                                        \
	    "Full Jitter base: sleep = random(0, min(cap, base * 2^attempt))"),               \
	OB_CFG_OPT("backoff-cap", "OUTBOX_BACKOFF_CAP", OB_CFG_DURATION, "200ms", 1, 600000,    \
	    NULL, false, backoff_cap, "Full Jitter cap"),                                     \
	CLIENT_OPT_TIMEOUT_MS(timeout_ms, "per-attempt timeout in milliseconds"),              \
	OB_CFG_OPT("max-retry-after", "OUTBOX_MAX_RETRY_AFTER", OB_CFG_DURATION, "5s", 0,       \
	    3600000, NULL, false, max_retry_after,                                            \
	    "longest Retry-After honoured between attempts"),                                 \
	OB_CFG_OPT("ledger", "OUTBOX_LEDGER", OB_CFG_STRING, NULL, 0, 0, NULL, false, ledger,   \
	    "append-only JSON-lines tool ledger (fsynced); an uncertain key is looked up first"), \
	OB_CFG_OPT("retry-budget", "OUTBOX_RETRY_BUDGET", OB_CFG_ENUM, "on", 0, 0, "on|off",    \
	    false, retry_budget, "pay each retry from this process's budget (500 tokens, a"     \
	    " retry 5, after a timeout 10, a success puts back 1 or what its retries cost):"   \
	    " while everything fails the process makes at most 100 retries in all, whatever"   \
	    " --attempts; off: every call retries up to --attempts (docs/retries.md)")

/* The values of CLIENT_RETRY_OPTIONS' fields of cfg as designated
 * initializers of the same-named members of struct client_opts (or of any
 * struct that takes them: struct mcp_server). */
#define CLIENT_RETRY_FIELDS(cfg)                                                         \
	.attempts = (int)(cfg).attempts,                                                     \
	.base_ms = (cfg).backoff_base,                                                       \
	.cap_ms = (cfg).backoff_cap,                                                         \
	.timeout_ms = (cfg).timeout_ms,                                                      \
	.max_retry_after_ms = (cfg).max_retry_after,                                         \
	.ledger = (cfg).ledger,                                                              \
	.retry_budget = strcmp((cfg).retry_budget, "off") != 0 ? client_retry_budget() : NULL

#endif
