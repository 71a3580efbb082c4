/*
 * main.c - outbox-notify-sink: a small downstream notification service to
 * point the consumer's webhook at (deploy/chain.sh, docs/consumer.md).
 *
 * It is what a well-behaved notification API does with the key the
 * outbox passes on: POST PATH needs an Idempotency-Key; the first request
 * with a key acts (one "effect": a log line with the key and the body) and
 * answers 200; every later request with that key acts on nothing and is
 * answered 200 with Idempotent-Replayed: true. With --ignore-key it is the
 * careless downstream instead: every request acts, which is what a key
 * that is not honoured costs (docs/guarantees.md).
 *
 * Faults, to watch the chain recover: the first --fail-first requests get
 * --fail-status (with Retry-After: 1) and act on nothing; the next
 * --lose-first requests act and then lose their answer (the connection is
 * closed unanswered), so the consumer cannot know and sends the key again.
 *
 * With --db it keeps its effects in an inbox database instead, through the
 * inbox's SQL contract as a service in any language would (sink_inbox.c):
 * the effect is a row of inbox.notifications, committed with the key's
 * dedup record, and a call whose Outbox-Fence is lower than the fence its
 * message was applied under is refused, 409 stale_fence: a late call of a
 * consumer that lost its claim (issue 33). --ignore-fence is the broken
 * mode that does not look (such a call is answered as a replay).
 *
 * Who frees the records (--db): each record's created_at is the message's
 * enqueue time, from the call's Outbox-Created-At (RFC 3339; malformed:
 * 400, nothing done; absent: the time of receipt, as a consumer from
 * before the header gets); a call whose message is older than
 * --retention-ms by the inbox database's clock is refused, 422
 * older_than_retention (its record may be purged: applying it could apply
 * it twice); and every --purge-interval-ms the main thread deletes the
 * records past the retention (inbox.purge, SINK_PURGE_MAX_ROWS a
 * transaction, again while a call deletes that many).
 *
 * GET /stats answers the counts as JSON (requests, effects, keys, replays,
 * failed, lost, stale, the most requests one key got); with ?key=K also
 * that key's requests and effects. Keys are counted in memory, at most
 * --max-keys (a new key past it gets 507 and acts on nothing).
 *
 * Served by common/httpd.c (the same deadline-keeping server as the
 * producer API): every request runs on the server's one thread, with the
 * one connection of s.inbox, so the request state needs no lock. The
 * purge runs on the main thread, which otherwise only waits for signals,
 * with a connection of its own (s.purger): a purge never delays a request
 * and a request never waits for a purge (inbox.purge skips the rows a
 * request's transaction holds). The two threads share only the purge
 * counts, which are atomic.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <search.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "outbox/clock.h"
#include "outbox/config_rows.h"
#include "outbox/err.h"
#include "outbox/httpd.h"
#include "outbox/log.h"
#include "outbox/program.h"
#include "outbox/ready_file.h"
#include "outbox/sig.h"
#include "sink_inbox.h"

#define SINK_KEY_MAX 255          /* bytes of an Idempotency-Key, as the outbox's */
#define SINK_CONNS_MAX 256        /* open connections */
#define SINK_IDLE_MS 30000        /* keep-alive idle timeout */
#define SINK_HEADER_MS 5000       /* first byte -> end of headers */
#define SINK_REQUEST_MS 10000     /* first byte -> end of body */
#define SINK_WRITE_MS 10000       /* to write one answer */
#define SINK_HEADER_BYTES 16384   /* request line + headers */
#define SINK_LOG_BODY_MAX 512     /* bytes of a body shown in the effect line */
#define SINK_CREATED_AT_MAX 64    /* bytes of an Outbox-Created-At (RFC 3339) */
#define SINK_PURGE_INTERVAL_MAX_MS 86400000 /* --purge-interval-ms: at most a day */

struct sink_config {
	char *http;
	char *path;
	int64_t max_keys;
	int64_t max_body;
	int64_t fail_first;
	int64_t fail_status;
	int64_t lose_first;
	bool ignore_key;
	char *db;
	bool ignore_fence;
	int64_t retention_ms;
	int64_t purge_interval_ms;
	char *ready_file;
	char *log_level;
};

