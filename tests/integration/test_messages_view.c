/*
 * test_messages_view.c - the contract view outbox.messages
 * (sql/outbox/functions/messages.sql) says, for every state a message can
 * be in, what the per-row function outbox.event_state says (the view's
 * definition before issue 32 item 5, kept here as SQL text): the same rows,
 * every column. And it is cheap for what people ask of it: counting the
 * pending messages of an outbox whose messages are all delivered and
 * retained reads no message and calls no per-row function (the old
 * definition called outbox.event_state once per retained message, each
 * call a few queries: 11.9 s at 250,000).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testsupport.h"

/* The view as it was (sql/outbox/functions/messages.sql before issue 32
 * item 5): one call of outbox.event_state per message. */
static const char by_row_sql[] =
    "CREATE VIEW public.messages_by_row AS\n"
    "SELECT e.id, e.topic, e.idempotency_key, e.payload, e.ordering_key, e.ordering_seq,\n"
    "       s.status, s.attempts, s.fence, s.lease_owner, s.lease_until, s.available_at,\n"
    "       e.created_at, s.last_error, s.batch_id, e.headers, e.not_before\n"
    "  FROM outbox.events e, LATERAL outbox.event_state(e) s\n"
    " WHERE NOT EXISTS (SELECT 1 FROM outbox.retries r WHERE r.id = e.id)\n"
    "   AND NOT EXISTS (SELECT 1 FROM outbox.dead d WHERE d.id = e.id)\n"
    "UNION ALL\n"
    "SELECT r.id, r.topic, r.idempotency_key, r.payload, r.ordering_key, r.ordering_seq,\n"
    "       'pending', r.attempts, r.fence, b.owner, CASE WHEN b.owner IS NOT NULL THEN b.lease_until END,\n"
    "       CASE WHEN b.id IS NULL THEN r.due_at ELSE b.created_at END, r.created_at,\n"
    "       r.last_error, r.batch_id, r.headers, r.not_before\n"
    "  FROM outbox.retries r LEFT JOIN outbox.batches b ON b.id = r.batch_id AND b.state = 'leased'\n"
    "UNION ALL\n"
    "SELECT d.id, d.topic, d.idempotency_key, d.payload, d.ordering_key, d.ordering_seq,\n"
    "       'dead', d.attempts, d.fence, NULL, NULL, d.died_at, d.created_at, d.last_error, NULL,\n"
    "       d.headers, d.not_before\n"
    "  FROM outbox.dead d\n";

/* One claim of topic (at most max_n, lease lease_ms) as owner 'test': the
 * batch's "id, fence" into batch, its ids ("{1,2}") into ids; returns how
 * many messages. */
static int
claim(PGconn *c, const char *topic, int max_n, int lease_ms, char *batch, size_t blen, char *ids,
    size_t ilen)
{
	char sql[512];
	snprintf(sql, sizeof(sql), "SELECT batch_id, fence, array_agg(id ORDER BY id), count(*)"
	    " FROM outbox.claim(3, 'test', %d, %d, '{%s}', '{}', false, false) GROUP BY 1, 2",
	    lease_ms, max_n, topic);
	PGresult *r = PQexec(c, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQresultErrorMessage(r));
	int n = 0;
	if (PQntuples(r) == 1) {
		snprintf(batch, blen, "%s, %s", PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1));
		snprintf(ids, ilen, "%s", PQgetvalue(r, 0, 2));
		n = atoi(PQgetvalue(r, 0, 3));
	}
	PQclear(r);
	return n;
}

/* Record batch: outcome 'done' with every listed id of kind kind (delay
 * delay_ms, error error), or 'release' for delay_ms when kind is NULL. */
