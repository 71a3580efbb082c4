/*
 * test_enqueue_options.c - enqueue's named optional arguments (migration
 * 022): headers are stored and copied with their message, not_before holds
 * a message back from every claim until then (parked in outbox.retries at
 * the cut that reaches it, due then) and its key's later messages behind
 * it; bad values are refused with 22023 and write nothing; the calls of
 * before (three and four arguments) still work. Against the real SQL, with
 * explicit claims and records; and the real relay, at its defaults,
 * delivering a delayed message once it is due, not before.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testsupport.h"
#include "ts_relay.h"

/* How long a delayed message is held back: long enough that the claims
 * before it surely run before it is due, short enough to wait for. */
#define DELAY_MS 1500

/* One claim of every topic (ordering as given; false is the BROKEN
 * --no-ordering mode): how many messages, their keys (comma separated, in
 * id order) into keys, "BATCH, FENCE, '{ID,..}'" into batch. */
static int
claim(PGconn *c, bool ordering, char *keys, size_t klen, char *batch, size_t blen)
{
	char sql[640];
	snprintf(sql, sizeof(sql), "SELECT count(*), string_agg(k.idempotency_key, ',' ORDER BY k.id),"
	    " format('%%s, %%s, %%L', min(k.batch_id), min(k.fence), array_agg(k.id)::text)"
	    " FROM outbox.claim(protocol => 5, owner => 'test', lease_ms => 60000, max_n => 100,"
	    " include => '{}', exclude => '{}', others => true, retries_first => false,"
	    " ordering => %s) k", ordering ? "true" : "false");
	PGresult *r = PQexec(c, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQresultErrorMessage(r));
	int n = atoi(PQgetvalue(r, 0, 0));
	snprintf(keys, klen, "%s", PQgetvalue(r, 0, 1));
	snprintf(batch, blen, "%s", PQgetvalue(r, 0, 2));
	PQclear(r);
	return n;
}

/* Every message of the batch (as claim() wrote it) delivered. */
static void
record_delivered(PGconn *c, const char *batch)
{
	char sql[512];
	snprintf(sql, sizeof(sql), "WITH b(id, fence, ids) AS (VALUES (%s::bigint[]))"
	    " SELECT outbox.record(5, b.id, b.fence, true, 'done', 0, false, b.ids,"
	    " array_fill('delivered'::text, ARRAY[cardinality(b.ids)]),"
	    " array_fill(0::bigint, ARRAY[cardinality(b.ids)]),"
	    " array_fill(''::text, ARRAY[cardinality(b.ids)]), false)::int FROM b", batch);
	ck_assert_int_eq(ts_query_int(c, sql), 1);
}

/* sql fails with 22023 and a message holding want; nothing is written. */
static void
refused(PGconn *c, const char *sql, const char *want)
{
	char state[8], msg[512];
	int64_t before = ts_query_int(c, "SELECT count(*) FROM outbox.events");
	ts_exec_state(c, sql, state, sizeof(state), msg, sizeof(msg));
	ck_assert_msg(strcmp(state, "22023") == 0, "%s: %s %s", sql, state, msg);
	ck_assert_msg(strstr(msg, want) != NULL, "%s: %s", sql, msg);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.events"), before);
}

