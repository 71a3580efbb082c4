/*
 * test_ctl.c - outboxctl status, dead list/show/requeue, inspect and purge
 * against a real PostgreSQL: rows are set up with SQL in a fresh database,
 * outboxctl runs as a child process, and both its output and the table
 * afterwards are checked. Every bad input must print one line, exit
 * non-zero and leave the table byte-for-byte unchanged.
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testsupport.h"

#define RUN_TIMEOUT_MS 30000
#define OUT_MAX 65536

/* id 1..3 topic a, 4..6 topic b; see each case's comment for states. */
static const char setup_sql[] =
    "SELECT outbox.enqueue('a', 'a' || g, jsonb_build_object('n', g)) FROM generate_series(1, 3) g;"
    "SELECT outbox.enqueue('b', 'b' || g, jsonb_build_object('n', g)) FROM generate_series(1, 3) g;"
    /* 1: delivered 10 days ago; 2: delivered just now */
    "UPDATE outbox.messages SET status = 'delivered', delivered_at = now() - interval '10 days' WHERE id = 1;"
    "UPDATE outbox.messages SET status = 'delivered', delivered_at = now() WHERE id = 2;"
    /* 3: dead, young; 6: dead, created 9 days ago */
    "UPDATE outbox.messages SET status = 'dead', attempts = 8, fence = 8,"
    "  available_at = now() + interval '1h', last_error = 'rejected: bad payload' WHERE id = 3;"
    "UPDATE outbox.messages SET status = 'dead', attempts = 5, fence = 5,"
    "  created_at = now() - interval '9 days', available_at = now() - interval '9 days',"
    "  last_error = 'max attempts' WHERE id = 6;"
    /* 4: pending under a live lease */
    "UPDATE outbox.messages SET lease_owner = 'relay-7', lease_until = now() + interval '5 min',"
    "  fence = 3, attempts = 1 WHERE id = 4;"
    /* 5: pending, waiting for a retry in an hour, created 2 hours ago */
    "UPDATE outbox.messages SET available_at = now() + interval '1 hour', attempts = 2,"
    "  created_at = now() - interval '2 hours', last_error = 'timeout' WHERE id = 5;";

static char db[TS_CONNINFO_MAX];
static PGconn *conn;

static void
setup(void)
{
	ts_db_create("ctl", "outbox", db, sizeof db);
	conn = ts_connect(db);
	ts_exec(conn, setup_sql);
}

static void
teardown(void)
{
	PQfinish(conn);
	conn = NULL;
}

/* Run outboxctl with args (NULL-terminated; --db added); returns the exit
 * code, output (stdout + stderr) in out. */
static int
ctl(char *out, const char *a0, ...)
{
	char *argv[32];
	int n = 0;
	va_list ap;
	argv[n++] = "outboxctl";
	va_start(ap, a0);
	for (const char *a = a0; a != NULL && n < 28; a = va_arg(ap, const char *))
		argv[n++] = (char *)a;
	va_end(ap);
	argv[n++] = "--db";
	argv[n++] = db;
	argv[n] = NULL;
	return ts_run(argv, NULL, out, OUT_MAX, RUN_TIMEOUT_MS);
}

/* The whole table as text: what "changes nothing" is checked against. */
static char *
snapshot(void)
{
	PGresult *r = PQexec(conn,
	    "SELECT coalesce(string_agg(m::text, E'\\n' ORDER BY id), '') FROM outbox.messages m");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	char *s = strdup(PQgetvalue(r, 0, 0));
	PQclear(r);
	return s;
}