static void
record(PGconn *c, const char *batch, const char *ids, const char *kind, int delay_ms,
    const char *error)
{
	static char sql[1 << 17];
	if (kind == NULL)
		snprintf(sql, sizeof(sql), "SELECT outbox.record(3, %s, true, 'release', %d, false,"
		    " '{}', '{}', '{}', '{%s}', false)::int", batch, delay_ms, error);
	else
		snprintf(sql, sizeof(sql), "SELECT outbox.record(3, %s, true, 'done', 0, false,"
		    " '%s'::bigint[], array_fill('%s'::text, ARRAY[cardinality('%s'::bigint[])]),"
		    " array_fill(%d::bigint, ARRAY[cardinality('%s'::bigint[])]),"
		    " array_fill('%s'::text, ARRAY[cardinality('%s'::bigint[])]), false)::int",
		    batch, ids, kind, ids, delay_ms, ids, error, ids);
	ck_assert_int_eq(ts_query_int(c, sql), 1);
}

/* How many rows of outbox.messages match cond (an SQL condition). */
static int64_t
messages_where(PGconn *c, const char *cond)
{
	char sql[512];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM outbox.messages WHERE %s", cond);
	return ts_query_int(c, sql);
}

/* The rows of outbox.messages and of the old definition differ by none
 * (every column, duplicates counted); there are want of them. */
static void
assert_same_rows(PGconn *c, int64_t want)
{
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages"), want);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM public.messages_by_row"), want);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM (SELECT * FROM outbox.messages"
	    " EXCEPT ALL SELECT * FROM public.messages_by_row) x"), 0);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM (SELECT * FROM public.messages_by_row"
	    " EXCEPT ALL SELECT * FROM outbox.messages) x"), 0);
	/* and each status asked for alone (the branches the planner keeps) */
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM (SELECT * FROM outbox.messages"
	    " WHERE status = 'pending' EXCEPT ALL SELECT * FROM public.messages_by_row"
	    " WHERE status = 'pending') x"), 0);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages"
	    " WHERE status = 'pending'"), ts_query_int(c, "SELECT count(*) FROM"
	    " public.messages_by_row WHERE status = 'pending'"));
}

