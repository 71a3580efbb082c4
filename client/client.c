/*
 * client.c - the agent-side client (see client.h), one code path for both
 * targets (a report, a message; the table `words` holds what differs):
 * nng's HTTP client, one
 * connection per attempt, Full Jitter between attempts, the ledger, and the
 * observation the agent reads.
 *
 * An attempt ends in one of three ways: NOT_SENT (the connection was never
 * made: nothing can have happened), LOST (the request may have reached the
 * server but no answer came: it may have been applied), or an HTTP answer.
 */
#include <ctype.h>
#include <pthread.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <openssl/evp.h>
#include <nng/nng.h>
#include <nng/supplemental/http/http.h>
#include <uuid/uuid.h>

#include "client.h"
#include "ledger.h"
#include "outbox/backoff.h"
#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/http_exchange.h"
#include "outbox/idem_key.h"
#include "outbox/url.h"

/* Namespace of the content-derived keys (a UUIDv5 of run + module + title). */

/* Said of a call that stopped before --attempts because a retry was
 * refused (client_opts.retry_budget). */
#define BUDGET_SPENT_NOTE " (it stopped retrying early: this process's retry budget is spent," \
	" after many failed calls)"

static const uuid_t content_ns = { 0x6f, 0x75, 0x74, 0x62, 0x6f, 0x78, 0x4b, 0x65, 0x89,
	0x79, 0x63, 0x6f, 0x6e, 0x74, 0x65, 0x6e };

/* What the observation and the requests say, per target. */
static const struct target_words {
	const char *path;       /* the endpoint */
	const char *id_member;  /* the new id in its 201 body */
	const char *id_meta;    /* the same in the observation's metadata */
	const char *tool;       /* how the agent's call is named */
	const char *thing;      /* "Bug report": a sentence's start */
	const char *noun;       /* "report": within a sentence */
	const char *lookup;     /* the command that looks a key up */
} words[] = {
	[CLIENT_REPORT] = { "/v1/reports", "report_id", "reportId", "submit_bug_report",
	    "Bug report", "report", "outbox-producer lookup --key" },
	[CLIENT_MESSAGE] = { "/v1/messages", "message_id", "messageId", "send_notification",
	    "Message", "message", "outbox-producer lookup --kind message --key" },
};

void
client_http_call(const char *base, const char *token, const char *method, const char *pathq,
    const char *key, const char *body, int64_t timeout_ms, struct client_http_reply *out)
{
	char urlbuf[2048], auth[300];
	nng_url *url = NULL;
	nng_http_client *cli = NULL;
	nng_http_req *req = NULL;
	nng_http_res *res = NULL;
	int rv;
	memset(out, 0, sizeof(*out));
	out->outcome = CLIENT_HTTP_NOT_SENT;
	snprintf(urlbuf, sizeof(urlbuf), "%s%s", base, pathq);
	if (token != NULL && snprintf(auth, sizeof(auth), "Bearer %s", token) >= (int)sizeof(auth)) {
		snprintf(out->why, sizeof(out->why), "the bearer token is too long");
		return;
	}
	if ((rv = ob_url_parse(&url, urlbuf)) != 0 || (rv = nng_http_client_alloc(&cli, url)) != 0) {
		snprintf(out->why, sizeof(out->why), "bad URL %s: %s", base, nng_strerror(rv));
		goto done;
	}
	if ((rv = nng_http_req_alloc(&req, url)) != 0 || (rv = nng_http_res_alloc(&res)) != 0 ||
	    (rv = nng_http_req_set_method(req, method)) != 0 ||
	    (key != NULL && (rv = nng_http_req_set_header(req, "Idempotency-Key", key)) != 0) ||
	    (token != NULL && (rv = nng_http_req_set_header(req, "Authorization", auth)) != 0) ||
	    (body != NULL &&
	        ((rv = nng_http_req_set_header(req, "Content-Type", "application/json")) != 0 ||
	            (rv = nng_http_req_copy_data(req, body, strlen(body))) != 0))) {
		snprintf(out->why, sizeof(out->why), "request: %s", nng_strerror(rv));
		goto done;
	}
	bool connected;
	if ((rv = ob_http_exchange(cli, req, res, timeout_ms, &connected)) != 0) {
		/* once connected, the request may have reached the server */
		out->outcome = connected ? CLIENT_HTTP_LOST : CLIENT_HTTP_NOT_SENT;
		out->timed_out = rv == NNG_ETIMEDOUT;
		snprintf(out->why, sizeof(out->why), "%s: %s", connected ? "no answer" : "connect",
		    nng_strerror(rv));
		goto done;
	}
	out->outcome = CLIENT_HTTP_ANSWERED;
	out->status = nng_http_res_get_status(res);
	const char *h = nng_http_res_get_header(res, "Idempotent-Replayed");
	out->replayed = h != NULL && strcmp(h, "true") == 0;
	if ((h = nng_http_res_get_header(res, "Retry-After")) != NULL) {
		char *end;
		long long s = strtoll(h, &end, 10);
		if (end != h && *end == '\0' && s >= 0 && s < 86400)
			out->retry_after_ms = s * 1000;
	}
	void *data;
	size_t len;
	nng_http_res_get_data(res, &data, &len);
	if (len > CLIENT_MAX_RESPONSE)
		len = 0;
	/* a C string for the caller (the JSON it parses ends at a NUL anyway) */
	out->body = strndup(len > 0 ? data : "", len);
done:
	if (req != NULL)
		nng_http_req_free(req);
	if (res != NULL)
		nng_http_res_free(res);
	if (cli != NULL)
		nng_http_client_free(cli);
	if (url != NULL)
		nng_url_free(url);
}

