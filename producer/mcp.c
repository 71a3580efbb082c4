/*
 * mcp.c - the MCP tool server's messages and tools (see mcp.h).
 *
 * JSON-RPC 2.0 as MCP uses it: a request (method + id) gets exactly one
 * response, a notification (method, no id) none; batches (arrays) are not
 * part of MCP since 2025-06-18 and are refused. Protocol errors (unknown
 * method, unknown tool, arguments not an object) are JSON-RPC errors; a
 * tool's own failure, bad arguments included, is a result with isError,
 * so the model reads why and can correct itself (the MCP spec's split).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uuid/uuid.h>

#include "client.h"
#include "json_members.h"
#include "mcp.h"
#include "outbox/err.h"

#define RPC_PARSE_ERROR -32700
#define RPC_INVALID_REQUEST -32600
#define RPC_METHOD_NOT_FOUND -32601
#define RPC_INVALID_PARAMS -32602

/* The namespace of the tools' name-based keys (another than the client's
 * content keys: a tool key never equals a `--key-from content` one). */
static const uuid_t mcp_ns = { 0x6f, 0x75, 0x74, 0x62, 0x6f, 0x78, 0x4d, 0x43, 0x90, 0x50,
	0x74, 0x6f, 0x6f, 0x6c, 0x6b, 0x79 };

static const char *const protocol_versions[] = {
	"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", NULL,
};

struct tool {
	const char *name;
	const char *title;
	const char *description;
	const char *input_schema; /* JSON */
	bool read_only;
	bool idempotent;
	/* Check args and call the API; the result object (owned) or NULL on
	 * ENOMEM. */
	json_t *(*call)(const struct mcp_server *s, const json_t *args, const struct mcp_call *c);
};

static json_t *
rpc_error(const json_t *id, int code, const char *message)
{
	return json_pack("{s:s,s:O,s:{s:i,s:s}}", "jsonrpc", "2.0", "id",
	    id != NULL ? id : json_null(), "error", "code", code, "message", message);
}

static json_t *
rpc_result(const json_t *id, json_t *result)
{
	if (result == NULL)
		return rpc_error(id, RPC_INVALID_REQUEST, "out of memory");
	return json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id, "result", result);
}

json_t *
mcp_parse_error(const char *why)
{
	return rpc_error(NULL, RPC_PARSE_ERROR, why);
}

/* A tool's result from an observation of the client (client.h). */
static json_t *
observation_result(const struct client_result *res)
{
	const char *text = res->observation != NULL ? res->observation : "{}";
	json_t *structured = json_loads(text, 0, NULL);
	json_t *r = json_pack("{s:[{s:s,s:s}],s:b}", "content", "type", "text", "text", text,
	    "isError", !res->ok);
	if (r != NULL && structured != NULL)
		json_object_set_new(r, "structuredContent", structured);
	else
		json_decref(structured);
	return r;
}

/* A tool's result for arguments it cannot use: the model can fix them. */
static json_t *
bad_arguments(const char *message)
{
	char obs[1024];
	json_t *o = json_pack("{s:b,s:s,s:s}", "ok", false, "code", "INVALID_ARGUMENTS",
	    "content", message);
	char *text = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
	snprintf(obs, sizeof(obs), "%s", text != NULL ? text : message);
	free(text);
	json_t *r = json_pack("{s:[{s:s,s:s}],s:b,s:o?}", "content", "type", "text", "text", obs,
	    "isError", true, "structuredContent", o);
	return r;
}

/* args' string member name: NULL when absent; *bad set when present but
 * not a string. */
static const char *
string_arg(const json_t *args, const char *name, bool *bad)
{
	json_t *v = json_object_get(args, name);
	if (v == NULL || json_is_null(v))
		return NULL;
	if (!json_is_string(v)) {
		*bad = true;
		return NULL;
	}
	return json_string_value(v);
}


