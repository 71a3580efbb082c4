/*
 * test_examples.c - the files of examples/ a user copies, run as a user
 * runs them, against a real PostgreSQL, relay and consumer (issue 33 item
 * 2): examples/python/place_order.py writes an order and enqueues its
 * message in one transaction (the same again: the same message id; another
 * payload for the key: OB002 handled under a savepoint, exit 3), and
 * examples/python/receiver.py takes the consumer's signed webhook and
 * applies one email per order in its OWN database through the inbox's SQL
 * contract. An unsigned call is refused (401) and writes nothing; with the
 * consumer's claim switched off (--no-dedup, its broken mode) and its
 * first reply lost, the receiver gets the key twice and applies it once.
 *
 * The same for examples/node (node-postgres, pinned by its lock file),
 * and for examples/go/place_order (pgx v4 from Debian's packages, built
 * here offline in GOPATH mode as examples/README.md says, its cache in the
 * test's temporary directory); the Go case's receiver is the Python one.
 * In each, an order refused at COMMIT (a deferred trigger of this test's,
 * firing after the enqueue) leaves neither its row nor its message; the
 * receiver stores the message's enqueue time (Outbox-Created-At), refuses
 * a message older than its retention (422), and its purge frees the
 * records past it. The
 * services reach their databases through a PgBouncer in transaction mode,
 * the relay and consumer directly (docs/operations.md).
 * Needs Debian's python3-psycopg, `npm ci` in examples/node, golang-go,
 * golang-github-jackc-pgx-v4-dev and pgbouncer (scripts/setup-deps.sh --tests): without
 * them the test is Skipped, a failure under OUTBOX_TEST_STRICT=1.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "testsupport.h"
#include "ts_consumer.h"
#include "ts_pgserver.h"
#include "ts_relay.h"

#define PYTHON "/usr/bin/python3"
#define NODE "/usr/bin/env" /* then "node" */
#define SECRET "example-secret-0123456789abcdef"
#define SKIPPED 77 /* ctest: SKIP_RETURN_CODE */
#define GOPATH "/usr/share/gocode" /* Debian's golang-*-dev sources */

static char src[512];

/* One language's two files: how each is started. Node's node-postgres
 * takes libpq's environment (PGHOST, ...), Python's psycopg and Go's pgx a
 * conninfo. */
struct lang {
	const char *name;                /* examples/<name>/ */
	const char *enqueue, *receiver;  /* the files (an absolute path: as is) */
	const char *interp[2];           /* argv before the file */
	bool env_db;                     /* the database by PG* variables, not --db */
	const struct lang *receiver_of;  /* whose receiver, when not its own */
};

static char go_bin[600]; /* place_order, built by build_go() */
static const struct lang python = { "python", "place_order.py", "receiver.py",
	{ PYTHON, NULL }, false, NULL };
static const struct lang node = { "node", "place_order.js", "receiver.js",
	{ NODE, "node" }, true, NULL };
static const struct lang go = { "go", go_bin, NULL, { NULL, NULL }, false, &python };

/* PGHOST=... PGPORT=... PGDATABASE=... PGUSER=... of conninfo, into env
 * (room for 5 pointers) and buf. */
static void
pg_env(const char *conninfo, char *buf, size_t buflen, char **env)
{
	static const struct {
		const char *keyword, *var;
	} map[] = { { "host", "PGHOST" }, { "port", "PGPORT" }, { "dbname", "PGDATABASE" },
		{ "user", "PGUSER" } };
	char *err = NULL;
	PQconninfoOption *opts = PQconninfoParse(conninfo, &err);
	ck_assert_msg(opts != NULL, "conninfo: %s", err ? err : "?");
	int n = 0;
	size_t used = 0;
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		for (PQconninfoOption *o = opts; o->keyword != NULL; o++)
			if (strcmp(o->keyword, map[i].keyword) == 0 && o->val != NULL) {
				int w = snprintf(buf + used, buflen - used, "%s=%s", map[i].var, o->val);
				ck_assert(w > 0 && (size_t)w < buflen - used);
				env[n++] = buf + used;
				used += (size_t)w + 1;
			}
	env[n] = NULL;
	PQconninfoFree(opts);
}

