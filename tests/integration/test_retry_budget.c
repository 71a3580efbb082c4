/*
 * test_retry_budget.c - the retry budget's bound, against a failing
 * service (docs/guarantees.md, "Retries: the bound").
 *
 * The agent-side client: a process makes CALLS logical calls of --attempts
 * ATTEMPTS each against a producer API whose database is down (every
 * answer 503). Without the budget it sends CALLS x ATTEMPTS requests; with
 * it, CALLS + 100: the budget pays 100 retries (500 tokens, 5 a retry)
 * and then each call stops after its first attempt, saying why. Counted
 * twice: by the client's results and by the producer's own
 * outbox_producer_requests_total.
 *
 * The relay: MESSAGES messages, one a frame, to a consumer whose webhook
 * target answers every call 503 (outbox-notify-sink --fail-first). With
 * the budget a worker pays 100 retried frames; every other retry waits
 * --retry-budget-slow (its messages are due that much later), counted in
 * outbox_relay_retry_budget_spent_total. Without it every retry waits its
 * backoff (here at most 2 s, --backoff-cap-ms, or the target's
 * Retry-After of 1 s, spread).
 */
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>
#include <libpq-fe.h>

#include "client.h"
#include "outbox/err.h"
#include "outbox/token_bucket.h"
#include "testsupport.h"
#include "ts_consumer.h"
#include "ts_pgserver.h"
#include "ts_producer.h"
#include "ts_relay.h"

#define CALLS 100
#define ATTEMPTS 4
#define MESSAGES 300
#define PAID_RETRIES (OB_RETRY_BUDGET_CAPACITY / OB_RETRY_BUDGET_COST) /* 100 */

static char pg_dir[400];

static void
setup(void)
{
	snprintf(pg_dir, sizeof(pg_dir), "%s/pg-budget-%d", ts_tmpdir(), (int)getpid());
}

static void
teardown(void)
{
	ts_pgserver_stop_quiet(pg_dir);
}

/* CALLS failing calls through the client, with budget (NULL: off); the
 * requests they sent. */
static int
failing_calls(const char *url, struct ob_token_bucket *budget, int *spent_calls)
{
	int requests = 0;
	*spent_calls = 0;
	for (int i = 0; i < CALLS; i++) {
		char key[64];
		snprintf(key, sizeof(key), "budget-%s-%d", budget ? "on" : "off", i);
		struct client_opts o = { .url = url, .target = CLIENT_MESSAGE,
			.topic = "notify.budget", .payload = "{\"n\":1}", .key_source = CLIENT_KEY_FIXED,
			.key = key, .attempts = ATTEMPTS, .base_ms = 1, .cap_ms = 2,
			.timeout_ms = 5000, .max_retry_after_ms = 0, .retry_budget = budget };
		struct client_result r;
		client_submit(&o, &r);
		ck_assert_msg(!r.ok, "call %d succeeded against a database that is down", i);
		ck_assert_int_eq(r.last_status, 503);
		requests += r.attempts;
		if (r.budget_spent) {
			(*spent_calls)++;
			ck_assert_msg(strstr(r.observation, "retry budget is spent") != NULL, "%s",
			    r.observation);
		}
		client_result_fini(&r);
	}
	return requests;
}

START_TEST(test_client_budget_bounds_the_retries)
{
	char server[TS_CONNINFO_MAX], db[TS_CONNINFO_MAX];
	ts_pgserver_start(pg_dir, server, sizeof(server));
	ts_pgserver_db_create(server, "budget", "outbox", db, sizeof(db));
	struct ts_producer_server srv;
	ts_producer_serve(db, (char *[]){ "--metrics", "127.0.0.1:0", NULL }, &srv);
	int mport = ts_producer_metrics_port(&srv);
	ts_pgserver_kill(pg_dir);

	const char *series =
	    "outbox_producer_requests_total{method=\"POST\",route=\"/v1/messages\",status=\"503\"}";
	int spent;
	int off = failing_calls(srv.url, NULL, &spent);
	ck_assert_int_eq(off, CALLS * ATTEMPTS);
	ck_assert_int_eq(spent, 0);
	ck_assert_double_eq(ts_metric(mport, series), CALLS * ATTEMPTS);

	struct ob_token_bucket budget;
	ck_assert_int_eq(ob_token_bucket_init(&budget, OB_RETRY_BUDGET_CAPACITY, 0), OB_OK);
	int on = failing_calls(srv.url, &budget, &spent);
	fprintf(stderr, "test_retry_budget: %d failing calls: %d requests without the budget,"
	    " %d with it (%d calls stopped early)\n", CALLS, off, on, spent);
	ck_assert_int_eq(on, CALLS + PAID_RETRIES);
	ck_assert_int_eq(spent, CALLS - PAID_RETRIES / (ATTEMPTS - 1));
	ck_assert_double_eq(ts_metric(mport, series), CALLS * ATTEMPTS + CALLS + PAID_RETRIES);

	/* the service back: a success puts tokens back, retries are paid again */
	ts_pgserver_resume(pg_dir);
	struct client_opts o = { .url = srv.url, .target = CLIENT_MESSAGE,
		.topic = "notify.budget", .payload = "{\"n\":2}", .key_source = CLIENT_KEY_FIXED,
		.key = "budget-back", .attempts = 50, .base_ms = 10, .cap_ms = 100,
		.timeout_ms = 5000, .max_retry_after_ms = 2000, .retry_budget = &budget };
	struct client_result r;
	client_submit(&o, &r);
	ck_assert_msg(r.ok, "%s", r.observation);
	client_result_fini(&r);
	ck_assert_double_ge(ob_token_bucket_level(&budget), OB_RETRY_BUDGET_SUCCESS_REFILL);
	ob_token_bucket_fini(&budget);
	ts_stop(srv.pid, SIGTERM);
}
END_TEST