int
mcp_tool_key(const char *run_id, const char *tool, const json_t *args, char *out,
    size_t outlen)
{
	char *canon = json_dumps(args, JSON_COMPACT | JSON_SORT_KEYS);
	if (canon == NULL)
		return OB_EINVAL;
	size_t n = strlen(run_id) + strlen(tool) + strlen(canon) + 3;
	char *name = malloc(n);
	if (name == NULL) {
		free(canon);
		return OB_ENOMEM;
	}
	/* \x1f (unit separator) cannot occur in the run id (checked at start)
	 * nor in a tool name, so (run, tool, args) -> name is one-to-one. */
	snprintf(name, n, "%s\x1f%s\x1f%s", run_id, tool, canon);
	uuid_t u;
	char s[37];
	uuid_generate_sha1(u, mcp_ns, name, strlen(name));
	uuid_unparse_lower(u, s);
	snprintf(out, outlen, "mcp-%s", s);
	free(name);
	free(canon);
	return OB_OK;
}

/* The client options of one call: the server's, and the call's key, the
 * host's (meta_key), else made from the run, the tool and norm, the
 * arguments as the API will see them (released here). key (keylen bytes)
 * must outlive *o. OB_OK, or an error when norm cannot be encoded. */
static int
call_opts(const struct mcp_server *s, const char *tool, json_t *norm, const struct mcp_call *c,
    struct client_opts *o, char *key, size_t keylen)
{
	int rc = c->meta_key != NULL ? (snprintf(key, keylen, "%s", c->meta_key), OB_OK)
	                             : mcp_tool_key(s->run_id, tool, norm, key, keylen);
	json_decref(norm);
	*o = (struct client_opts){
		.url = s->url,
		.key_source = CLIENT_KEY_FIXED,
		.key = key,
		.attempts = s->attempts,
		.base_ms = s->base_ms,
		.cap_ms = s->cap_ms,
		.timeout_ms = s->timeout_ms,
		.max_retry_after_ms = s->max_retry_after_ms,
		.ledger = s->ledger,
		.token = s->token,
		.retry_budget = s->retry_budget,
		.tool_name = tool,
		.run_id = s->run_id,
		.step_id = c->step,
		.replay = s->replay,
		.approve = s->elicit != NULL && s->host_elicits != NULL && *s->host_elicits
		    ? s->elicit : NULL,
		.approve_arg = s->elicit_arg,
	};
	return rc;
}

/* One call through the agent-side client, as a tool result. */
static json_t *
call_client(const struct client_opts *o)
{
	struct client_result res;
	client_submit(o, &res);
	json_t *r = observation_result(&res);
	client_result_fini(&res);
	return r;
}

static json_t *
tool_submit_bug_report(const struct mcp_server *s, const json_t *args, const struct mcp_call *c)
{
	static const char *const allowed[] = { "title", "module", "steps", "severity", NULL };
	char err[256], key[256];
	bool bad = false;

	if (!producer_json_only_members(args, allowed, err, sizeof(err)))
		return bad_arguments(err);
	const char *title = string_arg(args, "title", &bad);
	const char *module = string_arg(args, "module", &bad);
	const char *steps = string_arg(args, "steps", &bad);
	const char *severity = string_arg(args, "severity", &bad);
	if (bad)
		return bad_arguments("title, module, steps and severity are strings");
	if (title == NULL || module == NULL)
		return bad_arguments("title and module are required");
	if (severity == NULL)
		severity = "medium";

	/* The key is of the arguments as the API will see them: with the
	 * default severity filled in, an omitted and an explicit "medium"
	 * are one call. */
	json_t *norm = json_pack("{s:s,s:s,s:s}", "title", title, "module", module, "severity",
	    severity);
	if (norm == NULL)
		return NULL;
	if (steps != NULL)
		json_object_set_new(norm, "steps", json_string(steps));
	struct client_opts o;
	if (call_opts(s, "submit_bug_report", norm, c, &o, key, sizeof(key)) != OB_OK)
		return bad_arguments("the arguments cannot be encoded (invalid UTF-8?)");
	o.title = title;
	o.module = module;
	o.steps = steps;
	o.severity = severity;
	return call_client(&o);
}

