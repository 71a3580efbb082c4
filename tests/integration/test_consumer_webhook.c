/*
 * test_consumer_webhook.c - the webhook handler against a real HTTP server
 * started by the test (tests/support/webhook_target.c), a running
 * outbox-consumer and a real PostgreSQL: the key is passed on downstream,
 * 2xx/4xx/5xx/timeout/lost-response map to applied/reject/retry with the
 * SAME key re-sent, a crashed holder's claim is taken over only after its
 * lease (token bumped), and a stalled holder's late completion is fenced
 * out. Broken mode (--no-dedup: no claim) first shows the second call.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>

#include "outbox/buf.h"
#include "outbox/err.h"
#include "outbox/wire.h"
#include "testsupport.h"
#include "webhook_sign.h"
#include "ts_consumer.h"
#include "webhook_target.h"

static pid_t
start_webhook_consumer(const char *db, const char *url, const char *hook, char *log,
    char *const extra[])
{
	const char *webhook[] = { "--handler", "webhook", "--webhook-url", hook, "--log-level",
		"debug", NULL };
	const char *args[40];
	return ts_consumer_spawn(log, db, url,
	    ts_args_cat(args, 40, webhook, (const char *const *)extra));
}

struct env {
	char db[TS_CONNINFO_MAX], url[256], hook[256], log[256];
	struct wt_target *target;
	PGconn *conn;
};

static void
env_init(struct env *e, const char *tag)
{
	ts_db_create(tag, "inbox", e->db, sizeof(e->db));
	ts_ipc_url(tag, e->url, sizeof(e->url));
	e->target = wt_start(e->hook, sizeof(e->hook));
	ck_assert_ptr_nonnull(e->target);
	e->conn = ts_connect(e->db);
}

static void
env_fini(struct env *e)
{
	PQfinish(e->conn);
	wt_stop(e->target);
}

START_TEST(test_webhook_applied_once)
{
	struct env e;
	char detail[512], h[256];
	env_init(&e, "wh");
	pid_t pid = start_webhook_consumer(e.db, e.url, e.hook, e.log, NULL);
	struct ts_consumer_conn c;
	ts_consumer_open(&c, e.url);
	struct ob_wire_msg m = ts_consumer_msg(42, "report.created", "wh-1", "{\"title\":\"crash\"}");
	ck_assert_int_eq(ts_consumer_call1(&c, m, detail, sizeof(detail)), OB_WIRE_APPLIED);
	ck_assert_msg(strstr(detail, "201") != NULL, "%s", detail);
	ck_assert_int_eq(wt_requests(e.target, "wh-1"), 1);
	wt_last_header(e.target, "Outbox-Topic", h, sizeof(h));
	ck_assert_str_eq(h, "report.created");
	wt_last_header(e.target, "Outbox-Fence", h, sizeof(h));
	ck_assert_str_eq(h, "1");
	wt_last_header(e.target, "Outbox-Message-Id", h, sizeof(h));
	ck_assert_str_eq(h, "42");
	wt_last_header(e.target, "Content-Type", h, sizeof(h));
	ck_assert_str_eq(h, "application/json");
	/* The claim is done, with the downstream status and body stored. */
	ck_assert_int_eq(ts_query_int(e.conn, "SELECT count(*) FROM inbox.webhook_calls"
	    " WHERE idempotency_key = 'wh-1' AND state = 'done' AND response_status = 201"
	    " AND response_body LIKE '%created%' AND fence = 1"), 1);
	ck_assert_int_eq(ts_query_int(e.conn,
	    "SELECT count(*) FROM inbox.processed WHERE idempotency_key = 'wh-1'"), 1);
	/* Redelivered: duplicate, no second call. */
	ck_assert_int_eq(ts_consumer_call1(&c, m, NULL, 0), OB_WIRE_DUPLICATE);
	ck_assert_int_eq(wt_requests(e.target, "wh-1"), 1);
	/* Another payload under the same key: 422 case, no call. */
	ck_assert_int_eq(ts_consumer_call1(&c, ts_consumer_msg(43, "report.created", "wh-1", "{}"), detail,
	    sizeof(detail)), OB_WIRE_REJECT);
	ck_assert_str_eq(detail, "idempotency key reused with a different payload");
	ck_assert_int_eq(wt_requests(e.target, "wh-1"), 1);
	/* A key that cannot be a header value: rejected, nothing sent. */
	ck_assert_int_eq(ts_consumer_call1(&c, ts_consumer_msg(44, "t", "bad\r\nX-Injected: 1", "{}"), NULL, 0),
	    OB_WIRE_REJECT);
	ck_assert_int_eq(wt_total(e.target), 1);
	ts_consumer_close(&c);
	ts_stop(pid, SIGTERM);
	env_fini(&e);
}
END_TEST