START_TEST(test_headers_are_stored_and_bad_options_refused)
{
	char db[TS_CONNINFO_MAX];
	ts_db_create("enqueue_options", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);

	/* the calls of before: three and four arguments, positional */
	ck_assert_int_gt(ts_query_int(c, "SELECT outbox.enqueue('t', 'a', '{}')"), 0);
	ck_assert_int_gt(ts_query_int(c, "SELECT outbox.enqueue('t', 'b', '{}', 'ok')"), 0);
	/* named: headers stored as given */
	int64_t id = ts_query_int(c, "SELECT outbox.enqueue('t', 'c', '{\"n\": 1}',"
	    " headers => '{\"traceparent\": \"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\"}')");
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages WHERE idempotency_key"
	    " = 'c' AND headers->>'traceparent' LIKE '00-4bf9%' AND not_before IS NULL"), 1);
	/* the same key again: the same message, whatever its headers and
	 * not_before (the payload alone decides; the first call's are kept) */
	char sql[256];
	snprintf(sql, sizeof(sql), "SELECT (outbox.enqueue('t', 'c', '{\"n\": 1}',"
	    " headers => '{\"traceparent\": \"other\"}', not_before => now() + interval '1 day')"
	    " = %lld)::int", (long long)id);
	ck_assert_int_eq(ts_query_int(c, sql), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.events WHERE idempotency_key"
	    " = 'c' AND headers->>'traceparent' LIKE '00-4bf9%' AND not_before IS NULL"), 1);

	/* bad values: refused, nothing written */
	refused(c, "SELECT outbox.enqueue('t', 'x1', '{}', headers => '[\"a\"]')",
	    "headers must be NULL or a JSON object of string values");
	refused(c, "SELECT outbox.enqueue('t', 'x2', '{}', headers => '{\"n\": 1}')",
	    "headers must be NULL or a JSON object of string values");
	refused(c, "SELECT outbox.enqueue('t', 'x3', '{}', headers => jsonb_build_object('h',"
	    " repeat('a', outbox.max_headers_bytes())))", "at most 8192 bytes");
	refused(c, "SELECT outbox.enqueue('t', 'x4', '{}', not_before => 'infinity')",
	    "not_before must be NULL or a time at most");
	refused(c, "SELECT outbox.enqueue('t', 'x5', '{}', not_before => now() + outbox.max_delay()"
	    " + interval '1 minute')", "not_before must be NULL or a time at most 366 days");
	/* at the bounds: accepted */
	ck_assert_int_gt(ts_query_int(c, "SELECT outbox.enqueue('t', 'y1', '{}', headers =>"
	    " jsonb_build_object('h', repeat('a', outbox.max_headers_bytes() - 9)))"), 0);
	ck_assert_int_gt(ts_query_int(c, "SELECT outbox.enqueue('t', 'y2', '{}', not_before =>"
	    " now() + outbox.max_delay())"), 0);
	PQfinish(c);
}
END_TEST

/* A delayed message is claimed only once due, and with its age counted
 * from then; the others of its topic go at once. Its headers go with it
 * into outbox.retries and, answered dead, into outbox.dead. */
START_TEST(test_not_before_holds_a_message_back)
{
	char db[TS_CONNINFO_MAX], keys[256], batch[64], sql[512];
	ts_db_create("enqueue_not_before", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	snprintf(sql, sizeof(sql), "SELECT outbox.enqueue('t', 'later', '{}', headers =>"
	    " '{\"h\": \"v\"}', not_before => clock_timestamp() + interval '%d ms')", DELAY_MS);
	ts_exec(c, sql);
	ts_exec(c, "SELECT outbox.enqueue('t', 'now', '{}')");
	ck_assert_int_eq(claim(c, true, keys, sizeof(keys), batch, sizeof(batch)), 1);
	ck_assert_str_eq(keys, "now");
	record_delivered(c, batch);
	/* parked, due at its not_before, headers kept */
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.retries WHERE idempotency_key"
	    " = 'later' AND due_at = not_before AND headers->>'h' = 'v' AND attempts = 0"), 1);
	ck_assert_int_eq(claim(c, true, keys, sizeof(keys), batch, sizeof(batch)), 0);
	/* due: claimed, its created_us its not_before */
	ck_assert_int_eq(ts_wait_value(c, "SELECT count(*) FROM outbox.retries WHERE due_at <= now()",
	    1, 30000), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.claim(protocol => 5, owner =>"
	    " 'test', lease_ms => 60000, max_n => 100, include => '{}', exclude => '{}', others =>"
	    " true, retries_first => false) k JOIN outbox.retries r USING (id)"
	    " WHERE k.created_us = outbox.available_us(r.created_at, r.not_before)"
	    " AND k.created_us > (extract(epoch FROM r.created_at) * 1000000)::bigint"
	    " AND k.idempotency_key = 'later'"), 1);
	/* answered dead: the dead letter keeps headers and not_before */
	ts_exec(c, "SELECT outbox.record(5, b.id, b.fence, true, 'done', 0, false, ARRAY[r.id],"
	    " '{dead}', '{0}', '{rejected}', false) FROM outbox.batches b JOIN outbox.retries r"
	    " ON r.batch_id = b.id WHERE b.state = 'leased'");
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.dead WHERE idempotency_key"
	    " = 'later' AND headers->>'h' = 'v' AND not_before IS NOT NULL"), 1);
	/* requeued: still its headers */
	ts_exec(c, "SELECT outbox.requeue_dead(ARRAY(SELECT id FROM outbox.dead))");
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.retries WHERE idempotency_key"
	    " = 'later' AND headers->>'h' = 'v'"), 1);
	PQfinish(c);
}
END_TEST

/* A key's delayed message holds its later ones back (they are parked
 * behind it), and the key's order holds: first shown broken, with
 * ordering off (the --no-ordering mode), where the later message goes
 * first. */
