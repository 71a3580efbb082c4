/*
 * test_consumer_webhook_proxy.c - the webhook's connections (libcurl,
 * consumer/webhook_http.c) through a real forward proxy the test starts
 * (Debian's tinyproxy, tests/support/ts_proxy.c) and a real HTTPS target
 * (webhook_target.c) trusted through SSL_CERT_FILE:
 *  - https:// through HTTPS_PROXY: the proxy's CONNECT to the target, TLS
 *    end to end, applied once; the tunnel kept and reused for the next
 *    calls (one CONNECT for three);
 *  - an answer lost on that reused connection: retried, and the request
 *    was sent once (libcurl's own re-send refused);
 *  - NO_PROXY naming the target: the proxy never asked;
 *  - http:// through http_proxy: the proxy forwards the POST;
 *  - at most once: the proxy reached but not the target (refused behind
 *    it, or the target's handshake refused through the tunnel) is "not
 *    sent", retried, never parked; an answer lost behind the proxy after
 *    the target acted is parked.
 * Without tinyproxy the test is Skipped (exit 77), a failure under
 * OUTBOX_TEST_STRICT=1.
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
#include "ts_proxy.h"
#include "ts_tls.h"
#include "webhook_mode.h"
#include "webhook_target.h"

struct env {
	char db[TS_CONNINFO_MAX], url[256], log[256];
	PGconn *conn;
	pid_t pid;
	struct ts_consumer_conn cc;
};

/* A consumer of hook (https:// under TS_TLS_SERVER_NAME, trusting the test
 * CA through SSL_CERT_FILE, unless no_store), every topic matching amo
 * (NULL: none) at most once, with up to two more variables. */
static void
env_start(struct env *e, const char *tag, const char *hook, const char *amo, bool no_store,
    const char *var1, const char *val1, const char *var2, const char *val2)
{
	const struct ts_tls *t = ts_tls_certs();
	static char vars[3][512];
	char *envp[4];
	int k = 0;
	if (!no_store) {
		snprintf(vars[k], sizeof(vars[k]), "SSL_CERT_FILE=%s", t->ca);
		envp[k] = vars[k], k++;
	}
	if (var1 != NULL) {
		snprintf(vars[k], sizeof(vars[k]), "%s=%s", var1, val1);
		envp[k] = vars[k], k++;
	}
	if (var2 != NULL) {
		snprintf(vars[k], sizeof(vars[k]), "%s=%s", var2, val2);
		envp[k] = vars[k], k++;
	}
	envp[k] = NULL;
	ts_db_create(tag, "inbox", e->db, sizeof(e->db));
	ts_ipc_url(tag, e->url, sizeof(e->url));
	const char *argv[20] = { "outbox-consumer", "--db", e->db, "--listen", e->url,
		"--handler", "webhook", "--webhook-url", hook, "--webhook-timeout", "10s",
		"--threads", "1" };
	int n = 13;
	if (strncmp(hook, "https://", 8) == 0) {
		argv[n++] = "--webhook-server-name";
		argv[n++] = TS_TLS_SERVER_NAME;
	}
	if (amo != NULL) {
		argv[n++] = "--webhook-at-most-once";
		argv[n++] = amo;
	}
	argv[n] = NULL;
	e->conn = ts_connect(e->db);
	e->pid = ts_spawn((char *const *)argv, envp, e->log);
	ts_consumer_open(&e->cc, e->url);
}

static void
env_stop(struct env *e)
{
	ts_consumer_close(&e->cc);
	ts_stop(e->pid, SIGTERM);
	PQfinish(e->conn);
}

static int
call(struct env *e, uint64_t id, const char *topic, const char *key, char *detail,
    size_t len)
{
	struct ob_wire_msg m = ts_consumer_msg(id, topic, key, "{\"n\":1}");
	return ts_consumer_call1(&e->cc, m, detail, len);
}

/* The port of an "http(s)://127.0.0.1:PORT/hook" URL. */
static int
port_of(const char *url)
{
	const char *p = strstr(url, "127.0.0.1:");
	ck_assert_ptr_nonnull(p);
	return atoi(p + 10);
}

static int64_t
parked(struct env *e)
{
	return ts_query_int(e->conn, "SELECT count(*) FROM inbox.webhook_calls"
	    " WHERE state = 'unknown'");
}