/* The reply is dropped after COMMIT and the message redelivered: broken
 * mode calls downstream twice, the real mode once. */
static int
drop_reply_calls(bool dedup)
{
	struct env e;
	env_init(&e, dedup ? "whdrop" : "whdropb");
	char *extra[] = { "--fault-drop-reply", "1", dedup ? NULL : "--no-dedup", NULL };
	pid_t pid = start_webhook_consumer(e.db, e.url, e.hook, e.log, extra);
	struct ts_consumer_conn c;
	ts_consumer_open(&c, e.url);
	struct ob_wire_msg m = ts_consumer_msg(1, "t", "drop-1", "{}");
	struct ts_consumer_reply r;
	ts_consumer_send(&c, &m, 1);
	ck_assert_int_eq(ts_consumer_recv(&c, &r, 3000), NNG_ETIMEDOUT); /* no reply */
	ts_consumer_close(&c);
	ts_consumer_open(&c, e.url);
	int st = ts_consumer_call1(&c, m, NULL, 0);
	ck_assert(st == OB_WIRE_APPLIED || st == OB_WIRE_DUPLICATE);
	int calls = wt_requests(e.target, "drop-1");
	ts_consumer_close(&c);
	ts_stop(pid, SIGTERM);
	env_fini(&e);
	return calls;
}

START_TEST(test_webhook_redelivery)
{
	ck_assert_int_eq(drop_reply_calls(false), 2);
	ck_assert_int_eq(drop_reply_calls(true), 1);
}
END_TEST

