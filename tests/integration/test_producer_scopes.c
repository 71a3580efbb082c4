/*
 * test_producer_scopes.c - `serve --api-token-file` with token scopes
 * (`scope=NAME TOKEN` lines): idempotency keys belong to the scope of the
 * token that used them, as Stripe's belong to an account.
 *
 * Two clients (scopes alpha and beta) that send the same Idempotency-Key
 * with different bodies make two reports and two outbox messages (keyed
 * report-<id>, so the consumer applies both), each client reads back its
 * own report (POST, replay, lookup by key, GET by id) with the key it
 * sent; neither sees the other's. Two tokens of one scope share its keys
 * (rotation). The default scope (a bare TOKEN line) stores keys as before.
 * A scope's name counts against the key limit (400 naming the maximum).
 * Malformed lines are start-up errors naming the file and the line, never
 * the token or what stood where a scope name should be. `submit` and
 * `lookup` send a token from their own --api-token-file.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/nng.h>

#include "testsupport.h"
#include "ts_producer.h"

#define ALPHA_OLD "tok-alpha-old-0123456789"
#define ALPHA_NEW "tok-alpha-new-0123456789"
#define BETA "tok-beta-0123456789abcdef"
#define PLAIN "tok-default-0123456789abc"

#define BODY_ALPHA TS_PRODUCER_BODY
#define BODY_BETA "{\"title\":\"Beta loses data\",\"module\":\"sync\",\"severity\":\"low\"}"

static void
post_as(const struct ts_producer_server *s, const char *token, const char *key,
    const char *body, struct ts_producer_reply *r)
{
	ts_producer_http_as(s->url, token, "POST", "/v1/reports", key, body, strlen(body), r);
}

static void
get_as(const struct ts_producer_server *s, const char *token, const char *path,
    struct ts_producer_reply *r)
{
	ts_producer_http_as(s->url, token, "GET", path, NULL, NULL, 0, r);
}

START_TEST(test_keys_are_per_scope)
{
	char db[TS_CONNINFO_MAX], path[300], v[300], target[128];
	ts_db_create("prodscope", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	snprintf(path, sizeof(path), "%s/scoped-tokens-%d", ts_tmpdir(), (int)getpid());
	ts_write_file(path, "# alpha: old and new token while it rotates\n"
	    "scope=alpha " ALPHA_OLD "\n"
	    "scope=alpha\t" ALPHA_NEW "\n"
	    "scope=beta " BETA "\n"
	    PLAIN "\n");
	struct ts_producer_server s;
	char *extra[] = { "--api-token-file", path, NULL };
	ts_producer_serve(db, extra, &s);
	struct ts_producer_reply a, b, r;

	/* alpha, then beta, the same key with another body: two new reports. */
	post_as(&s, ALPHA_OLD, "k1", BODY_ALPHA, &a);
	ck_assert_int_eq(a.status, 201);
	ck_assert(!a.replayed);
	long long ida = ts_producer_report_id(a.body);
	post_as(&s, BETA, "k1", BODY_BETA, &b);
	ck_assert_msg(b.status == 201 && !b.replayed, "beta's k1: %d %s", b.status, b.body);
	long long idb = ts_producer_report_id(b.body);
	ck_assert_int_gt(ida, 0);
	ck_assert_int_gt(idb, 0);
	ck_assert_int_ne(ida, idb);
	/* Each is told the key it sent, not the stored form. */
	ck_assert_str_eq(ts_producer_json_str(a.body, "idempotency_key", v, sizeof(v)), "k1");
	ck_assert_str_eq(ts_producer_json_str(b.body, "idempotency_key", v, sizeof(v)), "k1");
	ck_assert_str_eq(ts_producer_json_str(b.body, "title", v, sizeof(v)), "Beta loses data");

	/* Two messages, one per report, keyed by the report: the consumer
	 * deduplicates by that key, so it applies both. */
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.bug_reports"), 2);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(DISTINCT m.idempotency_key)"
	    " FROM outbox.messages m JOIN app.bug_reports b ON m.idempotency_key = 'report-' || b.id"
	    " AND (m.payload->>'report_id')::bigint = b.id AND m.topic = 'report.created'"), 2);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages"), 2);

	/* The lookup by key answers each scope with its own report. */
	get_as(&s, ALPHA_OLD, "/v1/reports?idempotency_key=k1", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(ts_producer_report_id(r.body), ida);
	ck_assert_str_eq(ts_producer_json_str(r.body, "idempotency_key", v, sizeof(v)), "k1");
	get_as(&s, BETA, "/v1/reports?idempotency_key=k1", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(ts_producer_report_id(r.body), idb);
	ck_assert_str_eq(ts_producer_json_str(r.body, "title", v, sizeof(v)), "Beta loses data");
	ck_assert_str_eq(ts_producer_json_str(r.body, "idempotency_key", v, sizeof(v)), "k1");
	/* ... and by id only its own. */
	snprintf(target, sizeof(target), "/v1/reports/%lld", idb);
	get_as(&s, BETA, target, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(ts_producer_json_str(r.body, "idempotency_key", v, sizeof(v)), "k1");
	get_as(&s, ALPHA_OLD, target, &r);
	ck_assert_int_eq(r.status, 404);
	get_as(&s, PLAIN, target, &r);
	ck_assert_int_eq(r.status, 404);

	/* A replay in each scope: that scope's original answer, byte for byte. */
	post_as(&s, ALPHA_OLD, "k1", BODY_ALPHA, &r);
	ck_assert_int_eq(r.status, 201);
	ck_assert(r.replayed);
	ck_assert_str_eq(r.body, a.body);
	post_as(&s, BETA, "k1", BODY_BETA, &r);
	ck_assert(r.replayed);
	ck_assert_str_eq(r.body, b.body);
	/* Within beta the key is taken: another body is 422. */
	post_as(&s, BETA, "k1", BODY_ALPHA, &r);
	ck_assert_int_eq(r.status, 422);

	/* Rotation: alpha's new token shares alpha's keys. */
	post_as(&s, ALPHA_NEW, "k1", BODY_ALPHA, &r);
	ck_assert_int_eq(r.status, 201);
	ck_assert(r.replayed);
	ck_assert_str_eq(r.body, a.body);
	post_as(&s, ALPHA_NEW, "k1", BODY_BETA, &r);
	ck_assert_int_eq(r.status, 422);
	snprintf(target, sizeof(target), "/v1/reports/%lld", ida);
	get_as(&s, ALPHA_NEW, target, &r);
	ck_assert_int_eq(r.status, 200);

	/* The default scope: a third report, its key stored as sent. */
	post_as(&s, PLAIN, "k1", BODY_ALPHA, &r);
	ck_assert_int_eq(r.status, 201);
	ck_assert(!r.replayed);
	long long idp = ts_producer_report_id(r.body);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.bug_reports"
	    " WHERE idempotency_key = 'k1'"), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.idempotency_keys"
	    " WHERE idempotency_key = 'k1'"), 1);
	get_as(&s, PLAIN, "/v1/reports?idempotency_key=k1", &r);
	ck_assert_int_eq(ts_producer_report_id(r.body), idp);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.bug_reports"), 3);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.idempotency_keys"), 3);
	/* A key of alpha not used by alpha: 404 (beta has one, k2). */
	post_as(&s, BETA, "k2", BODY_BETA, &r);
	ck_assert_int_eq(r.status, 201);
	get_as(&s, ALPHA_OLD, "/v1/reports?idempotency_key=k2", &r);
	ck_assert_int_eq(r.status, 404);

	/* The scope's name counts against the 255 bytes of a key: for alpha
	 * (5 + 1) 249 fit, 250 are a 400 that says so; the default scope
	 * keeps all 255. */
	char key[300];
	memset(key, 'x', 250);
	key[250] = '\0';
	post_as(&s, ALPHA_OLD, key, BODY_ALPHA, &r);
	ck_assert_int_eq(r.status, 400);
	ck_assert_msg(strstr(r.body, "the maximum is 249") != NULL, "%s", r.body);
	key[249] = '\0';
	post_as(&s, ALPHA_OLD, key, BODY_ALPHA, &r);
	ck_assert_int_eq(r.status, 201);
	memset(key, 'y', 255);
	key[255] = '\0';
	post_as(&s, PLAIN, key, BODY_ALPHA, &r);
	ck_assert_int_eq(r.status, 201);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.bug_reports"), 6);

	ts_stop(s.pid, SIGTERM);
	char *log = ts_read_file(s.log);
	ck_assert_ptr_nonnull(log);
	ck_assert_msg(strstr(log, "producer.auth.bearer tokens=4 scopes=2") != NULL, "%s", log);
	ck_assert_msg(strstr(log, "tok-") == NULL, "a token in the log:\n%s", log);
	free(log);
	PQfinish(c);
}
END_TEST