static json_t *
tool_send_notification(const struct mcp_server *s, const json_t *args, const struct mcp_call *c)
{
	static const char *const allowed[] = { "topic", "payload", "ordering_key", NULL };
	char err[256], key[256];
	bool bad = false;

	if (!producer_json_only_members(args, allowed, err, sizeof(err)))
		return bad_arguments(err);
	const char *topic = string_arg(args, "topic", &bad);
	const char *ordering_key = string_arg(args, "ordering_key", &bad);
	json_t *payload = json_object_get(args, "payload");
	if (bad)
		return bad_arguments("topic and ordering_key are strings");
	if (topic == NULL || (!json_is_object(payload) && !json_is_array(payload)))
		return bad_arguments("topic (a string) and payload (a JSON object or array) are"
		                     " required");
	json_t *norm = json_pack("{s:s,s:O}", "topic", topic, "payload", payload);
	if (norm == NULL)
		return NULL;
	if (ordering_key != NULL)
		json_object_set_new(norm, "ordering_key", json_string(ordering_key));
	struct client_opts o;
	int rc = call_opts(s, "send_notification", norm, c, &o, key, sizeof(key));
	char *payload_text = json_dumps(payload, JSON_COMPACT);
	if (rc != OB_OK || payload_text == NULL) {
		free(payload_text);
		return bad_arguments("the arguments cannot be encoded (invalid UTF-8?)");
	}
	o.target = CLIENT_MESSAGE;
	o.topic = topic;
	o.payload = payload_text;
	o.ordering_key = ordering_key;
	json_t *r = call_client(&o);
	free(payload_text);
	return r;
}

static json_t *
tool_lookup_by_key(const struct mcp_server *s, const json_t *args, const struct mcp_call *c)
{
	static const char *const allowed[] = { "idempotency_key", "kind", NULL };
	char err[256];
	bool bad = false;

	(void)c; /* a lookup creates nothing: no key of its own */
	if (!producer_json_only_members(args, allowed, err, sizeof(err)))
		return bad_arguments(err);
	const char *key = string_arg(args, "idempotency_key", &bad);
	const char *kind = string_arg(args, "kind", &bad);
	if (bad || key == NULL)
		return bad_arguments("idempotency_key (a string) is required");
	if (kind != NULL && strcmp(kind, "notification") != 0 && strcmp(kind, "bug_report") != 0)
		return bad_arguments("kind is 'notification' or 'bug_report'");
	/* Without a kind: a notification, else a bug report (a key made by
	 * this server names one call of one tool, so at most one is found). */
	struct client_result res;
	bool report_only = kind != NULL && strcmp(kind, "bug_report") == 0;
	if (!report_only) {
		client_lookup(CLIENT_MESSAGE, s->url, s->token, key, s->timeout_ms, &res);
		if (kind != NULL || strcmp(res.code, "NOT_FOUND") != 0)
			goto done;
		client_result_fini(&res);
	}
	client_lookup(CLIENT_REPORT, s->url, s->token, key, s->timeout_ms, &res);
done:;
	json_t *r = observation_result(&res);
	client_result_fini(&res);
	return r;
}