START_TEST(test_webhook_failures_resend_same_key)
{
	struct env e;
	char detail[512], fences[256];
	env_init(&e, "whfail");
	char *extra[] = { "--webhook-timeout", "400ms", NULL };
	pid_t pid = start_webhook_consumer(e.db, e.url, e.hook, e.log, extra);
	struct ts_consumer_conn c;
	ts_consumer_open(&c, e.url);

	/* 5xx twice: retry, retry, then applied; one effect downstream. */
	struct ob_wire_msg m = ts_consumer_msg(1, "t", "f-5xx", "{}");
	wt_fail_next(e.target, 2, 503);
	ck_assert_int_eq(ts_consumer_call1(&c, m, detail, sizeof(detail)), OB_WIRE_RETRY);
	ck_assert_msg(strstr(detail, "503") != NULL, "%s", detail);
	ck_assert_int_eq(ts_consumer_call1(&c, m, NULL, 0), OB_WIRE_RETRY);
	ck_assert_int_eq(ts_consumer_call1(&c, m, NULL, 0), OB_WIRE_APPLIED);
	ck_assert_int_eq(wt_requests(e.target, "f-5xx"), 3);
	ck_assert_int_eq(wt_effects(e.target, "f-5xx"), 1);
	/* Every attempt carried the same key and a higher token. */
	wt_fences(e.target, "f-5xx", fences, sizeof(fences));
	ck_assert_str_eq(fences, "1,2,3");

	/* Timeout (downstream acted, answered too late): retry, then the same
	 * key again, which downstream recognises. */
	m = ts_consumer_msg(2, "t", "f-timeout", "{}");
	wt_hold_next(e.target, 1, 1500);
	ck_assert_int_eq(ts_consumer_call1(&c, m, detail, sizeof(detail)), OB_WIRE_RETRY);
	ck_assert_msg(strstr(detail, "timed out") != NULL, "%s", detail);
	ck_assert_int_eq(ts_consumer_call1(&c, m, NULL, 0), OB_WIRE_APPLIED);
	ck_assert_int_eq(wt_requests(e.target, "f-timeout"), 2);
	ck_assert_int_eq(wt_effects(e.target, "f-timeout"), 1);

	/* Response lost after downstream acted: retry, then applied, once. */
	m = ts_consumer_msg(3, "t", "f-lost", "{}");
	wt_lose_next(e.target, 1);
	ck_assert_int_eq(ts_consumer_call1(&c, m, detail, sizeof(detail)), OB_WIRE_RETRY);
	ck_assert_int_eq(ts_consumer_call1(&c, m, NULL, 0), OB_WIRE_APPLIED);
	ck_assert_int_eq(wt_requests(e.target, "f-lost"), 2);
	ck_assert_int_eq(wt_effects(e.target, "f-lost"), 1);

	/* 4xx: permanent, rejected with downstream's answer, nothing recorded. */
	m = ts_consumer_msg(4, "t", "f-4xx", "{}");
	wt_fail_next(e.target, 1, 422);
	ck_assert_int_eq(ts_consumer_call1(&c, m, detail, sizeof(detail)), OB_WIRE_REJECT);
	ck_assert_msg(strstr(detail, "422") != NULL, "%s", detail);
	ck_assert_int_eq(ts_query_int(e.conn,
	    "SELECT count(*) FROM inbox.processed WHERE idempotency_key = 'f-4xx'"), 0);

	/* 4xx that mean "later": 429 (a burst limit), 409 (the same key still
	 * in flight downstream), and any 4xx with a Retry-After: retry, the
	 * claim released, then the same key again, applied once. */
	static const struct {
		int status;
		const char *retry_after;
	} later[] = { { 429, NULL }, { 409, NULL }, { 408, NULL }, { 429, "2" },
		{ 403, "Wed, 21 Oct 2026 07:28:00 GMT" } };
	for (size_t i = 0; i < sizeof later / sizeof later[0]; i++) {
		char key[32];
		snprintf(key, sizeof(key), "f-later-%zu", i);
		m = ts_consumer_msg(10 + i, "t", key, "{}");
		wt_fail_next_retry_after(e.target, 1, later[i].status, later[i].retry_after);
		ck_assert_int_eq(ts_consumer_call1(&c, m, detail, sizeof(detail)), OB_WIRE_RETRY);
		ck_assert_msg(strstr(detail, "retry later") != NULL, "%d: %s", later[i].status, detail);
		if (later[i].retry_after != NULL)
			ck_assert_msg(strstr(detail, later[i].retry_after) != NULL, "%s", detail);
		ck_assert_int_eq(ts_consumer_call1(&c, m, NULL, 0), OB_WIRE_APPLIED);
		ck_assert_int_eq(wt_requests(e.target, key), 2);
		ck_assert_int_eq(wt_effects(e.target, key), 1);
	}
	/* A 4xx without Retry-After other than those: permanent (above, 422). */
	m = ts_consumer_msg(20, "t", "f-403", "{}");
	wt_fail_next(e.target, 1, 403);
	ck_assert_int_eq(ts_consumer_call1(&c, m, detail, sizeof(detail)), OB_WIRE_REJECT);

	/* Downstream not there at all: connection error, retry. */
	wt_stop(e.target);
	e.target = NULL;
	ck_assert_int_eq(ts_consumer_call1(&c, ts_consumer_msg(5, "t", "f-down", "{}"), detail, sizeof(detail)),
	    OB_WIRE_RETRY);
	ck_assert_msg(strstr(detail, "failed") != NULL, "%s", detail);
	ts_consumer_close(&c);
	ts_stop(pid, SIGTERM);
	ck_assert(ts_log_wait(e.log, "webhook_calls=", 1, 1000) >= 1);
	PQfinish(e.conn);
}
END_TEST

