/*
 * test_webhook_at_most_once.c - the webhook's per-route at-most-once mode
 * (--webhook-at-most-once, consumer/webhook_mode.h) end to end: a real
 * relay, outbox-consumer --handler webhook, a downstream started here
 * (tests/support/webhook_target.c) that is counted as a careless one that
 * IGNORES the Idempotency-Key would apply (wt_acts), and outboxctl.
 *
 * First the default (at-least-once with the key) against a downstream that
 * loses its answer after acting: a key-ignoring downstream applies it
 * twice. Then at most once on that topic: applied once, dead-lettered with
 * the parked detail, listed by `outboxctl webhook list`; a requeue without
 * a verdict sends nothing; resolved as sent, a requeue is a duplicate and
 * sends nothing; another key lost before acting, resolved as not sent, is
 * sent exactly once more after its requeue; an expired claim (a holder that
 * died mid-call) is parked without a call; bad resolves change nothing; a
 * topic that does not match keeps at-least-once in the same consumer; a
 * refused connection is retried, never parked.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "outbox/err.h"
#include "outbox/keyclaim.h"
#include "outbox/wire.h"
#include "testsupport.h"
#include "ts_consumer.h"
#include "ts_relay.h"
#include "webhook_target.h"

#define T_SEC 1000
#define SETTLE_MS (60 * T_SEC)
#define AMO_PATTERN "notify.*"
#define PARKED "parked: outcome unknown (at-most-once), resolve with outboxctl webhook resolve"

struct env {
	char db[TS_CONNINFO_MAX], url[256], route[300], hook[256], clog[256], rlog[256];
	struct wt_target *target;
	PGconn *conn;
	pid_t consumer, relay;
	int metrics_port;
};

/* A relay and a webhook consumer (at most once for AMO_PATTERN when amo)
 * on a fresh database, the downstream started here. */
static void
env_start(struct env *e, const char *tag, bool amo)
{
	ts_db_create(tag, "all", e->db, sizeof(e->db));
	e->conn = ts_connect(e->db);
	e->target = wt_start(e->hook, sizeof(e->hook));
	ck_assert_ptr_nonnull(e->target);
	ts_ipc_url(tag, e->url, sizeof(e->url));
	const char *cargs[] = { "--handler", "webhook", "--webhook-url", e->hook,
		"--webhook-timeout", "1s", "--webhook-lease", "3s", "--metrics", "127.0.0.1:0",
		amo ? "--webhook-at-most-once" : NULL, AMO_PATTERN, NULL };
	e->consumer = ts_consumer_spawn(e->clog, e->db, e->url, cargs);
	e->metrics_port = ts_log_wait_port(e->clog, "consumer.metrics.listening", 30 * T_SEC);
	snprintf(e->route, sizeof(e->route), "*=%s", e->url);
	/* --no-source: the downstream and the claims see the key alone (the
	 * source's derived key is test_source_identity's) */
	const char *rargs[] = { "--poll-ms", "100", "--backoff-base-ms", "20", "--backoff-cap-ms",
		"300", "--no-source", NULL };
	e->relay = ts_relay_spawn(e->rlog, e->db, e->route, rargs);
}

static void
env_stop(struct env *e)
{
	ts_stop(e->relay, SIGTERM);
	ts_stop(e->consumer, SIGTERM);
	wt_stop(e->target);
	PQfinish(e->conn);
}

static int64_t
enqueue(struct env *e, const char *topic, const char *key)
{
	char sql[512];
	snprintf(sql, sizeof(sql), "SELECT outbox.enqueue('%s', '%s', '{}')", topic, key);
	return ts_query_int(e->conn, sql);
}

/* Poll until message id has status (delivered / dead). */
static void
wait_status(struct env *e, int64_t id, const char *status)
{
	char sql[256];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM outbox.messages WHERE id = %lld"
	    " AND status = '%s'", (long long)id, status);
	ck_assert_msg(ts_wait_value(e->conn, sql, 1, SETTLE_MS) == 1,
	    "message %lld never %s (logs %s, %s)", (long long)id, status, e->clog, e->rlog);
}

