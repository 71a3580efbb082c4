/*
 * test_ctl.c - outboxctl status, dead list/show/requeue, inspect and purge
 * against a real PostgreSQL: states are made in a fresh database with the
 * functions the relays use (outbox.enqueue, outbox.claim, outbox.record),
 * outboxctl runs as a child process, and both its output and the tables
 * afterwards are checked. Every bad input must print one line, exit
 * non-zero and leave every table of the outbox byte-for-byte unchanged.
 * Stored text with terminal escape sequences is printed escaped.
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testsupport.h"

#define RUN_TIMEOUT_MS 30000
#define OUT_MAX 65536
#define LEASE_MS "300000"

/* id 1..3 topic a, 4..6 topic b; setup() makes their states:
 *  1, 2  delivered (one batch, no exceptions)
 *  3     dead, young, after 8 attempts ("rejected: bad payload")
 *  4     pending under a live lease of relay-7 (claimed, not recorded)
 *  5     pending, a retry due in an hour ("timeout"), created 2 hours ago
 *  6     dead after 5 attempts ("max attempts"), created 9 days ago */
static const char enqueue_sql[] =
    "SELECT outbox.enqueue('a', 'a' || g, jsonb_build_object('n', g)) FROM generate_series(1, 3) g;"
    "SELECT outbox.enqueue('b', 'b' || g, jsonb_build_object('n', g)) FROM generate_series(1, 3) g;";

static char db[TS_CONNINFO_MAX];
static PGconn *conn;

/* A claimed batch: its id, fence, and the ids in it ("1,2"). */
struct batch {
	int64_t id, fence;
	char ids[256];
};

static struct batch lease4; /* the batch relay-7 holds (message 4) */

/* outbox.claim of at most max_n messages of topics (a text[] literal),
 * stream first or retries first. */
static struct batch
claim_from(const char *topics, int max_n, const char *owner, bool retries_first)
{
	char sql[512];
	struct batch b;
	snprintf(sql, sizeof sql,
	    "SELECT batch_id, fence, string_agg(id::text, ',' ORDER BY id)"
	    " FROM outbox.claim(2, '%s', " LEASE_MS ", %d, '%s', NULL, false, %s)"
	    " GROUP BY batch_id, fence",
	    owner, max_n, topics, retries_first ? "true" : "false");
	PGresult *r = PQexec(conn, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQresultErrorMessage(r));
	ck_assert_msg(PQntuples(r) == 1, "claim %s: %d batches", topics, PQntuples(r));
	b.id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	b.fence = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
	snprintf(b.ids, sizeof b.ids, "%s", PQgetvalue(r, 0, 2));
	PQclear(r);
	return b;
}

static struct batch
claim(const char *topic, int max_n, const char *want_ids)
{
	char topics[64];
	snprintf(topics, sizeof topics, "{%s}", topic);
	struct batch b = claim_from(topics, max_n, "relay-1", false);
	ck_assert_str_eq(b.ids, want_ids);
	return b;
}

/* A relay polling with nothing to do: claims nothing, and so moves every
 * stream's floor past what has been cut (a slot can only go after that). */
static void
claim_nothing(const char *topics)
{
	char sql[256];
	snprintf(sql, sizeof sql, "SELECT count(*) FROM outbox.claim(2, 'relay-1', " LEASE_MS
	    ", 100, '%s', NULL, false, false)", topics);
	ck_assert_int_eq(ts_query_int(conn, sql), 0);
}

/* outbox.record of batch b, fenced: outcome 'done' with the exceptions
 * (ids, kinds, delays, errors as array literals) or 'release' (due again
 * after delay_ms). */
static void
record(const struct batch *b, const char *outcome, long delay_ms, const char *ids,
    const char *kinds, const char *delays, const char *errors)
{
	char sql[1024];
	snprintf(sql, sizeof sql,
	    "SELECT outbox.record(2, %lld, %lld, true, '%s', %ld, false, '%s', '%s', '%s', '%s',"
	    " false)::int", (long long)b->id, (long long)b->fence, outcome, delay_ms, ids, kinds,
	    delays, errors);
	ck_assert_msg(ts_query_int(conn, sql) == 1, "record of batch %lld fenced out",
	    (long long)b->id);
}

/* Release b and take it again, times times: attempts + 1 each, new fence. */
static struct batch
retake(const char *topic, struct batch b, int times)
{
	for (int i = 0; i < times; i++) {
		record(&b, "release", 0, "{}", "{}", "{}", "{}");
		struct batch again = claim(topic, 1, b.ids);
		ck_assert_int_eq(again.id, b.id);
		ck_assert_int_gt(again.fence, b.fence);
		b = again;
	}
	return b;
}