static int
lines(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

#define assert_has(text, needle) \
	ck_assert_msg(strstr((text), (needle)) != NULL, "missing <%s> in:\n%s", (needle), (text))

static json_t *
parse_json(const char *text)
{
	json_error_t e;
	json_t *j = json_loads(text, 0, &e);
	ck_assert_msg(j != NULL, "bad JSON (%s) in:\n%s", e.text, text);
	return j;
}

static json_int_t
jint(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	ck_assert_msg(json_is_integer(v), "%s is not an integer", key);
	return json_integer_value(v);
}

START_TEST(test_status)
{
	char *out = malloc(OUT_MAX);
	ck_assert_int_eq(ctl(out, "status", NULL), 0);
	/* topic a: 0 pending, 2 delivered, 1 dead; b: 2 pending (1 leased), 1 dead */
	ck_assert_msg(strstr(out, "TOPIC") == out, "%s", out);
	assert_has(out, "OLDEST_CLAIMABLE_AGE");
	assert_has(out, "\na        0        0       2          1     0             -");
	assert_has(out, "\nb        2        1       0          1     0             2h");
	assert_has(out, "\n(total)  2        1       2          2     0             2h");

	ck_assert_int_eq(ctl(out, "status", "--json", NULL), 0);
	json_t *j = parse_json(out);
	json_t *topics = json_object_get(j, "topics");
	ck_assert_int_eq(json_array_size(topics), 2);
	json_t *b = json_array_get(topics, 1);
	ck_assert_str_eq(json_string_value(json_object_get(b, "topic")), "b");
	ck_assert_int_eq(jint(b, "pending"), 2);
	ck_assert_int_eq(jint(b, "leased"), 1);
	ck_assert_int_eq(jint(b, "delivered"), 0);
	ck_assert_int_eq(jint(b, "dead"), 1);
	/* 5 waits for a retry (2 h old), 4 is leased: nothing is claimable */
	double pend = json_number_value(json_object_get(b, "oldest_pending_age_seconds"));
	ck_assert_msg(pend >= 7200 && pend < 7300, "oldest pending %f", pend);
	ck_assert(json_is_null(json_object_get(b, "oldest_claimable_age_seconds")));
	json_t *t = json_object_get(j, "total");
	ck_assert_int_eq(jint(t, "delivered"), 2);
	ck_assert_int_eq(jint(t, "dead"), 2);
	json_decref(j);

	/* the lease expires: 4 becomes claimable, due since its creation */
	ts_exec(conn, "UPDATE outbox.messages SET lease_until = now() - interval '1 s',"
	    " available_at = now() - interval '30 s' WHERE id = 4");
	ck_assert_int_eq(ctl(out, "status", "--json", "--topic", "b", NULL), 0);
	j = parse_json(out);
	ck_assert_int_eq(json_array_size(json_object_get(j, "topics")), 1);
	b = json_array_get(json_object_get(j, "topics"), 0);
	ck_assert_int_eq(jint(b, "leased"), 0);
	double claim = json_number_value(json_object_get(b, "oldest_claimable_age_seconds"));
	ck_assert_msg(claim >= 30 && claim < 120, "oldest claimable %f", claim);
	json_decref(j);
	free(out);
}
END_TEST

START_TEST(test_dead_list_show)
{
	char *out = malloc(OUT_MAX);
	ck_assert_int_eq(ctl(out, "dead", "list", NULL), 0);
	ck_assert_int_eq(lines(out), 3);
	assert_has(out, "\n3   a      a3   8         ");
	assert_has(out, "rejected: bad payload");
	assert_has(out, "\n6   b      b3   5         ");
	ck_assert_int_eq(ctl(out, "dead", "list", "--topic", "b", "--json", NULL), 0);
	json_t *j = parse_json(out);
	ck_assert_int_eq(json_array_size(j), 1);
	ck_assert_int_eq(jint(json_array_get(j, 0), "id"), 6);
	json_decref(j);
	ck_assert_int_eq(ctl(out, "dead", "list", "--limit", "1", "--json", NULL), 0);
	j = parse_json(out);
	ck_assert_int_eq(json_array_size(j), 1);
	ck_assert_int_eq(jint(json_array_get(j, 0), "id"), 3);
	json_decref(j);
	ck_assert_int_eq(ctl(out, "dead", "list", "--topic", "zzz", NULL), 0);
	assert_has(out, "no dead messages in topic zzz");

	ck_assert_int_eq(ctl(out, "dead", "show", "3", NULL), 0);
	assert_has(out, "status         dead\n");
	assert_has(out, "attempts       8\n");
	assert_has(out, "last_error     rejected: bad payload\n");
	assert_has(out, "\"n\": 3");
	ck_assert_int_eq(ctl(out, "dead", "show", "--json", "6", NULL), 0);
	j = parse_json(out);
	ck_assert_int_eq(jint(json_object_get(j, "payload"), "n"), 3);
	ck_assert_str_eq(json_string_value(json_object_get(j, "last_error")), "max attempts");
	ck_assert_int_eq(jint(j, "attempts"), 5);
	assert_has(json_string_value(json_object_get(j, "created_at")), "T");
	json_decref(j);
	free(out);
}
END_TEST

START_TEST(test_requeue)
{
	char *out = malloc(OUT_MAX);
	/* young dead message: back to pending, attempts 0, due now, fence bumped */
	ck_assert_int_eq(ctl(out, "dead", "requeue", "3", NULL), 0);
	assert_has(out, "dead requeue: 1 message requeued");
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE id = 3 AND status = 'pending'"
	    " AND attempts = 0 AND fence = 9 AND available_at <= now() AND lease_owner IS NULL"),
	    1);
	/* requeue of a message that is no longer dead: says so, changes nothing */
	char *before = snapshot();
	ck_assert_int_eq(ctl(out, "dead", "requeue", "3", NULL), 1);
	ck_assert_str_eq(out, "outboxctl dead requeue: message 3 is pending, not dead: not requeued\n");
	char *after = snapshot();
	ck_assert_str_eq(before, after);
	free(after);

	/* older than the dedup retention: refused with the reason */
	ck_assert_int_eq(ctl(out, "dead", "requeue", "6", NULL), 1);
	ck_assert_int_eq(lines(out), 1);
	assert_has(out, "message 6 was created 9d ago, longer than the consumer's dedup"
	    " retention (7d)");
	assert_has(out, "--force");
	after = snapshot();
	ck_assert_str_eq(before, after);
	free(after);
	/* ... unless the retention is longer, or --force */
	char *env[] = { "OUTBOX_DEDUP_RETENTION=10d", NULL };
	char *argv[] = { "outboxctl", "dead", "requeue", "6", "--json", "--db", db, NULL };
	ck_assert_int_eq(ts_run(argv, env, out, OUT_MAX, RUN_TIMEOUT_MS), 0);
	json_t *j = parse_json(out);
	ck_assert_int_eq(jint(j, "requeued"), 1);
	json_decref(j);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT fence FROM outbox.messages WHERE id = 6 AND status = 'pending'"), 6);
	ts_exec(conn, "UPDATE outbox.messages SET status = 'dead' WHERE id = 6");
	ck_assert_int_eq(ctl(out, "dead", "requeue", "--force", "6", NULL), 0);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT fence FROM outbox.messages WHERE id = 6 AND status = 'pending'"), 7);
	free(before);
	free(out);
}
END_TEST

