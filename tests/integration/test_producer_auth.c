/*
 * test_producer_auth.c - `serve --api-token-file`: bearer tokens for the
 * producer API. Without a valid token: 401 with `WWW-Authenticate: Bearer`
 * and nothing written (the request never reaches a serving thread); each
 * of several tokens works; GET /healthz stays open (probes); no token ever
 * appears in the log; bad token files are start-up errors (exit 2) whose
 * message names the line, not the token. Without the flag nothing changes
 * (every other producer test).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/nng.h>

#include "testsupport.h"
#include "ts_producer.h"

#define TOKEN_A "tok-A-0123456789abcdef"
#define TOKEN_B "tok-B-fedcba9876543210"

/* A POST with Authorization: auth (NULL: none); status, the raw answer in out. */
static int
post_with(int port, const char *key, const char *auth, char *out, size_t outlen)
{
	char extra[512], req[4096];
	snprintf(extra, sizeof(extra), "%s%s%sConnection: close\r\n", auth ? "Authorization: " : "",
	    auth ? auth : "", auth ? "\r\n" : "");
	size_t n = ts_producer_raw_post(req, sizeof(req), key, extra, TS_PRODUCER_BODY);
	return ts_http_raw(port, req, n, out, outlen, 10000);
}

START_TEST(test_bearer_tokens)
{
	char db[TS_CONNINFO_MAX], path[300], out[8192];
	ts_db_create("prodauth", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	snprintf(path, sizeof(path), "%s/tokens-%d", ts_tmpdir(), (int)getpid());
	ts_write_file(path, "# producer API tokens\n" TOKEN_A "\n\n" TOKEN_B "\r\n");
	struct ts_producer_server s;
	char *extra[] = { "--api-token-file", path, NULL };
	ts_producer_serve(db, extra, &s);
	int port = ts_producer_port(&s);

	ck_assert_int_eq(post_with(port, "a-1", NULL, out, sizeof(out)), 401);
	ck_assert_msg(strstr(out, "WWW-Authenticate: Bearer") != NULL, "%s", out);
	ck_assert_int_eq(post_with(port, "a-2", "Bearer " TOKEN_A "x", out, sizeof(out)), 401);
	ck_assert_msg(strstr(out, "error=\"invalid_token\"") != NULL, "%s", out);
	ck_assert_int_eq(post_with(port, "a-3", "Bearer tok-A-0123456789abcdeX", out, sizeof(out)),
	    401);
	ck_assert_int_eq(post_with(port, "a-4", "Basic dXNlcjpwYXNz", out, sizeof(out)), 401);
	ck_assert_int_eq(ts_producer_raw_get(port, "/v1/reports?idempotency_key=a-1", out,
	    sizeof(out)), 401);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.bug_reports"), 0);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.idempotency_keys"), 0);

	ck_assert_int_eq(post_with(port, "b-1", "Bearer " TOKEN_A, out, sizeof(out)), 201);
	ck_assert_int_eq(post_with(port, "b-2", "bearer  " TOKEN_B, out, sizeof(out)), 201);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.bug_reports"), 2);
	/* Liveness probes need no token. */
	ck_assert_int_eq(ts_producer_raw_get(port, "/healthz", out, sizeof(out)), 200);

	ts_stop(s.pid, SIGTERM);
	char *log = ts_read_file(s.log);
	ck_assert_ptr_nonnull(log);
	ck_assert_msg(strstr(log, "tok-A-") == NULL && strstr(log, "tok-B-") == NULL,
	    "a token in the log:\n%s", log);
	free(log);
	PQfinish(c);
}
END_TEST

START_TEST(test_bad_token_files_refused)
{
	char db[TS_CONNINFO_MAX], path[300], out[4096];
	ts_db_create("prodauthbad", "outbox", db, sizeof(db));
	snprintf(path, sizeof(path), "%s/badtokens-%d", ts_tmpdir(), (int)getpid());
	char *argv[] = { "outbox-producer", "serve", "--db", db, "--http", "http://127.0.0.1:0",
		"--api-token-file", path, NULL };
	static const char *const bad[] = { "# only a comment\n\n", "short-secret-1\n",
		"tok-with space-0123456789\n", NULL };
	for (int i = 0; bad[i] != NULL; i++) {
		ts_write_file(path, bad[i]);
		ck_assert_int_eq(ts_run(argv, NULL, out, sizeof(out), 20000), 2);
		ck_assert_msg(strstr(out, "--api-token-file") != NULL, "%s", out);
		ck_assert_msg(strstr(out, "secret") == NULL && strstr(out, "space-") == NULL,
		    "the token was printed: %s", out);
	}
	unlink(path);
	ck_assert_int_eq(ts_run(argv, NULL, out, sizeof(out), 20000), 2);
	ck_assert_msg(strstr(out, "No such file") != NULL, "%s", out);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("producer_auth");
	TCase *tc = tcase_create("auth");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_bearer_tokens);
	tcase_add_test(tc, test_bad_token_files_refused);
	suite_add_tcase(s, tc);
	int rc = ts_run_suite(s);
	nng_fini();
	return rc;
}