static void
setup(void)
{
	ts_db_create("ctl", "outbox", db, sizeof db);
	conn = ts_connect(db);
	ts_exec(conn, enqueue_sql);
	struct batch b = claim("a", 2, "1,2");
	record(&b, "done", 0, "{}", "{}", "{}", "{}");
	b = retake("a", claim("a", 1, "3"), 7);
	record(&b, "done", 0, "{3}", "{dead}", "{0}", "{rejected: bad payload}");
	lease4 = claim_from("{b}", 1, "relay-7", false);
	ck_assert_str_eq(lease4.ids, "4");
	b = claim("b", 1, "5");
	record(&b, "done", 0, "{5}", "{retry}", "{3600000}", "{timeout}");
	b = retake("b", claim("b", 1, "6"), 4);
	record(&b, "done", 0, "{6}", "{dead}", "{0}", "{max attempts}");
	ts_exec(conn, "UPDATE outbox.dead SET created_at = now() - interval '9 days' WHERE id = 6;"
	    "UPDATE outbox.retries SET created_at = now() - interval '2 hours' WHERE id = 5");
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.messages WHERE"
	    " (id, status, attempts) IN ((1, 'delivered', 1), (2, 'delivered', 1), (3, 'dead', 8),"
	    " (4, 'pending', 1), (5, 'pending', 1), (6, 'dead', 5))"), 6);
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

/* Every table of the outbox as text: what "changes nothing" is checked
 * against (the view outbox.messages is derived from these). */
static char *
snapshot(void)
{
	PGresult *r = PQexec(conn,
	    "SELECT concat("
	    " 'events:', (SELECT string_agg(x::text, E'\\n' ORDER BY x.id) FROM outbox.events x),"
	    " E'\\nbatches:', (SELECT string_agg(x::text, E'\\n' ORDER BY x.id) FROM outbox.batches x),"
	    " E'\\nretries:', (SELECT string_agg(x::text, E'\\n' ORDER BY x.id) FROM outbox.retries x),"
	    " E'\\ndead:', (SELECT string_agg(x::text, E'\\n' ORDER BY x.id) FROM outbox.dead x),"
	    " E'\\nordering_blocks:', (SELECT string_agg(x::text, E'\\n'"
	    "   ORDER BY x.topic, x.ordering_key) FROM outbox.ordering_blocks x),"
	    " E'\\nordering_seqs:', (SELECT string_agg(x::text, E'\\n'"
	    "   ORDER BY x.topic, x.ordering_key) FROM outbox.ordering_seqs x),"
	    " E'\\nslots:', (SELECT string_agg(x::text, E'\\n' ORDER BY x.slot) FROM outbox.slots x),"
	    " E'\\nstreams:', (SELECT string_agg(x::text, E'\\n' ORDER BY x.topic, x.lane)"
	    "   FROM outbox.streams x),"
	    " E'\\nfences:', (SELECT last_value FROM outbox.fences))");
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQresultErrorMessage(r));
	char *s = strdup(PQgetvalue(r, 0, 0));
	PQclear(r);
	return s;
}

/* Fail with the first line that differs (the whole text is too long for
 * one Check message). */
