/*
 * test_consumer_webhook_https.c - the webhook handler with an https://
 * target (libcurl, consumer/webhook_http.c): a real HTTPS server in the
 * test process (tests/support/webhook_target.c, wt_start_tls) with
 * certificates from the test's own CA (ts_tls.c, ts_tls_webhook.c).
 *
 * Trust: without --webhook-ca the system store, which the test hands over
 * as $SSL_CERT_FILE or $SSL_CERT_DIR in the consumer's environment; with
 * it, that file alone. A delivery the trust accepts applies the effect
 * once. Each refusal (the store lacks the CA; --webhook-ca names another
 * CA while the store has the right one; a certificate for another name;
 * an expired one) is shown beside the same message delivered once by a
 * consumer that differs only in what the fault is about: nothing sent,
 * nothing applied, the failure logged once at warn, the message answered
 * retry (never parked: at most once, a refused handshake sent nothing).
 * A bad CA file, store or name, or an http:// URL with TLS flags, is exit
 * 2 with one line; --help says what the trust is.
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
#include "ts_tls_webhook.h"
#include "webhook_target.h"

#define ARGS_MAX 16
#define ENV_MAX 4

/* What a consumer is started with beside --db, --listen and the URL. */
struct side {
	const char *cert, *key;         /* the target's certificate */
	const char *args[ARGS_MAX];     /* flags, NULL-ended */
	char env[ENV_MAX][TS_TLS_PATH_MAX + 32]; /* "K=V", "" ends */
};

static pid_t
start(const char *db, const char *url, const char *hook, const struct side *s, char *log)
{
	const char *argv[8 + ARGS_MAX] = { "outbox-consumer", "--db", db, "--listen", url,
		"--handler", "webhook", "--webhook-url", hook, "--webhook-timeout", "10s" };
	int n = 11;
	for (int i = 0; s->args[i] != NULL && n < 7 + ARGS_MAX; i++)
		argv[n++] = s->args[i];
	argv[n] = NULL;
	char *env[ENV_MAX + 1];
	int k = 0;
	for (int i = 0; i < ENV_MAX && s->env[i][0] != '\0'; i++)
		env[k++] = (char *)s->env[i];
	env[k] = NULL;
	return ts_spawn((char *const *)argv, env, log);
}

static int64_t
processed(PGconn *c, const char *key)
{
	char q[256];
	snprintf(q, sizeof(q), "SELECT count(*) FROM inbox.processed WHERE idempotency_key = '%s'",
	    key);
	return ts_query_int(c, q);
}

/* A consumer started with s delivers one message to a target with s's
 * certificate: applied once, a redelivery a duplicate without a call; its
 * start line names the trust (want_trust). */
static void
applied_run(const char *tag, const struct side *s, const char *want_trust)
{
	char db[TS_CONNINFO_MAX], url[256], hook[256], log[256], detail[512], key[64];
	snprintf(key, sizeof(key), "%s-1", tag);
	ts_db_create(tag, "inbox", db, sizeof(db));
	ts_ipc_url(tag, url, sizeof(url));
	struct wt_target *wt = wt_start_tls(hook, sizeof(hook), s->cert, s->key);
	ck_assert_ptr_nonnull(wt);
	ck_assert(strncmp(hook, "https://127.0.0.1:", 18) == 0);
	PGconn *c = ts_connect(db);
	pid_t pid = start(db, url, hook, s, log);
	struct ts_consumer_conn cc;
	ts_consumer_open(&cc, url);
	struct ob_wire_msg m = ts_consumer_msg(7, "report.created", key, "{\"n\":1}");
	int st = ts_consumer_call1(&cc, m, detail, sizeof(detail));
	ck_assert_msg(st == OB_WIRE_APPLIED, "status %d: %s", st, detail);
	ck_assert_msg(strstr(detail, "201") != NULL, "%s", detail);
	ck_assert_int_eq(wt_effects(wt, key), 1);
	ck_assert_int_eq(processed(c, key), 1);
	char q[256];
	snprintf(q, sizeof(q), "SELECT count(*) FROM inbox.webhook_calls WHERE idempotency_key ="
	    " '%s' AND state = 'done' AND response_status = 201", key);
	ck_assert_int_eq(ts_query_int(c, q), 1);
	/* Redelivered: duplicate, no second call. */
	ck_assert_int_eq(ts_consumer_call1(&cc, m, NULL, 0), OB_WIRE_DUPLICATE);
	ck_assert_int_eq(wt_requests(wt, key), 1);
	ts_assert_logged(log, want_trust);
	ts_consumer_close(&cc);
	ts_stop(pid, SIGTERM);
	wt_stop(wt);
	PQfinish(c);
}

/* A consumer started with bad refuses its target (want: libcurl's words
 * for why): retry, nothing sent or applied, never parked, logged once;
 * then one started with good (its own target) applies it once. */