/* All or nothing: one bad id among good ones changes nothing. */
START_TEST(test_requeue_all_or_nothing)
{
	char *out = malloc(OUT_MAX);
	char *before = snapshot();
	ck_assert_int_eq(ctl(out, "dead", "requeue", "3", "4", "999", NULL), 1);
	assert_has(out, "message 4 is pending, not dead: not requeued\n");
	assert_has(out, "no message with id 999\n");
	assert_has(out, "nothing requeued (2 of 3 refused)\n");
	char *after = snapshot();
	ck_assert_str_eq(before, after);
	free(after);

	/* --all refuses because 6 is too old; --all --topic a does 3 only */
	ck_assert_int_eq(ctl(out, "dead", "requeue", "--all", NULL), 1);
	assert_has(out, "message 6 was created");
	after = snapshot();
	ck_assert_str_eq(before, after);
	free(after);
	ck_assert_int_eq(ctl(out, "dead", "requeue", "--all", "--topic", "a", NULL), 0);
	assert_has(out, "1 message requeued");
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'dead'"), 1);
	ck_assert_int_eq(ctl(out, "dead", "requeue", "--all", "--topic", "a", NULL), 0);
	assert_has(out, "no dead messages in topic a: nothing to do");
	ck_assert_int_eq(ctl(out, "dead", "requeue", "--all", "--force", NULL), 0);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'dead'"), 0);
	free(before);
	free(out);
}
END_TEST

START_TEST(test_inspect)
{
	static const struct {
		const char *key, *state;
	} cases[] = {
		{ "a1", "delivered" }, { "a3", "dead" }, { "b1", "leased" },
		{ "b2", "waiting_retry" }, { "a2", "delivered" },
	};
	char *out = malloc(OUT_MAX);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char want[64];
		ck_assert_int_eq(ctl(out, "inspect", "--key", cases[i].key, NULL), 0);
		snprintf(want, sizeof want, "state         %s\n", cases[i].state);
		assert_has(out, want);
	}
	ck_assert_int_eq(ctl(out, "inspect", "--key", "b1", "--topic", "b", "--json", NULL), 0);
	json_t *j = parse_json(out);
	ck_assert_int_eq(json_array_size(j), 1);
	json_t *o = json_array_get(j, 0);
	ck_assert_int_eq(jint(o, "fence"), 3);
	ck_assert_int_eq(jint(o, "attempts"), 1);
	ck_assert_str_eq(json_string_value(json_object_get(o, "lease_owner")), "relay-7");
	ck_assert(json_is_string(json_object_get(o, "lease_until")));
	ck_assert(json_is_null(json_object_get(o, "delivered_at")));
	json_decref(j);
	/* same key in two topics: both shown */
	ts_exec(conn, "SELECT outbox.enqueue('c', 'a1', '{}')");
	ck_assert_int_eq(ctl(out, "inspect", "--key", "a1", "--json", NULL), 0);
	j = parse_json(out);
	ck_assert_int_eq(json_array_size(j), 2);
	json_decref(j);
	ts_exec(conn, "UPDATE outbox.messages SET lease_until = NULL, available_at = now()"
	    " WHERE id = 4");
	ck_assert_int_eq(ctl(out, "inspect", "--key", "b1", NULL), 0);
	assert_has(out, "state         claimable\n");
	free(out);
}
END_TEST