START_TEST(test_webhook_crash_takeover)
{
	struct env e;
	char fences[256], log_b[256];
	env_init(&e, "whcrash");
	/* A dies right after downstream acted, before recording anything. */
	char *die[] = { "--fault-die-after-call", "1", "--webhook-lease", "2s",
		"--webhook-timeout", "1s", NULL };
	pid_t a = start_webhook_consumer(e.db, e.url, e.hook, e.log, die);
	struct ts_consumer_conn c;
	ts_consumer_open(&c, e.url);
	struct ob_wire_msg m = ts_consumer_msg(1, "t", "crash-1", "{}");
	ts_consumer_send(&c, &m, 1);
	ck_assert_int_eq(ts_wait_exit(a, 30000), 128 + SIGKILL);
	ts_consumer_close(&c);
	ck_assert_int_eq(wt_effects(e.target, "crash-1"), 1);
	ck_assert_int_eq(ts_query_int(e.conn, "SELECT count(*) FROM inbox.webhook_calls"
	    " WHERE idempotency_key = 'crash-1' AND state = 'started' AND fence = 1"), 1);

	/* B while A's lease is live: busy, retry, nothing sent. */
	char url_b[256];
	ts_ipc_url("whcrash-b", url_b, sizeof(url_b));
	char *plain[] = { "--webhook-lease", "2s", "--webhook-timeout", "1s", NULL };
	pid_t b = start_webhook_consumer(e.db, url_b, e.hook, log_b, plain);
	ts_consumer_open(&c, url_b);
	/* ... and asked to come back when A's lease ends (retry_after_ms),
	 * not to burn attempts before a takeover is possible */
	struct ts_consumer_reply r;
	ts_consumer_send_v(&c, 2, &m, 1);
	ck_assert_int_eq(ts_consumer_recv(&c, &r, TS_CONSUMER_REPLY_TIMEOUT_MS), 0);
	ck_assert_uint_eq(r.rep.count, 1);
	ck_assert_int_eq(r.rep.results[0].status, OB_WIRE_RETRY);
	ck_assert_msg(memmem(r.rep.results[0].detail, r.rep.results[0].detail_len, "in flight",
	    9) != NULL, "%.*s", (int)r.rep.results[0].detail_len, r.rep.results[0].detail);
	ck_assert_msg(r.rep.results[0].retry_after_ms > 0 &&
	    r.rep.results[0].retry_after_ms <= 2000, "retry_after_ms %u",
	    r.rep.results[0].retry_after_ms);
	ts_consumer_reply_fini(&r);
	ck_assert_int_eq(wt_requests(e.target, "crash-1"), 1);
	/* After the lease: taken over with the token bumped, same key sent. */
	ck_assert_int_eq(ts_wait_value(e.conn, "SELECT count(*) FROM inbox.webhook_calls"
	    " WHERE lease_until < now()", 1, 10000), 1);
	ck_assert_int_eq(ts_consumer_call1(&c, m, NULL, 0), OB_WIRE_APPLIED);
	wt_fences(e.target, "crash-1", fences, sizeof(fences));
	ck_assert_str_eq(fences, "1,2");
	ck_assert_int_eq(wt_effects(e.target, "crash-1"), 1);
	ck_assert_int_eq(ts_query_int(e.conn, "SELECT count(*) FROM inbox.webhook_calls"
	    " WHERE idempotency_key = 'crash-1' AND state = 'done' AND fence = 2"), 1);
	ts_consumer_close(&c);
	ts_stop(b, SIGTERM);
	ck_assert(ts_log_wait(log_b, "consumer.webhook.takeover", 1, 1000) >= 1);
	env_fini(&e);
}
END_TEST

/* A stalls 4 s after its call returned, before recording it; its lease is
 * 1 s. A's lease runs out while it stalls; B takes the key over (token 2)
 * and its call fails, so B gives the claim up again. Then A wakes up and
 * records its call with token 1. fencing false: both consumers run with
 * the BROKEN --no-fencing. */