static void
refused_run(const char *tag, const struct side *bad, const struct side *good, const char *want)
{
	char db[TS_CONNINFO_MAX], url[256], url2[256], hook[256], hook2[256], log[256], log2[256];
	char key[64], detail[512], url_tag[64];
	snprintf(key, sizeof(key), "%s-1", tag);
	ts_db_create(tag, "inbox", db, sizeof(db));
	ts_ipc_url(tag, url, sizeof(url));
	snprintf(url_tag, sizeof(url_tag), "%s-good", tag);
	ts_ipc_url(url_tag, url2, sizeof(url2));
	struct wt_target *wb = wt_start_tls(hook, sizeof(hook), bad->cert, bad->key);
	struct wt_target *wg = wt_start_tls(hook2, sizeof(hook2), good->cert, good->key);
	ck_assert_ptr_nonnull(wb);
	ck_assert_ptr_nonnull(wg);
	PGconn *c = ts_connect(db);
	pid_t pid = start(db, url, hook, bad, log);
	struct ts_consumer_conn cc;
	ts_consumer_open(&cc, url);
	struct ob_wire_msg m = ts_consumer_msg(9, "t", key, "{}");
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(ts_consumer_call1(&cc, m, detail, sizeof(detail)), OB_WIRE_RETRY);
		ck_assert_msg(strstr(detail, "webhook TLS handshake failed") != NULL &&
		    strstr(detail, want) != NULL, "want '%s' in: %s", want, detail);
	}
	ck_assert_int_eq(wt_total(wb), 0);
	ck_assert_int_eq(processed(c, key), 0);
	/* The claim was given up, not left held, and not parked. */
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM inbox.webhook_calls"
	    " WHERE state = 'started' AND lease_until > now()"), 0);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM inbox.webhook_calls"
	    " WHERE state = 'unknown'"), 0);
	/* Logged once at warn, not per attempt. */
	ck_assert_int_eq(ts_log_wait(log, "consumer.webhook.tls_failed", 1, 10000), 1);
	ck_assert_int_eq(ts_log_count(log, "consumer.webhook.tls_failed"), 1);
	ck_assert_int_eq(ts_log_count(log, want), 1);
	ts_consumer_close(&cc);
	ts_stop(pid, SIGTERM);

	pid_t ok = start(db, url2, hook2, good, log2);
	ts_consumer_open(&cc, url2);
	int st = ts_consumer_call1(&cc, m, detail, sizeof(detail));
	ck_assert_msg(st == OB_WIRE_APPLIED, "status %d: %s", st, detail);
	ck_assert_int_eq(wt_effects(wg, key), 1);
	ck_assert_int_eq(wt_requests(wg, key), 1);
	ck_assert_int_eq(wt_total(wb), 0);
	ck_assert_int_eq(processed(c, key), 1);
	ts_consumer_close(&cc);
	ts_stop(ok, SIGTERM);
	wt_stop(wb);
	wt_stop(wg);
	PQfinish(c);
}

/* A target with cert, reached at 127.0.0.1 under name (the one its
 * certificate must carry), every topic at most once; with flags and up to
 * two variables. */
static struct side
side(const char *cert, const char *key, const char *name, const char *const *flags,
    const char *var1, const char *val1, const char *var2, const char *val2)
{
	struct side s = { cert, key, { "--webhook-server-name", name,
		"--webhook-at-most-once", "*" }, { "" } };
	int n = 4;
	for (int i = 0; flags != NULL && flags[i] != NULL; i++)
		s.args[n++] = flags[i];
	s.args[n] = NULL;
	if (var1 != NULL)
		snprintf(s.env[0], sizeof(s.env[0]), "%s=%s", var1, val1);
	if (var2 != NULL)
		snprintf(s.env[1], sizeof(s.env[1]), "%s=%s", var2, val2);
	return s;
}

#define NO_FLAGS ((const char *const *)NULL)

START_TEST(test_https_webhook_ca_applied_once)
{
	const struct ts_tls *t = ts_tls_certs();
	const char *ca[] = { "--webhook-ca", t->ca, NULL };
	struct side s = side(t->server_cert, t->server_key, TS_TLS_SERVER_NAME,
	    ca, NULL, NULL, NULL, NULL);
	char want[TS_TLS_PATH_MAX + 64];
	snprintf(want, sizeof(want), "trust=\"--webhook-ca %s\"", t->ca);
	applied_run("whhttps", &s, want);
}
END_TEST

/* (a) No --webhook-ca: the system store, here the test's CA handed over
 * as SSL_CERT_FILE, and as SSL_CERT_DIR. */
