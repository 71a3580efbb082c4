/*
 * test_roles.c - least-privilege database roles (docs/security.md,
 * "Database roles"): the group roles outbox_producer, outbox_relay,
 * outbox_consumer and outbox_admin that migrate creates (once per server)
 * and grants (sql/<set>/functions/grants.sql), with login roles in them:
 *
 * - the whole flow runs with one login role per program: the producer
 *   enqueues (outbox-producer enqueue, serve and plain SQL), the relay
 *   claims, records, dead-letters and keeps house (truncating a slot),
 *   the consumer applies, outboxctl reads, requeues and purges;
 * - each write a role must not make is refused with SQLSTATE 42501, and
 *   the same statement run as the superuser (what the compose stack used
 *   for every program) goes through first;
 * - PUBLIC may execute no function of the schema: before this version's
 *   migration it could execute all of them;
 * - a program whose role lacks a grant refuses to start and says which
 *   object, which privilege, which role, and which group to join;
 * - outbox.enqueue is SECURITY DEFINER with a pinned search_path, and no
 *   definer function takes a switch from its caller;
 * - the grants survive a forced re-apply of the schema files;
 * - migrations of two databases of one fresh server, run at once, both
 *   create the shared roles: one of them deadlocks, and runs again.
 *
 * The test server trusts its unix socket (scripts/pg-tmp.sh): a login
 * role needs no password here.
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "outbox/err.h"
#include "outbox/migrate.h"
#include "testsupport.h"
#include "ts_consumer.h"
#include "ts_pgserver.h"
#include "ts_producer.h"
#include "ts_relay.h"

#define OUT_MAX 8192
#define RUN_TIMEOUT_MS 60000
#define FLOW_TIMEOUT_MS 60000
#define ENQUEUED 40 /* by outbox-producer enqueue */

/* The migrations of before the roles: outbox up to 013, inbox up to 003. */
#define OUTBOX_BEFORE_ROLES 14
#define INBOX_BEFORE_ROLES 4

/* The four login roles of the flow, one per program. */
struct logins {
	char producer[64], relay[64], consumer[64], admin[64];
};

static void
logins_create(struct logins *l)
{
	ts_role_create("r_producer", "outbox_producer", l->producer);
	ts_role_create("r_relay", "outbox_relay", l->relay);
	ts_role_create("r_consumer", "outbox_consumer", l->consumer);
	ts_role_create("r_admin", "outbox_admin", l->admin);
}

static void
logins_drop(struct logins *l)
{
	ts_role_drop(l->producer);
	ts_role_drop(l->relay);
	ts_role_drop(l->consumer);
	ts_role_drop(l->admin);
}

static PGconn *
connect_as(const char *db, const char *role)
{
	char c[TS_CONNINFO_MAX];
	ts_conninfo_as(db, role, c, sizeof(c));
	return ts_connect(c);
}

/* sql as the superuser, in a transaction rolled back: it must go
 * through, touching at least min_rows rows. */
static void
superuser_may(PGconn *su, const char *sql, int64_t min_rows)
{
	char state[8], msg[512];
	ts_exec(su, "BEGIN");
	int64_t n = ts_exec_state(su, sql, state, sizeof(state), msg, sizeof(msg));
	ts_exec(su, "ROLLBACK");
	ck_assert_msg(state[0] == '\0', "as the superuser, %s: %s %s", sql, state, msg);
	ck_assert_msg(n >= min_rows, "as the superuser, %s: %lld rows, want >= %lld", sql,
	    (long long)n, (long long)min_rows);
}

/* sql as role (conn) must be refused: 42501, the message naming what. */
static void
role_may_not(PGconn *conn, const char *role, const char *sql, const char *what)
{
	char state[8], msg[512];
	ts_exec_state(conn, sql, state, sizeof(state), msg, sizeof(msg));
	ck_assert_msg(strcmp(state, "42501") == 0, "as %s, %s: want 42501, got '%s' %s", role, sql,
	    state, msg);
	ck_assert_msg(strstr(msg, what) != NULL, "as %s, %s: '%s' does not name %s", role, sql, msg,
	    what);
}

/* Apply the migrations of before the roles and record them, as a release
 * of then did (its files are the migrations' own function bodies). */
static void
migrate_before_roles(const char *db)
{
	char sql[256];
	PGconn *c = ts_connect(db);
	ts_exec(c, "BEGIN");
	ts_exec(c, "CREATE TABLE public.outbox_schema_migrations ("
	    " schema_set text NOT NULL, version integer NOT NULL, name text NOT NULL,"
	    " applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (schema_set, version))");
	for (const struct ob_migration *m = ob_migrations; m->set != NULL; m++) {
		bool outbox = strcmp(m->set, "outbox") == 0;
		if (m->version >= (outbox ? OUTBOX_BEFORE_ROLES : INBOX_BEFORE_ROLES))
			continue;
		ts_exec(c, m->sql);
		snprintf(sql, sizeof(sql), "INSERT INTO public.outbox_schema_migrations"
		    " (schema_set, version, name) VALUES ('%s', %d, '%s')", m->set, m->version,
		    m->name);
		ts_exec(c, sql);
	}
	ts_exec(c, "COMMIT");
	PQfinish(c);
}