START_TEST(test_view_matches_event_state)
{
	char db[TS_CONNINFO_MAX], batch[64], ids[256], b2[64], ids2[256];
	ts_db_create("messages_view", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db), *late = ts_connect(db);
	ts_exec(c, by_row_sql);

	/* history (lane -1, as 012 carried the old table's rows over) */
	ts_exec(c, "INSERT INTO outbox.events (slot, id, txid, lane, topic, idempotency_key, payload)"
	    " SELECT 0, nextval('outbox.event_ids'), pg_current_xact_id(), -1, 'old', 'old-' || g,"
	    " '{}' FROM generate_series(1, 3) g");
	/* done: delivered by a batch still kept */
	ts_exec(c, "SELECT outbox.enqueue('done', 'd' || g, '{}') FROM generate_series(1, 3) g");
	ck_assert_int_eq(claim(c, "done", 10, 600000, batch, sizeof(batch), ids, sizeof(ids)), 3);
	record(c, batch, ids, "delivered", 0, "");
	/* leased: under a live lease */
	ts_exec(c, "SELECT outbox.enqueue('leased', 'l' || g, '{}') FROM generate_series(1, 2) g");
	ck_assert_int_eq(claim(c, "leased", 10, 600000, batch, sizeof(batch), ids, sizeof(ids)), 2);
	/* released until later: no owner, lease_until ahead */
	ts_exec(c, "SELECT outbox.enqueue('released', 'r1', '{}')");
	ck_assert_int_eq(claim(c, "released", 10, 600000, batch, sizeof(batch), ids, sizeof(ids)), 1);
	record(c, batch, ids, NULL, 600000, "breaker open");
	/* taken over: its 1 ms lease ran out, claimed again (new fence) */
	ts_exec(c, "SELECT outbox.enqueue('taken', 'x1', '{}')");
	ck_assert_int_eq(claim(c, "taken", 10, 1, batch, sizeof(batch), ids, sizeof(ids)), 1);
	usleep(50 * 1000);
	ck_assert_int_eq(claim(c, "taken", 10, 600000, b2, sizeof(b2), ids2, sizeof(ids2)), 1);
	ck_assert_str_eq(ids, ids2);
	ck_assert_str_ne(batch, b2);
	/* a retry due later, a dead letter */
	ts_exec(c, "SELECT outbox.enqueue('retry', 'y1', '{}'), outbox.enqueue('retry', 'y2', '{}')");
	ck_assert_int_eq(claim(c, "retry", 1, 600000, batch, sizeof(batch), ids, sizeof(ids)), 1);
	record(c, batch, ids, "retry", 600000, "busy");
	ck_assert_int_eq(claim(c, "retry", 1, 600000, batch, sizeof(batch), ids, sizeof(ids)), 1);
	record(c, batch, ids, "dead", 0, "bad");
	/* ordering keys: k's head answered retry (k blocked), then k's next
	 * message is parked behind it, in the batch that takes j's */
	ts_exec(c, "SELECT outbox.enqueue('ordered', 'o1', '{}', 'k')");
	ck_assert_int_eq(claim(c, "ordered", 10, 600000, batch, sizeof(batch), ids, sizeof(ids)), 1);
	record(c, batch, ids, "retry", 600000, "later");
	ts_exec(c, "SELECT outbox.enqueue('ordered', 'o2', '{}', 'k'),"
	    " outbox.enqueue('ordered', 'o3', '{}', 'j')");
	/* (o2 and o3 may hash to different lanes: one claim per lane) */
	while (claim(c, "ordered", 10, 600000, batch, sizeof(batch), ids, sizeof(ids)) > 0)
		;
	ck_assert_int_eq(messages_where(c, "idempotency_key = 'o2' AND status = 'pending'"
	    " AND last_error LIKE 'waits behind%'"), 1);
	/* a window still open: a transaction in progress at the cut (it
	 * commits after it), two batches cut of five (one delivered, one out),
	 * the fifth not cut yet, one more after the window */
	ts_exec(late, "BEGIN");
	ts_exec(late, "SELECT outbox.enqueue('window', 'w-late', '{}')");
	ts_exec(c, "SELECT outbox.enqueue('window', 'w' || g, '{}') FROM generate_series(1, 5) g");
	ck_assert_int_eq(claim(c, "window", 2, 600000, batch, sizeof(batch), ids, sizeof(ids)), 2);
	record(c, batch, ids, "delivered", 0, "");
	ck_assert_int_eq(claim(c, "window", 2, 600000, batch, sizeof(batch), ids, sizeof(ids)), 2);
	ts_exec(late, "COMMIT");
	ts_exec(c, "SELECT outbox.enqueue('window', 'w6', '{}')");
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.streams WHERE topic = 'window'"
	    " AND snap_hi IS NOT NULL"), 1);
	/* a stream that moved on (its window used up, snap_lo past them) while
	 * its two batches are still out, one of them released until later */
	ts_exec(c, "SELECT outbox.enqueue('moved', 'm' || g, '{}') FROM generate_series(1, 2) g");
	ck_assert_int_eq(claim(c, "moved", 1, 600000, batch, sizeof(batch), ids, sizeof(ids)), 1);
	ck_assert_int_eq(claim(c, "moved", 1, 600000, batch, sizeof(batch), ids, sizeof(ids)), 1);
	record(c, batch, ids, NULL, 600000, "");
	ck_assert_int_eq(claim(c, "moved", 1, 600000, batch, sizeof(batch), ids, sizeof(ids)), 0);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.streams WHERE topic = 'moved'"
	    " AND snap_hi IS NULL AND snap_lo IS NOT NULL"), 1);
	ts_exec(c, "SELECT outbox.enqueue('moved', 'm3', '{}')");
	/* a topic no relay has read yet (no stream row) */
	ts_exec(c, "SELECT outbox.enqueue('new', 'n' || g, '{}') FROM generate_series(1, 2) g");
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.streams WHERE topic = 'new'"),
	    0);

	/* delayed (not_before), with headers: one no claim has reached, one
	 * parked in outbox.retries by the cut that reached it (due then) */
	ts_exec(c, "SELECT outbox.enqueue('delayed', 'z1', '{}', headers => '{\"tp\": \"t1\"}',"
	    " not_before => now() + interval '1 hour')");
	ts_exec(c, "SELECT outbox.enqueue('parked', 'z2', '{}', headers => '{\"tp\": \"t2\"}',"
	    " not_before => now() + interval '1 hour')");
	ck_assert_int_eq(claim(c, "parked", 10, 600000, batch, sizeof(batch), ids, sizeof(ids)), 0);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.retries WHERE idempotency_key"
	    " = 'z2' AND due_at > now() + interval '50 minutes' AND headers->>'tp' = 't2'"), 1);

	assert_same_rows(c, 3 + 3 + 2 + 1 + 1 + 2 + 3 + 7 + 3 + 2 + 2);
	ck_assert_int_eq(messages_where(c, "topic IN ('delayed', 'parked') AND status = 'pending'"
	    " AND available_at > now() + interval '50 minutes' AND not_before = available_at"
	    " AND headers->>'tp' = 't' || right(idempotency_key, 1)"), 2);
	/* the states are the ones meant */
	ck_assert_int_eq(messages_where(c, "topic = 'done' AND status = 'delivered'"
	    " AND attempts = 1 AND batch_id IS NOT NULL"), 3);
	ck_assert_int_eq(messages_where(c, "topic = 'old' AND status = 'delivered'"
	    " AND batch_id IS NULL"), 3);
	ck_assert_int_eq(messages_where(c, "topic = 'leased' AND status = 'pending'"
	    " AND lease_owner = 'test' AND lease_until > now()"), 2);
	ck_assert_int_eq(messages_where(c, "topic = 'released' AND status = 'pending'"
	    " AND lease_owner IS NULL AND available_at > now() + interval '1 minute'"
	    " AND last_error = 'breaker open'"), 1);
	ck_assert_int_eq(messages_where(c, "topic = 'taken' AND status = 'pending'"
	    " AND attempts = 2 AND lease_owner = 'test'"), 1);
	ck_assert_int_eq(messages_where(c, "idempotency_key = 'y1' AND status = 'pending'"
	    " AND available_at > now() + interval '1 minute' AND last_error = 'busy'"), 1);
	ck_assert_int_eq(messages_where(c, "idempotency_key = 'y2' AND status = 'dead'"), 1);
	ck_assert_int_eq(messages_where(c, "topic = 'window' AND status = 'delivered'"), 2);
	ck_assert_int_eq(messages_where(c, "topic = 'window' AND status = 'pending'"
	    " AND lease_owner = 'test'"), 2);
	ck_assert_int_eq(messages_where(c, "topic = 'window' AND status = 'pending'"
	    " AND attempts = 0 AND idempotency_key IN ('w5', 'w-late', 'w6')"), 3);
	ck_assert_int_eq(messages_where(c, "topic = 'moved' AND status = 'pending'"
	    " AND attempts = 1"), 2);
	ck_assert_int_eq(messages_where(c, "topic = 'moved' AND status = 'pending'"
	    " AND attempts = 0"), 1);
	ck_assert_int_eq(messages_where(c, "topic = 'new' AND status = 'pending'"), 2);
	/* outboxctl status counts them alike, topic by topic (outbox.topic_stats,
	 * whose waiting messages outbox.stream_backlog counts in place: the
	 * open window of 'window' past its position, the unread rest) */
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.topic_stats() s"
	    " FULL JOIN (SELECT topic, count(*) AS n FROM outbox.messages"
	    " WHERE status = 'pending' GROUP BY topic) m USING (topic)"
	    " WHERE COALESCE(s.pending, 0) <> COALESCE(m.n, 0)"), 0);
	/* a key looked up, with and without its topic */
	ck_assert_int_eq(messages_where(c, "idempotency_key = 'w-late' AND status = 'pending'"), 1);
	ck_assert_int_eq(messages_where(c, "idempotency_key = 'm1' AND topic = 'moved'"
	    " AND status = 'pending'"), 1);

	/* everything delivered: the same again */
	for (int i = 0; i < 100; i++) {
		ts_exec(c, "UPDATE outbox.batches SET lease_until = now() - interval '1 second'"
		    " WHERE state = 'leased'");
		ts_exec(c, "UPDATE outbox.retries SET due_at = now() - interval '1 second'");
		ts_exec(c, "DELETE FROM outbox.ordering_blocks");
		ts_exec(c, "UPDATE outbox.events SET not_before = now() - interval '1 second'"
		    " WHERE not_before > now()");
		int n = 0;
		const char *topics[] = { "done", "leased", "released", "taken", "retry", "ordered",
			"window", "moved", "new", "delayed", "parked" };
		for (size_t t = 0; t < sizeof(topics) / sizeof(topics[0]); t++)
			while (claim(c, topics[t], 10, 600000, batch, sizeof(batch), ids, sizeof(ids)) > 0) {
				record(c, batch, ids, "delivered", 0, "");
				n++;
			}
		if (n == 0)
			break;
	}
	ck_assert_int_eq(messages_where(c, "status = 'pending'"), 0);
	assert_same_rows(c, 27 + 2);
	PQfinish(late);
	PQfinish(c);
}
END_TEST