static void
last_error(struct env *e, int64_t id, char *out, size_t outlen)
{
	char sql[256];
	snprintf(sql, sizeof(sql), "SELECT coalesce(last_error, '') FROM outbox.dead WHERE id = %lld",
	    (long long)id);
	PGresult *r = PQexec(e->conn, sql);
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	ck_assert_int_eq(PQntuples(r), 1);
	snprintf(out, outlen, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
}

/* outboxctl with args (NULL-ended); its exit code, its output into out. */
static int
ctl(char *out, size_t outlen, const char *const *args)
{
	const char *argv[24] = { "outboxctl" };
	size_t n = 1;
	for (; args[n - 1] != NULL; n++) {
		ck_assert(n < 23);
		argv[n] = args[n - 1];
	}
	argv[n] = NULL;
	return ts_run((char *const *)argv, NULL, out, outlen, 60 * T_SEC);
}

static void
requeue(struct env *e, int64_t id)
{
	char ids[32], out[4096];
	snprintf(ids, sizeof(ids), "%lld", (long long)id);
	const char *a[] = { "dead", "requeue", "--db", e->db, ids, NULL };
	ck_assert_msg(ctl(out, sizeof(out), a) == 0, "%s", out);
}

static int
resolve(struct env *e, const char *topic, const char *key, const char *as, char *out,
    size_t outlen)
{
	const char *a[] = { "webhook", "resolve", "--inbox-db", e->db, "--topic", topic, "--key",
		key, as ? "--as" : NULL, as, NULL };
	return ctl(out, outlen, a);
}

/* Every claim row as text, to show that a refused command changed nothing. */
static char *
claims_snapshot(struct env *e)
{
	PGresult *r = PQexec(e->conn, "SELECT coalesce(string_agg(idempotency_key || ':' || state"
	    " || ':' || fence || ':' || lease_until::text || ':' || coalesce(topic, '-'), ','"
	    " ORDER BY idempotency_key), '') FROM inbox.webhook_calls");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	char *s = strdup(PQgetvalue(r, 0, 0));
	PQclear(r);
	return s;
}

/* Whether a line of the log at path holds needle at level warn. */
static bool
logged_warn(const char *path, const char *needle)
{
	char *text = ts_read_file(path);
	bool found = false;
	for (char *line = text; line != NULL && *line != '\0' && !found;) {
		char *nl = strchr(line, '\n');
		if (nl != NULL)
			*nl = '\0';
		found = strstr(line, needle) != NULL && strstr(line, " level=warn ") != NULL;
		line = nl != NULL ? nl + 1 : NULL;
	}
	free(text);
	return found;
}

/* The broken row first: the default mode against a downstream that
 * ignores the key and loses its answer after acting. */
START_TEST(test_at_least_once_applies_twice_downstream)
{
	struct env e;
	env_start(&e, "amo_alo", false);
	wt_lose_next(e.target, 1);
	int64_t id = enqueue(&e, "notify.sms", "alo-1");
	wait_status(&e, id, "delivered");
	ck_assert_int_eq(wt_requests(e.target, "alo-1"), 2);
	ck_assert_int_eq(wt_effects(e.target, "alo-1"), 1); /* a key-deduping one: once */
	ck_assert_int_eq(wt_acts(e.target, "alo-1"), 2);    /* a key-ignoring one: twice */
	env_stop(&e);
}
END_TEST

START_TEST(test_at_most_once_parks_and_resolves)
{
	struct env e;
	char out[16384], err[1024];
	env_start(&e, "amo", true);

	/* Lost after acting: applied once, parked, dead-lettered. */
	wt_lose_next(e.target, 1);
	int64_t lost = enqueue(&e, "notify.sms", "amo-lost");
	wait_status(&e, lost, "dead");
	ck_assert_int_eq(wt_acts(e.target, "amo-lost"), 1);
	last_error(&e, lost, err, sizeof(err));
	ck_assert_msg(strstr(err, PARKED " --topic notify.sms --key amo-lost --as sent|not-sent")
	    != NULL, "%s", err);
	ck_assert_int_eq(ts_query_int(e.conn, "SELECT count(*) FROM inbox.webhook_calls WHERE"
	    " idempotency_key = 'amo-lost' AND state = 'unknown' AND topic = 'notify.sms'"
	    " AND parked_error LIKE 'webhook call failed%'"), 1);
	ck_assert_int_eq(ts_log_wait(e.clog, "event=consumer.webhook.parked topic=notify.sms"
	    " key=amo-lost", 1, 30 * T_SEC), 1);
	ck_assert(logged_warn(e.clog, "event=consumer.webhook.parked topic=notify.sms key=amo-lost"));

	/* Listed, as a table and as JSON. */
	const char *list[] = { "webhook", "list", "--inbox-db", e.db, NULL };
	ck_assert_int_eq(ctl(out, sizeof(out), list), 0);
	ck_assert_msg(strstr(out, "amo-lost") != NULL && strstr(out, "notify.sms") != NULL &&
	    strstr(out, "FENCE") != NULL && strstr(out, "webhook call failed") != NULL, "%s", out);
	const char *listj[] = { "webhook", "list", "--inbox-db", e.db, "--json", NULL };
	ck_assert_int_eq(ctl(out, sizeof(out), listj), 0);
	json_t *j = json_loads(out, 0, NULL);
	ck_assert_msg(json_is_array(j) && json_array_size(j) == 1, "%s", out);
	json_t *o = json_array_get(j, 0);
	ck_assert_str_eq(json_string_value(json_object_get(o, "topic")), "notify.sms");
	ck_assert_str_eq(json_string_value(json_object_get(o, "key")), "amo-lost");
	ck_assert_int_eq(json_integer_value(json_object_get(o, "fence")), 1);
	ck_assert_ptr_nonnull(json_string_value(json_object_get(o, "parked_at")));
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(o, "error")),
	    "webhook call failed"));
	json_decref(j);

	/* Requeued without a verdict: answered parked again, nothing sent. */
	requeue(&e, lost);
	wait_status(&e, lost, "dead");
	ck_assert_int_eq(wt_requests(e.target, "amo-lost"), 1);
	last_error(&e, lost, err, sizeof(err));
	ck_assert_msg(strstr(err, PARKED) != NULL && strstr(err, "not sent again") != NULL, "%s",
	    err);

	/* Resolved as sent: a requeue is a duplicate, nothing sent. */
	ck_assert_msg(resolve(&e, "notify.sms", "amo-lost", "sent", out, sizeof(out)) == 0, "%s",
	    out);
	ck_assert_msg(strstr(out, "resolved as sent") != NULL, "%s", out);
	requeue(&e, lost);
	wait_status(&e, lost, "delivered");
	ck_assert_int_eq(wt_requests(e.target, "amo-lost"), 1);
	ck_assert_int_eq(wt_acts(e.target, "amo-lost"), 1);

	/* Lost BEFORE acting: parked too (the consumer cannot tell); the
	 * operator finds it never applied, resolves not sent, requeues: sent
	 * exactly once more. */
	wt_drop_next(e.target, 1);
	int64_t dropped = enqueue(&e, "notify.sms", "amo-dropped");
	wait_status(&e, dropped, "dead");
	ck_assert_int_eq(wt_requests(e.target, "amo-dropped"), 1);
	ck_assert_int_eq(wt_acts(e.target, "amo-dropped"), 0);
	ck_assert_msg(resolve(&e, "notify.sms", "amo-dropped", "not-sent", out, sizeof(out)) == 0,
	    "%s", out);
	requeue(&e, dropped);
	wait_status(&e, dropped, "delivered");
	ck_assert_int_eq(wt_requests(e.target, "amo-dropped"), 2);
	ck_assert_int_eq(wt_acts(e.target, "amo-dropped"), 1);

	/* Timed out after acting (held past --webhook-timeout): parked. */
	wt_hold_next(e.target, 1, 2500);
	int64_t slow = enqueue(&e, "notify.sms", "amo-slow");
	wait_status(&e, slow, "dead");
	last_error(&e, slow, err, sizeof(err));
	ck_assert_msg(strstr(err, PARKED) != NULL && strstr(err, "timed out") != NULL, "%s", err);
	ck_assert_int_eq(wt_requests(e.target, "amo-slow"), 1);

	/* A holder that died mid-call (its claim left, lease run out): the
	 * next attempt parks it without a call. */
	struct ob_key_claim c;
	char cerr[512];
	ck_assert_int_eq(ob_keyclaim_claim(e.conn, "inbox.webhook_calls", "amo-crashed",
	    "notify.sms\0{}", sizeof("notify.sms\0{}") - 1, 100, &c, cerr, sizeof(cerr)), OB_OK);
	ck_assert_int_eq(c.verdict, OB_KEY_PROCEED);
	ck_assert_int_eq(ts_wait_value(e.conn, "SELECT count(*) FROM inbox.webhook_calls WHERE"
	    " idempotency_key = 'amo-crashed' AND lease_until < clock_timestamp()", 1, SETTLE_MS), 1);
	int64_t crashed = enqueue(&e, "notify.sms", "amo-crashed");
	wait_status(&e, crashed, "dead");
	last_error(&e, crashed, err, sizeof(err));
	ck_assert_msg(strstr(err, PARKED) != NULL && strstr(err, "expired unfinished") != NULL,
	    "%s", err);
	ck_assert_int_eq(wt_requests(e.target, "amo-crashed"), 0);

	/* Bad resolves: a clear error, the exit code, nothing changed. */
	char *before = claims_snapshot(&e);
	ck_assert_int_eq(resolve(&e, "notify.sms", "no-such-key", "sent", out, sizeof(out)), 1);
	ck_assert_msg(strstr(out, "no webhook call with key 'no-such-key'") != NULL, "%s", out);
	ck_assert_int_eq(resolve(&e, "notify.sms", "amo-lost", "not-sent", out, sizeof(out)), 1);
	ck_assert_msg(strstr(out, "is not parked (it is done)") != NULL, "%s", out);
	ck_assert_int_eq(resolve(&e, "notify.other", "amo-slow", "sent", out, sizeof(out)), 1);
	ck_assert_msg(strstr(out, "is not parked in topic 'notify.other' (its topic:"
	    " 'notify.sms')") != NULL, "%s", out);
	ck_assert_int_eq(resolve(&e, "notify.sms", "amo-slow", NULL, out, sizeof(out)), 2);
	ck_assert_msg(strstr(out, "--as is required") != NULL, "%s", out);
	ck_assert_int_eq(resolve(&e, "notify.sms", "", "sent", out, sizeof(out)), 2);
	char *after = claims_snapshot(&e);
	ck_assert_str_eq(before, after);
	free(before);
	free(after);

	/* A topic that does not match: at-least-once in the same consumer. */
	wt_lose_next(e.target, 1);
	int64_t other = enqueue(&e, "report.created", "alo-same-consumer");
	wait_status(&e, other, "delivered");
	ck_assert_int_eq(wt_requests(e.target, "alo-same-consumer"), 2);
	ck_assert_int_eq(wt_effects(e.target, "alo-same-consumer"), 1);

	/* Parked: amo-lost, amo-dropped, amo-slow, amo-crashed. */
	ck_assert_int_eq((int)ts_wait_metric(e.metrics_port,
	    "outbox_consumer_webhook_claims_total{event=\"parked\"}", 4, 30 * T_SEC), 4);
	ck_assert_int_eq(ts_log_count(e.clog, "event=consumer.webhook.parked"), 4);
	env_stop(&e);
}
END_TEST