#define OB_CFG_STRUCT struct sink_config

static const struct ob_cfg_opt sink_options[] = {
	OB_CFG_OPT("http", "OUTBOX_SINK_HTTP", OB_CFG_STRING, "http://127.0.0.1:8090", 0, 0, NULL,
	    false, http, "listen on http://HOST:PORT (port 0: any free port, see --ready-file)"),
	OB_CFG_OPT("path", "OUTBOX_SINK_PATH", OB_CFG_STRING, "/notify", 0, 0, NULL, false, path,
	    "the path notifications are POSTed to"),
	OB_CFG_OPT("max-keys", "OUTBOX_SINK_MAX_KEYS", OB_CFG_INT, "100000", 1, 10000000, NULL,
	    false, max_keys, "keys remembered; a new key past it gets 507"),
	OB_CFG_OPT("max-body", "OUTBOX_SINK_MAX_BODY", OB_CFG_SIZE, "1m", 0, 16777216, NULL, false,
	    max_body, "largest request body accepted (larger: 413)"),
	OB_CFG_OPT("fail-first", "OUTBOX_SINK_FAIL_FIRST", OB_CFG_INT, "0", 0, 1000000000, NULL,
	    false, fail_first,
	    "the first N requests get --fail-status and Retry-After: 1, acting on nothing"),
	OB_CFG_OPT("fail-status", "OUTBOX_SINK_FAIL_STATUS", OB_CFG_INT, "503", 400, 599, NULL,
	    false, fail_status, "the status of the --fail-first answers"),
	OB_CFG_OPT("lose-first", "OUTBOX_SINK_LOSE_FIRST", OB_CFG_INT, "0", 0, 1000000000, NULL,
	    false, lose_first,
	    "then N requests act and lose their answer (connection closed unanswered)"),
	OB_CFG_OPT("ignore-key", "OUTBOX_SINK_IGNORE_KEY", OB_CFG_BOOL, "false", 0, 0, NULL, false,
	    ignore_key, "act on every request, as a downstream that ignores the key does"),
	OB_CFG_OPT("db", "OUTBOX_SINK_DB", OB_CFG_STRING, "", 0, 0, NULL, false, db,
	    "keep the effects in this inbox database (outboxctl migrate --schema inbox; a role"
	    " of outbox_consumer) through the inbox's SQL contract, checking each call's"
	    " Outbox-Fence; empty: in memory, by key only"),
	OB_CFG_OPT("ignore-fence", "OUTBOX_SINK_IGNORE_FENCE", OB_CFG_BOOL, "false", 0, 0, NULL,
	    false, ignore_fence, "BROKEN, for tests: with --db, do not check Outbox-Fence (a"
	    " fenced-out caller's late call is answered as a replay)"),
	OB_CFG_OPT("retention-ms", "OUTBOX_SINK_RETENTION_MS", OB_CFG_DURATION,
	    SINK_RETENTION_DEFAULT, SINK_RETENTION_MIN_MS, SINK_RETENTION_MAX_MS, NULL, false,
	    retention_ms, "with --db: a call whose message (Outbox-Created-At) is older than"
	    " this by the inbox database's clock gets 422, nothing done; its record is purged"
	    " once the message is older than this plus 1h and was applied longer ago than"
	    " this (the consumer's --dedup-retention rule)"),
	OB_CFG_OPT("purge-interval-ms", "OUTBOX_SINK_PURGE_INTERVAL_MS", OB_CFG_DURATION, "1m", 0,
	    SINK_PURGE_INTERVAL_MAX_MS, NULL, false, purge_interval_ms, "with --db: how often"
	    " the records past --retention-ms are deleted (inbox.purge, on a connection of its"
	    " own); 0 = never: then something else must call inbox.purge, or the inbox grows"
	    " forever"),
	OB_CFG_OPT_READY_FILE("OUTBOX_SINK_READY_FILE", ready_file),
	OB_CFG_OPT_LOG_LEVEL(log_level),
	OB_CFG_END,
};