static void
stale_holder_run(bool fencing)
{
	struct env e;
	char detail[512], fences[256], log_b[256], url_b[256];
	env_init(&e, fencing ? "whstale" : "whstalenf");
	char *stall[] = { "--fault-stall-after-call", "1", "--fault-slow-ms", "4s",
		"--webhook-lease", "1s", "--webhook-timeout", "500ms",
		fencing ? NULL : "--no-fencing", NULL };
	pid_t a = start_webhook_consumer(e.db, e.url, e.hook, e.log, stall);
	ts_ipc_url(fencing ? "whstale-b" : "whstalenf-b", url_b, sizeof(url_b));
	char *plain[] = { "--webhook-lease", "1s", "--webhook-timeout", "500ms",
		fencing ? NULL : "--no-fencing", NULL };
	pid_t b = start_webhook_consumer(e.db, url_b, e.hook, log_b, plain);
	struct ts_consumer_conn ca, cb;
	ts_consumer_open(&ca, e.url);
	ts_consumer_open(&cb, url_b);
	struct ob_wire_msg m = ts_consumer_msg(1, "t", "stale-1", "{}");
	ts_consumer_send(&ca, &m, 1);
	ck_assert(ts_log_wait(e.log, "fault=consumer.webhook.stall_after_call", 1, 20000) >= 1);
	ck_assert_int_eq(ts_wait_value(e.conn, "SELECT count(*) FROM inbox.webhook_calls"
	    " WHERE lease_until < now()", 1, 10000), 1);
	wt_fail_next(e.target, 1, 500);
	ck_assert_int_eq(ts_consumer_call1(&cb, m, NULL, 0), OB_WIRE_RETRY);
	int status = ts_consumer_recv1(&ca, detail, sizeof(detail));
	if (!fencing) {
		/* The stale holder's write landed, over B's claim: applied, with
		 * B's token on the row. */
		ck_assert_msg(status == OB_WIRE_APPLIED, "%d %s", status, detail);
		ck_assert_int_eq(ts_query_int(e.conn,
		    "SELECT count(*) FROM inbox.processed WHERE idempotency_key = 'stale-1'"), 1);
		ck_assert_int_eq(ts_query_int(e.conn, "SELECT count(*) FROM inbox.webhook_calls"
		    " WHERE idempotency_key = 'stale-1' AND state = 'done' AND fence = 2"), 1);
		ck_assert_int_eq(ts_log_count(e.log, "consumer.webhook.fenced_out"), 0);
	} else {
		/* Refused: fenced out, nothing recorded. */
		ck_assert_int_eq(status, OB_WIRE_RETRY);
		ck_assert_msg(strstr(detail, "fenced out") != NULL, "%s", detail);
		ck_assert_int_eq(ts_query_int(e.conn,
		    "SELECT count(*) FROM inbox.processed WHERE idempotency_key = 'stale-1'"), 0);
		/* The next delivery completes it, token 3, one effect downstream. */
		ck_assert_int_eq(ts_consumer_call1(&cb, m, NULL, 0), OB_WIRE_APPLIED);
		wt_fences(e.target, "stale-1", fences, sizeof(fences));
		ck_assert_str_eq(fences, "1,2,3");
		ck_assert_int_eq(wt_effects(e.target, "stale-1"), 1);
		ck_assert_int_eq(ts_query_int(e.conn, "SELECT count(*) FROM inbox.webhook_calls"
		    " WHERE idempotency_key = 'stale-1' AND state = 'done' AND fence = 3"), 1);
	}
	ts_consumer_close(&ca);
	ts_consumer_close(&cb);
	ts_stop(a, SIGTERM);
	ts_stop(b, SIGTERM);
	if (fencing)
		ck_assert(ts_log_wait(e.log, "consumer.webhook.fenced_out", 1, 1000) >= 1);
	env_fini(&e);
}

START_TEST(test_webhook_stale_holder_fenced)
{
	stale_holder_run(false); /* broken first: the stale write lands */
	stale_holder_run(true);
}
END_TEST

START_TEST(test_webhook_config_refused)
{
	char out[2048];
	char *no_url[] = { "outbox-consumer", "--db", "dbname=x", "--handler", "webhook", NULL };
	ck_assert_int_eq(ts_run(no_url, NULL, out, sizeof(out), 20000), 2);
	ck_assert_msg(strstr(out, "--webhook-url") != NULL, "%s", out);
	char *lease[] = { "outbox-consumer", "--db", "dbname=x", "--handler", "webhook",
		"--webhook-url", "http://127.0.0.1:1/x", "--webhook-timeout", "5s",
		"--webhook-lease", "2s", NULL };
	ck_assert_int_eq(ts_run(lease, NULL, out, sizeof(out), 20000), 2);
	ck_assert_msg(strstr(out, "--webhook-lease") != NULL, "%s", out);
	char *scheme[] = { "outbox-consumer", "--db", "dbname=x", "--handler", "webhook",
		"--webhook-url", "ftp://x/y", NULL };
	ck_assert_int_eq(ts_run(scheme, NULL, out, sizeof(out), 20000), 2);
	/* the broken switch means nothing to the record handler: refused */
	char *nofence[] = { "outbox-consumer", "--db", "dbname=x", "--no-fencing", NULL };
	ck_assert_int_eq(ts_run(nofence, NULL, out, sizeof(out), 20000), 2);
	ck_assert_msg(strstr(out, "--no-fencing applies to --handler webhook only") != NULL, "%s",
	    out);
	/* the longest Retry-After passed on has a ceiling (the wire's u32 ms) */
	char *ra[] = { "outbox-consumer", "--db", "dbname=x", "--handler", "webhook",
		"--webhook-url", "http://127.0.0.1:1/x", "--webhook-max-retry-after", "8d", NULL };
	ck_assert_int_eq(ts_run(ra, NULL, out, sizeof(out), 20000), 2);
	ck_assert_msg(strstr(out, "webhook-max-retry-after") != NULL, "%s", out);
}
END_TEST