static void
assert_same(const char *before, const char *after, const char *what)
{
	if (strcmp(before, after) == 0)
		return;
	size_t i = 0, line = 0;
	while (before[i] != '\0' && before[i] == after[i])
		i++;
	while (i > 0 && before[i - 1] != '\n')
		i--;
	for (size_t k = 0; k < i; k++)
		line += before[k] == '\n';
	ck_abort_msg("%s changed the tables; line %zu was <%.200s>, is <%.200s>", what, line + 1,
	    before + i, after + i);
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
	/* topic a: 0 pending, 2 delivered, 1 dead; b: 2 pending (1 leased, 1
	 * retrying), 1 dead */
	ck_assert_msg(strstr(out, "TOPIC") == out, "%s", out);
	assert_has(out, "OLDEST_CLAIMABLE_AGE  RETRYING  UNCLAIMED\n");
	assert_has(out, "\na        0        0       2          1     0             -");
	assert_has(out, "\nb        2        1       0          1     0             2h");
	assert_has(out, "\n(total)  2        1       2          2     0             2h");
	ck_assert_int_eq(lines(out), 4);

	ck_assert_int_eq(ctl(out, "status", "--json", NULL), 0);
	json_t *j = parse_json(out);
	json_t *topics = json_object_get(j, "topics");
	ck_assert_int_eq(json_array_size(topics), 2);
	json_t *a = json_array_get(topics, 0);
	ck_assert_str_eq(json_string_value(json_object_get(a, "topic")), "a");
	ck_assert(json_is_null(json_object_get(a, "oldest_pending_age_seconds")));
	ck_assert(json_is_null(json_object_get(a, "oldest_claimable_age_seconds")));
	json_t *b = json_array_get(topics, 1);
	ck_assert_str_eq(json_string_value(json_object_get(b, "topic")), "b");
	ck_assert_int_eq(jint(b, "pending"), 2);
	ck_assert_int_eq(jint(b, "leased"), 1);
	ck_assert_int_eq(jint(b, "retrying"), 1);
	ck_assert_int_eq(jint(b, "delivered"), 0);
	ck_assert_int_eq(jint(b, "dead"), 1);
	ck_assert_int_eq(jint(b, "blocked_keys"), 0);
	/* 5 waits for a retry (2 h old), 4 is leased: nothing is claimable */
	double pend = json_number_value(json_object_get(b, "oldest_pending_age_seconds"));
	ck_assert_msg(pend >= 7200 && pend < 7300, "oldest pending %f", pend);
	ck_assert(json_is_null(json_object_get(b, "oldest_claimable_age_seconds")));
	json_t *t = json_object_get(j, "total");
	ck_assert(json_object_get(t, "topic") == NULL);
	ck_assert_int_eq(jint(t, "pending"), 2);
	ck_assert_int_eq(jint(t, "delivered"), 2);
	ck_assert_int_eq(jint(t, "dead"), 2);
	json_decref(j);

	/* a relay's idle poll moves the streams' floors: same figures (the
	 * message of the batch still out, 4, made 3 hours old here, is the
	 * oldest pending one) */
	ts_exec(conn, "UPDATE outbox.retries SET created_at = now() WHERE id = 5;"
	    "UPDATE outbox.events SET created_at = now() - interval '3 hours' WHERE id = 4");
	claim_nothing("{a,b}");
	ck_assert_int_eq(ctl(out, "status", "--json", "--topic", "b", NULL), 0);
	j = parse_json(out);
	b = json_array_get(json_object_get(j, "topics"), 0);
	ck_assert_int_eq(jint(b, "pending"), 2);
	ck_assert_int_eq(jint(b, "leased"), 1);
	pend = json_number_value(json_object_get(b, "oldest_pending_age_seconds"));
	ck_assert_msg(pend >= 10800 && pend < 10900, "oldest pending %f (message 4)", pend);
	ck_assert(json_is_null(json_object_get(b, "oldest_claimable_age_seconds")));
	json_decref(j);

	/* the lease expires: 4 becomes claimable, since its lease ended */
	char sql[256];
	snprintf(sql, sizeof sql, "UPDATE outbox.batches SET lease_until = now() - interval '30 s'"
	    " WHERE id = %lld", (long long)lease4.id);
	ts_exec(conn, sql);
	ck_assert_int_eq(ctl(out, "status", "--json", "--topic", "b", NULL), 0);
	j = parse_json(out);
	ck_assert_int_eq(json_array_size(json_object_get(j, "topics")), 1);
	b = json_array_get(json_object_get(j, "topics"), 0);
	ck_assert_int_eq(jint(b, "leased"), 0);
	ck_assert_int_eq(jint(b, "pending"), 2);
	double claim = json_number_value(json_object_get(b, "oldest_claimable_age_seconds"));
	ck_assert_msg(claim >= 30 && claim < 120, "oldest claimable %f", claim);
	json_decref(j);

	/* a topic nobody wrote to: only the total row, all zero */
	ck_assert_int_eq(ctl(out, "status", "--topic", "zzz", NULL), 0);
	ck_assert_int_eq(lines(out), 2);
	assert_has(out, "\n(total)  0        0       0          0     0             -");
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
	assert_has(out, "lease_owner    -\n");
	assert_has(out, "\"n\": 3");
	ck_assert_int_eq(ctl(out, "dead", "show", "--json", "6", NULL), 0);
	j = parse_json(out);
	ck_assert_int_eq(jint(json_object_get(j, "payload"), "n"), 3);
	ck_assert_str_eq(json_string_value(json_object_get(j, "last_error")), "max attempts");
	ck_assert_int_eq(jint(j, "attempts"), 5);
	ck_assert_int_eq(jint(j, "fence"), ts_query_int(conn, "SELECT fence FROM outbox.dead WHERE id = 6"));
	assert_has(json_string_value(json_object_get(j, "created_at")), "T");
	assert_has(json_string_value(json_object_get(j, "died_at")), "T");
	double age = json_number_value(json_object_get(j, "age_seconds"));
	ck_assert_msg(age >= 9 * 86400 && age < 9 * 86400 + 300, "age %f", age);
	json_decref(j);
	free(out);
}
END_TEST