/* The relay against a failing downstream, budget on or off: the messages
 * due more than SLOW_DUE_S from now once every message was tried. */
#define SLOW "30s"
#define SLOW_DUE_S "5"
static void
relay_against_failing_downstream(bool budget, int64_t *slow_due, int64_t *spent)
{
	char server[TS_CONNINFO_MAX], outbox[TS_CONNINFO_MAX], inbox[TS_CONNINFO_MAX];
	char name[32], slog[256], clog[256], rlog[256], ready[300], url[200], route[300];
	ts_pgserver_start(pg_dir, server, sizeof(server));
	snprintf(name, sizeof(name), "budget_out_%d", budget);
	ts_pgserver_db_create(server, name, "outbox", outbox, sizeof(outbox));
	snprintf(name, sizeof(name), "budget_in_%d", budget);
	ts_pgserver_db_create(server, name, "inbox", inbox, sizeof(inbox));

	snprintf(ready, sizeof(ready), "%s/sink-%d.url", ts_tmpdir(), budget);
	unlink(ready);
	char *sink_argv[] = { "outbox-notify-sink", "--http", "http://127.0.0.1:0", "--fail-first",
		"1000000000", "--ready-file", ready, NULL };
	pid_t sink = ts_spawn(sink_argv, NULL, slog);
	char *hook = ts_wait_ready_file(ready, sink, slog, 30000);
	ts_ipc_url(budget ? "budget-on" : "budget-off", url, sizeof(url));
	snprintf(route, sizeof(route), "*=%s", url);
	pid_t consumer = ts_consumer_spawn(clog, inbox, url,
	    (const char *const[]){ "--handler", "webhook", "--webhook-url", hook, NULL });
	PGconn *c = ts_connect(outbox);
	ts_enqueue_n(c, "notify.budget", "m", MESSAGES);
	pid_t relay = ts_relay_spawn(rlog, outbox, route,
	    (const char *const[]){ "--batch", "1", "--metrics", "127.0.0.1:0", "--retry-budget",
		budget ? "on" : "off", "--retry-budget-slow", SLOW, "--backoff-cap-ms", "2s",
		NULL });
	int mport = ts_log_wait_port(rlog, "relay.metrics.listening", 30000);
	/* every message tried once and answered retry */
	ck_assert_int_eq(ts_wait_value(c, "SELECT count(*) FROM outbox.messages WHERE attempts >= 1"
	    " AND status = 'pending'", MESSAGES, 120000), MESSAGES);
	*slow_due = ts_query_int(c, "SELECT count(*) FROM outbox.messages WHERE available_at >"
	    " now() + interval '" SLOW_DUE_S " seconds'");
	*spent = (int64_t)ts_metric(mport, "outbox_relay_retry_budget_spent_total");
	if (budget)
		ts_assert_logged(rlog, "event=relay.retry_budget.spent");
	PQfinish(c);
	ts_stop(relay, SIGTERM);
	ts_stop(consumer, SIGTERM);
	ts_stop(sink, SIGTERM);
	free(hook);
	ts_pgserver_stop_quiet(pg_dir);
}

START_TEST(test_relay_budget_slows_retries_to_a_failing_destination)
{
	int64_t slow_off, spent_off, slow_on, spent_on;
	relay_against_failing_downstream(false, &slow_off, &spent_off);
	relay_against_failing_downstream(true, &slow_on, &spent_on);
	fprintf(stderr, "test_retry_budget: relay, %d messages failing: budget off %" PRId64
	    " due after %s s (%" PRId64 " refused), on %" PRId64 " (%" PRId64 " refused)\n",
	    MESSAGES, slow_off, SLOW_DUE_S, spent_off, slow_on, spent_on);
	ck_assert_int_eq(spent_off, 0);
	ck_assert_int_eq(slow_off, 0);
	/* 100 frames paid; the first attempts of the other 200 refused their retry */
	ck_assert_int_ge(spent_on, MESSAGES - PAID_RETRIES - 10);
	ck_assert_int_ge(slow_on, MESSAGES - PAID_RETRIES - 10);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("retry_budget");
	TCase *tc = tcase_create("retry_budget");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_client_budget_bounds_the_retries);
	tcase_add_test(tc, test_relay_budget_slows_retries_to_a_failing_destination);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