static void
migrate_ok(const char *db, struct ob_migrate_report *r)
{
	PGconn *c = ts_connect(db);
	char err[1024];
	const struct ob_migrate_opts all = { .set = "all", .demo = true };
	ck_assert_msg(ob_migrate(c, &all, r, err, sizeof(err)) == OB_OK, "migrate: %s", err);
	PQfinish(c);
}

/* Functions of schemas outbox and inbox PUBLIC may execute. */
static const char public_exec_sql[] =
    "SELECT count(*) FROM pg_proc"
    " WHERE pronamespace IN ('outbox'::regnamespace, 'inbox'::regnamespace)"
    "   AND has_function_privilege('public', oid, 'EXECUTE')";

START_TEST(test_groups_once_per_server)
{
	char a[TS_CONNINFO_MAX], b[TS_CONNINFO_MAX], c[TS_CONNINFO_MAX];
	/* the second and third database find the roles: no error */
	ts_db_create("roles_a", "all", a, sizeof(a));
	ts_db_create("roles_b", "all", b, sizeof(b));
	ts_db_create("roles_c", "inbox", c, sizeof(c));
	PGconn *conn = ts_connect(b);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM pg_roles WHERE rolname IN ('outbox_producer', 'outbox_relay',"
	    " 'outbox_consumer', 'outbox_admin') AND NOT rolcanlogin AND NOT rolsuper"
	    " AND NOT rolcreaterole AND NOT rolcreatedb"), 4);
	/* the same grants in both databases */
	static const char grants_sql[] =
	    "SELECT count(*) FROM information_schema.role_table_grants"
	    " WHERE grantee IN ('outbox_producer', 'outbox_relay', 'outbox_consumer', 'outbox_admin')";
	int64_t in_b = ts_query_int(conn, grants_sql);
	ck_assert_int_gt(in_b, 0);
	PGconn *ca = ts_connect(a);
	ck_assert_int_eq(ts_query_int(ca, grants_sql), in_b);
	PQfinish(ca);

	/* A forced re-apply of the files (CREATE OR REPLACE, then the grants
	 * again) keeps every grant and gives PUBLIC nothing back. */
	ts_exec(conn, "UPDATE outbox.schema_files SET digest = 'forced'");
	struct ob_migrate_report r;
	migrate_ok(b, &r);
	ck_assert_int_gt(r.files, 0);
	ck_assert_int_eq(r.dropped, 0);
	ck_assert_int_eq(ts_query_int(conn, grants_sql), in_b);
	ck_assert_int_eq(ts_query_int(conn, public_exec_sql), 0);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT has_function_privilege('outbox_producer',"
	    " 'outbox.enqueue(text, text, jsonb, text, jsonb, timestamptz)', 'EXECUTE')::int"), 1);
	PQfinish(conn);
}
END_TEST

/* PUBLIC could execute every function before; now none, and a role in no
 * group is refused outbox.enqueue itself (given the schema, to reach it). */
START_TEST(test_public_executes_nothing)
{
	char db[TS_CONNINFO_MAX], nobody[64], sql[256];
	ts_db_create("roles_public", NULL, db, sizeof(db));
	migrate_before_roles(db);
	PGconn *su = ts_connect(db);
	ck_assert_int_gt(ts_query_int(su, public_exec_sql), 10); /* the broken state */
	ck_assert_int_eq(ts_query_int(su,
	    "SELECT has_function_privilege('public', 'outbox.enqueue(text, text, jsonb, text)',"
	    " 'EXECUTE')::int"), 1);

	struct ob_migrate_report r;
	migrate_ok(db, &r);
	/* outbox 014, inbox 004, and whatever came after them */
	int later = 0;
	for (const struct ob_migration *m = ob_migrations; m->set != NULL; m++)
		later += m->version >= (strcmp(m->set, "outbox") == 0 ? OUTBOX_BEFORE_ROLES
		                                                      : INBOX_BEFORE_ROLES);
	ck_assert_int_ge(later, 2);
	ck_assert_int_eq(r.migrations, later);
	ck_assert_int_eq(ts_query_int(su, public_exec_sql), 0);
	ck_assert_int_eq(ts_query_int(su,
	    "SELECT count(*) FROM pg_namespace WHERE nspname IN ('outbox', 'app', 'inbox')"
	    " AND (has_schema_privilege('public', oid, 'USAGE')"
	    "      OR has_schema_privilege('public', oid, 'CREATE'))"), 0);
	ck_assert_int_eq(ts_query_int(su,
	    "SELECT has_schema_privilege('public', 'public', 'CREATE')::int"), 0);

	ts_role_create("r_nobody", NULL, nobody);
	snprintf(sql, sizeof(sql), "GRANT USAGE ON SCHEMA outbox TO %s", nobody);
	ts_exec(su, sql);
	superuser_may(su, "SELECT outbox.enqueue('t', 'public-1', '{}')", 1);
	PGconn *conn = connect_as(db, nobody);
	role_may_not(conn, nobody, "SELECT outbox.enqueue('t', 'public-1', '{}')",
	    "permission denied for function enqueue");
	PQfinish(conn);
	snprintf(sql, sizeof(sql), "REVOKE USAGE ON SCHEMA outbox FROM %s", nobody);
	ts_exec(su, sql);
	PQfinish(su);
	ts_role_drop(nobody);
}
END_TEST

