/*
 * test_producer_https.c - `serve --http https://` (common/httpd_tls.c on
 * OpenSSL): a POST over HTTPS with a bearer token enqueues exactly one
 * message; plain HTTP sent to the HTTPS port is refused in the handshake
 * and writes nothing; a client that sends half a ClientHello and stalls is
 * cut off at --header-timeout while a legitimate HTTPS request is served
 * meanwhile; with --tls-ca only clients holding a certificate from that CA
 * get through; bad TLS flags and files exit 2 with one line. Certificates
 * are made by the test with the openssl CLI (tests/support/ts_tls.c).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nng/nng.h>

#include "testsupport.h"
#include "ts_https.h"
#include "ts_producer.h"
#include "ts_tls.h"

#define TOKEN "tok-https-0123456789abcdef"

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

/* A POST over HTTPS with Authorization: Bearer TOKEN (auth false: none). */
static int
https_post(int port, const struct ts_https_client *cl, const char *key, bool auth, char *out,
    size_t outlen, char *why, size_t whylen)
{
	char req[4096];
	size_t n = ts_producer_raw_post(req, sizeof(req), key,
	    auth ? "Authorization: Bearer " TOKEN "\r\nConnection: close\r\n"
	         : "Connection: close\r\n", TS_PRODUCER_BODY);
	return ts_https_raw(port, cl, req, n, out, outlen, 10000, why, whylen);
}

static int64_t
rows(PGconn *c, const char *table)
{
	char q[128];
	snprintf(q, sizeof(q), "SELECT count(*) FROM %s", table);
	return ts_query_int(c, q);
}

START_TEST(test_https_post_and_plain_refused)
{
	const struct ts_tls *t = ts_tls_certs();
	char db[TS_CONNINFO_MAX], tokens[300], out[8192], why[512];
	ts_db_create("prodhttps", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	snprintf(tokens, sizeof(tokens), "%s/https-tokens-%d", ts_tmpdir(), (int)getpid());
	write_file(tokens, TOKEN "\n");
	char *extra[] = { "--http", "https://127.0.0.1:0", "--tls-cert", (char *)t->server_cert,
		"--tls-key", (char *)t->server_key, "--api-token-file", tokens, "--metrics",
		"127.0.0.1:0", NULL };
	struct ts_producer_server s;
	ts_producer_serve(db, extra, &s);
	ck_assert_msg(strncmp(s.url, "https://127.0.0.1:", 18) == 0, "ready file: %s", s.url);
	int port = ts_producer_port(&s), mport = ts_producer_metrics_port(&s);
	struct ts_https_client cl = { .ca = t->ca };

	/* Over HTTPS, with the token: one report, one message. */
	int st = https_post(port, &cl, "tls-1", true, out, sizeof(out), why, sizeof(why));
	ck_assert_msg(st == 201, "status %d (%s): %s", st, why, out);
	ck_assert_int_eq(rows(c, "app.bug_reports"), 1);
	ck_assert_int_eq(rows(c, "outbox.messages"), 1);
	/* The same key again: replayed, nothing new. */
	st = https_post(port, &cl, "tls-1", true, out, sizeof(out), why, sizeof(why));
	ck_assert_msg(st == 201 && strstr(out, "Idempotent-Replayed: true") != NULL, "%d: %s", st,
	    out);
	ck_assert_int_eq(rows(c, "outbox.messages"), 1);
	/* Tokens still hold over HTTPS. */
	ck_assert_int_eq(https_post(port, &cl, "tls-2", false, out, sizeof(out), NULL, 0), 401);
	ck_assert_msg(strstr(out, "WWW-Authenticate: Bearer") != NULL, "%s", out);
	/* A client that does not trust the server's CA refuses it. */
	struct ts_https_client wrong = { .ca = t->ca2 };
	ck_assert_int_eq(https_post(port, &wrong, "tls-3", true, out, sizeof(out), why,
	    sizeof(why)), 0);
	ck_assert_msg(strstr(why, "handshake") != NULL, "%s", why);

	/* Keep-alive and pipelining over TLS: two requests in one write, two
	 * answers on one connection. */
	static const char two[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
	    "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	ck_assert_int_eq(ts_https_raw(port, &cl, two, sizeof(two) - 1, out, sizeof(out), 10000,
	    why, sizeof(why)), 200);
	const char *second = strstr(out + 1, "HTTP/1.1 200");
	ck_assert_msg(second != NULL && strstr(second, "Connection: close") != NULL, "%s", out);

	/* Plain HTTP to the HTTPS port: no HTTP answer, connection closed,
	 * nothing written. */
	char req[4096];
	size_t n = ts_producer_raw_post(req, sizeof(req), "plain-1",
	    "Authorization: Bearer " TOKEN "\r\nConnection: close\r\n", TS_PRODUCER_BODY);
	int64_t t0 = ts_now_ms();
	ck_assert_int_eq(ts_http_raw(port, req, n, out, sizeof(out), 10000), 0);
	ck_assert_msg(ts_now_ms() - t0 < 5000, "not closed at once");
	ck_assert_msg(strstr(out, "HTTP/1.") == NULL, "%s", out);
	ck_assert_int_eq(rows(c, "app.bug_reports"), 1);
	ck_assert_int_eq(rows(c, "app.idempotency_keys"), 1);
	ck_assert_int_eq(rows(c, "outbox.messages"), 1);
	ck_assert_int_eq(ts_log_wait(s.log, "http.tls.handshake_failed", 2, 10000), 2);
	ck_assert_int_eq(ts_log_count(s.log, "err=\"http request\""), 1);
	ck_assert_double_eq(ts_wait_metric(mport, "outbox_http_connections_closed_total{server="
	    "\"api\",reason=\"tls_handshake\"}", 2, 5000), 2);

	ts_stop(s.pid, SIGTERM);
	char *log = ts_read_file(s.log);
	ck_assert_ptr_nonnull(log);
	ck_assert_msg(strstr(log, "tls=on") != NULL, "%s", log);
	ck_assert_msg(strstr(log, "tok-https-") == NULL, "a token in the log:\n%s", log);
	free(log);
	PQfinish(c);
}
END_TEST