/* Lowercase, trim, collapse runs of white space. */
static void
normalize(const char *in, char *out, size_t outlen)
{
	size_t n = 0;
	bool space = false;
	for (; *in && n + 2 < outlen; in++) {
		unsigned char c = (unsigned char)*in;
		if (isspace(c)) {
			space = n > 0;
			continue;
		}
		if (space)
			out[n++] = ' ';
		space = false;
		out[n++] = (char)tolower(c);
	}
	out[n] = '\0';
}

int
client_derive_key(const struct client_opts *o, char *out, size_t outlen, char *err,
    size_t errlen)
{
	switch (o->key_source) {
	case CLIENT_KEY_FIXED:
		if (o->key == NULL) {
			snprintf(err, errlen, "--key is required");
			return OB_EINVAL;
		}
		snprintf(out, outlen, "%s", o->key);
		break;
	case CLIENT_KEY_TOOL_CALL: {
		const char *colon = o->key != NULL ? strchr(o->key, ':') : NULL;
		if (colon == NULL || colon == o->key || colon[1] == '\0') {
			snprintf(err, errlen, "--key-from tool-call needs RUN:TOOL_USE_ID");
			return OB_EINVAL;
		}
		snprintf(out, outlen, "%s", o->key);
		break;
	}
	case CLIENT_KEY_CONTENT: {
		char name[1024], m[256], t[512];
		if (o->run == NULL || o->run[0] == '\0') {
			snprintf(err, errlen, "--key-from content needs --run");
			return OB_EINVAL;
		}
		uuid_t u;
		char s[37];
		if (o->target == CLIENT_MESSAGE) {
			/* run, topic, the payload normalized (members sorted,
			 * compact), the ordering key: one-to-one, each part
			 * ended by a newline that none of them contains. */
			json_t *p = o->payload != NULL ? json_loads(o->payload, 0, NULL) : NULL;
			char *canon = p != NULL ? json_dumps(p, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
			json_decref(p);
			if (canon == NULL) {
				snprintf(err, errlen, "--key-from content: the payload is not JSON");
				return OB_EINVAL;
			}
			size_t n = strlen(o->run) + strlen(o->topic ? o->topic : "") + strlen(canon) +
			    strlen(o->ordering_key ? o->ordering_key : "") + 8;
			char *msg = malloc(n);
			if (msg == NULL) {
				free(canon);
				snprintf(err, errlen, "out of memory");
				return OB_ENOMEM;
			}
			snprintf(msg, n, "%s\n%s\n%s\n%s%s", o->run, o->topic ? o->topic : "", canon,
			    o->ordering_key ? "k:" : "-", o->ordering_key ? o->ordering_key : "");
			uuid_generate_sha1(u, content_ns, msg, strlen(msg));
			free(msg);
			free(canon);
		} else {
			normalize(o->module, m, sizeof(m));
			normalize(o->title, t, sizeof(t));
			int n = snprintf(name, sizeof(name), "%s\n%s\n%s", o->run, m, t);
			uuid_generate_sha1(u, content_ns, name,
			    (size_t)n < sizeof(name) ? (size_t)n : sizeof(name) - 1);
		}
		uuid_unparse_lower(u, s);
		snprintf(out, outlen, "content-%s", s);
		break;
	}
	case CLIENT_KEY_PER_ATTEMPT:
	case CLIENT_KEY_NONE:
		out[0] = '\0';
		return OB_OK;
	}
	return ob_idem_key_check(out, strlen(out), err, errlen);
}

static char *
request_body(const struct client_opts *o)
{
	json_t *b;
	if (o->target == CLIENT_MESSAGE) {
		json_t *p = o->payload != NULL ? json_loads(o->payload, 0, NULL) : NULL;
		b = p != NULL ? json_pack("{s:s,s:o}", "topic", o->topic ? o->topic : "", "payload", p)
		              : NULL;
		if (b != NULL && o->ordering_key != NULL)
			json_object_set_new(b, "ordering_key", json_string(o->ordering_key));
	} else {
		b = json_pack("{s:s,s:s,s:s}", "title", o->title ? o->title : "", "module",
		    o->module ? o->module : "", "severity", o->severity ? o->severity : "");
		if (b != NULL && o->steps != NULL)
			json_object_set_new(b, "steps", json_string(o->steps));
	}
	char *s = b != NULL ? json_dumps(b, JSON_COMPACT) : NULL;
	json_decref(b);
	return s;
}

static bool
retryable_status(int st)
{
	return st == 409 || st == 429 || st == 500 || st == 502 || st == 503 || st == 504;
}

/* Statuses after which the request may have been applied. */
static bool
ambiguous_status(int st)
{
	return st == 409 || st == 500 || st == 502 || st == 504;
}

static void
observe(struct client_result *res, bool ok, const char *code, const char *content,
    bool retryable, const char *status_json)
{
	json_t *meta = json_pack("{s:s?,s:i,s:b}", "idempotencyKey", res->key[0] ? res->key : NULL,
	    "attempts", res->attempts, "retryable", retryable);
	if (res->created_id > 0)
		json_object_set_new(meta, words[res->target].id_meta, json_integer(res->created_id));
	if (res->replayed)
		json_object_set_new(meta, "replayed", json_true());
	if (res->last_status > 0)
		json_object_set_new(meta, "httpStatus", json_integer(res->last_status));
	json_t *o = json_pack("{s:b,s:s,s:s,s:o}", "ok", ok, "code", code, "content", content,
	    "metadata", meta);
	if (status_json != NULL) {
		json_t *r = json_loads(status_json, 0, NULL);
		if (r != NULL)
			json_object_set_new(o, "result", r);
	}
	res->observation = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	res->ok = ok;
	res->code = code;
}

static int64_t
body_id(enum client_target t, const char *body)
{
	json_t *o = body != NULL ? json_loads(body, 0, NULL) : NULL;
	int64_t id = (int64_t)json_integer_value(json_object_get(o, words[t].id_member));
	json_decref(o);
	return id;
}

static const char *const replay_names[] = { "auto", "ask", "never" };

enum client_replay
client_replay_of(const char *name)
{
	for (int i = 0; i < 3; i++)
		if (name != NULL && strcmp(name, replay_names[i]) == 0)
			return (enum client_replay)i;
	return CLIENT_REPLAY_AUTO;
}

/* s percent-encoded for a URL query (unreserved characters kept) into out. */
static void
query_escape(const char *s, char *out, size_t outlen)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = 0;
	for (; *s != '\0' && n + 4 < outlen; s++) {
		unsigned char c = (unsigned char)*s;
		if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
			out[n++] = (char)c;
		} else {
			out[n++] = '%';
			out[n++] = hex[c >> 4];
			out[n++] = hex[c & 15];
		}
	}
	out[n] = '\0';
}