/* One message through the webhook, the downstream answering status with
 * Retry-After ra first: the reply's status and retry_after_ms, in the
 * reply version of a request of version v. */
static uint32_t
retry_after_of(struct env *e, struct ts_consumer_conn *c, int v, uint64_t id, const char *key,
    int status, const char *ra, int *st)
{
	struct ts_consumer_reply r;
	struct ob_wire_msg m = ts_consumer_msg(id, "t", key, "{}");
	wt_fail_next_retry_after(e->target, 1, status, ra);
	ts_consumer_send_v(c, v, &m, 1);
	ck_assert_int_eq(ts_consumer_recv(c, &r, TS_CONSUMER_REPLY_TIMEOUT_MS), 0);
	ck_assert_int_eq(r.rep.frame_err, 0);
	ck_assert_uint_eq(r.rep.version, v); /* answered in the version asked for */
	ck_assert_uint_eq(r.rep.count, 1);
	*st = r.rep.results[0].status;
	uint32_t ms = r.rep.results[0].retry_after_ms;
	ts_consumer_reply_fini(&r);
	return ms;
}

/* Retry-After on a retried answer is passed on to the relay as
 * retry_after_ms (wire version 2): delta-seconds and HTTP-date, on 429 and
 * 503, cut to --webhook-max-retry-after, a past date 0, garbage ignored
 * with a warn line; a version 1 request gets a version 1 reply, without
 * it. */
START_TEST(test_webhook_retry_after_passed_on)
{
	struct env e;
	int st;
	env_init(&e, "whra");
	char *extra[] = { "--webhook-max-retry-after", "100s", NULL };
	pid_t pid = start_webhook_consumer(e.db, e.url, e.hook, e.log, extra);
	struct ts_consumer_conn c;
	ts_consumer_open(&c, e.url);

	ck_assert_uint_eq(retry_after_of(&e, &c, 2, 1, "ra-429", 429, "3", &st), 3000);
	ck_assert_int_eq(st, OB_WIRE_RETRY);
	ck_assert_uint_eq(retry_after_of(&e, &c, 2, 2, "ra-503", 503, "7", &st), 7000);
	ck_assert_int_eq(st, OB_WIRE_RETRY);
	/* no header: no wish */
	ck_assert_uint_eq(retry_after_of(&e, &c, 2, 3, "ra-none", 429, NULL, &st), 0);
	ck_assert_int_eq(st, OB_WIRE_RETRY);
	/* over the cap: cut to it */
	ck_assert_uint_eq(retry_after_of(&e, &c, 2, 4, "ra-cap", 429, "86400", &st), 100000);
	/* an HTTP-date 30 s ahead: about 30 s (the second it crosses, and the
	 * call's own time, may take one or two off) */
	char date[64];
	time_t ahead = time(NULL) + 30;
	struct tm tm;
	strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", gmtime_r(&ahead, &tm));
	uint32_t ms = retry_after_of(&e, &c, 2, 5, "ra-date", 503, date, &st);
	ck_assert_msg(ms >= 27000 && ms <= 30000, "%s: %u ms", date, ms);
	/* a date in the past: retry now (0), still a retry */
	ck_assert_uint_eq(retry_after_of(&e, &c, 2, 6, "ra-past", 429,
	    "Sun, 06 Nov 1994 08:49:37 GMT", &st), 0);
	ck_assert_int_eq(st, OB_WIRE_RETRY);
	/* garbage: ignored, one warn line, the relay's backoff applies */
	ck_assert_uint_eq(retry_after_of(&e, &c, 2, 7, "ra-junk", 429, "soon", &st), 0);
	ck_assert_int_eq(st, OB_WIRE_RETRY);
	ck_assert_int_eq(ts_log_wait(e.log, "consumer.webhook.bad_retry_after", 1, 10000), 1);
	ck_assert_int_eq(ts_log_count(e.log, "retry_after=soon"), 1);
	/* an old relay (version 1 request): a version 1 reply, no field */
	ck_assert_uint_eq(retry_after_of(&e, &c, 1, 8, "ra-v1", 429, "3", &st), 0);
	ck_assert_int_eq(st, OB_WIRE_RETRY);
	/* and each key still goes through once it is let through */
	ck_assert_int_eq(ts_consumer_call1(&c, ts_consumer_msg(1, "t", "ra-429", "{}"), NULL, 0),
	    OB_WIRE_APPLIED);
	ck_assert_int_eq(wt_requests(e.target, "ra-429"), 2);
	ck_assert_int_eq(wt_effects(e.target, "ra-429"), 1);
	ts_consumer_close(&c);
	ts_stop(pid, SIGTERM);
	env_fini(&e);
}
END_TEST