START_TEST(test_proxy_https_connect_reused)
{
	const struct ts_tls *t = ts_tls_certs();
	char hook[256], detail[512], connect[64];
	struct wt_target *wt = wt_start_tls(hook, sizeof(hook), t->server_cert, t->server_key);
	ck_assert_ptr_nonnull(wt);
	int port = port_of(hook);
	struct ts_proxy *px = ts_proxy_start(&port, 1);
	snprintf(connect, sizeof(connect), "CONNECT 127.0.0.1:%d ", port);
	struct env e;
	env_start(&e, "whpxtunnel", hook, NULL, false, "HTTPS_PROXY", ts_proxy_url(px), NULL,
	    NULL);
	ts_assert_logged(e.log, "proxy_env=HTTPS_PROXY no_proxy_env=none");
	const char *keys[] = { "px-1", "px-2", "px-3" };
	for (int i = 0; i < 3; i++) {
		int st = call(&e, (uint64_t)i + 1, "t", keys[i], detail, sizeof(detail));
		ck_assert_msg(st == OB_WIRE_APPLIED, "status %d: %s", st, detail);
		ck_assert_int_eq(wt_effects(wt, keys[i]), 1);
	}
	/* through the proxy's tunnel to the address (the name is TLS's), and
	 * one tunnel for the three: the connection was reused */
	ck_assert_msg(ts_proxy_requests(px, connect) == 1, "%d CONNECTs, log %s",
	    ts_proxy_requests(px, connect), ts_proxy_log(px));
	ck_assert_int_eq(ts_proxy_requests(px, ""), 1);

	/* The answer lost on that reused connection after the target acted:
	 * retried, and the request went out once (libcurl would re-send it
	 * on a new connection by itself; refused), then the key again. */
	wt_lose_next(wt, 1);
	ck_assert_int_eq(call(&e, 4, "t", "px-lost", detail, sizeof(detail)), OB_WIRE_RETRY);
	ck_assert_msg(strstr(detail, "webhook call failed") != NULL, "%s", detail);
	ck_assert_int_eq(wt_requests(wt, "px-lost"), 1);
	ck_assert_int_eq(call(&e, 4, "t", "px-lost", detail, sizeof(detail)), OB_WIRE_APPLIED);
	ck_assert_int_eq(wt_requests(wt, "px-lost"), 2);
	ck_assert_int_eq(wt_effects(wt, "px-lost"), 1);
	env_stop(&e);
	ts_proxy_stop(px);
	wt_stop(wt);
}
END_TEST

/* NO_PROXY naming the target (the name the URL is sent to): direct. */
START_TEST(test_proxy_no_proxy_bypasses)
{
	const struct ts_tls *t = ts_tls_certs();
	char hook[256], detail[512];
	struct wt_target *wt = wt_start_tls(hook, sizeof(hook), t->server_cert, t->server_key);
	ck_assert_ptr_nonnull(wt);
	int port = port_of(hook);
	struct ts_proxy *px = ts_proxy_start(&port, 1);
	struct env e;
	env_start(&e, "whpxbypass", hook, NULL, false, "HTTPS_PROXY", ts_proxy_url(px),
	    "NO_PROXY", "example.org," TS_TLS_SERVER_NAME);
	ts_assert_logged(e.log, "proxy_env=HTTPS_PROXY no_proxy_env=NO_PROXY");
	int st = call(&e, 1, "t", "bypass-1", detail, sizeof(detail));
	ck_assert_msg(st == OB_WIRE_APPLIED, "status %d: %s", st, detail);
	ck_assert_int_eq(wt_effects(wt, "bypass-1"), 1);
	ck_assert_int_eq(ts_proxy_requests(px, ""), 0);
	env_stop(&e);
	ts_proxy_stop(px);
	wt_stop(wt);
}
END_TEST

/* http:// through http_proxy: the proxy forwards the POST itself. */
START_TEST(test_proxy_http_forwarded)
{
	char hook[256], detail[512], post[300];
	struct wt_target *wt = wt_start(hook, sizeof(hook));
	ck_assert_ptr_nonnull(wt);
	int port = port_of(hook);
	struct ts_proxy *px = ts_proxy_start(&port, 1);
	snprintf(post, sizeof(post), "POST %s ", hook);
	struct env e;
	env_start(&e, "whpxhttp", hook, NULL, true, "http_proxy", ts_proxy_url(px), NULL, NULL);
	ts_assert_logged(e.log, "proxy_env=http_proxy");
	int st = call(&e, 1, "t", "fwd-1", detail, sizeof(detail));
	ck_assert_msg(st == OB_WIRE_APPLIED, "status %d: %s", st, detail);
	ck_assert_int_eq(wt_effects(wt, "fwd-1"), 1);
	ck_assert_msg(ts_proxy_requests(px, post) == 1, "log %s", ts_proxy_log(px));
	env_stop(&e);
	ts_proxy_stop(px);
	wt_stop(wt);
}
END_TEST