/* Every program started with a role it cannot work as says so and stops. */
START_TEST(test_missing_grant_refused_at_start)
{
	char db[TS_CONNINFO_MAX], as[TS_CONNINFO_MAX], url[256], route[300], out[OUT_MAX];
	char nobody[64], producer[64], want[256];
	ts_db_create("roles_start", "all", db, sizeof(db));
	ts_role_create("r_nobody", NULL, nobody);
	ts_role_create("r_producer", "outbox_producer", producer);
	ts_ipc_url("consumer", url, sizeof(url));
	snprintf(route, sizeof(route), "*=%s", url);

	ts_conninfo_as(db, nobody, as, sizeof(as));
	struct {
		const char *what;
		char *argv[12];
		const char *object, *group;
	} cases[] = {
		{ "relay", { "outbox-relay", "--db", as, "--route", route, NULL },
		    "schema outbox", "outbox_relay" },
		{ "consumer", { "outbox-consumer", "--db", as, "--listen", url, NULL },
		    "schema inbox", "outbox_consumer" },
		{ "producer enqueue", { "outbox-producer", "enqueue", "--db", as, "--quiet", NULL },
		    "schema outbox", "outbox_producer" },
		{ "producer serve", { "outbox-producer", "serve", "--db", as, "--http",
		    "http://127.0.0.1:0", NULL }, "schema outbox", "outbox_producer" },
		{ "outboxctl", { "outboxctl", "status", "--db", as, NULL },
		    "schema outbox", "outbox_admin" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int code = ts_run(cases[i].argv, NULL, out, sizeof(out), RUN_TIMEOUT_MS);
		ck_assert_msg(code > 0, "%s as %s: exit %d (want a refusal):\n%s", cases[i].what,
		    nobody, code, out);
		snprintf(want, sizeof(want), "permission denied for %s: role \"%s\" has no USAGE on it",
		    cases[i].object, nobody);
		ck_assert_msg(strstr(out, want) != NULL, "%s: no '%s' in:\n%s", cases[i].what, want,
		    out);
		snprintf(want, sizeof(want), "GRANT %s TO %s", cases[i].group, nobody);
		ck_assert_msg(strstr(out, want) != NULL, "%s: no '%s' in:\n%s", cases[i].what, want,
		    out);
		ck_assert_msg(strstr(out, "database is unavailable") == NULL, "%s:\n%s",
		    cases[i].what, out);
	}

	/* The producer's role as a relay: it has the schema, not the claim. */
	ts_conninfo_as(db, producer, as, sizeof(as));
	char *relay_argv[] = { "outbox-relay", "--db", as, "--route", route, NULL };
	ck_assert_int_eq(ts_run(relay_argv, NULL, out, sizeof(out), RUN_TIMEOUT_MS), 2);
	snprintf(want, sizeof(want), "permission denied for function outbox.claim: role \"%s\""
	    " has no EXECUTE on it (and ", producer);
	ck_assert_msg(strstr(out, want) != NULL, "no '%s' in:\n%s", want, out);
	ck_assert_msg(strstr(out, "GRANT outbox_relay TO ") != NULL, "%s", out);
	ts_role_drop(nobody);
	ts_role_drop(producer);
}
END_TEST

/* The whole flow with one login role per program. */
START_TEST(test_flow_with_one_role_per_program)
{
	char db[TS_CONNINFO_MAX], url[256], route[300], out[OUT_MAX];
	char as_producer[TS_CONNINFO_MAX], as_relay[TS_CONNINFO_MAX];
	char as_consumer[TS_CONNINFO_MAX], as_admin[TS_CONNINFO_MAX];
	char relay_log[256], consumer_log[256];
	struct logins l;
	ts_db_create("roles_flow", "all", db, sizeof(db));
	logins_create(&l);
	ts_conninfo_as(db, l.producer, as_producer, sizeof(as_producer));
	ts_conninfo_as(db, l.relay, as_relay, sizeof(as_relay));
	ts_conninfo_as(db, l.consumer, as_consumer, sizeof(as_consumer));
	ts_conninfo_as(db, l.admin, as_admin, sizeof(as_admin));
	PGconn *su = ts_connect(db);

	/* The producer: the CLI (report + enqueue in one transaction), the
	 * HTTP API (key claim, report, enqueue), SQL with an ordering key. */
	char count[16];
	snprintf(count, sizeof(count), "%d", ENQUEUED);
	char *enqueue_argv[] = { "outbox-producer", "enqueue", "--db", as_producer, "--count",
		count, "--key", "cli", "--quiet", NULL };
	ck_assert_msg(ts_run(enqueue_argv, NULL, out, sizeof(out), RUN_TIMEOUT_MS) == 0, "%s",
	    out);
	struct ts_producer_server srv;
	ts_producer_serve(as_producer, NULL, &srv);
	struct ts_producer_reply rep;
	ts_producer_post(srv.url, "api-1", TS_PRODUCER_BODY, &rep);
	ck_assert_msg(rep.status == 201, "POST as %s: %d %s", l.producer, rep.status, rep.body);
	ts_producer_post(srv.url, "api-1", TS_PRODUCER_BODY, &rep);
	ck_assert_int_eq(rep.status, 201);
	ck_assert(rep.replayed);
	ts_stop(srv.pid, SIGTERM);
	PGconn *pc = connect_as(db, l.producer);
	ts_exec(pc, "SELECT outbox.enqueue('report.created', 'ord-1', '{}', 'key-a')");
	ts_exec(pc, "SELECT outbox.enqueue('report.created', 'ord-2', '{}', 'key-a')");
	/* no route: the relay dead-letters them (--unrouted dead-letter) */
	ts_exec(pc, "SELECT outbox.enqueue('doomed', 'd-1', '{}')");
	ts_exec(pc, "SELECT outbox.enqueue('doomed', 'd-2', '{}')");
	PQfinish(pc);
	const int64_t delivered = ENQUEUED + 1 + 2;
	ck_assert_int_eq(ts_query_int(su, "SELECT count(*) FROM app.bug_reports"), ENQUEUED + 1);

	/* The consumer and the relay; housekeeping often, with a short
	 * retention, so the relay switches and truncates slots as itself. */
	ts_ipc_url("consumer", url, sizeof(url));
	snprintf(route, sizeof(route), "report.created=%s", url);
	pid_t cpid = ts_consumer_spawn(consumer_log, as_consumer, url, NULL);
	const char *relay_extra[] = { "--poll-ms", "100", "--purge-interval", "100ms",
		"--retention", "1s", "--metrics", "127.0.0.1:0", "--metrics-interval", "100ms",
		"--unrouted", "dead-letter", NULL };
	pid_t rpid = ts_relay_spawn(relay_log, as_relay, route, relay_extra);
	int64_t applied = ts_wait_value(su, "SELECT count(*) FROM inbox.notifications",
	    delivered, FLOW_TIMEOUT_MS);
	int64_t dead = ts_wait_value(su, "SELECT count(*) FROM outbox.dead", 2, FLOW_TIMEOUT_MS);
	int truncated = ts_log_wait(relay_log, "relay.housekeep.done truncated_slot=0", 1,
	    FLOW_TIMEOUT_MS);
	ts_stop(rpid, SIGTERM);
	ts_stop(cpid, SIGTERM);
	ck_assert_int_eq(applied, delivered);
	ck_assert_int_eq(ts_query_int(su,
	    "SELECT count(DISTINCT idempotency_key) FROM inbox.notifications"), delivered);
	ck_assert_int_eq(ts_query_int(su, "SELECT count(*) FROM inbox.processed"), delivered);
	ck_assert_int_eq(dead, 2);
	char *rl = ts_read_file(relay_log), *cl = ts_read_file(consumer_log);
	ck_assert_msg(truncated == 1, "no slot truncated by the relay:\n%s", rl);
	/* housekeeping, the gauges' figures (outbox.topic_stats), the purge */
	static const char *const quiet[] = { "permission denied", "relay.housekeep.failed",
		"relay.metrics.stats_failed", "consumer.purge.failed", NULL };
	for (int i = 0; quiet[i] != NULL; i++) {
		ck_assert_msg(strstr(rl, quiet[i]) == NULL, "relay: %s:\n%s", quiet[i], rl);
		ck_assert_msg(strstr(cl, quiet[i]) == NULL, "consumer: %s:\n%s", quiet[i], cl);
	}
	free(rl);
	free(cl);

	/* outboxctl as the admin: read, requeue the dead letters, purge. */
	char id[32];
	snprintf(id, sizeof(id), "%lld",
	    (long long)ts_query_int(su, "SELECT min(id) FROM outbox.dead"));
	struct {
		char *argv[10];
		const char *want;
	} ctl[] = {
		{ { "outboxctl", "status", "--db", as_admin, NULL }, "doomed" },
		/* a dead letter: the delivered ones went with their slot */
		{ { "outboxctl", "inspect", "--key", "d-1", "--db", as_admin, NULL }, "dead" },
		{ { "outboxctl", "dead", "list", "--db", as_admin, NULL }, "d-1" },
		{ { "outboxctl", "dead", "show", id, "--db", as_admin, NULL }, "doomed" },
		{ { "outboxctl", "dead", "requeue", "--all", "--db", as_admin, NULL }, NULL },
		{ { "outboxctl", "purge", "--older-than", "7d", "--db", as_admin, NULL }, NULL },
	};
	for (size_t i = 0; i < sizeof(ctl) / sizeof(ctl[0]); i++) {
		int code = ts_run(ctl[i].argv, NULL, out, sizeof(out), RUN_TIMEOUT_MS);
		ck_assert_msg(code == 0, "outboxctl %s %s as %s: exit %d:\n%s", ctl[i].argv[1],
		    ctl[i].argv[2], l.admin, code, out);
		ck_assert_msg(ctl[i].want == NULL || strstr(out, ctl[i].want) != NULL,
		    "outboxctl %s: no %s in:\n%s", ctl[i].argv[1], ctl[i].want, out);
	}
	ck_assert_int_eq(ts_query_int(su, "SELECT count(*) FROM outbox.dead"), 0);
	ck_assert_int_eq(ts_query_int(su, "SELECT count(*) FROM outbox.retries"), 2);
	PQfinish(su);
	logins_drop(&l);
}
END_TEST

/* Each role's forbidden writes: the superuser's goes through (the broken
 * deployment: every program as the superuser), the role's is refused. */
START_TEST(test_forbidden_writes_refused)
{
	char db[TS_CONNINFO_MAX], nobody[64], sql[512];
	struct logins l;
	ts_db_create("roles_writes", "all", db, sizeof(db));
	logins_create(&l);
	ts_role_create("r_nobody", NULL, nobody);
	PGconn *su = ts_connect(db);
	/* a batch out, a stream read, a relay waiting, a business row, a key */
	ts_enqueue_n(su, "t", "w", 3);
	PGresult *r = PQexec(su, "SELECT batch_id, fence FROM outbox.claim(2, 'su', 60000, 10,"
	    " NULL, NULL, true, false, true) LIMIT 1");
	ck_assert_int_eq(PQntuples(r), 1);
	char batch[64], fence[64];
	snprintf(batch, sizeof(batch), "%s", PQgetvalue(r, 0, 0));
	snprintf(fence, sizeof(fence), "%s", PQgetvalue(r, 0, 1));
	PQclear(r);
	ts_exec(su, "SELECT outbox.relay_waiting('worker-1', 60000)");
	ts_exec(su, "INSERT INTO app.bug_reports (title, module, severity) VALUES ('a', 'b', 'low')");
	ts_exec(su, "INSERT INTO app.idempotency_keys (idempotency_key, fingerprint, state, fence,"
	    " lease_until) VALUES ('k', 'f', 'started', 1, now())");
	ts_exec(su, "INSERT INTO inbox.notifications (idempotency_key, topic, payload)"
	    " VALUES ('k', 't', '{}')");

	char record_sql[256];
	snprintf(record_sql, sizeof(record_sql), "SELECT outbox.record(2, %s, %s, false, 'done', 0,"
	    " false, '{}', '{}', '{}', '{}', false)", batch, fence);
	static const char forge_event_sql[] =
	    "INSERT INTO outbox.events (slot, id, txid, lane, topic, idempotency_key, payload)"
	    " VALUES (0, 999999, pg_current_xact_id(), 0, 't', 'forged', '{}')";
	struct {
		const char *role;
		const char *sql;
		int64_t min_rows; /* as the superuser */
		const char *refusal;
	} cases[] = {
		/* the producer changes no relay state */
		{ l.producer, "UPDATE outbox.batches SET owner = 'evil'", 1,
		    "permission denied for table batches" },
		{ l.producer, "UPDATE outbox.streams SET cut_at = now()", 1,
		    "permission denied for table streams" },
		{ l.producer, "SELECT * FROM outbox.claim(2, 'evil', 60000, 10, NULL, NULL, true,"
		    " false, false)", 0, "permission denied for function claim" },
		{ l.producer, record_sql, 1, "permission denied for function record" },
		{ l.producer, "SELECT outbox.record_outcomes('{1}', '{1}', '{delivered}', '{0}',"
		    " '{0}', '{\"\"}', false, false)", 0, "permission denied for function record_outcomes" },
		{ l.producer, "SELECT nextval('outbox.fences')", 1,
		    "permission denied for sequence fences" },
		{ l.producer, "DELETE FROM outbox.relay_waiters", 1,
		    "permission denied for table relay_waiters" },
		{ l.producer, "DELETE FROM outbox.retries", 0, "permission denied for table retries" },
		{ l.producer, "DELETE FROM outbox.dead", 0, "permission denied for table dead" },
		{ l.producer, forge_event_sql, 1, "permission denied for table events" },
		/* the relay writes no business table and nothing of the inbox */
		{ l.relay, "INSERT INTO inbox.processed (idempotency_key, topic, message_id, fence)"
		    " VALUES ('forged', 't', 1, 1)", 1, "permission denied for schema inbox" },
		{ l.relay, "DELETE FROM inbox.notifications", 1, "permission denied for schema inbox" },
		{ l.relay, "INSERT INTO app.bug_reports (title, module, severity)"
		    " VALUES ('x', 'y', 'low')", 1, "permission denied for schema app" },
		{ l.relay, "UPDATE app.idempotency_keys SET state = 'done', response_status = 200", 1,
		    "permission denied for schema app" },
		{ l.relay, "SELECT outbox.enqueue('t', 'relay-forged', '{}')", 1,
		    "permission denied for function enqueue" },
		{ l.relay, forge_event_sql, 1, "permission denied for table events" },
		/* the consumer touches nothing of the outbox */
		{ l.consumer, "UPDATE outbox.batches SET owner = 'evil'", 1,
		    "permission denied for schema outbox" },
		{ l.consumer, forge_event_sql, 1, "permission denied for schema outbox" },
		{ l.consumer, "SELECT outbox.enqueue('t', 'consumer-forged', '{}')", 1,
		    "permission denied for schema outbox" },
		{ l.consumer, "DELETE FROM outbox.dead", 0, "permission denied for schema outbox" },
		/* outboxctl enqueues nothing and claims nothing */
		{ l.admin, "SELECT outbox.enqueue('t', 'admin-forged', '{}')", 1,
		    "permission denied for function enqueue" },
		{ l.admin, "UPDATE outbox.batches SET owner = 'evil'", 1,
		    "permission denied for table batches" },
		/* a role in no group: nothing at all */
		{ nobody, "SELECT outbox.enqueue('t', 'nobody-forged', '{}')", 1,
		    "permission denied for schema outbox" },
		{ nobody, "DELETE FROM inbox.processed", 0, "permission denied for schema inbox" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		superuser_may(su, cases[i].sql, cases[i].min_rows);
		PGconn *conn = connect_as(db, cases[i].role);
		role_may_not(conn, cases[i].role, cases[i].sql, cases[i].refusal);
		PQfinish(conn);
	}
	/* nothing of it happened */
	ck_assert_int_eq(ts_query_int(su, "SELECT count(*) FROM outbox.batches"
	    " WHERE owner = 'evil'"), 0);
	ck_assert_int_eq(ts_query_int(su, "SELECT count(*) FROM outbox.relay_waiters"), 1);
	ck_assert_int_eq(ts_query_int(su, "SELECT count(*) FROM outbox.events"
	    " WHERE idempotency_key LIKE '%forged'"), 0);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM outbox.batches WHERE id = %s"
	    " AND state = 'leased'", batch);
	ck_assert_int_eq(ts_query_int(su, sql), 1);
	PQfinish(su);
	logins_drop(&l);
	ts_role_drop(nobody);
}
END_TEST

/* Every function a role may call, and every function those call in turn
 * (named in their source: a function that is not SECURITY DEFINER checks
 * each call it makes against its caller), is granted to the role: a
 * missing one fails only on the path that reaches it (retry_claimable's
 * lane_of -> ordering_lanes failed every claim of a relay role once an
 * ordered retry existed; the compose scenario caught it, no test did). */
START_TEST(test_granted_functions_reach_only_granted_ones)
{
	char db[TS_CONNINFO_MAX], sql[2048];
	ts_db_create("roles_reach", "all", db, sizeof(db));
	PGconn *su = ts_connect(db);
	static const char *const roles[] = { "outbox_producer", "outbox_relay", "outbox_admin",
		"outbox_viewer", NULL };
	for (int i = 0; roles[i] != NULL; i++) {
		snprintf(sql, sizeof(sql),
		    "WITH RECURSIVE g AS ("
		    "  SELECT p.oid FROM pg_proc p WHERE p.pronamespace = 'outbox'::regnamespace"
		    "     AND has_function_privilege('%s', p.oid, 'EXECUTE')"
		    "  UNION"
		    "  SELECT c.oid FROM g JOIN pg_proc p ON p.oid = g.oid AND NOT p.prosecdef,"
		    "       LATERAL regexp_matches(p.prosrc, 'outbox\\.([a-z_]+)\\s*\\(', 'g') m"
		    "       JOIN pg_proc c ON c.proname = m[1] AND c.pronamespace = 'outbox'::regnamespace)"
		    " SELECT coalesce(string_agg(DISTINCT p.proname, ', '), '') FROM g"
		    "  JOIN pg_proc p ON p.oid = g.oid"
		    " WHERE NOT has_function_privilege('%s', g.oid, 'EXECUTE')", roles[i], roles[i]);
		PGresult *r = PQexec(su, sql);
		ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQresultErrorMessage(r));
		ck_assert_msg(PQgetvalue(r, 0, 0)[0] == '\0', "%s may call functions that call %s,"
		    " which it may not (sql/outbox/functions/grants.sql)", roles[i], PQgetvalue(r, 0, 0));
		PQclear(r);
	}
	PQfinish(su);
}
END_TEST