static const struct ob_program sink_program = { .events = "sink", .config = {
	.name = "outbox-notify-sink",
	.synopsis = "outbox-notify-sink [--http URL] [--path P] [--db CONNINFO] [--ignore-key]"
	    " [faults]",
	.description = "A downstream notification service for the consumer's webhook:"
	    " POST PATH with an Idempotency-Key acts once per key (a log line),"
	    " later requests with the key are answered as replays, a call whose Outbox-Fence"
	    " is lower than its message's applied one (--db) gets 409, one older than"
	    " --retention-ms (--db) 422, and the records past the retention are purged every"
	    " --purge-interval-ms; GET /stats gives the counts as JSON.",
	.options = sink_options,
} };

struct sink_key {
	char *key;       /* owned; the tree's order */
	long requests;
	long effects;
};

struct sink {
	const struct sink_config *cfg;
	void *keys;      /* tsearch tree of struct sink_key */
	long nkeys;
	struct sink_inbox *inbox; /* --db; NULL: in memory */
	struct sink_inbox *purger; /* --db with a purge interval: the main thread's */
	long requests, effects, replays, failed, lost, refused, stale, mismatched;
	long too_old, created_at_missing;
	long max_per_key;
	long fail_left, lose_left;
	/* written by the main thread (the purge), read by /stats */
	atomic_llong purged, purge_failures;
};

static int
key_cmp(const void *a, const void *b)
{
	return strcmp(((const struct sink_key *)a)->key, ((const struct sink_key *)b)->key);
}

static void
respond_json(struct ob_httpd_req *req, int status, json_t *body, const char *headers)
{
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	struct ob_httpd_res res = {
		.status = text ? status : 500,
		.content_type = "application/json",
		.body = text ? text : "{\"error\":\"out of memory\"}",
		.headers = headers,
	};
	res.body_len = strlen(res.body);
	ob_httpd_respond(req, &res);
	free(text);
	json_decref(body);
}

static void
respond_error(struct ob_httpd_req *req, int status, const char *text, const char *headers)
{
	respond_json(req, status, json_pack("{s:s}", "error", text), headers);
}

/* The key's entry, made when new (NULL when the table is full or out of memory). */
static struct sink_key *
key_entry(struct sink *s, const char *key, bool *full)
{
	struct sink_key probe = { .key = (char *)key };
	void *found = tfind(&probe, &s->keys, key_cmp);

	*full = false;
	if (found != NULL)
		return *(struct sink_key **)found;
	if (s->nkeys >= s->cfg->max_keys) {
		*full = true;
		return NULL;
	}
	struct sink_key *k = calloc(1, sizeof(*k));
	if (k == NULL || (k->key = strdup(key)) == NULL) {
		free(k);
		return NULL;
	}
	if (tsearch(k, &s->keys, key_cmp) == NULL) {
		free(k->key);
		free(k);
		return NULL;
	}
	s->nkeys++;
	return k;
}

static void
replayed(struct sink *s, struct ob_httpd_req *req, const char *key)
{
	s->replays++;
	respond_json(req, 200, json_pack("{s:s,s:b}", "key", key, "replayed", 1),
	    "Idempotent-Replayed: true\r\n");
}

/* The call acted (its effect is made, or committed with --db): count it,
 * log it, answer 200 (or, --lose-first, lose the answer). */
static void
acted(struct sink *s, struct ob_httpd_req *req, const char *key, struct sink_key *k)
{
	char qk[2 * SINK_KEY_MAX + 8], qb[2 * SINK_LOG_BODY_MAX + 8];
	k->effects++;
	s->effects++;
	ob_info("sink.effect", "key=%s effects=%ld body=%s", ob_log_q(key, qk, sizeof qk),
	    k->effects, ob_log_q(req->body_len > SINK_LOG_BODY_MAX ? "(long body)" : req->body,
	    qb, sizeof qb));
	if (s->lose_left > 0) {
		s->lose_left--;
		s->lost++;
		struct ob_httpd_res res = { .status = 200, .drop = true };
		ob_httpd_respond(req, &res);
		return;
	}
	respond_json(req, 200, json_pack("{s:s,s:b}", "key", key, "replayed", 0), NULL);
}

/* A header holding a number 0..INT64_MAX, or -1 when absent; -2 when not
 * such a number. */