START_TEST(test_purge)
{
	char *out = malloc(OUT_MAX);
	/* 20 more delivered 30 days ago, 3 at a time */
	ts_exec(conn, "SELECT outbox.enqueue('p', 'p' || g, '{}') FROM generate_series(1, 20) g;"
	    "UPDATE outbox.messages SET status = 'delivered', delivered_at = now() - interval '30 days'"
	    " WHERE topic = 'p'");
	ck_assert_int_eq(ctl(out, "purge", "--older-than", "7d", "--dry-run", NULL), 0);
	assert_has(out, "purge: 21 delivered messages older than 7d would be deleted");
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.messages"), 26);
	ck_assert_int_eq(ctl(out, "purge", "--older-than", "7d", "--batch", "3", "--json", NULL), 0);
	json_t *j = parse_json(out);
	ck_assert_int_eq(jint(j, "deleted"), 21);
	ck_assert_int_eq(jint(j, "batches"), 7);
	json_decref(j);
	/* the young delivered one (2), pending, leased and dead ones stay */
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.messages"), 5);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE id IN (2, 3, 4, 5, 6)"), 5);
	/* dead rows are never purged, however old */
	ts_exec(conn, "UPDATE outbox.messages SET delivered_at = now() - interval '99 days'"
	    " WHERE id = 3");
	ck_assert_int_eq(ctl(out, "purge", "--older-than", "1s", NULL), 0);
	assert_has(out, "purge: 0 delivered messages older than 1.0s deleted in 0 batches");
	free(out);
}
END_TEST

/* Every bad input: non-zero exit, exactly one line, nothing changed. */
START_TEST(test_bad_input)
{
	static const struct {
		int code;
		const char *args[8];
		const char *says;
	} cases[] = {
		{ 2, { "dead", "show", "abc" }, "bad id 'abc': want a positive integer" },
		{ 2, { "dead", "show", "-5" }, "bad id '-5'" },
		{ 2, { "dead", "show", "0" }, "bad id '0'" },
		{ 2, { "dead", "show", "99999999999999999999" }, "bad id" },
		{ 2, { "dead", "show" }, "want exactly one ID" },
		{ 2, { "dead", "show", "3", "6" }, "want exactly one ID" },
		{ 1, { "dead", "show", "424242" }, "no message with id 424242" },
		{ 1, { "dead", "show", "4" }, "message 4 is pending, not dead" },
		{ 2, { "dead", "requeue", "1x" }, "bad id '1x'" },
		{ 2, { "dead", "requeue", "3", "--all" }, "give message IDs or --all" },
		{ 2, { "dead", "requeue" }, "give message IDs or --all" },
		{ 2, { "dead", "requeue", "3", "--topic", "a" }, "--topic goes with --all" },
		{ 1, { "dead", "requeue", "424242" }, "no message with id 424242" },
		{ 1, { "dead", "requeue", "2" }, "message 2 is delivered, not dead: not requeued" },
		{ 1, { "dead", "requeue", "6" }, "longer than the consumer's dedup retention" },
		{ 2, { "dead", "requeue", "3", "--dedup-retention", "7x" }, "is not a duration" },
		{ 2, { "dead", "requeue", "3", "--dedup-retention", "10ms" }, "below the minimum" },
		{ 2, { "dead", "list", "--limit", "0" }, "below the minimum" },
		{ 2, { "dead", "list", "--limit", "ten" }, "--limit" },
		{ 2, { "dead", "list", "extra" }, "unexpected argument 'extra'" },
		{ 2, { "dead", "bury" }, "want list, show or requeue (got 'bury')" },
		{ 1, { "inspect", "--key", "nope" }, "no message with key 'nope'" },
		{ 1, { "inspect", "--key", "a1", "--topic", "b" }, "no message with key 'a1' in topic b" },
		{ 2, { "inspect" }, "--key is required (or set OUTBOX_CTL_KEY)" },
		{ 2, { "inspect", "--key", "a1", "b1" }, "unexpected argument 'b1' (use --key)" },
		{ 2, { "purge", "--older-than", "5x" }, "'5x' is not a duration" },
		{ 2, { "purge", "--older-than", "" }, "--older-than" },
		{ 2, { "purge", "--older-than", "100ms" }, "below the minimum" },
		{ 2, { "purge" }, "--older-than is required" },
		{ 2, { "purge", "--older-than", "1d", "--batch", "0" }, "below the minimum" },
		{ 2, { "status", "--bogus" }, "unknown option --bogus" },
		{ 2, { "status", "x" }, "unexpected argument 'x'" },
		{ 2, { "nosuch" }, "unknown command 'nosuch'" },
	};
	char *out = malloc(OUT_MAX);
	char *before = snapshot();
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *argv[16];
		int n = 0;
		argv[n++] = "outboxctl";
		for (int k = 0; k < 8 && cases[i].args[k] != NULL; k++)
			argv[n++] = (char *)cases[i].args[k];
		argv[n++] = "--db";
		argv[n++] = db;
		argv[n] = NULL;
		int code = ts_run(argv, NULL, out, OUT_MAX, RUN_TIMEOUT_MS);
		ck_assert_msg(code == cases[i].code, "case %zu (%s %s): exit %d, want %d: %s", i,
		    argv[1], argv[2], code, cases[i].code, out);
		ck_assert_msg(lines(out) == 1, "case %zu: %d lines: %s", i, lines(out), out);
		ck_assert_msg(strstr(out, cases[i].says) != NULL, "case %zu: want <%s>, got %s", i,
		    cases[i].says, out);
		char *after = snapshot();
		ck_assert_msg(strcmp(before, after) == 0, "case %zu changed the table", i);
		free(after);
	}
	/* a database that cannot be reached: one line, exit 1, password hidden */
	char *argv[] = { "outboxctl", "status", "--db",
	    "host=/nonexistent port=1 user=x password=hunter2", NULL };
	ck_assert_int_eq(ts_run(argv, NULL, out, OUT_MAX, RUN_TIMEOUT_MS), 1);
	ck_assert_msg(strstr(out, "hunter2") == NULL, "password printed: %s", out);
	free(before);
	free(out);
}
END_TEST