/* outbox.enqueue runs as its owner with a pinned search_path, takes a
 * waiting relay's announcement and writes the key's sequence row for the
 * producer, who may do neither itself; no definer function takes a switch.
 * The only other definer is outbox.adopt_restore (no argument at all). */
START_TEST(test_enqueue_is_the_only_definer)
{
	char db[TS_CONNINFO_MAX], producer[64];
	ts_db_create("roles_definer", "all", db, sizeof(db));
	ts_role_create("r_producer", "outbox_producer", producer);
	PGconn *su = ts_connect(db);
	ck_assert_int_eq(ts_query_int(su,
	    "SELECT (prosecdef AND proconfig = '{\"search_path=pg_catalog, pg_temp\"}')::int"
	    " FROM pg_proc WHERE oid = 'outbox.enqueue(text, text, jsonb, text, jsonb, timestamptz)'::regprocedure"), 1);
	/* every definer function: a pinned search_path, no boolean argument */
	ck_assert_int_eq(ts_query_int(su,
	    "SELECT count(*) FROM pg_proc WHERE prosecdef"
	    " AND pronamespace IN ('outbox'::regnamespace, 'inbox'::regnamespace, 'app'::regnamespace)"
	    " AND ('boolean'::regtype::oid = ANY(proargtypes::oid[])"
	    "      OR NOT COALESCE('search_path=pg_catalog, pg_temp' = ANY(proconfig), false))"), 0);
	ck_assert_int_eq(ts_query_int(su,
	    "SELECT count(*) FROM pg_proc WHERE prosecdef"
	    " AND pronamespace IN ('outbox'::regnamespace, 'inbox'::regnamespace)"
	    " AND oid NOT IN ('outbox.enqueue(text, text, jsonb, text, jsonb, timestamptz)'::regprocedure,"
	    "                 'outbox.adopt_restore()'::regprocedure)"), 0);

	ts_exec(su, "SELECT outbox.relay_waiting('worker-1', 60000)");
	PGconn *pc = connect_as(db, producer);
	ts_exec(pc, "BEGIN");
	int64_t id = ts_query_int(pc, "SELECT outbox.enqueue('t', 'k-1', '{}', 'key-a')");
	ts_exec(pc, "COMMIT");
	ck_assert_int_gt(id, 0);
	ck_assert_int_eq(ts_query_int(su, "SELECT count(*) FROM outbox.relay_waiters"), 0);
	ck_assert_int_eq(ts_query_int(su, "SELECT last_seq FROM outbox.ordering_seqs"
	    " WHERE ordering_key = 'key-a'"), 1);
	/* a producer's own search_path changes nothing inside */
	ts_exec(pc, "SET search_path = pg_temp, public");
	ts_exec(pc, "CREATE TEMP TABLE slots (slot smallint, state text)");
	ck_assert_int_eq(ts_query_int(pc, "SELECT outbox.enqueue('t', 'k-2', '{}')"), id + 1);
	ck_assert_int_eq(ts_query_int(su, "SELECT count(*) FROM outbox.messages"), 2);
	/* the role owns the temp table until it is gone: dropped here, not by
	 * the backend's exit after PQfinish, which the DROP ROLE below could
	 * overtake ("some objects depend on it", seen at -j2) */
	ts_exec(pc, "DISCARD TEMP");
	PQfinish(pc);
	PQfinish(su);
	ts_role_drop(producer);
}
END_TEST

