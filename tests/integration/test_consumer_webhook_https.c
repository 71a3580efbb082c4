/*
 * test_consumer_webhook_https.c - the webhook handler with an https://
 * target (libcurl, consumer/webhook_http.c): a real
 * HTTPS server in the test process (tests/support/webhook_target.c,
 * wt_start_tls) with a certificate from the test CA (ts_tls.c). A delivery
 * through it applies the effect once; a consumer that trusts another CA,
 * or expects another name, refuses the target: nothing is sent, nothing
 * applied, the failure logged, the message answered retry (not reject),
 * and delivered once by a consumer configured right. A CA with an http://
 * URL, or a bad CA file, is exit 2 with one line.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/nng.h>

#include "outbox/wire.h"
#include "testsupport.h"
#include "ts_consumer.h"
#include "ts_tls.h"
#include "webhook_target.h"

static pid_t
start(const char *db, const char *url, const char *hook, const char *ca, const char *name,
    char *log)
{
	const char *args[] = { "--handler", "webhook", "--webhook-url", hook, "--webhook-ca", ca,
		"--webhook-server-name", name, "--webhook-timeout", "10s", NULL };
	return ts_consumer_spawn(log, db, url, args);
}

static int64_t
processed(PGconn *c, const char *key)
{
	char q[256];
	snprintf(q, sizeof(q), "SELECT count(*) FROM inbox.processed WHERE idempotency_key = '%s'",
	    key);
	return ts_query_int(c, q);
}

START_TEST(test_https_webhook_applied_once)
{
	const struct ts_tls *t = ts_tls_certs();
	char db[TS_CONNINFO_MAX], url[256], hook[256], log[256], detail[512];
	ts_db_create("whhttps", "inbox", db, sizeof(db));
	ts_ipc_url("whhttps", url, sizeof(url));
	struct wt_target *wt = wt_start_tls(hook, sizeof(hook), t->server_cert, t->server_key);
	ck_assert_ptr_nonnull(wt);
	ck_assert(strncmp(hook, "https://127.0.0.1:", 18) == 0);
	PGconn *c = ts_connect(db);
	pid_t pid = start(db, url, hook, t->ca, TS_TLS_SERVER_NAME, log);
	struct ts_consumer_conn cc;
	ts_consumer_open(&cc, url);
	struct ob_wire_msg m = ts_consumer_msg(7, "report.created", "https-1", "{\"n\":1}");
	int st = ts_consumer_call1(&cc, m, detail, sizeof(detail));
	ck_assert_msg(st == OB_WIRE_APPLIED, "status %d: %s", st, detail);
	ck_assert_msg(strstr(detail, "201") != NULL, "%s", detail);
	ck_assert_int_eq(wt_effects(wt, "https-1"), 1);
	ck_assert_int_eq(processed(c, "https-1"), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM inbox.webhook_calls"
	    " WHERE idempotency_key = 'https-1' AND state = 'done' AND response_status = 201"), 1);
	/* Redelivered: duplicate, no second call. */
	ck_assert_int_eq(ts_consumer_call1(&cc, m, NULL, 0), OB_WIRE_DUPLICATE);
	ck_assert_int_eq(wt_requests(wt, "https-1"), 1);
	ts_consumer_close(&cc);
	ts_stop(pid, SIGTERM);
	wt_stop(wt);
	PQfinish(c);
}
END_TEST

/* A consumer with the wrong CA (or name): retry, nothing sent or applied,
 * logged; then the right one applies it once. */