START_TEST(test_https_webhook_system_store_applied_once)
{
	const struct ts_tls *t = ts_tls_certs();
	const struct ts_tls_webhook *w = ts_tls_webhook_certs();
	struct side s = side(t->server_cert, t->server_key, TS_TLS_SERVER_NAME,
	    NO_FLAGS, "SSL_CERT_FILE", t->ca,
	    NULL, NULL);
	char want[TS_TLS_PATH_MAX + 64];
	snprintf(want, sizeof(want), "file %s from SSL_CERT_FILE", t->ca);
	applied_run("whsysfile", &s, want);
	s = side(t->server_cert, t->server_key, TS_TLS_SERVER_NAME,
	    NO_FLAGS, "SSL_CERT_DIR", w->ca_dir, NULL, NULL);
	snprintf(want, sizeof(want), "directory %s from SSL_CERT_DIR", w->ca_dir);
	applied_run("whsysdir", &s, want);
}
END_TEST

/* (b) The system store without the test's CA refuses the target. */
START_TEST(test_https_webhook_system_store_lacks_ca)
{
	const struct ts_tls *t = ts_tls_certs();
	struct side bad = side(t->server_cert, t->server_key, TS_TLS_SERVER_NAME,
	    NO_FLAGS, NULL, NULL, NULL, NULL);
	struct side good = side(t->server_cert, t->server_key, TS_TLS_SERVER_NAME,
	    NO_FLAGS, "SSL_CERT_FILE", t->ca,
	    NULL, NULL);
	refused_run("whnostore", &bad, &good, "unable to get local issuer certificate");
}
END_TEST

/* (c) --webhook-ca narrows: another CA there refuses the target although
 * the system store (file and directory) has the right one. */
START_TEST(test_https_webhook_ca_narrows_trust)
{
	const struct ts_tls *t = ts_tls_certs();
	const struct ts_tls_webhook *w = ts_tls_webhook_certs();
	const char *ca2[] = { "--webhook-ca", t->ca2, NULL };
	struct side bad = side(t->server_cert, t->server_key, TS_TLS_SERVER_NAME,
	    ca2, "SSL_CERT_FILE", t->ca,
	    "SSL_CERT_DIR", w->ca_dir);
	struct side good = side(t->server_cert, t->server_key, TS_TLS_SERVER_NAME,
	    NO_FLAGS, "SSL_CERT_FILE", t->ca,
	    "SSL_CERT_DIR", w->ca_dir);
	refused_run("whnarrow", &bad, &good, "unable to get local issuer certificate");
}
END_TEST

/* (d) A certificate for another name, then the name it carries; and the
 * right certificate where --webhook-server-name expects another. */
START_TEST(test_https_webhook_other_name_refused)
{
	const struct ts_tls *t = ts_tls_certs();
	const struct ts_tls_webhook *w = ts_tls_webhook_certs();
	struct side bad = side(w->other_cert, w->other_key, TS_TLS_SERVER_NAME,
	    NO_FLAGS, "SSL_CERT_FILE", t->ca,
	    NULL, NULL);
	struct side good = side(w->other_cert, w->other_key, TS_TLS_OTHER_NAME, NO_FLAGS,
	    "SSL_CERT_FILE", t->ca, NULL, NULL);
	refused_run("whothername", &bad, &good, "no alternative certificate subject name matches"
	    " target host name 'consumer.test'");
	const char *ca[] = { "--webhook-ca", t->ca, NULL };
	bad = side(t->server_cert, t->server_key, TS_TLS_OTHER_NAME,
	    ca, NULL, NULL, NULL, NULL);
	good = side(t->server_cert, t->server_key, TS_TLS_SERVER_NAME,
	    ca, NULL, NULL, NULL, NULL);
	refused_run("whflagname", &bad, &good, "target host name 'other.test'");
}
END_TEST

/* (e) An expired certificate, then a valid one, the consumer the same. */
START_TEST(test_https_webhook_expired_refused)
{
	const struct ts_tls *t = ts_tls_certs();
	const struct ts_tls_webhook *w = ts_tls_webhook_certs();
	struct side bad = side(w->expired_cert, w->expired_key, TS_TLS_SERVER_NAME,
	    NO_FLAGS, "SSL_CERT_FILE", t->ca,
	    NULL, NULL);
	struct side good = side(t->server_cert, t->server_key, TS_TLS_SERVER_NAME,
	    NO_FLAGS, "SSL_CERT_FILE", t->ca,
	    NULL, NULL);
	refused_run("whexpired", &bad, &good, "certificate has expired");
}
END_TEST