static const struct tool tools[] = {
	{ "send_notification", "Send a notification",
	    "Send a notification (an email, a chat message, a page: whatever the topic's"
	    " consumer does) exactly once per logical call: the server derives the idempotency"
	    " key from the arguments and this run, so calling again with the same arguments"
	    " returns the first result (metadata.replayed) and sends nothing new. The message"
	    " is committed to the outbox when this returns OK and delivered after; ordering_key"
	    " keeps the notifications of one key in order. If the result's code is"
	    " SIDE_EFFECT_UNCERTAIN, do not send again: call lookup_by_key with"
	    " metadata.idempotencyKey first.",
	    "{\"type\":\"object\",\"properties\":{"
	    "\"topic\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":255,"
	    "\"pattern\":\"^[!-~]+$\"},"
	    "\"payload\":{\"type\":[\"object\",\"array\"]},"
	    "\"ordering_key\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":255}},"
	    "\"required\":[\"topic\",\"payload\"],\"additionalProperties\":false}",
	    false, true, tool_send_notification },
	{ "submit_bug_report", "Submit a bug report",
	    "File a bug report with the team's tracker. Exactly once per logical call: the"
	    " server derives the idempotency key from the arguments and this run, so calling"
	    " again with the same arguments returns the first result (metadata.replayed) and"
	    " creates nothing new. If the result's code is SIDE_EFFECT_UNCERTAIN, do not"
	    " submit again: call lookup_by_key with metadata.idempotencyKey first.",
	    "{\"type\":\"object\",\"properties\":{"
	    "\"title\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":200},"
	    "\"module\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":100},"
	    "\"steps\":{\"type\":\"string\"},"
	    "\"severity\":{\"type\":\"string\",\"enum\":[\"low\",\"medium\",\"high\",\"critical\"],"
	    "\"default\":\"medium\"}},"
	    "\"required\":[\"title\",\"module\"],\"additionalProperties\":false}",
	    false, true, tool_submit_bug_report },
	{ "lookup_by_key", "Look up a call by its idempotency key",
	    "Find what an earlier call created, by the idempotency key in its result's"
	    " metadata: the recovery step after SIDE_EFFECT_UNCERTAIN. kind (notification or"
	    " bug_report) says which tool made it; without it both are looked in. NOT_FOUND"
	    " means it was not created and may be sent again with the same arguments.",
	    "{\"type\":\"object\",\"properties\":{"
	    "\"idempotency_key\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":255},"
	    "\"kind\":{\"type\":\"string\",\"enum\":[\"notification\",\"bug_report\"]}},"
	    "\"required\":[\"idempotency_key\"],\"additionalProperties\":false}",
	    true, false, tool_lookup_by_key },
	{ NULL, NULL, NULL, NULL, false, false, NULL },
};

static json_t *
tools_list(void)
{
	json_t *list = json_array();
	for (const struct tool *t = tools; list != NULL && t->name != NULL; t++) {
		json_t *schema = json_loads(t->input_schema, 0, NULL);
		json_t *ann = json_pack("{s:s,s:b,s:b,s:b}", "title", t->title, "readOnlyHint",
		    t->read_only, "destructiveHint", false, "openWorldHint", false);
		if (ann != NULL && !t->read_only)
			json_object_set_new(ann, "idempotentHint", json_boolean(t->idempotent));
		json_t *o = json_pack("{s:s,s:s,s:s,s:o?,s:o?}", "name", t->name, "title", t->title,
		    "description", t->description, "inputSchema", schema, "annotations", ann);
		if (o == NULL || json_array_append_new(list, o) != 0) {
			json_decref(list);
			return NULL;
		}
	}
	return json_pack("{s:o?}", "tools", list);
}

static json_t *
initialize(const struct mcp_server *s, const json_t *params)
{
	/* a host that can ask its user (elicitation/create) */
	if (s->host_elicits != NULL)
		*s->host_elicits = json_is_object(
		    json_object_get(json_object_get(params, "capabilities"), "elicitation"));
	const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
	const char *v = MCP_PROTOCOL_FALLBACK;
	for (const char *const *p = protocol_versions; asked != NULL && *p != NULL; p++)
		if (strcmp(asked, *p) == 0)
			v = *p;
	/* tools.idempotency (SEP-3182): tools/call takes params.idempotencyKey */
	return json_pack("{s:s,s:{s:{s:b,s:{}}},s:{s:s,s:s},s:s}", "protocolVersion", v,
	    "capabilities", "tools", "listChanged", false, "idempotency", "serverInfo", "name",
	    "outbox-producer", "version", "1", "instructions",
	    "Tools that change something outside (a bug report, a notification) happen"
	    " exactly once per logical call. On SIDE_EFFECT_UNCERTAIN, look the key up"
	    " before calling again.");
}

/* A host's key the API can store as given: 1..MCP_KEY_MAX bytes. */
static bool
host_key_ok(const char *k)
{
	return k != NULL && k[0] != '\0' && strlen(k) <= MCP_KEY_MAX;
}