START_TEST(test_requeue)
{
	char *out = malloc(OUT_MAX);
	int64_t fence3 = ts_query_int(conn, "SELECT fence FROM outbox.dead WHERE id = 3");
	/* young dead message: back to pending as a retry, attempts 0, due now,
	 * no lease; the relays are woken (an id given twice counts once) */
	ts_exec(conn, "LISTEN outbox_enqueued");
	ck_assert_int_eq(ctl(out, "dead", "requeue", "3", "3", NULL), 0);
	assert_has(out, "dead requeue: 1 message requeued");
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE id = 3 AND status = 'pending'"
	    " AND attempts = 0 AND available_at <= now() AND lease_owner IS NULL"),
	    1);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.dead WHERE id = 3"), 0);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.retries WHERE id = 3 AND batch_id IS NULL"), 1);
	ts_exec(conn, "SELECT 1"); /* notifications arrive before its answer */
	PGnotify *n = PQnotifies(conn);
	ck_assert_msg(n != NULL, "no NOTIFY outbox_enqueued");
	ck_assert_str_eq(n->relname, "outbox_enqueued");
	PQfreemem(n);
	ts_exec(conn, "UNLISTEN *");
	/* requeue of a message that is no longer dead: says so, changes nothing */
	char *before = snapshot();
	ck_assert_int_eq(ctl(out, "dead", "requeue", "3", NULL), 1);
	ck_assert_str_eq(out, "outboxctl dead requeue: message 3 is pending, not dead: not requeued\n");
	char *after = snapshot();
	assert_same(before, after, "requeue of a pending message");
	free(after);

	/* older than the dedup retention: refused with the reason */
	ck_assert_int_eq(ctl(out, "dead", "requeue", "6", NULL), 1);
	ck_assert_int_eq(lines(out), 1);
	assert_has(out, "message 6 was created 9d ago, longer than the consumer's dedup"
	    " retention (7d)");
	assert_has(out, "--force");
	after = snapshot();
	assert_same(before, after, "requeue of a too old message");
	free(after);
	/* ... unless the retention is longer, or --force */
	char *env[] = { "OUTBOX_DEDUP_RETENTION=10d", NULL };
	char *argv[] = { "outboxctl", "dead", "requeue", "6", "--json", "--db", db, NULL };
	ck_assert_int_eq(ts_run(argv, env, out, OUT_MAX, RUN_TIMEOUT_MS), 0);
	json_t *j = parse_json(out);
	ck_assert_int_eq(jint(j, "requeued"), 1);
	json_decref(j);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE id = 6 AND status = 'pending'"), 1);
	/* the next claim takes both retries due (3 and 6 are of two topics: one
	 * batch each), with a new fence; 6 dies again there */
	struct batch r3 = claim_from("{a}", 10, "relay-1", true);
	ck_assert_str_eq(r3.ids, "3");
	ck_assert_int_gt(r3.fence, fence3);
	struct batch r6 = claim_from("{b}", 10, "relay-1", true);
	ck_assert_str_eq(r6.ids, "6");
	record(&r6, "done", 0, "{6}", "{dead}", "{0}", "{max attempts}");
	char sql[256];
	snprintf(sql, sizeof sql, "SELECT count(*) FROM outbox.dead WHERE id = 6 AND fence = %lld"
	    " AND attempts = 1", (long long)r6.fence);
	ck_assert_int_eq(ts_query_int(conn, sql), 1);
	ck_assert_int_eq(ctl(out, "dead", "requeue", "6", NULL), 1);
	assert_has(out, "message 6 was created 9d ago");
	ck_assert_int_eq(ctl(out, "dead", "requeue", "--force", "6", NULL), 0);
	snprintf(sql, sizeof sql, "SELECT count(*) FROM outbox.retries WHERE id = 6 AND fence = %lld"
	    " AND attempts = 0", (long long)r6.fence);
	ck_assert_int_eq(ts_query_int(conn, sql), 1);

	/* an ordered message dead-lettered and kept blocking its key
	 * (--on-dead-head block): a blocked key in status; requeued, the key
	 * waits behind it as behind a retry */
	ts_exec(conn, "SELECT outbox.enqueue('k', 'k1', '{}', 'key-1')");
	struct batch k = claim("k", 1, "7");
	record(&k, "done", 0, "{7}", "{dead}", "{0}", "{nope}");
	ck_assert_int_eq(ctl(out, "status", "--topic", "k", "--json", NULL), 0);
	j = parse_json(out);
	ck_assert_int_eq(jint(json_object_get(j, "total"), "blocked_keys"), 1);
	json_decref(j);
	ck_assert_int_eq(ctl(out, "dead", "requeue", "7", NULL), 0);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.ordering_blocks"
	    " WHERE topic = 'k' AND ordering_key = 'key-1' AND state = 'retry'"), 1);
	ck_assert_int_eq(ctl(out, "status", "--topic", "k", "--json", NULL), 0);
	j = parse_json(out);
	ck_assert_int_eq(jint(json_object_get(j, "total"), "blocked_keys"), 0);
	ck_assert_int_eq(jint(json_object_get(j, "total"), "retrying"), 1);
	json_decref(j);
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
	assert_same(before, after, "requeue of 3 4 999");
	free(after);

	/* --all refuses because 6 is too old; --all --topic a does 3 only */
	ck_assert_int_eq(ctl(out, "dead", "requeue", "--all", NULL), 1);
	assert_has(out, "message 6 was created");
	after = snapshot();
	assert_same(before, after, "requeue --all");
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
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.dead"), 0);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.retries"), 3);
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
	ck_assert_int_eq(ctl(out, "inspect", "--key", "b2", NULL), 0);
	assert_has(out, "last_error    timeout\n");
	ck_assert_int_eq(ctl(out, "inspect", "--key", "b1", "--topic", "b", "--json", NULL), 0);
	json_t *j = parse_json(out);
	ck_assert_int_eq(json_array_size(j), 1);
	json_t *o = json_array_get(j, 0);
	ck_assert_int_eq(jint(o, "fence"), lease4.fence);
	ck_assert_int_eq(jint(o, "batch_id"), lease4.id);
	ck_assert_int_eq(jint(o, "attempts"), 1);
	ck_assert_str_eq(json_string_value(json_object_get(o, "lease_owner")), "relay-7");
	ck_assert(json_is_string(json_object_get(o, "lease_until")));
	ck_assert(json_object_get(o, "delivered_at") == NULL);
	json_decref(j);
	/* same key in two topics: both shown */
	ts_exec(conn, "SELECT outbox.enqueue('c', 'a1', '{}')");
	ck_assert_int_eq(ctl(out, "inspect", "--key", "a1", "--json", NULL), 0);
	j = parse_json(out);
	ck_assert_int_eq(json_array_size(j), 2);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(j, 1), "state")),
	    "claimable");
	json_decref(j);
	/* the lease runs out: claimable (a relay takes it over) */
	char sql[256];
	snprintf(sql, sizeof sql, "UPDATE outbox.batches SET lease_until = now() - interval '1 s'"
	    " WHERE id = %lld", (long long)lease4.id);
	ts_exec(conn, sql);
	ck_assert_int_eq(ctl(out, "inspect", "--key", "b1", NULL), 0);
	assert_has(out, "state         claimable\n");
	/* released until later (breaker open): nobody holds it, it waits */
	record(&lease4, "release", 60000, "{}", "{}", "{}", "{}");
	ck_assert_int_eq(ctl(out, "inspect", "--key", "b1", NULL), 0);
	assert_has(out, "state         waiting_retry\n");
	assert_has(out, "lease_owner   -\n");
	free(out);
}
END_TEST