static void
config_refused(const char *want, const char *url, const char *const *flags, const char *var,
    const char *val)
{
	char out[2048], env1[TS_TLS_PATH_MAX + 32];
	const char *argv[16] = { "outbox-consumer", "--db", "dbname=x", "--handler", "webhook",
		"--webhook-url", url };
	int n = 7;
	for (int i = 0; flags != NULL && flags[i] != NULL; i++)
		argv[n++] = flags[i];
	argv[n] = NULL;
	char *env[2] = { NULL, NULL };
	if (var != NULL) {
		snprintf(env1, sizeof(env1), "%s=%s", var, val);
		env[0] = env1;
	}
	ck_assert_int_eq(ts_run((char *const *)argv, env, out, sizeof(out), 20000), 2);
	ck_assert_msg(strstr(out, want) != NULL, "want '%s' in: %s", want, out);
	char *nl = strchr(out, '\n');
	ck_assert_msg(nl != NULL && nl[1] == '\0', "not one line: %s", out);
}

START_TEST(test_https_webhook_config_refused)
{
	const struct ts_tls *t = ts_tls_certs();
	const char *https = "https://127.0.0.1:1/hook", *http = "http://127.0.0.1:1/hook";
	const char *ca[] = { "--webhook-ca", t->ca, NULL };
	const char *name[] = { "--webhook-server-name", "x.test", NULL };
	const char *missing[] = { "--webhook-ca", "/nonexistent/ca.pem", NULL };
	const char *garbage[] = { "--webhook-ca", t->garbage, NULL };
	const char *badname[] = { "--webhook-server-name", "a b.test", NULL };
	char want[TS_TLS_PATH_MAX + 128];
	config_refused("--webhook-ca is set but --webhook-url http://127.0.0.1:1/hook is not"
	    " https://", http, ca, NULL, NULL);
	config_refused("--webhook-server-name is set but --webhook-url http://127.0.0.1:1/hook"
	    " is not https://", http, name, NULL, NULL);
	config_refused("--webhook-ca /nonexistent/ca.pem: No such file or directory", https,
	    missing, NULL, NULL);
	snprintf(want, sizeof(want), "--webhook-ca %s: not a PEM CA certificate", t->garbage);
	config_refused(want, https, garbage, NULL, NULL);
	config_refused("SSL_CERT_FILE /nonexistent/ca.pem (the https:// webhook's CA store): No"
	    " such file or directory", https, NULL, "SSL_CERT_FILE", "/nonexistent/ca.pem");
	snprintf(want, sizeof(want), "SSL_CERT_FILE %s: not a PEM CA certificate", t->garbage);
	config_refused(want, https, NULL, "SSL_CERT_FILE", t->garbage);
	snprintf(want, sizeof(want), "SSL_CERT_DIR %s (the https:// webhook's CA store): not a"
	    " directory", t->ca);
	config_refused(want, https, NULL, "SSL_CERT_DIR", t->ca);
	config_refused("--webhook-server-name: a DNS name", https, badname, NULL, NULL);
	config_refused("no user info in the URL", "https://u:p@127.0.0.1:1/hook", NULL, NULL,
	    NULL);
	config_refused("--webhook-url: need an http:// or https:// URL", "ftp://127.0.0.1/x",
	    NULL, NULL, NULL);
	/* --help tells it: the system store by default, --webhook-ca narrows */
	char out[65536];
	char *help[] = { "outbox-consumer", "--help", NULL };
	ck_assert_int_eq(ts_run(help, NULL, out, sizeof(out), 20000), 0);
	const char *url_help = strstr(out, "--webhook-url VALUE");
	ck_assert_ptr_nonnull(url_help);
	ck_assert_msg(strstr(out, "needs --webhook-ca") == NULL, "--help: %.600s", url_help);
	ck_assert_msg(strstr(out, "system CA store") != NULL, "--help: %.600s", url_help);
	ck_assert_msg(strstr(out, "https_proxy") != NULL, "--help: %.600s", url_help);
}
END_TEST

int
main(void)
{
	/* The consumer inherits this environment: no trust or proxy of the
	 * caller's may decide a case; each case sets its own. */
	static const char *const vars[] = { "SSL_CERT_FILE", "SSL_CERT_DIR", "https_proxy",
		"HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy",
		"NO_PROXY", NULL };
	for (int i = 0; vars[i] != NULL; i++)
		unsetenv(vars[i]);
	Suite *s = suite_create("consumer_webhook_https");
	TCase *tc = tcase_create("https");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_https_webhook_ca_applied_once);
	tcase_add_test(tc, test_https_webhook_system_store_applied_once);
	tcase_add_test(tc, test_https_webhook_system_store_lacks_ca);
	tcase_add_test(tc, test_https_webhook_ca_narrows_trust);
	tcase_add_test(tc, test_https_webhook_other_name_refused);
	tcase_add_test(tc, test_https_webhook_expired_refused);
	tcase_add_test(tc, test_https_webhook_config_refused);
	suite_add_tcase(s, tc);
	int rc = ts_run_suite(s);
	nng_fini();
	return rc;
}