static json_t *
tools_call(const struct mcp_server *s, const json_t *id, const json_t *params)
{
	const char *name = json_string_value(json_object_get(params, "name"));
	json_t *args = json_object_get(params, "arguments");
	if (name == NULL)
		return rpc_error(id, RPC_INVALID_PARAMS, "tools/call needs params.name");
	if (args != NULL && !json_is_object(args))
		return rpc_error(id, RPC_INVALID_PARAMS, "params.arguments must be an object");
	const struct tool *t = tools;
	while (t->name != NULL && strcmp(t->name, name) != 0)
		t++;
	if (t->name == NULL) {
		char msg[160];
		snprintf(msg, sizeof(msg), "unknown tool '%.64s'", name);
		return rpc_error(id, RPC_INVALID_PARAMS, msg);
	}
	/* The host's key: params.idempotencyKey (SEP-3182), or params._meta's;
	 * either given is used as given or refused (never cut to fit: two keys
	 * would become one), both given must agree. */
	json_t *sep = json_object_get(params, MCP_SEP_KEY);
	json_t *meta = json_object_get(json_object_get(params, "_meta"), MCP_META_KEY);
	const char *sep_key = json_string_value(sep), *meta_key = json_string_value(meta);
	if (sep != NULL && !host_key_ok(sep_key))
		return rpc_error(id, RPC_INVALID_PARAMS, "params." MCP_SEP_KEY " must be a string of"
		    " 1.." MCP_KEY_MAX_TEXT " bytes");
	if (meta != NULL && !host_key_ok(meta_key))
		return rpc_error(id, RPC_INVALID_PARAMS, "params._meta." MCP_META_KEY " must be a"
		    " string of 1.." MCP_KEY_MAX_TEXT " bytes");
	if (sep_key != NULL && meta_key != NULL && strcmp(meta_key, sep_key) != 0)
		return rpc_error(id, RPC_INVALID_PARAMS, "params." MCP_SEP_KEY " and params._meta."
		    MCP_META_KEY " name two different keys for one call");
	if (sep_key != NULL)
		meta_key = sep_key;
	json_t *empty = args == NULL ? json_object() : NULL;
	/* the ledger's step: the request's id, as the host sent it */
	char step[64];
	if (json_is_string(id))
		snprintf(step, sizeof(step), "%s", json_string_value(id));
	else
		snprintf(step, sizeof(step), "%" JSON_INTEGER_FORMAT, json_integer_value(id));
	const struct mcp_call call = { meta_key, step };
	json_t *r = t->call(s, args != NULL ? args : empty, &call);
	json_decref(empty);
	return rpc_result(id, r);
}

json_t *
mcp_handle(const struct mcp_server *s, const json_t *msg)
{
	if (!json_is_object(msg))
		return rpc_error(NULL, RPC_INVALID_REQUEST,
		    "a message is one JSON-RPC 2.0 object (batches are not part of MCP)");
	json_t *id = json_object_get(msg, "id");
	const char *method = json_string_value(json_object_get(msg, "method"));
	const char *version = json_string_value(json_object_get(msg, "jsonrpc"));
	bool valid_id = id != NULL && (json_is_string(id) || json_is_integer(id));
	if (version == NULL || strcmp(version, "2.0") != 0)
		return rpc_error(valid_id ? id : NULL, RPC_INVALID_REQUEST, "jsonrpc must be \"2.0\"");
	if (method == NULL) /* a response to us (we send no requests) */
		return NULL;
	if (id == NULL) /* a notification: initialized, cancelled, ... */
		return NULL;
	if (!valid_id)
		return rpc_error(NULL, RPC_INVALID_REQUEST, "id must be a string or an integer");
	json_t *params = json_object_get(msg, "params");
	if (strcmp(method, "initialize") == 0)
		return rpc_result(id, initialize(s, params));
	if (strcmp(method, "ping") == 0)
		return rpc_result(id, json_object());
	if (strcmp(method, "tools/list") == 0)
		return rpc_result(id, tools_list());
	if (strcmp(method, "tools/call") == 0)
		return tools_call(s, id, params);
	char m[160];
	snprintf(m, sizeof(m), "method '%.64s' not found", method);
	return rpc_error(id, RPC_METHOD_NOT_FOUND, m);
}