/* --help is generated from the tables and mentions every flag and env var;
 * --help-markdown prints them all for docs/configuration.md. */
START_TEST(test_help)
{
	char *out = malloc(OUT_MAX);
	char *argv[] = { "outboxctl", "dead", "requeue", "--help", NULL };
	ck_assert_int_eq(ts_run(argv, NULL, out, OUT_MAX, RUN_TIMEOUT_MS), 0);
	assert_has(out, "--dedup-retention DURATION");
	assert_has(out, "[OUTBOX_DEDUP_RETENTION]");
	assert_has(out, "default 7d");
	assert_has(out, "--force");
	char *argv2[] = { "outboxctl", "--help-markdown", NULL };
	ck_assert_int_eq(ts_run(argv2, NULL, out, OUT_MAX, RUN_TIMEOUT_MS), 0);
	const char *titles[] = { "### outboxctl migrate", "### outboxctl status",
		"### outboxctl dead list", "### outboxctl dead show", "### outboxctl dead requeue",
		"### outboxctl inspect", "### outboxctl purge" };
	for (size_t i = 0; i < sizeof titles / sizeof titles[0]; i++)
		assert_has(out, titles[i]);
	assert_has(out, "| `--older-than` | `OUTBOX_CTL_PURGE_OLDER_THAN` | duration | required |");
	char *argv3[] = { "outboxctl", "--help", NULL };
	ck_assert_int_eq(ts_run(argv3, NULL, out, OUT_MAX, RUN_TIMEOUT_MS), 0);
	for (const char *c = "status\0dead\0inspect\0purge\0migrate\0"; *c; c += strlen(c) + 1)
		assert_has(out, c);
	free(out);
}
END_TEST

static Suite *
ctl_suite(void)
{
	Suite *s = suite_create("ctl");
	TCase *tc = tcase_create("ctl");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_status);
	tcase_add_test(tc, test_dead_list_show);
	tcase_add_test(tc, test_requeue);
	tcase_add_test(tc, test_requeue_all_or_nothing);
	tcase_add_test(tc, test_inspect);
	tcase_add_test(tc, test_purge);
	tcase_add_test(tc, test_bad_input);
	tcase_set_timeout(tc, 240);
	suite_add_tcase(s, tc);
	TCase *th = tcase_create("help");
	tcase_add_test(th, test_help);
	tcase_set_timeout(th, 60);
	suite_add_tcase(s, th);
	return s;
}

int
main(void)
{
	return ts_run_suite(ctl_suite());
}