/* A server of its own (made by main, so that the teardown finds it after
 * a failure): the roles exist once per server, and only a fresh one has
 * none yet. */
static char fresh_base[64], fresh_dir[128];

struct migrate_run {
	char db[TS_CONNINFO_MAX];
	int rc;
	char err[1024];
};

static void *
migrate_thread(void *arg)
{
	struct migrate_run *m = arg;
	struct ob_migrate_report r;
	PGconn *c = ts_connect(m->db);
	m->rc = ob_migrate(c, &(struct ob_migrate_opts){ .set = "outbox", .demo = true }, &r,
	    m->err, sizeof(m->err));
	PQfinish(c);
	return NULL;
}

/* Two databases' migrations on a server that has no roles yet, in the
 * interleaving that deadlocks: the other holds outbox_viewer (uncommitted,
 * as 016_viewer makes it) while the migration of d1 has made the roles of
 * 014 and waits for it; then the other asks for one of those. PostgreSQL
 * aborts the migration (it waited first, so its deadlock_timeout ends
 * first; the other's is set far out). It must run again and apply once the
 * other commits; before, `outboxctl migrate` of two databases at once (CI's
 * tests, two deployments) failed: "migration outbox/016_viewer: deadlock
 * detected". */
START_TEST(test_migrations_of_two_databases_retry_a_deadlock)
{
	char postgres[TS_CONNINFO_MAX], d2[TS_CONNINFO_MAX];
	struct migrate_run m = { .rc = -1 };
	ts_pgserver_start(fresh_dir, postgres, sizeof(postgres));
	ts_pgserver_db_create(postgres, "d1", NULL, m.db, sizeof(m.db));
	ts_pgserver_db_create(postgres, "d2", NULL, d2, sizeof(d2));
	PGconn *watch = ts_connect(postgres);
	ck_assert_int_eq(ts_query_int(watch, "SELECT count(*) FROM pg_roles"
	    " WHERE rolname LIKE 'outbox\\_%'"), 0);
	PGconn *other = ts_connect(d2);
	ts_exec(other, "SET deadlock_timeout = '1min'");
	ts_exec(other, "BEGIN");
	ts_exec(other, "CREATE ROLE outbox_viewer NOLOGIN");

	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, migrate_thread, &m), 0);
	static const char d1_waits_sql[] = "SELECT count(*) FROM pg_stat_activity"
	    " WHERE datname = 'd1' AND wait_event_type = 'Lock'";
	ck_assert_int_eq(ts_wait_value(watch, d1_waits_sql, 1, 60000), 1);
	/* made by the migration, not committed: this waits for it */
	ck_assert_int_eq(PQsendQuery(other, "CREATE ROLE outbox_producer NOLOGIN"), 1);
	/* the migration is the deadlock's victim: the other's statement ends */
	PGresult *res;
	bool ok = true;
	while ((res = PQgetResult(other)) != NULL) {
		ok = ok && PQresultStatus(res) == PGRES_COMMAND_OK;
		PQclear(res);
	}
	ck_assert_msg(ok, "the other database's CREATE ROLE failed: %s", PQerrorMessage(other));
	/* its run again waits for the other's roles (a run that gave up
	 * does not); they commit */
	ck_assert_int_eq(ts_wait_value(watch, "SELECT (count(*) = 0 OR count(*) FILTER"
	    " (WHERE wait_event_type = 'Lock') = 1)::int FROM pg_stat_activity"
	    " WHERE datname = 'd1'", 1, 60000), 1);
	if (ts_query_int(watch, d1_waits_sql) == 0) {
		ck_assert_int_eq(pthread_join(t, NULL), 0);
		ck_abort_msg("migrate of d1 gave up: %s", m.err);
	}
	ts_exec(other, "COMMIT");
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_msg(m.rc == OB_OK, "migrate of d1: %s", m.err);
	PGconn *c1 = ts_connect(m.db);
	ck_assert_int_eq(ts_query_int(c1, "SELECT count(*) FROM outbox.protocols"
	    " WHERE component = 'viewer'"), 1);
	PQfinish(c1);
	PQfinish(other);
	PQfinish(watch);
	ts_pgserver_stop_quiet(fresh_dir);
}
END_TEST