static int64_t
header_number(struct ob_httpd_req *req, const char *name)
{
	const char *v = ob_httpd_req_header(req, name);
	if (v == NULL)
		return -1;
	char *end;
	errno = 0;
	long long n = strtoll(v, &end, 10);
	if (v[0] < '0' || v[0] > '9' || *end != '\0' || errno != 0 || n < 0)
		return -2;
	return (int64_t)n;
}

/* An RFC 3339 date-time, YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM),
 * as the consumer sends Outbox-Created-At (UTC, microseconds), into Unix
 * microseconds; digits of the fraction past the sixth are dropped. False
 * when s is not one. The date and time go to strptime and timegm (as
 * consumer/retry_after.c reads a date), after a check of their shape digit
 * by digit (strptime would skip blanks and take short numbers); a day the
 * month does not have (timegm moves it on) is refused by reading it back. */
static bool
parse_rfc3339(const char *s, int64_t *out_us)
{
	static const char shape[] = "dddd-dd-ddTdd:dd:dd";
	for (size_t i = 0; i < sizeof(shape) - 1; i++)
		if (shape[i] == 'd' ? !isdigit((unsigned char)s[i])
		                    : toupper((unsigned char)s[i]) != shape[i])
			return false;
	struct tm tm = { 0 };
	if (strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) != s + 19)
		return false;
	struct tm asked = tm;
	time_t t = timegm(&tm);
	if (asked.tm_sec < 60 && (tm.tm_mday != asked.tm_mday || tm.tm_mon != asked.tm_mon))
		return false;
	const char *p = s + 19;
	int64_t frac = 0;
	if (*p == '.') {
		int n = 0;
		for (p++; isdigit((unsigned char)*p); p++, n++)
			if (n < 6)
				frac = frac * 10 + (*p - '0');
		if (n == 0)
			return false;
		for (; n < 6; n++)
			frac *= 10;
	}
	int64_t offset_s = 0;
	if ((p[0] == 'Z' || p[0] == 'z') && p[1] == '\0') {
		offset_s = 0;
	} else if ((p[0] == '+' || p[0] == '-') && strlen(p) == 6 && isdigit((unsigned char)p[1]) &&
	    isdigit((unsigned char)p[2]) && p[3] == ':' && isdigit((unsigned char)p[4]) &&
	    isdigit((unsigned char)p[5])) {
		int oh = (p[1] - '0') * 10 + (p[2] - '0'), om = (p[4] - '0') * 10 + (p[5] - '0');
		if (oh > 23 || om > 59)
			return false;
		offset_s = (p[0] == '-' ? -1 : 1) * (int64_t)(oh * 3600 + om * 60);
	} else {
		return false;
	}
	*out_us = ((int64_t)t - offset_s) * 1000000 + frac;
	return true;
}