/* One ledger line of the call (ledger.h): the tool, its run and step, the
 * SHA-256 of its input (the request body, when there is one yet), its
 * declared idempotency (a stable key: the API answers a repeat from the
 * first) and replay policy; after "planned", the attempts and code so far
 * and, once made, what it made with a reference that reads it back. */
static void
ledger_note(const struct client_opts *o, const char *key, const char *state,
    const struct client_result *res, const char *body)
{
	char err[512];
	if (o->ledger == NULL || key[0] == '\0')
		return;
	const struct target_words *w = &words[res->target];
	json_t *x = json_pack("{s:s,s:s}", "idempotency", "idempotent", "replay",
	    replay_names[o->replay]);
	if (x == NULL) {
		fprintf(stderr, "outbox-producer: ledger: out of memory\n");
		return;
	}
	if (o->run_id != NULL)
		json_object_set_new(x, "run", json_string(o->run_id));
	if (o->step_id != NULL)
		json_object_set_new(x, "step", json_string(o->step_id));
	if (body != NULL) {
		unsigned char md[EVP_MAX_MD_SIZE];
		unsigned int mdlen = 0;
		char hexd[2 * EVP_MAX_MD_SIZE + 8] = "sha256:";
		if (EVP_Digest(body, strlen(body), md, &mdlen, EVP_sha256(), NULL) == 1) {
			for (unsigned int i = 0; i < mdlen; i++)
				snprintf(hexd + 7 + 2 * i, 3, "%02x", md[i]);
			json_object_set_new(x, "input_hash", json_string(hexd));
		}
	}
	if (strcmp(state, "planned") != 0) {
		json_object_set_new(x, "attempts", json_integer(res->attempts));
		json_object_set_new(x, "code", json_string(res->code ? res->code : ""));
	}
	if (res->created_id > 0) {
		char q[600], ref[700];
		query_escape(key, q, sizeof(q));
		snprintf(ref, sizeof(ref), "%s?idempotency_key=%s", w->path, q);
		json_object_set_new(x, w->id_meta, json_integer(res->created_id));
		json_object_set_new(x, "result_ref", json_string(ref));
	}
	if (ledger_append(o->ledger, o->tool_name != NULL ? o->tool_name : w->tool, key, state, x,
	        err, sizeof(err)) != OB_OK)
		fprintf(stderr, "outbox-producer: %s\n", err);
	json_decref(x);
}