static void
refused_run(const char *tag, const char *ca, const char *name)
{
	const struct ts_tls *t = ts_tls_certs();
	char db[TS_CONNINFO_MAX], url[256], url2[256], hook[256], log[256], log2[256], key[64];
	char detail[512], url_tag[64];
	snprintf(key, sizeof(key), "%s-1", tag);
	ts_db_create(tag, "inbox", db, sizeof(db));
	ts_ipc_url(tag, url, sizeof(url));
	snprintf(url_tag, sizeof(url_tag), "%s-good", tag);
	ts_ipc_url(url_tag, url2, sizeof(url2));
	struct wt_target *wt = wt_start_tls(hook, sizeof(hook), t->server_cert, t->server_key);
	ck_assert_ptr_nonnull(wt);
	PGconn *c = ts_connect(db);
	pid_t bad = start(db, url, hook, ca, name, log);
	struct ts_consumer_conn cc;
	ts_consumer_open(&cc, url);
	struct ob_wire_msg m = ts_consumer_msg(9, "t", key, "{}");
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(ts_consumer_call1(&cc, m, detail, sizeof(detail)), OB_WIRE_RETRY);
		ck_assert_msg(strstr(detail, "webhook TLS handshake failed") != NULL, "%s", detail);
	}
	ck_assert_int_eq(wt_total(wt), 0);
	ck_assert_int_eq(processed(c, key), 0);
	/* The claim was given up (lease expired at once), not left held. */
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM inbox.webhook_calls"
	    " WHERE state = 'started' AND lease_until > now()"), 0);
	/* Logged once at warn, not per attempt. */
	ck_assert_int_eq(ts_log_wait(log, "consumer.webhook.tls_failed", 1, 10000), 1);
	ck_assert_int_eq(ts_log_count(log, "consumer.webhook.tls_failed"), 1);
	ts_consumer_close(&cc);
	ts_stop(bad, SIGTERM);

	pid_t good = start(db, url2, hook, t->ca, TS_TLS_SERVER_NAME, log2);
	ts_consumer_open(&cc, url2);
	int st = ts_consumer_call1(&cc, m, detail, sizeof(detail));
	ck_assert_msg(st == OB_WIRE_APPLIED, "status %d: %s", st, detail);
	ck_assert_int_eq(wt_effects(wt, key), 1);
	ck_assert_int_eq(wt_requests(wt, key), 1);
	ck_assert_int_eq(processed(c, key), 1);
	ts_consumer_close(&cc);
	ts_stop(good, SIGTERM);
	wt_stop(wt);
	PQfinish(c);
}

START_TEST(test_https_webhook_other_ca_refused)
{
	refused_run("whotherca", ts_tls_certs()->ca2, TS_TLS_SERVER_NAME);
}
END_TEST

START_TEST(test_https_webhook_other_name_refused)
{
	refused_run("whothername", ts_tls_certs()->ca, "other.test");
}
END_TEST

static void
config_refused(const char *want, const char *url, const char *ca)
{
	char out[2048];
	char *argv[12] = { "outbox-consumer", "--db", "dbname=x", "--handler", "webhook",
		"--webhook-url", (char *)url, NULL };
	if (ca != NULL) {
		argv[7] = "--webhook-ca";
		argv[8] = (char *)ca;
		argv[9] = NULL;
	}
	ck_assert_int_eq(ts_run(argv, NULL, out, sizeof(out), 20000), 2);
	ck_assert_msg(strstr(out, want) != NULL, "want '%s' in: %s", want, out);
	char *nl = strchr(out, '\n');
	ck_assert_msg(nl != NULL && nl[1] == '\0', "not one line: %s", out);
}

START_TEST(test_https_webhook_config_refused)
{
	const struct ts_tls *t = ts_tls_certs();
	config_refused("--webhook-ca is set but --webhook-url http://127.0.0.1:1/hook is not"
	    " https://", "http://127.0.0.1:1/hook", t->ca);
	config_refused("--webhook-ca /nonexistent/ca.pem: No such file or directory",
	    "https://127.0.0.1:1/hook", "/nonexistent/ca.pem");
	config_refused("not a PEM CA certificate", "https://127.0.0.1:1/hook", t->garbage);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("consumer_webhook_https");
	TCase *tc = tcase_create("https");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_https_webhook_applied_once);
	tcase_add_test(tc, test_https_webhook_other_ca_refused);
	tcase_add_test(tc, test_https_webhook_other_name_refused);
	tcase_add_test(tc, test_https_webhook_config_refused);
	suite_add_tcase(s, tc);
	int rc = ts_run_suite(s);
	nng_fini();
	return rc;
}