/* --db: the call through the inbox's SQL contract, its fence checked. */
static void
on_notify_db(struct sink *s, struct ob_httpd_req *req, const char *key, struct sink_key *k)
{
	char err[512], qk[2 * SINK_KEY_MAX + 8], qe[1100];
	const char *topic = ob_httpd_req_header(req, "Outbox-Topic");
	struct sink_call call = {
		.topic = topic != NULL && topic[0] != '\0' ? topic : s->cfg->path,
		.key = key,
		.body = req->body != NULL ? req->body : "",
		.body_len = req->body_len,
		.fence = header_number(req, "Outbox-Fence"),
		.ignore_fence = s->cfg->ignore_fence,
		.message_id = header_number(req, "Outbox-Message-Id"),
	};
	if (call.fence == -2 || call.message_id == -2) {
		respond_error(req, 400, "Outbox-Fence and Outbox-Message-Id are whole numbers", NULL);
		return;
	}
	const char *created = ob_httpd_req_header(req, "Outbox-Created-At");
	if (created != NULL && (strlen(created) > SINK_CREATED_AT_MAX ||
	        !parse_rfc3339(created, &call.created_at_us))) {
		respond_error(req, 400, "Outbox-Created-At is not an RFC 3339 time"
		    " (YYYY-MM-DDTHH:MM:SS.ffffffZ)", NULL);
		return;
	}
	call.has_created_at = created != NULL;
	if (created == NULL && s->created_at_missing++ == 0)
		ob_warn("sink.created_at.missing", "key=%s note=%s", ob_log_q(key, qk, sizeof qk),
		    "no Outbox-Created-At: the record keeps the time of receipt and no retention"
		    " check is made (logged once)");
	if (call.message_id < 0)
		call.message_id = 0;
	enum sink_verdict v;
	int64_t applied_fence;
	if (sink_inbox_apply(s->inbox, &call, &v, &applied_fence, err, sizeof err) != OB_OK) {
		ob_warn("sink.db_failed", "key=%s err=%s", ob_log_q(key, qk, sizeof qk),
		    ob_log_q(err, qe, sizeof qe));
		respond_error(req, 503, "the database failed; retry later", "Retry-After: 1\r\n");
		return;
	}
	switch (v) {
	case SINK_APPLIED:
		acted(s, req, key, k);
		return;
	case SINK_DUPLICATE:
		replayed(s, req, key);
		return;
	case SINK_STALE:
		s->stale++;
		ob_info("sink.stale_fence", "key=%s fence=%" PRId64 " applied_fence=%" PRId64,
		    ob_log_q(key, qk, sizeof qk), call.fence, applied_fence);
		respond_json(req, 409, json_pack("{s:s,s:s,s:I,s:I}", "error", "stale_fence",
		    "key", key, "fence", (json_int_t)call.fence, "applied_fence",
		    (json_int_t)applied_fence), NULL);
		return;
	case SINK_TOO_OLD:
		s->too_old++;
		ob_info("sink.too_old", "key=%s created_at=%s retention_ms=%" PRId64,
		    ob_log_q(key, qk, sizeof qk), created, s->cfg->retention_ms);
		respond_json(req, 422, json_pack("{s:s,s:s,s:s,s:I}", "error", "older_than_retention",
		    "key", key, "created_at", created, "retention_ms",
		    (json_int_t)s->cfg->retention_ms), NULL);
		return;
	case SINK_MISMATCH:
		s->mismatched++;
		respond_error(req, 422, "the key was used with another body", NULL);
		return;
	case SINK_BAD_BODY:
		respond_error(req, 400, "the body is not UTF-8 JSON", NULL);
		return;
	case SINK_BUSY:
	case SINK_FAILED:
		respond_error(req, 503, "the key is being applied; retry later", "Retry-After: 1\r\n");
		return;
	}
}

static void
on_notify(struct sink *s, struct ob_httpd_req *req)
{
	const char *key = ob_httpd_req_header(req, "Idempotency-Key");
	char qk[2 * SINK_KEY_MAX + 8];
	bool full;

	if (key == NULL || key[0] == '\0') {
		respond_error(req, 400, "Idempotency-Key is required", NULL);
		return;
	}
	if (strlen(key) > SINK_KEY_MAX) {
		respond_error(req, 400, "Idempotency-Key is over 255 bytes", NULL);
		return;
	}
	struct sink_key *k = key_entry(s, key, &full);
	if (k == NULL) {
		s->refused++;
		respond_error(req, full ? 507 : 500, full ? "key table full (--max-keys)" :
		    "out of memory", NULL);
		return;
	}
	s->requests++;
	if (++k->requests > s->max_per_key)
		s->max_per_key = k->requests;
	if (s->fail_left > 0) {
		s->fail_left--;
		s->failed++;
		ob_info("sink.failed", "key=%s status=%d", ob_log_q(key, qk, sizeof qk),
		    (int)s->cfg->fail_status);
		respond_error(req, (int)s->cfg->fail_status, "failing on purpose (--fail-first)",
		    "Retry-After: 1\r\n");
		return;
	}
	if (s->inbox != NULL) {
		on_notify_db(s, req, key, k);
		return;
	}
	if (k->effects > 0 && !s->cfg->ignore_key) {
		replayed(s, req, key);
		return;
	}
	acted(s, req, key, k);
}