static void
finish_with_status(struct client_result *res, const struct client_http_reply *r)
{
	char msg[512];
	int st = r->status;
	const char *code = "TOOL_CRASH";
	json_t *b = r->body != NULL ? json_loads(r->body, 0, NULL) : NULL;
	bool conflict = st == 422 && json_string_value(json_object_get(b, "error")) != NULL &&
	    strcmp(json_string_value(json_object_get(b, "error")), "idempotency_key_reused") == 0;
	if (conflict)
		code = "IDEMPOTENCY_CONFLICT";
	else if (st == 400 || st == 411 || st == 413 || st == 415 || st == 422)
		code = "INVALID_ARGUMENTS";
	else if (st == 404 || st == 405)
		code = "NOT_FOUND";
	else if (st == 401 || st == 403)
		code = "PERMISSION_DENIED";
	const char *m = json_string_value(json_object_get(b, "message"));
	const struct target_words *w = &words[res->target];
	snprintf(msg, sizeof(msg), "%s was refused (HTTP %d): %s. Nothing was created. Do not"
	    " retry the same request unchanged%s%s.", w->tool, st, m ? m : "no detail",
	    conflict ? "; this key was already used for a different " : "",
	    conflict ? w->noun : "");
	json_decref(b);
	res->exit_code = CLIENT_EXIT_FAILED;
	observe(res, false, code, msg, false, NULL);
}