/* Refused connections never reached the downstream: retried (the claim
 * released, the token bumped each time), never parked. */
START_TEST(test_at_most_once_refused_is_retried)
{
	char db[TS_CONNINFO_MAX], url[256], hook[256], log[256], detail[1024];
	int port;
	int fd = ts_refusing_local(&port);
	snprintf(hook, sizeof(hook), "http://127.0.0.1:%d/hook", port);
	ts_db_create("amo_refused", "inbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	ts_ipc_url("amorefused", url, sizeof(url));
	const char *cargs[] = { "--handler", "webhook", "--webhook-url", hook,
		"--webhook-at-most-once", "*", NULL };
	pid_t pid = ts_consumer_spawn(log, db, url, cargs);
	struct ts_consumer_conn c;
	ts_consumer_open(&c, url);
	struct ob_wire_msg m = ts_consumer_msg(1, "notify.sms", "refused-1", "{}");
	for (int i = 1; i <= 3; i++) {
		ck_assert_int_eq(ts_consumer_call1(&c, m, detail, sizeof(detail)), OB_WIRE_RETRY);
		ck_assert_msg(strstr(detail, "webhook call failed") != NULL, "%s", detail);
		char sql[256];
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM inbox.webhook_calls WHERE"
		    " idempotency_key = 'refused-1' AND state = 'started' AND fence = %d"
		    " AND lease_until = '-infinity'", i);
		ck_assert_int_eq(ts_wait_value(conn, sql, 1, 30 * T_SEC), 1);
	}
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM inbox.webhook_calls WHERE state = 'unknown'"), 0);
	ck_assert_int_eq(ts_log_count(log, "consumer.webhook.parked"), 0);
	ts_consumer_close(&c);
	ts_stop(pid, SIGTERM);
	close(fd);
	PQfinish(conn);
}
END_TEST