/* A raw POST to the target with Outbox-Signature sig over body: what a
 * forger or a replayer sends. Returns the status. */
static int
raw_signed_post(const char *hook, const char *key, const char *sig, const char *body)
{
	char req[2048], out[2048];
	const char *colon = strrchr(hook, ':');
	ck_assert_ptr_nonnull(colon);
	int port = atoi(colon + 1);
	const char *path = strchr(colon, '/');
	int n = snprintf(req, sizeof(req), "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
	    "Idempotency-Key: %s\r\nOutbox-Signature: %s\r\nContent-Type: application/json\r\n"
	    "Connection: close\r\nContent-Length: %zu\r\n\r\n%s", path != NULL ? path : "/", key,
	    sig, strlen(body), body);
	return ts_http_raw(port, req, (size_t)n, out, sizeof(out), 10000);
}

/* Signed calls: a downstream that verifies Outbox-Signature (written on its
 * own in webhook_target.c) refuses the unsigned call first (the broken
 * way: anyone who can reach it is believed), then accepts the signed one,
 * once; a rotation file (old + new secret) is accepted; a forged body, a
 * replay with an old timestamp and a wrong secret are refused; bad secret
 * files are start-up errors that never print the secret. */
START_TEST(test_webhook_signed)
{
	struct env e;
	char detail[512], path[300], sig[256], out[4096];
	env_init(&e, "whsig");
	const char *secret = "whsec-0123456789abcdef";
	wt_require_signature(e.target, secret, 300);
	struct ts_consumer_conn c;

	/* Unsigned: refused (401), a permanent 4xx: rejected, nothing applied. */
	pid_t pid = start_webhook_consumer(e.db, e.url, e.hook, e.log, NULL);
	ts_consumer_open(&c, e.url);
	struct ob_wire_msg m = ts_consumer_msg(1, "t", "sig-1", "{\"n\":1}");
	ck_assert_int_eq(ts_consumer_call1(&c, m, detail, sizeof(detail)), OB_WIRE_REJECT);
	ck_assert_msg(strstr(detail, "401") != NULL, "%s", detail);
	ck_assert_int_eq(wt_refused(e.target), 1);
	ck_assert_int_eq(wt_effects(e.target, "sig-1"), 0);
	ts_consumer_close(&c);
	ts_stop(pid, SIGTERM);

	/* Signed, with a rotation file (another secret first): applied once. */
	snprintf(path, sizeof(path), "%s/webhook-secrets", ts_tmpdir());
	ts_write_file(path, "# rotation: the old one, then the new\nwhsec-old-0123456789ab\n"
	    "whsec-0123456789abcdef\n");
	char url2[256], log2[256];
	ts_ipc_url("whsig-2", url2, sizeof(url2));
	char *signed_args[] = { "--webhook-secret-file", path, NULL };
	pid = start_webhook_consumer(e.db, url2, e.hook, log2, signed_args);
	ts_consumer_open(&c, url2);
	m = ts_consumer_msg(2, "t", "sig-2", "{\"n\":2}");
	ck_assert_int_eq(ts_consumer_call1(&c, m, detail, sizeof(detail)), OB_WIRE_APPLIED);
	ck_assert_int_eq(wt_effects(e.target, "sig-2"), 1);
	char h[256];
	wt_last_header(e.target, "Outbox-Signature", h, sizeof(h));
	ck_assert_msg(strncmp(h, "t=", 2) == 0 && strstr(h, ",v1=") != NULL &&
	    strstr(strstr(h, ",v1=") + 1, ",v1=") != NULL, "two v1 for two secrets: %s", h);
	ts_consumer_close(&c);
	ts_stop(pid, SIGTERM);
	char *log = ts_read_file(log2);
	ck_assert_msg(log != NULL && strstr(log, "0123456789abcdef") == NULL, "a secret logged");
	free(log);

	/* A forger and a replayer, straight to the downstream. */
	char hex[65];
	long long now = (long long)time(NULL);
	ck_assert_int_eq(webhook_hmac_hex(secret, strlen(secret), now, "{\"n\":3}", 7, hex), OB_OK);
	snprintf(sig, sizeof(sig), "t=%lld,v1=%s", now, hex);
	ck_assert_int_eq(raw_signed_post(e.hook, "sig-3", sig, "{\"n\":3}"), 201); /* genuine */
	ck_assert_int_eq(raw_signed_post(e.hook, "sig-4", sig, "{\"n\":4}"), 401); /* forged body */
	ck_assert_int_eq(webhook_hmac_hex(secret, strlen(secret), now - 1000, "{\"n\":5}", 7, hex),
	    OB_OK);
	snprintf(sig, sizeof(sig), "t=%lld,v1=%s", now - 1000, hex);
	ck_assert_int_eq(raw_signed_post(e.hook, "sig-5", sig, "{\"n\":5}"), 401); /* replay */
	ck_assert_int_eq(webhook_hmac_hex("whsec-wrong-0123456789", 22, now, "{\"n\":6}", 7, hex),
	    OB_OK);
	snprintf(sig, sizeof(sig), "t=%lld,v1=%s", now, hex);
	ck_assert_int_eq(raw_signed_post(e.hook, "sig-6", sig, "{\"n\":6}"), 401); /* wrong key */
	ck_assert_int_eq(wt_effects(e.target, "sig-4") + wt_effects(e.target, "sig-5") +
	    wt_effects(e.target, "sig-6"), 0);

	/* Bad secret files: exit 2, one line naming the file and line. */
	static const char *const bad[] = { "short\n", "has a space in it 0123\n", "# only a comment\n" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ts_write_file(path, bad[i]);
		char *argv[] = { "outbox-consumer", "--db", e.db, "--listen", e.url, "--handler",
			"webhook", "--webhook-url", e.hook, "--webhook-secret-file", path, NULL };
		ck_assert_int_eq(ts_run(argv, NULL, out, sizeof(out), 30000), 2);
		ck_assert_msg(strstr(out, "--webhook-secret-file") != NULL, "%s", out);
		ck_assert_msg(strstr(out, "short") == NULL && strstr(out, "space in") == NULL,
		    "the secret printed: %s", out);
	}
	char *nofile[] = { "outbox-consumer", "--db", e.db, "--listen", e.url,
		"--webhook-secret-file", path, NULL };
	ck_assert_int_eq(ts_run(nofile, NULL, out, sizeof(out), 30000), 2);
	ck_assert_msg(strstr(out, "--webhook-secret-file needs --handler webhook") != NULL, "%s",
	    out);
	env_fini(&e);
}
END_TEST

static Suite *
webhook_suite(void)
{
	Suite *s = suite_create("consumer_webhook");
	TCase *tc = tcase_create("webhook");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_webhook_applied_once);
	tcase_add_test(tc, test_webhook_redelivery);
	tcase_add_test(tc, test_webhook_failures_resend_same_key);
	tcase_add_test(tc, test_webhook_crash_takeover);
	tcase_add_test(tc, test_webhook_stale_holder_fenced);
	tcase_add_test(tc, test_webhook_config_refused);
	tcase_add_test(tc, test_webhook_retry_after_passed_on);
	tcase_add_test(tc, test_webhook_signed);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	int rc = ts_run_suite(webhook_suite());
	nng_fini();
	return rc;
}