/* argv of lang's file with db and args (NULL-ended), into argv (room
 * for 24); env (room for 5) gets the PG* variables when lang wants them. */
static void
lang_argv(const struct lang *l, const char *file, const char *db, const char *const *args,
    char *path, size_t pathlen, char **argv, char *envbuf, size_t envlen, char **env)
{
	int n = 0;
	for (int i = 0; i < 2 && l->interp[i] != NULL; i++)
		argv[n++] = (char *)l->interp[i];
	if (file[0] == '/')
		snprintf(path, pathlen, "%s", file);
	else
		snprintf(path, pathlen, "%s/examples/%s/%s", src, l->name, file);
	argv[n++] = path;
	if (l->env_db) {
		pg_env(db, envbuf, envlen, env);
	} else {
		argv[n++] = "--db";
		argv[n++] = (char *)db;
		env[0] = NULL;
	}
	for (int i = 0; args[i] != NULL && n < 23; i++)
		argv[n++] = (char *)args[i];
	argv[n] = NULL;
}

/* path of examples/<rel> in the source tree, into out */
static void
example(const char *rel, char *out, size_t outlen)
{
	snprintf(out, outlen, "%s/examples/%s", src, rel);
}

static void
run_sql_file(const char *db, const char *rel)
{
	char path[600];
	example(rel, path, sizeof(path));
	char *sql = ts_read_file(path);
	ck_assert_msg(sql != NULL, "cannot read %s", path);
	PGconn *c = ts_connect(db);
	ts_exec(c, sql);
	PQfinish(c);
	free(sql);
}

/* the language's place_order; its exit code, output in out */
static int
place_order(const struct lang *l, const char *db, const char *order, const char *customer,
    const char *total, char *out, size_t outlen)
{
	char path[600], envbuf[1024];
	char *argv[24], *env[5];
	const char *args[] = { "--order", order, "--customer", customer, "--total", total, NULL };
	lang_argv(l, l->enqueue, db, args, path, sizeof(path), argv, envbuf, sizeof(envbuf), env);
	return ts_run(argv, env, out, outlen, 60000);
}

static pid_t
start_receiver(const struct lang *l, const char *db, const char *secret_file, char *log,
    char *url, size_t urllen)
{
	char path[600], ready[512], envbuf[1024];
	char *argv[24], *env[5];
	snprintf(ready, sizeof(ready), "%s/receiver-%s.url", ts_tmpdir(), l->name);
	unlink(ready);
	const char *args[] = { "--secret-file", secret_file, "--listen", "127.0.0.1:0",
		"--ready-file", ready, "--purge-interval-ms", "200", NULL };
	lang_argv(l, l->receiver, db, args, path, sizeof(path), argv, envbuf, sizeof(envbuf), env);
	pid_t pid = ts_spawn(argv, env, log);
	char *line = ts_wait_ready_file(ready, pid, log, 30000);
	snprintf(url, urllen, "%s", line);
	free(line);
	return pid;
}

/* examples/go/place_order built as examples/README.md says (GOPATH mode,
 * Debian's sources, no network), into go_bin; its cache in the test's
 * temporary directory, nothing under $HOME */
static void
build_go(void)
{
	char dir[600], cache[600], out[4096];
	snprintf(go_bin, sizeof(go_bin), "%s/place_order", ts_tmpdir());
	snprintf(dir, sizeof(dir), "%s/examples/go/place_order", src);
	snprintf(cache, sizeof(cache), "GOCACHE=%s/gocache", ts_tmpdir());
	/* from its directory: in GOPATH mode a package outside GOPATH is named
	 * by a relative path, not an absolute one */
	char *argv[] = { "/usr/bin/env", "-C", dir, "go", "build", "-o", go_bin, ".", NULL };
	char *env[] = { "GO111MODULE=off", "GOPATH=" GOPATH, cache, "GOFLAGS=", "GOENV=off",
		NULL };
	int64_t t0 = ts_now_ms();
	ck_assert_msg(ts_run(argv, env, out, sizeof(out), 180000) == 0, "go build: %s", out);
	fprintf(stderr, "test_examples: go build of examples/go/place_order: %.1f s\n",
	    (double)(ts_now_ms() - t0) / 1000);
}