START_TEST(test_not_before_keeps_a_keys_order)
{
	char db[TS_CONNINFO_MAX], keys[256], batch[64], sql[512];
	for (int real = 0; real <= 1; real++) {
		ts_db_create(real ? "enqueue_order" : "enqueue_order_broken", "outbox", db,
		    sizeof(db));
		PGconn *c = ts_connect(db);
		snprintf(sql, sizeof(sql), "SELECT outbox.enqueue('t', 'k1', '{}', 'A', not_before =>"
		    " clock_timestamp() + interval '%d ms')", DELAY_MS);
		ts_exec(c, sql);
		ts_exec(c, "SELECT outbox.enqueue('t', 'k2', '{}', 'A')");
		int n = claim(c, real, keys, sizeof(keys), batch, sizeof(batch));
		if (!real) {
			/* the key's second message went before its first */
			ck_assert_int_eq(n, 1);
			ck_assert_str_eq(keys, "k2");
			PQfinish(c);
			continue;
		}
		ck_assert_int_eq(n, 0);
		ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.retries WHERE"
		    " ordering_key = 'A'"), 2);
		ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.ordering_blocks WHERE"
		    " ordering_key = 'A'"), 1);
		ck_assert_int_eq(claim(c, true, keys, sizeof(keys), batch, sizeof(batch)), 0);
		ck_assert_int_eq(ts_wait_value(c, "SELECT count(*) FROM outbox.retries WHERE"
		    " idempotency_key = 'k1' AND due_at <= now()", 1, 30000), 1);
		ck_assert_int_eq(claim(c, true, keys, sizeof(keys), batch, sizeof(batch)), 1);
		ck_assert_str_eq(keys, "k1");
		/* k2 waits while k1 is out */
		char other[64];
		ck_assert_int_eq(claim(c, true, keys, sizeof(keys), other, sizeof(other)), 0);
		record_delivered(c, batch);
		ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages WHERE"
		    " idempotency_key = 'k1' AND status = 'delivered'"), 1);
		ck_assert_int_eq(claim(c, true, keys, sizeof(keys), batch, sizeof(batch)), 1);
		ck_assert_str_eq(keys, "k2");
		PQfinish(c);
	}
}
END_TEST

/* The real relay at its defaults (its idle --poll-ms of 1 s finds a
 * message parked until later) and a consumer that applies everything: the
 * message without not_before goes at once, the delayed one once due, in a
 * batch claimed at or after its not_before. */
START_TEST(test_relay_delivers_a_delayed_message_when_due)
{
	char db[TS_CONNINFO_MAX], url[256], route[300], rlog[512], sql[256];
	ts_db_create("enqueue_relay", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	snprintf(sql, sizeof(sql), "SELECT outbox.enqueue('t', 'later', '{}', not_before =>"
	    " clock_timestamp() + interval '%d ms')", DELAY_MS);
	ts_exec(c, sql);
	ts_exec(c, "SELECT outbox.enqueue('t', 'now', '{}')");
	struct ts_fake_consumer fc;
	ts_fake_consumer_routed(&fc, "enqueue_relay", "t", TS_FAKE_APPLIED, url, sizeof(url), route,
	    sizeof(route));
	pid_t rpid = ts_relay_spawn(rlog, db, route, NULL);
	ck_assert_int_eq(ts_wait_value(c, "SELECT count(*) FROM outbox.messages WHERE"
	    " idempotency_key = 'now' AND status = 'delivered'", 1, 60000), 1);
	int64_t pending = ts_wait_value(c, "SELECT count(*) FROM outbox.messages WHERE"
	    " status = 'pending'", 0, 60000);
	ts_stop(rpid, SIGTERM);
	ts_fake_consumer_stop(&fc);
	ck_assert_msg(pending == 0, "the delayed message is still pending (relay log %s)", rlog);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.batches b WHERE b.kind = 'r'"
	    " AND b.state = 'done' AND b.created_at >= (SELECT not_before FROM outbox.events"
	    " WHERE idempotency_key = 'later')"), 1);
	ck_assert_uint_eq(atomic_load(&fc.messages), 2);
	PQfinish(c);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("enqueue_options");
	TCase *tc = tcase_create("enqueue_options");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_headers_are_stored_and_bad_options_refused);
	tcase_add_test(tc, test_not_before_holds_a_message_back);
	tcase_add_test(tc, test_not_before_keeps_a_keys_order);
	tcase_add_test(tc, test_relay_delivers_a_delayed_message_when_due);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