/* Each file is refused with exit 2 naming the file and `line N`; nothing
 * marked "secret" (tokens, and what stands where a scope name should) is
 * ever printed. */
START_TEST(test_bad_scope_lines_refused)
{
	char db[TS_CONNINFO_MAX], path[300], out[4096], longline[700];
	ts_db_create("prodscopebad", "outbox", db, sizeof(db));
	snprintf(path, sizeof(path), "%s/badscopes-%d", ts_tmpdir(), (int)getpid());
	char *argv[] = { "outbox-producer", "serve", "--db", db, "--http", "http://127.0.0.1:0",
		"--api-token-file", path, NULL };
	snprintf(longline, sizeof(longline), "scope=a %0600d\n", 0);
	static const char ok[] = "tok-default-0123456789abc\n";
	const struct {
		const char *line2;
		const char *why;
	} bad[] = {
		{ "scope=Alpha tok-secret-0123456789\n", "a scope name" },        /* upper case */
		{ "scope=al.pha tok-secret-0123456789\n", "a scope name" },       /* a dot */
		{ "scope=secretsecretsecretsecretsecretsecret tok-secret-0123456789\n",
		    "a scope name" },                                             /* 40 > 32 */
		{ "scope= tok-secret-0123456789\n", "a scope name" },             /* empty */
		{ "scope=tok-secret-0123456789\n", "no token after" },
		{ "scope=alpha tok-secret-0123456789 more-secret\n", "a token is" },
		{ "scope=alpha secret-short\n", "a token is" },
		{ "scope=beta tok-default-0123456789abc\n", "same token as line 1" },
		{ longline, "longer than 512" },
		{ "scope=alpha topics= tok-secret-0123456789\n", "a topic list" },   /* empty */
		{ "topics=a,,b tok-secret-0123456789\n", "a topic list" },           /* ,, */
		{ "topics=a, tok-secret-0123456789\n", "a topic list" },             /* trailing , */
		{ "scope=alpha topics=notify.*\n", "no token after the topic list" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[1024];
		snprintf(text, sizeof(text), "%s%s", ok, bad[i].line2);
		ts_write_file(path, text);
		ck_assert_int_eq(ts_run(argv, NULL, out, sizeof(out), 20000), 2);
		ck_assert_msg(strstr(out, path) != NULL && strstr(out, "line 2: ") != NULL &&
		    strstr(out, bad[i].why) != NULL, "case %zu: %s", i, out);
		ck_assert_msg(strstr(out, "secret") == NULL && strstr(out, "tok-") == NULL,
		    "case %zu printed a token: %s", i, out);
	}
	/* A scope name at the limit is fine: 32 characters of every kind. */
	ts_write_file(path, "scope=abcdefghijklmnopqrstuvwxyz_-0789 tok-alpha-old-0123456789\n");
	struct ts_producer_server s;
	char *extra[] = { "--api-token-file", path, NULL };
	ts_producer_serve(db, extra, &s);
	struct ts_producer_reply r;
	ts_producer_http_as(s.url, ALPHA_OLD, "POST", "/v1/reports", "k", BODY_ALPHA,
	    strlen(BODY_ALPHA), &r);
	ck_assert_int_eq(r.status, 201);
	ts_stop(s.pid, SIGTERM);
	unlink(path);
}
END_TEST

/* The agent-side client sends a token from --api-token-file (submit and
 * lookup), so it works against a server with tokens, in its token's
 * scope; without one it is refused (PERMISSION_DENIED, exit 1). */
START_TEST(test_client_sends_token)
{
	char db[TS_CONNINFO_MAX], server[300], alpha[300], beta[300], two[300], out[8192];
	ts_db_create("prodscopecli", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	snprintf(server, sizeof(server), "%s/cli-server-%d", ts_tmpdir(), (int)getpid());
	snprintf(alpha, sizeof(alpha), "%s/cli-alpha-%d", ts_tmpdir(), (int)getpid());
	snprintf(beta, sizeof(beta), "%s/cli-beta-%d", ts_tmpdir(), (int)getpid());
	snprintf(two, sizeof(two), "%s/cli-two-%d", ts_tmpdir(), (int)getpid());
	ts_write_file(server, "scope=alpha " ALPHA_OLD "\nscope=beta " BETA "\n");
	ts_write_file(alpha, "# the agent's token\n" ALPHA_OLD "\n");
	ts_write_file(beta, "scope=beta " BETA "\n"); /* the server's format works too */
	ts_write_file(two, ALPHA_OLD "\n" BETA "\n");
	struct ts_producer_server s;
	char *extra[] = { "--api-token-file", server, NULL };
	ts_producer_serve(db, extra, &s);

	char *submit[] = { "outbox-producer", "submit", "--url", s.url, "--title", "Crash on save",
		"--module", "editor", "--key", "cli-1", "--api-token-file", alpha, NULL };
	ck_assert_int_eq(ts_run(submit, NULL, out, sizeof(out), 30000), 0);
	ck_assert_msg(strstr(out, "\"ok\":true") != NULL, "%s", out);
	char *lookup[] = { "outbox-producer", "lookup", "--url", s.url, "--key", "cli-1",
		"--api-token-file", alpha, NULL };
	ck_assert_int_eq(ts_run(lookup, NULL, out, sizeof(out), 30000), 0);
	lookup[7] = beta;
	ck_assert_int_eq(ts_run(lookup, NULL, out, sizeof(out), 30000), 1);
	ck_assert_msg(strstr(out, "NOT_FOUND") != NULL, "%s", out);
	/* Without a token: refused, nothing created. */
	submit[10] = NULL;
	ck_assert_int_eq(ts_run(submit, NULL, out, sizeof(out), 30000), 1);
	ck_assert_msg(strstr(out, "PERMISSION_DENIED") != NULL, "%s", out);
	/* A client sends one token. */
	submit[10] = "--api-token-file";
	submit[11] = two;
	ck_assert_int_eq(ts_run(submit, NULL, out, sizeof(out), 30000), 2);
	ck_assert_msg(strstr(out, "holds 2 tokens") != NULL && strstr(out, "tok-") == NULL,
	    "%s", out);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.bug_reports"), 1);
	ts_stop(s.pid, SIGTERM);
	PQfinish(c);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("producer_scopes");
	TCase *tc = tcase_create("scopes");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_keys_are_per_scope);
	tcase_add_test(tc, test_bad_scope_lines_refused);
	tcase_add_test(tc, test_client_sends_token);
	suite_add_tcase(s, tc);
	int rc = ts_run_suite(s);
	nng_fini();
	return rc;
}