/* At most once through a proxy: connected to the proxy is not sent to the
 * target. */
START_TEST(test_proxy_at_most_once_not_sent)
{
	const struct ts_tls *t = ts_tls_certs();
	char hook[256], down[256], detail[512], connect[64];
	struct wt_target *wt = wt_start_tls(hook, sizeof(hook), t->server_cert, t->server_key);
	ck_assert_ptr_nonnull(wt);
	int refusing;
	int hold = ts_refusing_local(&refusing);
	snprintf(down, sizeof(down), "https://127.0.0.1:%d/hook", refusing);
	int ports[] = { port_of(hook), refusing };
	struct ts_proxy *px = ts_proxy_start(ports, 2);

	/* the proxy cannot reach the target: nothing sent, retried */
	struct env e;
	env_start(&e, "whpxdown", down, "amo.*", false, "HTTPS_PROXY", ts_proxy_url(px), NULL,
	    NULL);
	ck_assert_int_eq(call(&e, 1, "amo.x", "down-1", detail, sizeof(detail)), OB_WIRE_RETRY);
	ck_assert_msg(strstr(detail, "webhook call failed") != NULL, "%s", detail);
	snprintf(connect, sizeof(connect), "CONNECT 127.0.0.1:%d ", refusing);
	ck_assert_int_eq(ts_proxy_requests(px, connect), 1);
	ck_assert_int_eq(parked(&e), 0);
	env_stop(&e);

	/* the target's handshake refused through the tunnel (its CA not in
	 * the store): nothing sent, retried, reason tls */
	env_start(&e, "whpxtls", hook, "amo.*", true, "HTTPS_PROXY", ts_proxy_url(px), NULL,
	    NULL);
	ck_assert_int_eq(call(&e, 1, "amo.x", "tls-1", detail, sizeof(detail)), OB_WIRE_RETRY);
	ck_assert_msg(strstr(detail, "webhook TLS handshake failed") != NULL, "%s", detail);
	snprintf(connect, sizeof(connect), "CONNECT 127.0.0.1:%d ", port_of(hook));
	ck_assert_int_eq(ts_proxy_requests(px, connect), 1);
	ck_assert_int_eq(wt_total(wt), 0);
	ck_assert_int_eq(parked(&e), 0);
	ts_assert_logged(e.log, "consumer.webhook.tls_failed");
	env_stop(&e);

	/* ...while an answer lost behind the proxy after the target acted may
	 * have been applied: parked */
	env_start(&e, "whpxlost", hook, "amo.*", false, "HTTPS_PROXY", ts_proxy_url(px), NULL,
	    NULL);
	wt_lose_next(wt, 1);
	ck_assert_int_eq(call(&e, 1, "amo.x", "lost-1", detail, sizeof(detail)), OB_WIRE_REJECT);
	ck_assert_msg(strncmp(detail, WEBHOOK_PARKED_DETAIL, strlen(WEBHOOK_PARKED_DETAIL)) == 0,
	    "%s", detail);
	ck_assert_int_eq(wt_acts(wt, "lost-1"), 1);
	ck_assert_int_eq(parked(&e), 1);
	env_stop(&e);
	close(hold);
	ts_proxy_stop(px);
	wt_stop(wt);
}
END_TEST

int
main(void)
{
	char why[256];
	if (!ts_proxy_available(why, sizeof(why))) {
		const char *strict = getenv("OUTBOX_TEST_STRICT");
		if (strict != NULL && strcmp(strict, "1") == 0) {
			fprintf(stderr, "test_consumer_webhook_proxy: FAILED: %s; under"
			    " OUTBOX_TEST_STRICT=1 it must be there\n", why);
			return 1;
		}
		fprintf(stderr, "test_consumer_webhook_proxy: SKIPPED: %s\n", why);
		return 77;
	}
	/* no trust or proxy of the caller's may decide a case */
	static const char *const vars[] = { "SSL_CERT_FILE", "SSL_CERT_DIR", "https_proxy",
		"HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy",
		"NO_PROXY", NULL };
	for (int i = 0; vars[i] != NULL; i++)
		unsetenv(vars[i]);
	Suite *s = suite_create("consumer_webhook_proxy");
	TCase *tc = tcase_create("proxy");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_proxy_https_connect_reused);
	tcase_add_test(tc, test_proxy_no_proxy_bypasses);
	tcase_add_test(tc, test_proxy_http_forwarded);
	tcase_add_test(tc, test_proxy_at_most_once_not_sent);
	suite_add_tcase(s, tc);
	int rc = ts_run_suite(s);
	nng_fini();
	return rc;
}