/* Half a ClientHello, then nothing: closed at the header deadline (2 s),
 * counted as header_timeout; a legitimate HTTPS POST meanwhile is served
 * at once (the stalled handshake holds neither the loop nor a thread). */
START_TEST(test_stalled_handshake_cut_off)
{
	const struct ts_tls *t = ts_tls_certs();
	char db[TS_CONNINFO_MAX], out[8192], why[512];
	unsigned char hello[4096];
	ts_db_create("prodhttpsstall", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	char *extra[] = { "--http", "https://127.0.0.1:0", "--tls-cert", (char *)t->server_cert,
		"--tls-key", (char *)t->server_key, "--header-timeout", "2s", "--read-timeout", "3s",
		"--metrics", "127.0.0.1:0", NULL };
	struct ts_producer_server s;
	ts_producer_serve(db, extra, &s);
	int port = ts_producer_port(&s), mport = ts_producer_metrics_port(&s);
	struct ts_https_client cl = { .ca = t->ca };

	size_t n = ts_https_client_hello(hello, sizeof(hello));
	int64_t t0 = ts_now_ms();
	int fd = ts_tcp_connect(port);
	ts_tcp_send(fd, hello, n / 2);

	int64_t p0 = ts_now_ms();
	int st = https_post(port, &cl, "stall-legit", false, out, sizeof(out), why, sizeof(why));
	int64_t served = ts_now_ms() - p0;
	ck_assert_msg(st == 201, "status %d (%s): %s", st, why, out);
	/* done well before the stalled one's deadline, which is still open */
	ck_assert_msg(ts_now_ms() - t0 < 1800, "the legitimate POST took %lld ms",
	    (long long)served);
	ck_assert_int_eq(rows(c, "outbox.messages"), 1);

	int64_t took = ts_tcp_wait_closed(fd, 10000);
	took = took < 0 ? -1 : ts_now_ms() - t0;
	close(fd);
	ck_assert_msg(took >= 1900 && took < 4000, "stalled handshake closed after %lld ms,"
	    " want ~2000", (long long)took);
	ck_assert_double_eq(ts_wait_metric(mport, "outbox_http_connections_closed_total{server="
	    "\"api\",reason=\"header_timeout\"}", 1, 5000), 1);
	ck_assert_int_eq(ts_log_count(s.log, "reason=header_timeout"), 1);
	ck_assert_int_eq(rows(c, "outbox.messages"), 1);
	ts_stop(s.pid, SIGTERM);
	PQfinish(c);
}
END_TEST

/* --tls-ca: a client certificate from that CA is required. */
START_TEST(test_mutual_tls)
{
	const struct ts_tls *t = ts_tls_certs();
	char db[TS_CONNINFO_MAX], out[8192], why[512];
	ts_db_create("prodmtls", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	char *extra[] = { "--http", "https://127.0.0.1:0", "--tls-cert", (char *)t->server_cert,
		"--tls-key", (char *)t->server_key, "--tls-ca", (char *)t->ca, NULL };
	struct ts_producer_server s;
	ts_producer_serve(db, extra, &s);
	int port = ts_producer_port(&s);

	struct ts_https_client none = { .ca = t->ca };
	ck_assert_int_eq(https_post(port, &none, "m-1", false, out, sizeof(out), why,
	    sizeof(why)), 0);
	struct ts_https_client other = { .ca = t->ca, .cert = t->other_cert, .key = t->other_key };
	ck_assert_int_eq(https_post(port, &other, "m-2", false, out, sizeof(out), why,
	    sizeof(why)), 0);
	ck_assert_int_eq(rows(c, "app.idempotency_keys"), 0);
	ck_assert_int_eq(rows(c, "outbox.messages"), 0);
	ck_assert_int_eq(ts_log_wait(s.log, "http.tls.handshake_failed", 2, 10000), 2);

	struct ts_https_client good = { .ca = t->ca, .cert = t->client_cert, .key = t->client_key };
	int st = https_post(port, &good, "m-3", false, out, sizeof(out), why, sizeof(why));
	ck_assert_msg(st == 201, "status %d (%s): %s", st, why, out);
	ck_assert_int_eq(rows(c, "outbox.messages"), 1);
	ts_stop(s.pid, SIGTERM);
	ck_assert_int_eq(ts_log_count(s.log, "tls=mutual"), 1);
	PQfinish(c);
}
END_TEST

/* One run of serve that must exit 2 with one line holding want. */
static void
refused(const char *want, const char *const *flags)
{
	char out[4096];
	char *argv[24] = { "outbox-producer", "serve", "--db", "dbname=nowhere" };
	int argc = 4;
	for (int i = 0; flags[i] != NULL; i++)
		argv[argc++] = (char *)flags[i];
	argv[argc] = NULL;
	ck_assert_int_eq(ts_run(argv, NULL, out, sizeof(out), 20000), 2);
	ck_assert_msg(strstr(out, want) != NULL, "want '%s' in: %s", want, out);
	char *nl = strchr(out, '\n');
	ck_assert_msg(nl != NULL && nl[1] == '\0', "not one line: %s", out);
}

START_TEST(test_bad_tls_flags_exit_2)
{
	const struct ts_tls *t = ts_tls_certs();
	const char *https = "https://127.0.0.1:0";
	refused("needs --tls-cert and --tls-key",
	    (const char *[]){ "--http", https, NULL });
	refused("needs --tls-key (--tls-cert is set)",
	    (const char *[]){ "--http", https, "--tls-cert", t->server_cert, NULL });
	refused("needs --tls-cert (--tls-key is set)",
	    (const char *[]){ "--http", https, "--tls-key", t->server_key, NULL });
	refused("--tls-cert /nonexistent/server.pem: No such file or directory",
	    (const char *[]){ "--http", https, "--tls-cert", "/nonexistent/server.pem",
	        "--tls-key", t->server_key, NULL });
	refused("--tls-key /nonexistent/server.key: No such file or directory",
	    (const char *[]){ "--http", https, "--tls-cert", t->server_cert, "--tls-key",
	        "/nonexistent/server.key", NULL });
	refused("not a PEM certificate OpenSSL can read",
	    (const char *[]){ "--http", https, "--tls-cert", t->garbage, "--tls-key",
	        t->server_key, NULL });
	refused("not an unencrypted PEM private key",
	    (const char *[]){ "--http", https, "--tls-cert", t->server_cert, "--tls-key",
	        t->garbage, NULL });
	refused("not the private key of --tls-cert",
	    (const char *[]){ "--http", https, "--tls-cert", t->server_cert, "--tls-key",
	        t->client_key, NULL });
	refused("--tls-ca",
	    (const char *[]){ "--http", https, "--tls-cert", t->server_cert, "--tls-key",
	        t->server_key, "--tls-ca", t->garbage, NULL });
	refused("--tls-cert is set but --http http://127.0.0.1:0 is not https://",
	    (const char *[]){ "--http", "http://127.0.0.1:0", "--tls-cert", t->server_cert,
	        "--tls-key", t->server_key, NULL });
	/* A key file the user cannot read (not as root: root reads it anyway). */
	if (geteuid() != 0) {
		char path[300];
		snprintf(path, sizeof(path), "%s/unreadable-%d.key", ts_tmpdir(), (int)getpid());
		write_file(path, "x\n");
		chmod(path, 0);
		refused("Permission denied", (const char *[]){ "--http", https, "--tls-cert",
		    t->server_cert, "--tls-key", path, NULL });
	}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("producer_https");
	TCase *tc = tcase_create("https");
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, test_https_post_and_plain_refused);
	tcase_add_test(tc, test_stalled_handshake_cut_off);
	tcase_add_test(tc, test_mutual_tls);
	tcase_add_test(tc, test_bad_tls_flags_exit_2);
	suite_add_tcase(s, tc);
	int rc = ts_run_suite(s);
	nng_fini();
	return rc;
}