static char pgbouncer_dir[400];

/* A POST as the consumer sends it, signed with SECRET, with key and
 * Outbox-Created-At created_at; it must answer want. */
static void
signed_call(const char *url, const char *key, const char *created_at, int want)
{
	const char *body = "{\"order_id\":1,\"customer\":\"old\",\"total\":\"1.00\"}";
	char signed_text[256], sig[200], hex[2 * EVP_MAX_MD_SIZE + 1];
	long t = (long)time(NULL);
	snprintf(signed_text, sizeof(signed_text), "%ld.%s", t, body);
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int maclen = 0;
	ck_assert_ptr_nonnull(HMAC(EVP_sha256(), SECRET, (int)strlen(SECRET),
	    (const unsigned char *)signed_text, strlen(signed_text), mac, &maclen));
	for (unsigned int i = 0; i < maclen; i++)
		snprintf(hex + 2 * i, 3, "%02x", mac[i]);
	snprintf(sig, sizeof(sig), "t=%ld,v1=%s", t, hex);
	struct ts_http_req req = { .method = "POST", .url = url, .body = body,
		.body_len = strlen(body),
		.headers = (const char *const[]){ "Idempotency-Key", key, "Outbox-Topic",
		    "order.placed", "Outbox-Fence", "1", "Outbox-Message-Id", "999",
		    "Outbox-Created-At", created_at, "Outbox-Signature", sig, NULL } };
	struct ts_http_res res;
	ck_assert_int_eq(ts_http(&req, &res), want);
	free(res.body);
}

static void
setup(void)
{
	snprintf(pgbouncer_dir, sizeof(pgbouncer_dir), "%s/pgbouncer-%d", ts_tmpdir(),
	    (int)getpid());
}

static void
teardown(void)
{
	ts_pgbouncer_stop_quiet(pgbouncer_dir);
}