/* The age of slot s: as if it had been closed that long ago. */
static void
age_slot(int slot, const char *ago)
{
	char sql[160];
	snprintf(sql, sizeof sql, "UPDATE outbox.slots SET since = now() - interval '%s'"
	    " WHERE slot = %d", ago, slot);
	ts_exec(conn, sql);
}

START_TEST(test_purge)
{
	char *out = malloc(OUT_MAX);
	/* 20 more, delivered in one batch; q1 never claimed */
	ts_exec(conn, "SELECT outbox.enqueue('p', 'p' || g, '{}') FROM generate_series(1, 20) g;"
	    "SELECT outbox.enqueue('q', 'q1', '{}')");
	struct batch p = claim("p", 20, "7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26");
	record(&p, "done", 0, "{}", "{}", "{}", "{}");
	claim_nothing("{a,b,p}");
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.events WHERE slot = 0"), 27);

	/* everything is in the current slot: nothing can go yet */
	char *before = snapshot();
	ck_assert_int_eq(ctl(out, "purge", "--older-than", "7d", "--dry-run", NULL), 0);
	ck_assert_str_eq(out, "purge: 0 delivered messages older than 7d would be deleted (0 slots)\n");
	char *after = snapshot();
	assert_same(before, after, "purge --dry-run");
	free(after);
	free(before);
	/* a purge closes it (--batch is accepted and ignored) */
	ck_assert_int_eq(ctl(out, "purge", "--older-than", "7d", "--batch", "3", NULL), 0);
	assert_has(out, "purge: 0 delivered messages older than 7d deleted (0 slots)\n");
	assert_has(out, "purge: slot 0 closed: what it holds can go once it has been closed for 7d\n");
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.slots WHERE slot = 0 AND state = 'closed'"), 1);

	/* closed 8 days ago, but 4 is out under a lease and q1 never went: the
	 * slot stays, and nothing at all changes (the new current slot is empty:
	 * no switch) */
	age_slot(0, "8 days");
	before = snapshot();
	ck_assert_int_eq(ctl(out, "purge", "--older-than", "7d", "--json", NULL), 0);
	json_t *j = parse_json(out);
	ck_assert_int_eq(jint(j, "deleted"), 0);
	ck_assert_int_eq(jint(j, "slots"), 0);
	ck_assert(json_is_null(json_object_get(j, "closed_slot")));
	ck_assert_str_eq(json_string_value(json_object_get(j, "waiting")),
	    "slot 0 has messages not yet done");
	json_decref(j);
	after = snapshot();
	assert_same(before, after, "purge of a slot not done");
	free(after);
	free(before);
	ck_assert_int_eq(ctl(out, "purge", "--older-than", "7d", "--dry-run", NULL), 0);
	assert_has(out, "would be deleted (0 slots)\npurge: not yet: slot 0 has messages not yet done\n");

	/* 4 is delivered: q1 still holds the slot */
	record(&lease4, "done", 0, "{}", "{}", "{}", "{}");
	claim_nothing("{a,b,p}");
	ck_assert_int_eq(ctl(out, "purge", "--older-than", "7d", NULL), 0);
	assert_has(out, "purge: not yet: slot 0 has messages not yet done\n");
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.messages"
	    " WHERE id = 27 AND status = 'pending'"), 1);

	/* q1 delivered: the slot goes whole; its 24 delivered messages with it
	 * (2, delivered just now, too: a slot closed 7 days ago holds nothing
	 * younger; this one was aged by hand). The dead letters (3, 6) and the
	 * retry (5) have their own copies and stay. */
	struct batch q = claim("q", 1, "27");
	record(&q, "done", 0, "{}", "{}", "{}", "{}");
	claim_nothing("{q}");
	ck_assert_int_eq(ctl(out, "purge", "--older-than", "7d", "--dry-run", NULL), 0);
	ck_assert_str_eq(out, "purge: 24 delivered messages older than 7d would be deleted (1 slot)\n");
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.events"), 27);
	ck_assert_int_eq(ctl(out, "purge", "--older-than", "7d", "--json", NULL), 0);
	j = parse_json(out);
	ck_assert_int_eq(jint(j, "deleted"), 24);
	ck_assert_int_eq(jint(j, "truncated_rows"), 27);
	ck_assert_int_eq(jint(j, "slots"), 1);
	ck_assert(json_is_null(json_object_get(j, "waiting")));
	json_decref(j);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.events"), 0);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.slots WHERE slot = 0 AND state = 'empty'"), 1);
	PGresult *r = PQexec(conn, "SELECT string_agg(id || ' ' || status, ', ' ORDER BY id)"
	    " FROM outbox.messages");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	ck_assert_str_eq(PQgetvalue(r, 0, 0), "3 dead, 5 pending, 6 dead");
	PQclear(r);

	/* a pending message is never dropped: q2 in slot 1, closed and aged */
	ts_exec(conn, "SELECT outbox.enqueue('q', 'q2', '{}')");
	ck_assert_int_eq(ctl(out, "purge", "--older-than", "1s", NULL), 0);
	assert_has(out, "purge: slot 1 closed");
	age_slot(1, "1 hour");
	ck_assert_int_eq(ctl(out, "purge", "--older-than", "1s", NULL), 0);
	assert_has(out, "purge: 0 delivered messages older than 1.0s deleted (0 slots)\n"
	    "purge: not yet: slot 1 has messages not yet done\n");
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.messages"
	    " WHERE idempotency_key = 'q2' AND status = 'pending'"), 1);

	/* dead letters are never purged, however old */
	ts_exec(conn, "UPDATE outbox.dead SET died_at = now() - interval '99 days'");
	ck_assert_int_eq(ctl(out, "purge", "--older-than", "1s", NULL), 0);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.dead"), 2);
	free(out);
}
END_TEST