/* Reads of the event partitions (tuples from scans and index entries). */
static int64_t
event_reads(PGconn *c)
{
	ts_stats_flush(c);
	return ts_query_int(c, "SELECT (SELECT coalesce(sum(coalesce(seq_tup_read, 0)), 0)"
	    "  FROM pg_stat_user_tables t JOIN pg_inherits i ON i.inhrelid = t.relid"
	    "  WHERE i.inhparent = 'outbox.events'::regclass)"
	    " + (SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes x"
	    "  JOIN pg_inherits i ON i.inhrelid = x.relid"
	    "  WHERE i.inhparent = 'outbox.events'::regclass)");
}

#define RETAINED 3000

/* Issue 32 item 5: with RETAINED messages delivered and retained, the count
 * of the pending ones is right, reads no message (the old definition read
 * each, and called outbox.event_state RETAINED times), and the per-row
 * function is never called; the oldest pending message as cheap. */
START_TEST(test_pending_count_reads_no_delivered_message)
{
	char db[TS_CONNINFO_MAX], batch[64];
	static char ids[1 << 15];
	ts_db_create("messages_cost", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	ts_exec(c, "SELECT count(outbox.enqueue('t', 'k-' || g, '{}')) FROM generate_series(1, "
	    "3000) g");
	int n;
	while ((n = claim(c, "t", 1000, 600000, batch, sizeof(batch), ids, sizeof(ids))) > 0)
		record(c, batch, ids, "delivered", 0, "");
	ts_exec(c, "SELECT outbox.enqueue('t', 'last', '{}')");
	ts_exec(c, "VACUUM ANALYZE outbox.events");
	ts_exec(c, "SET track_functions = 'all'");
	ck_assert_int_eq(messages_where(c, "status = 'delivered'"), RETAINED);

	int64_t before = event_reads(c);
	ck_assert_int_eq(messages_where(c, "status = 'pending'"), 1);
	int64_t reads = event_reads(c) - before;
	ck_assert_msg(reads <= 10, "counting 1 pending message of %d read %lld event rows",
	    RETAINED + 1, (long long)reads);
	ck_assert_int_eq(ts_query_int(c, "SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions"
	    " WHERE schemaname = 'outbox' AND funcname = 'event_state'"), 0);

	/* the oldest pending message: as cheap */
	before = event_reads(c);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages WHERE status = 'pending'"
	    " AND created_at = (SELECT min(created_at) FROM outbox.messages"
	    " WHERE status = 'pending')"), 1);
	reads = event_reads(c) - before;
	ck_assert_msg(reads <= 10, "the oldest pending message of %d read %lld event rows",
	    RETAINED + 1, (long long)reads);
	/* keys looked up (at this size the planner may well scan: no bound) */
	ck_assert_int_eq(messages_where(c, "idempotency_key = 'k-1234' AND status = 'delivered'"
	    " AND attempts = 1 AND batch_id IS NOT NULL"), 1);
	ck_assert_int_eq(messages_where(c, "idempotency_key = 'last' AND topic = 't'"
	    " AND status = 'pending'"), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions"
	    " WHERE schemaname = 'outbox' AND funcname = 'event_state'"), 0);
	PQfinish(c);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("messages_view");
	TCase *tc = tcase_create("messages_view");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_view_matches_event_state);
	tcase_add_test(tc, test_pending_count_reads_no_delivered_message);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