static void
service_end_to_end(const struct lang *l)
{
	char shop[TS_CONNINFO_MAX], mail[TS_CONNINFO_MAX], inbox[TS_CONNINFO_MAX], tag[32];
	char secret_file[512], rlog[256], clog[256], llog[256], hook[256], ipc[256], out[2048];
	snprintf(tag, sizeof(tag), "ex_shop_%s", l->name);
	ts_db_create(tag, "outbox", shop, sizeof(shop));
	snprintf(tag, sizeof(tag), "ex_mail_%s", l->name);
	ts_db_create(tag, "inbox", mail, sizeof(mail));
	snprintf(tag, sizeof(tag), "ex_cons_%s", l->name);
	ts_db_create(tag, "inbox", inbox, sizeof(inbox));
	run_sql_file(shop, "shop.sql");
	run_sql_file(mail, "mailer.sql");
	/* the services through PgBouncer in transaction mode, as most
	 * production setups run them; the relay and consumer direct
	 * (docs/operations.md, "Behind PgBouncer") */
	char svc_shop[TS_CONNINFO_MAX], svc_mail[TS_CONNINFO_MAX];
	ts_pgbouncer_start(pgbouncer_dir, "transaction");
	ts_pgbouncer_conninfo(pgbouncer_dir, shop, svc_shop, sizeof(svc_shop));
	ts_pgbouncer_conninfo(pgbouncer_dir, mail, svc_mail, sizeof(svc_mail));
	/* the business refusing an order at COMMIT, after its enqueue ran (this
	 * test's, not the example's): the message must go with the order */
	PGconn *sc = ts_connect(shop);
	ts_exec(sc, "CREATE FUNCTION reject_order() RETURNS trigger LANGUAGE plpgsql AS"
	    " $$BEGIN RAISE EXCEPTION 'order % rejected at commit', NEW.id; END$$;"
	    " CREATE CONSTRAINT TRIGGER reject_at_commit AFTER INSERT ON shop_orders"
	    " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.customer = 'mallory')"
	    " EXECUTE FUNCTION reject_order()");
	snprintf(secret_file, sizeof(secret_file), "%s/webhook-%s.secret", ts_tmpdir(), l->name);
	FILE *f = fopen(secret_file, "w");
	ck_assert_ptr_nonnull(f);
	fputs(SECRET "\n", f);
	fclose(f);

	pid_t receiver = start_receiver(l->receiver_of ? l->receiver_of : l, svc_mail, secret_file,
	    rlog, hook, sizeof(hook));
	/* an unsigned call: refused, nothing written */
	struct ts_http_req bad = { .method = "POST", .url = hook, .body = "{}", .body_len = 2,
		.headers = (const char *const[]){ "Idempotency-Key", "forged", "Outbox-Topic",
		    "order.placed", NULL } };
	struct ts_http_res res;
	ck_assert_int_eq(ts_http(&bad, &res), 401);
	free(res.body);

	/* the consumer's claim off and its first reply lost: the receiver gets
	 * the key twice and must apply it once on its own */
	ts_ipc_url(l->name, ipc, sizeof(ipc));
	const char *cargs[] = { "--handler", "webhook", "--webhook-url", hook,
		"--webhook-secret-file", secret_file, "--no-dedup", "--fault-drop-reply", "1", NULL };
	pid_t consumer = ts_consumer_spawn(clog, inbox, ipc, cargs);
	char route[300];
	snprintf(route, sizeof(route), "*=%s", ipc);
	const char *rargs[] = { "--delivery-timeout-ms", "2s", NULL };
	pid_t relay = ts_relay_spawn(llog, shop, route, rargs);

	ck_assert_msg(place_order(l, svc_shop, "42", "ada", "19.90", out, sizeof(out)) == 0, "%s", out);
	long long id = 0;
	ck_assert_msg(sscanf(out, "order 42: message %lld", &id) == 1 && id > 0, "%s", out);
	/* again: the same message */
	ck_assert_msg(place_order(l, svc_shop, "42", "ada", "19.90", out, sizeof(out)) == 0, "%s", out);
	char want[64];
	snprintf(want, sizeof(want), "order 42: message %lld", id);
	ck_assert_msg(strstr(out, want) != NULL, "%s", out);
	/* another payload for the key: OB002, handled, exit 3, nothing new */
	ck_assert_int_eq(place_order(l, svc_shop, "42", "ada", "20.00", out, sizeof(out)), 3);
	ck_assert_msg(strstr(out, "OB002") != NULL, "%s", out);
	/* a business transaction failing after its enqueue: exit 1, and
	 * neither the order nor its message */
	ck_assert_msg(place_order(l, svc_shop, "43", "mallory", "5.00", out, sizeof(out)) == 1, "%s",
	    out);
	ck_assert_msg(strstr(out, "order 43 rejected at commit") != NULL, "%s", out);
	ck_assert_int_eq(ts_query_int(sc, "SELECT count(*) FROM outbox.messages"
	    " WHERE idempotency_key = 'order-43'"), 0);

	PGconn *mc = ts_connect(mail);
	ck_assert_int_eq(ts_query_int(sc, "SELECT count(*) FROM shop_orders"), 1);
	ck_assert_int_eq(ts_query_int(sc, "SELECT count(*) FROM outbox.messages"), 1);
	/* delivered: the dropped reply's batch sent again, answered */
	ck_assert_int_eq(ts_wait_value(sc, "SELECT count(*) FROM outbox.messages"
	    " WHERE status = 'delivered'", 1, 60000), 1);
	/* one email, under the webhook's key (SOURCE/TOPIC/KEY: docs/consumer.md) */
	ck_assert_int_eq(ts_query_int(mc, "SELECT count(*) FROM sent_emails"), 1);
	ck_assert_int_eq(ts_query_int(mc, "SELECT count(*) FROM sent_emails WHERE idempotency_key"
	    " LIKE '%/order.placed/order-42' AND payload->>'total' = '19.90'"), 1);
	ck_assert_int_eq(ts_query_int(mc, "SELECT count(*) FROM inbox.processed"), 1);
	/* the key reached the receiver twice: applied, then a duplicate */
	ck_assert_int_eq(ts_log_count(rlog, "/order.placed/order-42 applied"), 1);
	ck_assert_int_ge(ts_log_count(rlog, "/order.placed/order-42 duplicate"), 1);
	/* the record keeps the message's enqueue time (Outbox-Created-At), to
	 * the microsecond: the retention counts from it */
	ck_assert_int_eq(ts_query_int(mc, "SELECT extract(epoch FROM created_at) * 1000000"
	    " FROM inbox.processed"), ts_query_int(sc, "SELECT extract(epoch FROM created_at)"
	    " * 1000000 FROM outbox.messages WHERE idempotency_key = 'order-42'"));

	/* a message older than the retention (7 days): refused, not applied */
	signed_call(hook, "order-old", "2020-01-01T00:00:00.000000Z", 422);
	ck_assert_int_eq(ts_query_int(mc, "SELECT count(*) FROM sent_emails"), 1);
	/* an Outbox-Created-At that is no time: 400 */
	signed_call(hook, "order-bad-time", "yesterday", 400);

	/* the receiver's purge frees the records past the retention: the one
	 * record, aged by hand, goes; its effect stays */
	ts_exec(mc, "UPDATE inbox.processed SET created_at = now() - interval '9 days',"
	    " processed_at = now() - interval '8 days'");
	ck_assert_int_eq(ts_wait_value(mc, "SELECT count(*) FROM inbox.processed", 0, 30000), 0);
	ck_assert_int_ge(ts_log_count(rlog, "purged 1 records"), 1);
	ck_assert_int_eq(ts_query_int(mc, "SELECT count(*) FROM sent_emails"), 1);
	PQfinish(sc);
	PQfinish(mc);
	ts_stop(relay, SIGTERM);
	ts_stop(consumer, SIGTERM);
	ts_stop(receiver, SIGTERM);
}