/* A schema that does not serve this outboxctl: every command but migrate
 * says so in one line, exits 1 and reads or changes nothing. */
START_TEST(test_protocol)
{
	static const char *const cmds[][5] = {
		{ "status" }, { "dead", "list" }, { "dead", "show", "3" },
		{ "dead", "requeue", "3" }, { "inspect", "--key", "a1" },
		{ "purge", "--older-than", "1s" }, { "purge", "--older-than", "1s", "--dry-run" },
	};
	static const struct {
		const char *sql, *says;
	} schemas[] = {
		{ "UPDATE outbox.protocols SET min_version = 3, max_version = 3"
		  " WHERE component = 'admin'", "this program speaks 2: upgrade the program" },
		{ "UPDATE outbox.protocols SET min_version = 1, max_version = 1"
		  " WHERE component = 'admin'", "this program speaks 2: run outboxctl migrate" },
		{ "DELETE FROM outbox.protocols WHERE component = 'admin'",
		  "outbox schema does not know component \"admin\"" },
	};
	char *out = malloc(OUT_MAX);
	for (size_t s = 0; s < sizeof schemas / sizeof schemas[0]; s++) {
		ts_exec(conn, "BEGIN; DELETE FROM outbox.protocols WHERE component = 'admin';"
		    "INSERT INTO outbox.protocols VALUES ('admin', 2, 2); COMMIT");
		ts_exec(conn, schemas[s].sql);
		char *before = snapshot();
		for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
			char *argv[12];
			int n = 0;
			argv[n++] = "outboxctl";
			for (int k = 0; k < 5 && cmds[i][k] != NULL; k++)
				argv[n++] = (char *)cmds[i][k];
			argv[n++] = "--db";
			argv[n++] = db;
			argv[n] = NULL;
			int code = ts_run(argv, NULL, out, OUT_MAX, RUN_TIMEOUT_MS);
			ck_assert_msg(code == 1, "schema %zu, %s: exit %d: %s", s, cmds[i][0], code, out);
			ck_assert_msg(lines(out) == 1, "schema %zu, %s: %s", s, cmds[i][0], out);
			ck_assert_msg(strstr(out, schemas[s].says) != NULL, "schema %zu, %s: %s", s,
			    cmds[i][0], out);
			ck_assert_msg(strncmp(out, "outboxctl ", 10) == 0, "%s", out);
		}
		char *after = snapshot();
		assert_same(before, after, "a refused protocol");
		free(after);
		free(before);
	}
	/* a database never migrated: told to migrate; migrate needs no check */
	char bare[TS_CONNINFO_MAX];
	ts_db_create("ctlbare", NULL, bare, sizeof bare);
	char *argv[] = { "outboxctl", "status", "--db", bare, NULL };
	ck_assert_int_eq(ts_run(argv, NULL, out, OUT_MAX, RUN_TIMEOUT_MS), 1);
	ck_assert_str_eq(out, "outboxctl status: the outbox schema is older than this admin"
	    " (protocol 2) needs: run outboxctl migrate\n");
	char *argv2[] = { "outboxctl", "migrate", "--schema", "outbox", "--db", bare, NULL };
	ck_assert_int_eq(ts_run(argv2, NULL, out, OUT_MAX, RUN_TIMEOUT_MS), 0);
	ck_assert_int_eq(ts_run(argv, NULL, out, OUT_MAX, RUN_TIMEOUT_MS), 0);
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
		char what[32];
		snprintf(what, sizeof what, "case %zu", i);
		assert_same(before, after, what);
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