static void
on_stats(struct sink *s, struct ob_httpd_req *req)
{
	json_t *o = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:b,s:b,s:I,s:I,s:I,s:I}",
	    "requests", (json_int_t)s->requests, "effects", (json_int_t)s->effects,
	    "keys", (json_int_t)s->nkeys, "replays", (json_int_t)s->replays,
	    "failed", (json_int_t)s->failed, "lost", (json_int_t)s->lost,
	    "refused", (json_int_t)s->refused, "stale", (json_int_t)s->stale,
	    "mismatched", (json_int_t)s->mismatched, "max_requests_per_key",
	    (json_int_t)s->max_per_key, "ignore_key", s->cfg->ignore_key, "db",
	    s->inbox != NULL, "too_old", (json_int_t)s->too_old, "created_at_missing",
	    (json_int_t)s->created_at_missing, "purged", (json_int_t)atomic_load(&s->purged),
	    "purge_failures", (json_int_t)atomic_load(&s->purge_failures));

	if (o != NULL && req->query != NULL && strncmp(req->query, "key=", 4) == 0) {
		/* the key as given, not URL-decoded: keys here are plain text */
		struct sink_key probe = { .key = (char *)req->query + 4 };
		void *found = tfind(&probe, &s->keys, key_cmp);
		const struct sink_key *k = found ? *(struct sink_key **)found : NULL;
		json_object_set_new(o, "key_requests", json_integer(k ? k->requests : 0));
		json_object_set_new(o, "key_effects", json_integer(k ? k->effects : 0));
	}
	respond_json(req, 200, o, "Cache-Control: no-store\r\n");
}

static void
handle(void *arg, struct ob_httpd_req *req)
{
	struct sink *s = arg;
	bool is_notify = strcmp(req->path, s->cfg->path) == 0;
	bool is_stats = strcmp(req->path, "/stats") == 0;

	if (!is_notify && !is_stats) {
		respond_error(req, 404, "no such path", NULL);
		return;
	}
	if (is_notify && strcmp(req->method, "POST") != 0) {
		respond_error(req, 405, "POST only", "Allow: POST\r\n");
		return;
	}
	if (is_stats && strcmp(req->method, "GET") != 0) {
		respond_error(req, 405, "GET only", "Allow: GET\r\n");
		return;
	}
	if (is_notify)
		on_notify(s, req);
	else
		on_stats(s, req);
}

/* One purge pass on the main thread: inbox.purge again while a call
 * deletes SINK_PURGE_MAX_ROWS (each its own transaction), until a stop is
 * asked. One line when it deleted something; a failure is logged once,
 * when a run of failures starts, and its end once (the next pass tries
 * again, reconnecting when the connection broke); the requests go on
 * meanwhile. */
static void
purge_pass(struct sink *s, long long *failing)
{
	char err[512], qe[1100];
	int64_t total = 0, n = SINK_PURGE_MAX_ROWS;
	int calls = 0;
	while (n == SINK_PURGE_MAX_ROWS && ob_sig_stops() == 0) {
		if (sink_inbox_purge(s->purger, &n, err, sizeof err) != OB_OK) {
			atomic_fetch_add(&s->purge_failures, 1);
			if ((*failing)++ == 0)
				ob_warn("sink.purge.failed", "retention_ms=%" PRId64 " err=%s",
				    s->cfg->retention_ms, ob_log_q(err, qe, sizeof qe));
			break;
		}
		calls++;
		total += n;
		atomic_fetch_add(&s->purged, (long long)n);
	}
	if (calls > 0 && *failing > 0) {
		ob_info("sink.purge.recovered", "failures=%lld", *failing);
		*failing = 0;
	}
	if (total > 0)
		ob_info("sink.purge.deleted", "rows=%" PRId64 " calls=%d retention_ms=%" PRId64,
		    total, calls, s->cfg->retention_ms);
}

static void
key_free(void *p)
{
	struct sink_key *k = p;
	free(k->key);
	free(k);
}