START_TEST(test_python_service_end_to_end)
{
	service_end_to_end(&python);
}
END_TEST

START_TEST(test_node_service_end_to_end)
{
	service_end_to_end(&node);
}
END_TEST

START_TEST(test_go_service_end_to_end)
{
	build_go();
	service_end_to_end(&go);
}
END_TEST

int
main(void)
{
	const char *s = getenv("OUTBOX_SOURCE_DIR");
	snprintf(src, sizeof(src), "%s", s != NULL ? s : ".");
	/* what the examples run on: Debian's python3-psycopg, pg installed in
	 * examples/node, Go and pgx v4's sources (scripts/setup-deps.sh
	 * --tests does all). Asked with system(): the fixture's ts_run
	 * asserts, outside a test here. */
	char js[700];
	snprintf(js, sizeof(js), "node -e \"require('%s/examples/node/node_modules/pg')\""
	    " >/dev/null 2>&1", src);
	const char *missing = system(PYTHON " -c 'import psycopg' >/dev/null 2>&1") != 0
	    ? "python3-psycopg" : system(js) != 0 ? "node, or pg in examples/node/node_modules"
	    : system("go version >/dev/null 2>&1") != 0 ? "go (golang-go)"
	    : system("test -f " GOPATH "/src/github.com/jackc/pgx/v4/conn.go") != 0
	    ? "pgx v4 (golang-github-jackc-pgx-v4-dev)"
	    : system("command -v pgbouncer >/dev/null 2>&1") != 0 ? "pgbouncer" : NULL;
	if (missing != NULL) {
		const char *strict = getenv("OUTBOX_TEST_STRICT");
		bool fail = strict != NULL && strcmp(strict, "1") == 0;
		fprintf(stderr, "test_examples: %s: %s is missing (scripts/setup-deps.sh --tests)\n",
		    fail ? "FAILED" : "SKIPPED", missing);
		return fail ? 1 : SKIPPED;
	}
	Suite *suite = suite_create("examples");
	TCase *tc = tcase_create("examples");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_python_service_end_to_end);
	tcase_add_test(tc, test_node_service_end_to_end);
	tcase_add_test(tc, test_go_service_end_to_end);
	suite_add_tcase(suite, tc);
	return ts_run_suite(suite);
}