void
client_lookup(enum client_target target, const char *url, const char *token, const char *key,
    int64_t timeout_ms, struct client_result *res)
{
	char path[1024], msg[600];
	const struct target_words *w = &words[target];
	size_t n = (size_t)snprintf(path, sizeof(path), "%s?idempotency_key=", w->path);
	memset(res, 0, sizeof(*res));
	res->target = target;
	snprintf(res->key, sizeof(res->key), "%s", key);
	for (const unsigned char *p = (const unsigned char *)key; *p && n + 4 < sizeof(path); p++) {
		if (isalnum(*p) || strchr("-._~", *p) != NULL)
			path[n++] = (char)*p;
		else
			n += (size_t)snprintf(path + n, sizeof(path) - n, "%%%02X", *p);
	}
	path[n] = '\0';
	struct client_http_reply r;
	client_http_call(url, token, "GET", path, NULL, NULL, timeout_ms, &r);
	res->attempts = 1;
	res->last_status = r.status;
	if (r.outcome == CLIENT_HTTP_ANSWERED && r.status == 200) {
		res->created_id = body_id(res->target, r.body);
		snprintf(msg, sizeof(msg), "A %s with key %s exists: %s %" PRId64 ".", w->noun, key,
		    w->noun, res->created_id);
		res->exit_code = CLIENT_EXIT_OK;
		observe(res, true, "OK", msg, false, r.body);
	} else if (r.outcome == CLIENT_HTTP_ANSWERED && r.status == 404) {
		snprintf(msg, sizeof(msg), "No %s with key %s exists.", w->noun, key);
		res->exit_code = CLIENT_EXIT_FAILED;
		observe(res, false, "NOT_FOUND", msg, false, NULL);
	} else if (r.outcome == CLIENT_HTTP_ANSWERED) {
		finish_with_status(res, &r);
	} else {
		snprintf(msg, sizeof(msg), "The %s service did not answer the lookup (%s). It is"
		    " not known whether a %s with key %s exists; try the lookup again later.",
		    w->noun, r.why, w->noun, key);
		res->exit_code = CLIENT_EXIT_UNCERTAIN;
		observe(res, false, r.timed_out ? "TIMEOUT" : "TOOL_CRASH", msg, true, NULL);
	}
	free(r.body);
}