static void
fresh_server_stop(void)
{
	ts_pgserver_stop_quiet(fresh_dir);
	rmdir(fresh_base);
}

static Suite *
roles_suite(void)
{
	Suite *s = suite_create("roles");
	TCase *tc = tcase_create("roles");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_groups_once_per_server);
	tcase_add_test(tc, test_public_executes_nothing);
	tcase_add_test(tc, test_missing_grant_refused_at_start);
	tcase_add_test(tc, test_flow_with_one_role_per_program);
	tcase_add_test(tc, test_forbidden_writes_refused);
	tcase_add_test(tc, test_enqueue_is_the_only_definer);
	tcase_add_test(tc, test_granted_functions_reach_only_granted_ones);
	suite_add_tcase(s, tc);
	TCase *fresh = tcase_create("fresh server");
	tcase_set_timeout(fresh, 120);
	tcase_add_unchecked_fixture(fresh, NULL, fresh_server_stop);
	tcase_add_test(fresh, test_migrations_of_two_databases_retry_a_deadlock);
	suite_add_tcase(s, fresh);
	return s;
}

int
main(void)
{
	snprintf(fresh_base, sizeof(fresh_base), "/tmp/obrol.XXXXXX");
	if (mkdtemp(fresh_base) == NULL) {
		perror("mkdtemp");
		return EXIT_FAILURE;
	}
	snprintf(fresh_dir, sizeof(fresh_dir), "%s/pg", fresh_base);
	return ts_run_suite(roles_suite());
}