int
main(int argc, char **argv)
{
	struct sink_config cfg = { 0 };
	struct sink s = { .cfg = &cfg };
	struct ob_httpd *srv = NULL;
	char err[512], url[300];
	int code = ob_program_start(&sink_program, &cfg, argc, argv, NULL);

	if (code >= 0)
		return code;
	code = 2;
	if (cfg.path[0] != '/' || strcmp(cfg.path, "/stats") == 0) {
		fprintf(stderr, "outbox-notify-sink: --path must start with '/' and not be /stats\n");
		goto out;
	}
	bool db = cfg.db != NULL && cfg.db[0] != '\0';
	if (db && cfg.ignore_key) {
		fprintf(stderr, "outbox-notify-sink: --ignore-key acts on every request; with --db"
		    " every call is deduplicated by its key: choose one\n");
		goto out;
	}
	if (!db && cfg.ignore_fence) {
		fprintf(stderr, "outbox-notify-sink: --ignore-fence needs --db (without it no fence"
		    " is checked anyway)\n");
		goto out;
	}
	code = 1;
	if (db && (sink_inbox_open(cfg.db, cfg.retention_ms, &s.inbox, err, sizeof err) != OB_OK ||
	        (cfg.purge_interval_ms > 0 &&
	            sink_inbox_open(cfg.db, cfg.retention_ms, &s.purger, err, sizeof err) != OB_OK))) {
		fprintf(stderr, "outbox-notify-sink: --db: %s\n", err);
		goto out;
	}
	if (ob_sig_init("outbox-notify-sink", err, sizeof err) != OB_OK) {
		fprintf(stderr, "outbox-notify-sink: %s\n", err);
		goto out;
	}
	s.fail_left = cfg.fail_first;
	s.lose_left = cfg.lose_first;
	struct ob_httpd_config hc = {
		.url = cfg.http,
		.name = "sink",
		.limits = {
			.max_conns = SINK_CONNS_MAX,
			.idle_timeout_ms = SINK_IDLE_MS,
			.header_timeout_ms = SINK_HEADER_MS,
			.request_timeout_ms = SINK_REQUEST_MS,
			.write_timeout_ms = SINK_WRITE_MS,
			.max_header = SINK_HEADER_BYTES,
			.max_body = (size_t)cfg.max_body,
		},
		.handler = handle,
		.arg = &s,
	};
	if (ob_httpd_start(&hc, &srv, err, sizeof err) != OB_OK) {
		fprintf(stderr, "outbox-notify-sink: %s\n", err);
		goto out;
	}
	/* the URL with the port bound, whatever --http's host was */
	const char *host = strstr(cfg.http, "://") ? strstr(cfg.http, "://") + 3 : cfg.http;
	size_t hostlen = strcspn(host, host[0] == '[' ? "]" : ":/");
	if (host[0] == '[')
		hostlen++;
	snprintf(url, sizeof url, "http://%.*s:%d%s", (int)hostlen, host, ob_httpd_port(srv),
	    cfg.path);
	ob_info("sink.listening", "url=%s ignore_key=%s db=%s ignore_fence=%s fail_first=%lld"
	    " lose_first=%lld retention_ms=%lld purge_interval_ms=%lld", url,
	    cfg.ignore_key ? "true" : "false", db ? "true" : "false",
	    cfg.ignore_fence ? "true" : "false", (long long)cfg.fail_first,
	    (long long)cfg.lose_first, (long long)cfg.retention_ms,
	    (long long)cfg.purge_interval_ms);
	if (db && s.purger == NULL)
		ob_warn("sink.purge.off", "note=%s", "--purge-interval-ms 0: nothing here deletes"
		    " the inbox's records; call inbox.purge elsewhere or it grows forever");
	code = 0;
	if (cfg.ready_file != NULL && ob_ready_file_write(cfg.ready_file, url, err, sizeof err)) {
		fprintf(stderr, "outbox-notify-sink: %s\n", err);
		code = 1;
	}
	/* the main thread: signals, and the purge (the first pass at once: a
	 * sink restarted more often than the interval still frees) */
	int64_t next_purge = ob_mono_ms();
	long long failing = 0;
	while (code == 0 && ob_sig_stops() == 0) {
		int64_t wait = -1;
		if (s.purger != NULL) {
			int64_t now = ob_mono_ms();
			if (now >= next_purge) {
				purge_pass(&s, &failing);
				next_purge = ob_mono_ms() + cfg.purge_interval_ms;
				continue;
			}
			wait = next_purge - now;
		}
		ob_sig_wait(wait);
	}
	ob_httpd_stop(srv);
	ob_info("sink.stopped", "requests=%ld effects=%ld keys=%ld", s.requests, s.effects,
	    s.nkeys);
	tdestroy(s.keys, key_free);
out:
	sink_inbox_close(s.purger);
	sink_inbox_close(s.inbox);
	ob_cfg_free(sink_options, &cfg);
	return code;
}