void
client_submit(const struct client_opts *o, struct client_result *res)
{
	char key[256] = "", err[512], msg[1024];
	uint64_t rng = ob_rand_seed();
	const struct target_words *w = &words[o->target];
	memset(res, 0, sizeof(*res));
	res->target = o->target;
	if (client_derive_key(o, key, sizeof(key), err, sizeof(err)) != OB_OK) {
		res->exit_code = CLIENT_EXIT_USAGE;
		observe(res, false, "INVALID_ARGUMENTS", err, false, NULL);
		return;
	}
	snprintf(res->key, sizeof(res->key), "%s", key);
	bool stable = key[0] != '\0';
	bool approved = false; /* a replay the user approved (CLIENT_REPLAY_ASK) */

	/* A key the ledger left uncertain is looked up before it is posted. */
	if (stable && o->ledger != NULL) {
		char last[16];
		if (ledger_last_state(o->ledger, key, last, sizeof(last), err, sizeof(err)) != OB_OK) {
			res->exit_code = CLIENT_EXIT_FAILED;
			observe(res, false, "TOOL_CRASH", err, false, NULL);
			return;
		}
		if (strcmp(last, "uncertain") == 0 || strcmp(last, "started") == 0) {
			struct client_result lk;
			client_lookup(o->target, o->url, o->token, key, o->timeout_ms, &lk);
			if (lk.exit_code == CLIENT_EXIT_OK) {
				res->created_id = lk.created_id;
				snprintf(msg, sizeof(msg), "%s %" PRId64 " already exists for this call"
				    " (found by looking up key %s after an uncertain earlier attempt);"
				    " nothing was posted.", w->thing, lk.created_id, key);
				res->exit_code = CLIENT_EXIT_OK;
				observe(res, true, "OK", msg, false, NULL);
				ledger_note(o, key, "succeeded", res, NULL);
				client_result_fini(&lk);
				return;
			}
			bool not_found = strcmp(lk.code, "NOT_FOUND") == 0;
			client_result_fini(&lk);
			if (!not_found) {
				snprintf(msg, sizeof(msg), "An earlier %s with key %s may have created the"
				    " %s, and the lookup did not answer. Do NOT resubmit: look the key up"
				    " again later (%s %s).", w->tool, key, w->noun, w->lookup, key);
				res->exit_code = CLIENT_EXIT_UNCERTAIN;
				observe(res, false, "SIDE_EFFECT_UNCERTAIN", msg, false, NULL);
				return;
			}
			/* Not found: posting again is safe with the key, but the
			 * tool's policy decides who may do it. */
			bool asked = false, yes = o->approved;
			if (o->replay == CLIENT_REPLAY_ASK && !yes && o->approve != NULL) {
				snprintf(msg, sizeof(msg), "An earlier %s with key %s had an uncertain"
				    " outcome, and the %s is not found. Post it again?", w->tool, key,
				    w->noun);
				asked = true;
				yes = o->approve(o->approve_arg, msg);
			}
			if (o->replay == CLIENT_REPLAY_NEVER ||
			    (o->replay == CLIENT_REPLAY_ASK && !yes)) {
				snprintf(msg, sizeof(msg), "An earlier %s with key %s had an uncertain"
				    " outcome and the lookup does not find the %s (%s %s). Its replay"
				    " policy is %s: it is not posted again %s.", w->tool, key, w->noun,
				    w->lookup, key, replay_names[o->replay],
				    o->replay == CLIENT_REPLAY_NEVER
				        ? "by the client: a person decides (look it up again, then act by"
				          " hand)"
				        : asked ? "(the user was asked and did not approve: declined, or no"
				          " answer came)"
				        : "without the user's confirmation: ask the user, then call again"
				          " approved (--approved)");
				res->exit_code = CLIENT_EXIT_UNCERTAIN;
				observe(res, false, "SIDE_EFFECT_UNCERTAIN", msg, false, NULL);
				return;
			}
			if (o->replay == CLIENT_REPLAY_ASK)
				approved = true; /* noted once the body is made */
		}
	}

	char *body = request_body(o);
	if (body == NULL) {
		res->exit_code = CLIENT_EXIT_FAILED;
		observe(res, false, "TOOL_CRASH", "out of memory", false, NULL);
		return;
	}
	ledger_note(o, key, "planned", res, body);
	if (approved)
		ledger_note(o, key, "approved", res, body);
	ledger_note(o, key, "started", res, body);

	bool maybe_applied = false;
	double retry_cost = 0; /* what the last retry cost the budget */
	struct client_http_reply r = { 0 };
	for (int attempt = 1; attempt <= o->attempts; attempt++) {
		if (o->key_source == CLIENT_KEY_PER_ATTEMPT) {
			uuid_t u;
			uuid_generate_random(u);
			uuid_unparse_lower(u, key);
			snprintf(res->key, sizeof(res->key), "%s", key);
		}
		free(r.body);
		client_http_call(o->url, o->token, "POST", w->path, key[0] ? key : NULL, body,
		    o->timeout_ms, &r);
		res->attempts = attempt;
		res->last_status = r.status;
		if (o->on_attempt != NULL)
			o->on_attempt(o->on_attempt_arg, attempt, key, &r);
		if (r.outcome == CLIENT_HTTP_ANSWERED && r.status >= 200 && r.status < 300) {
			if (o->retry_budget != NULL)
				ob_retry_budget_success(o->retry_budget, retry_cost);
			res->created_id = body_id(res->target, r.body);
			res->replayed = r.replayed;
			snprintf(msg, sizeof(msg), "%s %" PRId64 " %s.", w->thing, res->created_id,
			    r.replayed ? "was already created by an earlier attempt of this call (the"
			                 " stored result was replayed); it exists once"
			               : "was created");
			res->exit_code = CLIENT_EXIT_OK;
			observe(res, true, "OK", msg, false, r.body);
			ledger_note(o, key, "succeeded", res, body);
			goto out;
		}
		if (r.outcome == CLIENT_HTTP_ANSWERED && !retryable_status(r.status)) {
			/* Definitive: with a stable key it also settles earlier attempts. */
			finish_with_status(res, &r);
			ledger_note(o, key, "failed", res, body);
			goto out;
		}
		if (r.outcome == CLIENT_HTTP_LOST ||
		    (r.outcome == CLIENT_HTTP_ANSWERED && ambiguous_status(r.status)))
			maybe_applied = true;
		if (attempt == o->attempts)
			break;
		/* retries are selfish: each is paid from the process's budget,
		 * and a spent budget ends the call with what it has */
		if (o->retry_budget != NULL &&
		    !ob_retry_budget_take(o->retry_budget, r.timed_out, &retry_cost)) {
			res->budget_spent = true;
			break;
		}
		int64_t wait = ob_backoff_full_jitter(o->base_ms, o->cap_ms, (uint32_t)attempt, &rng);
		wait = ob_backoff_at_least(wait, r.retry_after_ms < o->max_retry_after_ms
		        ? r.retry_after_ms : o->max_retry_after_ms, &rng);
		ob_sleep_ms(wait);
	}
	if (maybe_applied) {
		snprintf(msg, sizeof(msg), "%s was sent but its outcome is unknown after %d attempts%s"
		    " (last: %s): the %s MAY ALREADY HAVE BEEN CREATED. Do NOT resubmit. First look"
		    " it up with key %s (%s %s, or GET %s?idempotency_key=...); resubmit only if it"
		    " is not found, and then with the same key.", w->tool, res->attempts,
		    res->budget_spent ? BUDGET_SPENT_NOTE : "",
		    r.outcome == CLIENT_HTTP_ANSWERED ? "an HTTP error" : r.why, w->noun,
		    key[0] ? key : "(none)", w->lookup, key[0] ? key : "(none)", w->path);
		res->exit_code = CLIENT_EXIT_UNCERTAIN;
		observe(res, false, "SIDE_EFFECT_UNCERTAIN", msg, false, NULL);
		ledger_note(o, key, "uncertain", res, body);
	} else {
		snprintf(msg, sizeof(msg), "%s did not reach the %s service after %d attempts%s (%s)."
		    " Nothing was created; it is safe to retry later.", w->tool, w->noun,
		    res->attempts, res->budget_spent ? BUDGET_SPENT_NOTE : "",
		    r.outcome == CLIENT_HTTP_ANSWERED ? "it was overloaded" : r.why);
		res->exit_code = CLIENT_EXIT_FAILED;
		observe(res, false, r.timed_out ? "TIMEOUT" : "TOOL_CRASH", msg, true, NULL);
		ledger_note(o, key, "failed", res, body);
	}
out:
	free(r.body);
	free(body);
}

static struct ob_token_bucket process_budget;
static bool process_budget_ok;
static pthread_once_t process_budget_once = PTHREAD_ONCE_INIT;

static void
process_budget_init(void)
{
	process_budget_ok = ob_token_bucket_init(&process_budget, OB_RETRY_BUDGET_CAPACITY, 0) ==
	    OB_OK;
}

struct ob_token_bucket *
client_retry_budget(void)
{
	pthread_once(&process_budget_once, process_budget_init);
	return process_budget_ok ? &process_budget : NULL;
}

void
client_result_fini(struct client_result *res)
{
	free(res->observation);
	res->observation = NULL;
}