/* A producer's key, topic and payload and a consumer's error text are
 * stored as given: ESC sequences in them (clear the screen, retitle the
 * window, recolour) reach the database raw, but never the terminal. Every
 * text output shows them as "\x1b"; --json stays valid and gives them
 * back exactly. */
#define ESC_KEY "k\x1b[2J\x1b]0;owned\x07"
#define ESC_TOPIC "e\x1b[1m"
#define ESC_ERROR "boom \x1b[2J\rfake line"

static void
assert_no_raw_escape(const char *out, const char *what)
{
	ck_assert_msg(strchr(out, '\x1b') == NULL, "%s printed a raw ESC:\n%s", what, out);
	ck_assert_msg(strchr(out, '\x07') == NULL, "%s printed a raw BEL", what);
	ck_assert_msg(strchr(out, '\r') == NULL, "%s printed a raw CR", what);
	ck_assert_msg(strstr(out, "\xe2\x80\xae") == NULL, "%s printed a raw U+202E", what);
}

START_TEST(test_escapes)
{
	char *out = malloc(OUT_MAX);
	/* the payload: an ESC (jsonb prints it as \u001b) and a right-to-left
	 * override (jsonb prints it raw) */
	int64_t id = ts_query_int(conn, "SELECT outbox.enqueue(E'" ESC_TOPIC "', E'" ESC_KEY "',"
	    " jsonb_build_object('note', E'\\u202e' || 'txt', 'esc', E'\\x1b[31mred'),"
	    " E'ord\\x1b[5m')");
	ck_assert_int_eq(id, 7);
	struct batch b = claim_from("{\"" ESC_TOPIC "\"}", 1, "relay-1", false);
	ck_assert_str_eq(b.ids, "7");
	record(&b, "done", 0, "{7}", "{dead}", "{0}", "{\"" ESC_ERROR "\"}");
	/* the attack is in place: the raw bytes are stored */
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.dead WHERE id = 7"
	    " AND strpos(idempotency_key, E'\\x1b') > 0 AND strpos(topic, E'\\x1b') > 0"
	    " AND strpos(last_error, E'\\x1b') > 0 AND strpos(last_error, E'\\r') > 0"), 1);

	ck_assert_int_eq(ctl(out, "dead", "list", NULL), 0);
	assert_no_raw_escape(out, "dead list");
	assert_has(out, "k\\x1b[2J\\x1b]0;owned\\x07");
	assert_has(out, "e\\x1b[1m");
	assert_has(out, "boom \\x1b[2J\\rfake line");

	ck_assert_int_eq(ctl(out, "dead", "show", "7", NULL), 0);
	assert_no_raw_escape(out, "dead show");
	assert_has(out, "key            k\\x1b[2J\\x1b]0;owned\\x07\n");
	assert_has(out, "topic          e\\x1b[1m\n");
	assert_has(out, "ordering_key   ord\\x1b[5m\n");
	assert_has(out, "last_error     boom \\x1b[2J\\rfake line\n");
	assert_has(out, "\\u202etxt");
	assert_has(out, "\"esc\": \"\\u001b[31mred\""); /* jsonb's own escape */

	ck_assert_int_eq(ctl(out, "inspect", "--key", ESC_KEY, NULL), 0);
	assert_no_raw_escape(out, "inspect");
	assert_has(out, "key           k\\x1b[2J\\x1b]0;owned\\x07\n");
	assert_has(out, "state         dead\n");
	assert_has(out, "last_error    boom \\x1b[2J\\rfake line\n");
	/* a key given on the command line is echoed escaped too */
	ck_assert_int_eq(ctl(out, "inspect", "--key", "zz\x1b[2J", NULL), 1);
	assert_no_raw_escape(out, "inspect (not found)");
	assert_has(out, "no message with key 'zz\\x1b[2J'");

	ck_assert_int_eq(ctl(out, "status", NULL), 0);
	assert_no_raw_escape(out, "status");
	assert_has(out, "\ne\\x1b[1m  ");
	ck_assert_int_eq(ctl(out, "dead", "list", "--topic", ESC_TOPIC "x", NULL), 0);
	assert_no_raw_escape(out, "dead list (no such topic)");
	assert_has(out, "no dead messages in topic e\\x1b[1mx");

	/* JSON: valid, no raw byte, and the exact values back */
	const char *json_runs[][4] = {
		{ "dead", "list", "--json", NULL },
		{ "dead", "show", "--json", "7" },
		{ "inspect", "--json", "--key", ESC_KEY },
		{ "status", "--json", NULL, NULL },
	};
	for (size_t i = 0; i < sizeof json_runs / sizeof json_runs[0]; i++) {
		ck_assert_int_eq(ctl(out, json_runs[i][0], json_runs[i][1], json_runs[i][2],
		    json_runs[i][3], NULL), 0);
		assert_no_raw_escape(out, json_runs[i][0]);
		for (const unsigned char *p = (const unsigned char *)out; *p; p++)
			ck_assert_msg(*p == '\n' || (*p >= 0x20 && *p < 0x7f),
			    "%s --json: byte 0x%02x is not printable ASCII", json_runs[i][0], *p);
		json_t *j = parse_json(out);
		json_t *o = json_is_array(j) ? json_array_get(j, json_array_size(j) - 1) : j;
		if (i == 3) { /* the topic with the escape, wherever it sorts */
			json_t *topics = json_object_get(j, "topics");
			o = NULL;
			for (size_t k = 0; k < json_array_size(topics); k++) {
				const char *t = json_string_value(
				    json_object_get(json_array_get(topics, k), "topic"));
				if (t != NULL && t[0] == 'e')
					o = json_array_get(topics, k);
			}
		}
		ck_assert_ptr_nonnull(o);
		if (i < 3) {
			ck_assert_str_eq(json_string_value(json_object_get(o, "key")), ESC_KEY);
			ck_assert_str_eq(json_string_value(json_object_get(o, "last_error")),
			    ESC_ERROR);
		}
		ck_assert_str_eq(json_string_value(json_object_get(o, "topic")), ESC_TOPIC);
		json_decref(j);
	}
	ck_assert_int_eq(ctl(out, "dead", "show", "--json", "7", NULL), 0);
	json_t *j = parse_json(out);
	json_t *payload = json_object_get(j, "payload");
	ck_assert_str_eq(json_string_value(json_object_get(payload, "esc")), "\x1b[31mred");
	ck_assert_str_eq(json_string_value(json_object_get(payload, "note")), "\xe2\x80\xaetxt");
	json_decref(j);
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
	char *argv4[] = { "outboxctl", "purge", "--help", NULL };
	char *purge_help = malloc(OUT_MAX);
	ck_assert_int_eq(ts_run(argv4, NULL, purge_help, OUT_MAX, RUN_TIMEOUT_MS), 0);
	assert_has(purge_help, "--batch");
	assert_has(purge_help, "ignored");
	assert_has(purge_help, "a whole slot at a time");
	free(purge_help);
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
	tcase_add_test(tc, test_protocol);
	tcase_add_test(tc, test_escapes);
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