/* Bad flags: exit 2 with one line, nothing started. */
START_TEST(test_at_most_once_bad_flags)
{
	char out[4096];
	char *empty[] = { "outbox-consumer", "--db", "dbname=x", "--handler", "webhook",
		"--webhook-url", "http://127.0.0.1:1/hook", "--webhook-at-most-once", "a,,b", NULL };
	ck_assert_int_eq(ts_run(empty, NULL, out, sizeof(out), 30 * T_SEC), 2);
	ck_assert_msg(strstr(out, "--webhook-at-most-once: an empty topic pattern") != NULL, "%s",
	    out);
	char *nodedup[] = { "outbox-consumer", "--db", "dbname=x", "--handler", "webhook",
		"--webhook-url", "http://127.0.0.1:1/hook", "--webhook-at-most-once", "a", "--no-dedup",
		NULL };
	ck_assert_int_eq(ts_run(nodedup, NULL, out, sizeof(out), 30 * T_SEC), 2);
	ck_assert_msg(strstr(out, "needs the key claims") != NULL, "%s", out);
	char *record[] = { "outbox-consumer", "--db", "dbname=x", "--webhook-at-most-once", "a",
		NULL };
	ck_assert_int_eq(ts_run(record, NULL, out, sizeof(out), 30 * T_SEC), 2);
	ck_assert_msg(strstr(out, "--webhook-at-most-once needs --handler webhook") != NULL, "%s",
	    out);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("webhook_at_most_once");
	TCase *tc = tcase_create("webhook_at_most_once");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_at_least_once_applies_twice_downstream);
	tcase_add_test(tc, test_at_most_once_parks_and_resolves);
	tcase_add_test(tc, test_at_most_once_refused_is_retried);
	tcase_add_test(tc, test_at_most_once_bad_flags);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
