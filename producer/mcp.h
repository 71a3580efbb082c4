/*
 * mcp.h - the Model Context Protocol tool server of `outbox-producer mcp`:
 * one JSON-RPC 2.0 message in, at most one out (initialize, ping,
 * tools/list, tools/call; notifications get no answer). The transport
 * (stdio, one message per line) is the command's (mcp_cmd.c).
 *
 * The tools call the producer's HTTP API through the agent-side client
 * (client.h), so a tool call has the same retries, ledger and ONE
 * observation as `outbox-producer submit`. A tool's idempotency key is
 * made here, never by the model: "mcp-" + a name-based UUID of the run id,
 * the tool's name and its normalized arguments (defaults applied, keys
 * sorted), so a host's retry of the same call gets the same key and a new
 * call (other arguments, or another run) a new one. A key the host passes
 * wins: params.idempotencyKey, the field SEP-3182 proposes (advertised as
 * the capability tools.idempotency), or params._meta (MCP_META_KEY): either
 * must be a string of 1..255 bytes, and both at once the same key, else
 * the call is answered -32602 and nothing is done. The same key with other
 * arguments is answered IDEMPOTENCY_CONFLICT, as the HTTP API answers it
 * (422), and nothing is done again.
 */
#ifndef OUTBOX_PRODUCER_MCP_H
#define OUTBOX_PRODUCER_MCP_H

#include <stdint.h>

#include <jansson.h>

#include "client.h"
#include "outbox/token_bucket.h"

#define MCP_META_KEY "idempotency_key"  /* params._meta.<this>: the host's key */
#define MCP_SEP_KEY "idempotencyKey"    /* params.<this>: the host's key (SEP-3182) */
#define MCP_KEY_MAX 255                 /* bytes of a host's key (the API's limit) */
#define MCP_KEY_MAX_TEXT "255"
#define MCP_RUN_ID_MAX 128               /* bytes of a run id */
#define MCP_PROTOCOL_FALLBACK "2025-06-18" /* answered to an unknown version */

struct mcp_server {
	const char *url;          /* base URL of `outbox-producer serve` */
	char run_id[MCP_RUN_ID_MAX + 1];
	int attempts;             /* HTTP attempts per tool call */
	int64_t base_ms, cap_ms;  /* Full Jitter */
	int64_t timeout_ms;       /* per attempt */
	int64_t max_retry_after_ms;
	const char *ledger;       /* NULL = none */
	const char *token;        /* Authorization: Bearer; NULL = none */
	struct ob_token_bucket *retry_budget; /* the process's (client_retry_budget), or
	                          * NULL: every tools/call retries up to attempts */
	enum client_replay replay; /* the tools' replay policy (--replay) */
	/* The transport's way to ask the user (MCP elicitation/create), used
	 * for replay ask when the host declared the elicitation capability;
	 * NULL when it has none. true: the user approved. */
	bool (*elicit)(void *arg, const char *question);
	void *elicit_arg;
	bool *host_elicits;       /* set by initialize; NULL: never */
};

/* One tools/call as a tool sees it. */
struct mcp_call {
	const char *meta_key; /* the host's key (idempotencyKey or _meta), or NULL */
	const char *step;     /* the request's id as text: the ledger's step */
};

/* Handle one parsed JSON-RPC message. Returns the response (owned by the
 * caller) or NULL when none is due (a notification, a response). A
 * message that is not a JSON-RPC request gets an error response. Blocks
 * for a tool call's HTTP attempts. */
json_t *mcp_handle(const struct mcp_server *s, const json_t *msg);

/* The response to a line that is not JSON (code -32700). */
json_t *mcp_parse_error(const char *why);

/* The key a tools/call of tool with these arguments gets in run run_id
 * (normalized: the object's keys sorted, compact). OB_OK, or OB_EINVAL
 * when args cannot be encoded. */
int mcp_tool_key(const char *run_id, const char *tool, const json_t *args, char *out,
    size_t outlen);

#endif
