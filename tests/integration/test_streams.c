/*
 * test_streams.c - the log's reading and keeping rules, played with
 * explicit interleavings on several connections (sql/outbox/012_streams.sql):
 * a transaction that commits late with a low id is read when it commits,
 * where a naive "delivered up to id N" reader loses it (shown first); a
 * rolled-back one is never read; a slot switch waits for the transactions
 * still inserting into the old slot, and a key stored in one slot is found
 * from the next (enqueue stays idempotent across slots); housekeeping never
 * truncates a slot a transaction still holds, and names that transaction.
 * And an enqueue wakes one waiting relay worker, by name
 * (sql/outbox/013_wake_one.sql). A poison message among others ends dead
 * alone within a stated number of takeovers; a dump restored into a
 * younger cluster loses nothing (sql/outbox/018_ordering_next.sql,
 * outbox.adopt_restore). A claim keeps to its byte budget (019).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testsupport.h"

/* One claim of the whole topic 't' by owner 'test'; its ids (comma
 * separated, in order) into ids, the batch and fence into batch ("B, F");
 * returns how many. */
static int
claim_all(PGconn *c, char *ids, size_t idlen, char *batch, size_t blen)
{
	PGresult *r = PQexec(c, "SELECT batch_id, fence, string_agg(id::text, ',' ORDER BY id),"
	    " count(*) FROM outbox.claim(2, 'test', 60000, 1000, '{t}', '{}', false, false)"
	    " GROUP BY 1, 2");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	int n = 0;
	ids[0] = '\0';
	if (PQntuples(r) == 1) {
		snprintf(ids, idlen, "%s", PQgetvalue(r, 0, 2));
		snprintf(batch, blen, "%s, %s", PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1));
		n = atoi(PQgetvalue(r, 0, 3));
	}
	PQclear(r);
	return n;
}

static void
record_done(PGconn *c, const char *batch)
{
	char sql[256];
	snprintf(sql, sizeof(sql), "SELECT outbox.record(2, %s, true, 'done', 0, false,"
	    " '{}', '{}', '{}', '{}', false)::int", batch);
	ck_assert_int_eq(ts_query_int(c, sql), 1);
}

START_TEST(test_stream_reads_a_late_commit)
{
	char db[TS_CONNINFO_MAX], ids[4096], batch[64];
	ts_db_create("streams_late", "outbox", db, sizeof(db));
	PGconn *late = ts_connect(db), *other = ts_connect(db), *relay = ts_connect(db);

	/* The late transaction takes the lowest id and stays open... */
	ts_exec(late, "BEGIN");
	ts_exec(late, "SELECT outbox.enqueue('t', 'late', '{}')");
	int64_t late_id = ts_query_int(late,
	    "SELECT id FROM outbox.events WHERE idempotency_key = 'late'");
	/* ...one more that will roll back... */
	PGconn *rolled = ts_connect(db);
	ts_exec(rolled, "BEGIN");
	ts_exec(rolled, "SELECT outbox.enqueue('t', 'rolled-back', '{}')");
	/* ...while higher ids commit and are delivered. */
	ts_exec(other, "SELECT count(outbox.enqueue('t', 'e-' || g, '{}'))"
	    " FROM generate_series(1, 4) g");
	int64_t high = ts_query_int(other, "SELECT max(id) FROM outbox.events");
	ck_assert_int_gt(high, late_id);

	/* A naive reader: everything above the last id it delivered. */
	int64_t naive_seen = ts_query_int(relay, "SELECT count(*) FROM outbox.events"
	    " WHERE id > 0 AND lane = 0");
	ck_assert_int_eq(naive_seen, 4);
	/* The relay's claim: the four committed ones. */
	ck_assert_int_eq(claim_all(relay, ids, sizeof(ids), batch, sizeof(batch)), 4);
	record_done(relay, batch);

	ts_exec(late, "COMMIT");
	ts_exec(rolled, "ROLLBACK");

	/* The naive reader resumes after id `high`: the late message is lost. */
	char sql[256];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM outbox.events WHERE id > %lld",
	    (long long)high);
	ck_assert_int_eq(ts_query_int(relay, sql), 0);
	/* The claim reads it, because it commits after the last cut. */
	ck_assert_int_eq(claim_all(relay, ids, sizeof(ids), batch, sizeof(batch)), 1);
	char want[32];
	snprintf(want, sizeof(want), "%lld", (long long)late_id);
	ck_assert_str_eq(ids, want);
	record_done(relay, batch);
	/* and nothing else, ever: the rolled-back message does not exist */
	ck_assert_int_eq(claim_all(relay, ids, sizeof(ids), batch, sizeof(batch)), 0);
	ck_assert_int_eq(ts_query_int(relay, "SELECT outbox.backlog_empty()::int"), 1);
	ck_assert_int_eq(ts_query_int(relay, "SELECT count(*) FROM outbox.messages"
	    " WHERE status = 'delivered'"), 5);
	PQfinish(late);
	PQfinish(other);
	PQfinish(relay);
	PQfinish(rolled);
}
END_TEST

/* Does conn's backend wait for a lock (after sending sql)? */
static bool
waits_for_lock(PGconn *watch, PGconn *conn)
{
	char q[200];
	snprintf(q, sizeof(q), "SELECT count(*) FROM pg_stat_activity WHERE pid = %d"
	    " AND wait_event_type = 'Lock'", PQbackendPID(conn));
	for (int64_t end = ts_now_ms() + 5000; ts_now_ms() < end; usleep(20 * 1000)) {
		if (ts_query_int(watch, q) == 1)
			return true;
		ck_assert_int_eq(PQconsumeInput(conn), 1);
		if (!PQisBusy(conn))
			return false;
	}
	return false;
}

static int64_t
result_int(PGconn *conn)
{
	int64_t v = -1;
	PGresult *r;
	while ((r = PQgetResult(conn)) != NULL) {
		ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK || PQresultStatus(r) == PGRES_COMMAND_OK,
		    "%s", PQresultErrorMessage(r));
		if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && !PQgetisnull(r, 0, 0))
			v = atoll(PQgetvalue(r, 0, 0));
		PQclear(r);
	}
	return v;
}

/* The slot switch waits for a transaction still inserting into the old
 * slot; once it committed, the key it stored there is found from the new
 * slot: the same id, no second message. A pass whose lock times out says
 * who held it. */
START_TEST(test_slot_switch_keeps_keys_unique)
{
	char db[TS_CONNINFO_MAX];
	ts_db_create("streams_slot", "outbox", db, sizeof(db));
	PGconn *app = ts_connect(db), *keeper = ts_connect(db), *watch = ts_connect(db);
	ts_exec(app, "SET application_name = 'the-app'");

	ts_exec(app, "BEGIN");
	int64_t first = ts_query_int(app, "SELECT outbox.enqueue('t', 'K', '{}')");
	/* A pass with a short lock wait: the switch cannot happen yet, and
	 * the pass says why and who. */
	PGresult *r = PQexec(keeper, "SELECT switched_to, waiting FROM outbox.housekeep("
	    "3600000, 0, 600000, 200, true)");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	ck_assert_msg(PQgetisnull(r, 0, 0), "switched while a writer was open");
	ck_assert_msg(strstr(PQgetvalue(r, 0, 1), "slot switch waits") != NULL &&
	    strstr(PQgetvalue(r, 0, 1), "the-app") != NULL, "%s", PQgetvalue(r, 0, 1));
	PQclear(r);
	/* A pass that waits longer: it waits for the writer, then switches. */
	ck_assert_int_eq(PQsendQuery(keeper, "SELECT switched_to FROM outbox.housekeep("
	    "3600000, 0, 600000, 20000, true)"), 1);
	ck_assert_msg(waits_for_lock(watch, keeper), "the switch did not wait for the writer");
	ts_exec(app, "COMMIT");
	ck_assert_int_eq(result_int(keeper), 1);
	ck_assert_int_eq(ts_query_int(watch, "SELECT slot FROM outbox.slots WHERE state = 'current'"),
	    1);
	/* The key, enqueued again after the switch: the first message. */
	ck_assert_int_eq(ts_query_int(app, "SELECT outbox.enqueue('t', 'K', '{}')"), first);
	ck_assert_int_eq(ts_query_int(watch, "SELECT count(*) FROM outbox.events"
	    " WHERE idempotency_key = 'K'"), 1);
	/* A new key goes to the new slot. */
	ts_exec(app, "SELECT outbox.enqueue('t', 'L', '{}')");
	ck_assert_int_eq(ts_query_int(watch, "SELECT slot FROM outbox.events"
	    " WHERE idempotency_key = 'L'"), 1);
	PQfinish(app);
	PQfinish(keeper);
	PQfinish(watch);
}
END_TEST

/* The window inside an enqueue between reading the current slot and
 * inserting into it: held open here by a session that holds the row of
 * the message's ordering key (outbox.ordering_seqs), which the enqueue
 * takes in between. A switch in that window would let
 * the enqueue write the slot it read, now closed, while a second enqueue
 * of the same key writes the new one: two messages for one key. The
 * enqueue's lock on outbox.events keeps the switch out until it commits
 * (without that lock this pass switches). */
START_TEST(test_switch_waits_for_an_enqueue_between_look_and_insert)
{
	char db[TS_CONNINFO_MAX];
	ts_db_create("streams_window", "outbox", db, sizeof(db));
	PGconn *app = ts_connect(db), *other = ts_connect(db), *keeper = ts_connect(db),
	       *blocker = ts_connect(db), *watch = ts_connect(db);
	ts_exec(other, "SELECT outbox.enqueue('t', 'before', '{}', 'OK')");
	ts_exec(blocker, "BEGIN");
	ts_exec(blocker, "SELECT 1 FROM outbox.ordering_seqs WHERE topic = 't'"
	    " AND ordering_key = 'OK' FOR UPDATE");
	ts_exec(app, "BEGIN");
	ck_assert_int_eq(PQsendQuery(app, "SELECT outbox.enqueue('t', 'K', '{}', 'OK')"), 1);
	ck_assert_msg(waits_for_lock(watch, app), "the enqueue did not reach its key's row");
	PGresult *r = PQexec(keeper, "SELECT switched_to FROM outbox.housekeep("
	    "3600000, 0, 600000, 200, true)");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	ck_assert_msg(PQgetisnull(r, 0, 0), "switched to slot %s inside an enqueue",
	    PQgetvalue(r, 0, 0));
	PQclear(r);
	ts_exec(blocker, "COMMIT");
	int64_t first = result_int(app);
	ts_exec(app, "COMMIT");
	ck_assert_int_eq(ts_query_int(other, "SELECT outbox.enqueue('t', 'K', '{}', 'OK')"), first);
	ck_assert_int_eq(ts_query_int(watch, "SELECT count(*) FROM outbox.events"
	    " WHERE idempotency_key = 'K'"), 1);
	PQfinish(app);
	PQfinish(other);
	PQfinish(keeper);
	PQfinish(blocker);
	PQfinish(watch);
}
END_TEST

/* A closed, done, old slot is truncated, unless a transaction still holds
 * it (an application transaction that enqueued and sits idle): then the
 * pass skips it and names the holder; the held messages are never lost. */
START_TEST(test_truncate_waits_for_a_holder)
{
	char db[TS_CONNINFO_MAX], ids[4096], batch[64];
	ts_db_create("streams_trunc", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db), *app = ts_connect(db);
	ts_exec(app, "SET application_name = 'idle-app'");
	ts_exec(c, "SELECT count(outbox.enqueue('t', 'old-' || g, '{}')) FROM generate_series(1, 5) g");
	ck_assert_int_eq(claim_all(c, ids, sizeof(ids), batch, sizeof(batch)), 5);
	record_done(c, batch);
	ck_assert_int_eq(ts_query_int(c, "SELECT switched_to FROM outbox.housekeep(3600000, 0,"
	    " 600000, 1000, true)"), 1);
	ts_exec(c, "UPDATE outbox.slots SET since = now() - interval '2 hours'"
	    " WHERE state = 'closed'");
	/* An application transaction enqueues (it reads every slot) and idles. */
	ts_exec(app, "BEGIN");
	ts_exec(app, "SELECT outbox.enqueue('t', 'new-1', '{}')");
	PGresult *r = PQexec(c, "SELECT truncated_slot, waiting FROM outbox.housekeep(3600000, 0,"
	    " 600000, 200, false)");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	ck_assert_msg(PQgetisnull(r, 0, 0), "truncated a slot a transaction holds");
	ck_assert_msg(strstr(PQgetvalue(r, 0, 1), "slot 0 is in use") != NULL &&
	    strstr(PQgetvalue(r, 0, 1), "idle-app") != NULL, "%s", PQgetvalue(r, 0, 1));
	PQclear(r);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.events_0"), 5);
	ts_exec(app, "COMMIT");
	/* a relay's next claim moves the stream's floor past the slot */
	ck_assert_int_eq(claim_all(c, ids, sizeof(ids), batch, sizeof(batch)), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT truncated_rows FROM outbox.housekeep(3600000, 0,"
	    " 600000, 1000, false)"), 5);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.events"), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages"
	    " WHERE idempotency_key = 'new-1' AND status = 'pending'"), 1);
	PQfinish(c);
	PQfinish(app);
}
END_TEST

/* A message of a stream no relay has read yet (no relay ran since it was
 * enqueued) is pending: counted by topic_stats and backlog_empty, and
 * however old its slot, housekeeping keeps it; the slot switch gives its
 * stream a row, so a claim, which discovers the current slot only, still
 * finds it. */
START_TEST(test_undiscovered_stream_is_kept)
{
	char db[TS_CONNINFO_MAX];
	ts_db_create("streams_undisc", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	int64_t id = ts_query_int(c, "SELECT outbox.enqueue('never-read', 'k1', '{}')");
	/* counted before any relay read it */
	ck_assert_int_eq(ts_query_int(c, "SELECT pending FROM outbox.topic_stats('never-read')"), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT outbox.backlog_empty()::int"), 0);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.streams"), 0);
	ck_assert_int_eq(ts_query_int(c, "SELECT switched_to FROM outbox.housekeep(3600000, 0,"
	    " 600000, 1000, true)"), 1);
	/* the switch gave the closed slot's stream its row (024: discovery
	 * reads the current slot only) */
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.streams"
	    " WHERE topic = 'never-read'"), 1);
	ts_exec(c, "UPDATE outbox.slots SET since = now() - interval '2 hours'"
	    " WHERE state = 'closed'");
	PGresult *r = PQexec(c, "SELECT truncated_slot, waiting FROM outbox.housekeep(3600000, 0,"
	    " 600000, 1000, false)");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	ck_assert_msg(PQgetisnull(r, 0, 0), "truncated a slot with an undelivered message");
	ck_assert_msg(strstr(PQgetvalue(r, 0, 1), "slot 0 has messages not yet done") != NULL,
	    "%s", PQgetvalue(r, 0, 1));
	PQclear(r);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages"
	    " WHERE idempotency_key = 'k1' AND status = 'pending'"), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT outbox.enqueue('never-read', 'k1', '{}')"), id);
	/* and a claim finds it in the closed slot */
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.claim(5, 'test', 60000, 10,"
	    " '{never-read}', '{}', false, false)"), 1);
	PQfinish(c);
}
END_TEST

/* One claim of topic 't' (up to 10, lease lease_ms) as owner 'test': the
 * batch's "id, fence" into batch, its keys (comma separated, in order)
 * into keys, its ids into ids ("{1,2}"), whether it was a takeover; returns
 * how many messages. */
static int
claim_keys(PGconn *c, int lease_ms, char *batch, size_t blen, char *keys, size_t klen,
    char *ids, size_t ilen, bool *takeover)
{
	char sql[512];
	snprintf(sql, sizeof(sql), "SELECT batch_id, fence, string_agg(idempotency_key, ',' ORDER BY ord),"
	    " array_agg(id ORDER BY ord), bool_or(takeover), count(*)"
	    " FROM outbox.claim(2, 'test', %d, 10, '{t}', '{}', false, false)"
	    " WITH ORDINALITY x(batch_id, kind, fence, attempt, takeover, id, created_us, topic,"
	    "  idempotency_key, payload, ordering_key, ordering_seq, ord) GROUP BY 1, 2", lease_ms);
	PGresult *r = PQexec(c, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQresultErrorMessage(r));
	int n = 0;
	if (PQntuples(r) == 1) {
		snprintf(batch, blen, "%s, %s", PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1));
		snprintf(keys, klen, "%s", PQgetvalue(r, 0, 2));
		snprintf(ids, ilen, "%s", PQgetvalue(r, 0, 3));
		*takeover = PQgetvalue(r, 0, 4)[0] == 't';
		n = atoi(PQgetvalue(r, 0, 5));
	}
	PQclear(r);
	return n;
}

/* Record batch delivered, each of ids listed (a retry batch too). */
static void
record_delivered(PGconn *c, const char *batch, const char *ids)
{
	char sql[1024];
	snprintf(sql, sizeof(sql), "SELECT outbox.record(2, %s, true, 'done', 0, false, '%s'::bigint[],"
	    " array_fill('delivered'::text, ARRAY[cardinality('%s'::bigint[])]),"
	    " array_fill(0::bigint, ARRAY[cardinality('%s'::bigint[])]),"
	    " array_fill(''::text, ARRAY[cardinality('%s'::bigint[])]), false)::int",
	    batch, ids, ids, ids, ids);
	ck_assert_int_eq(ts_query_int(c, sql), 1);
}

/* Append item to the comma-separated list in buf (asserts it fits). */
static void
append_csv(char *buf, size_t len, const char *item)
{
	size_t used = strlen(buf), n = strlen(item);
	ck_assert_uint_lt(used + n + 1, len);
	if (used > 0)
		buf[used++] = ',';
	memcpy(buf + used, item, n + 1);
}

/* Issue 29, defect 4: a poison message (its relay dies whenever it holds
 * it: here, a batch holding "p" is never recorded and its 1 ms lease runs
 * out) among five. A batch that lost its holder batch_split_after() (3)
 * times is halved, and a message left alone in one is dead-lettered: the
 * poison ends dead alone after at most 3 + ceil(log2 5) = 6 takeovers, and
 * the other four are delivered once each. Before, the split put the five
 * into retries that the next claim took back as one retry batch, which was
 * never split (taken over forever). Played from a stream batch, and from a
 * retry batch (the five answered retry once first). */
static void
poison_among_five(const char *db, bool from_retries)
{
	char batch[64], keys[256], ids[256], delivered[256] = "";
	bool takeover;
	PGconn *c = ts_connect(db);
	ts_exec(c, "SELECT outbox.enqueue('t', 'a', '{}'), outbox.enqueue('t', 'b', '{}'),"
	    " outbox.enqueue('t', 'p', '{}'), outbox.enqueue('t', 'd', '{}'),"
	    " outbox.enqueue('t', 'e', '{}')");
	if (from_retries) {
		ck_assert_int_eq(claim_keys(c, 60000, batch, sizeof(batch), keys, sizeof(keys), ids,
		    sizeof(ids), &takeover), 5);
		char sql[1024];
		snprintf(sql, sizeof(sql), "SELECT outbox.record(2, %s, true, 'done', 0, false,"
		    " '%s'::bigint[], array_fill('retry'::text, ARRAY[5]), array_fill(0::bigint,"
		    " ARRAY[5]), array_fill('busy'::text, ARRAY[5]), false)::int", batch, ids);
		ck_assert_int_eq(ts_query_int(c, sql), 1);
	}
	int poison_takeovers = 0;
	int64_t end = ts_now_ms() + 30000;
	while (ts_query_int(c, "SELECT count(*) FROM outbox.dead") == 0) {
		ck_assert_msg(ts_now_ms() < end, "the poison is not dead after %d takeovers of it",
		    poison_takeovers);
		ck_assert_msg(poison_takeovers <= 6, "the poison was taken over %d times, bound 6",
		    poison_takeovers);
		if (claim_keys(c, 1, batch, sizeof(batch), keys, sizeof(keys), ids, sizeof(ids),
		        &takeover) == 0)
			continue; /* no lease ran out yet */
		if (strstr(keys, "p") != NULL) {
			poison_takeovers += takeover; /* its holder dies: never recorded */
			continue;
		}
		record_delivered(c, batch, ids);
		append_csv(delivered, sizeof(delivered), keys);
	}
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.dead WHERE idempotency_key = 'p'"
	    " AND last_error LIKE 'taken over % times without an outcome%'"), 1);
	/* whatever was still out is delivered, each of the four once */
	for (int i = 0; i < 100 && ts_query_int(c, "SELECT count(*) FROM outbox.messages"
	         " WHERE status = 'pending'") > 0; i++) {
		if (claim_keys(c, 60000, batch, sizeof(batch), keys, sizeof(keys), ids, sizeof(ids),
		        &takeover) > 0) {
			record_delivered(c, batch, ids);
			append_csv(delivered, sizeof(delivered), keys);
		}
	}
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages"
	    " WHERE status = 'delivered'"), 4);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.batches WHERE state = 'leased'"),
	    0);
	int seen[4] = { 0 };
	for (char *k = strtok(delivered, ","); k != NULL; k = strtok(NULL, ","))
		for (int i = 0; i < 4; i++)
			seen[i] += strcmp(k, (const char *[]){ "a", "b", "d", "e" }[i]) == 0;
	for (int i = 0; i < 4; i++)
		ck_assert_msg(seen[i] == 1, "message %d delivered %d times", i, seen[i]);
	PQfinish(c);
}

START_TEST(test_poison_message_ends_dead_alone)
{
	char db[TS_CONNINFO_MAX];
	ts_db_create("streams_poison", "outbox", db, sizeof(db));
	poison_among_five(db, false);
	ts_db_create("streams_poison_r", "outbox", db, sizeof(db));
	poison_among_five(db, true);
}
END_TEST

/* Issue 29, defect 5: a dump restored into a cluster whose transaction
 * counter is behind the old one's (simulated: every stored transaction id
 * moved up by 2^32, tests/data/sql/simulate_restore.sql). The streams'
 * snapshots then lie beyond this cluster's transactions: a message
 * enqueued after the restore looked read already, was never claimed, and
 * housekeeping truncated it unsent. Housekeeping now adopts the restore
 * first: what was delivered stays delivered, what a batch held open and
 * what was never read (before or after the restore) is delivered, once. */
START_TEST(test_restore_into_a_younger_cluster)
{
	char db[TS_CONNINFO_MAX], batch[64], keys[256], ids[256], got[512] = "";
	bool takeover;
	ts_db_create("streams_restore", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	ts_exec(c, "SELECT count(outbox.enqueue('t', 'done-' || g, '{}')) FROM generate_series(1, 3) g");
	ck_assert_int_eq(claim_keys(c, 60000, batch, sizeof(batch), keys, sizeof(keys), ids,
	    sizeof(ids), &takeover), 3);
	record_delivered(c, batch, ids);
	ts_exec(c, "SELECT count(outbox.enqueue('t', 'open-' || g, '{}')) FROM generate_series(1, 2) g");
	ck_assert_int_eq(claim_keys(c, 60000, batch, sizeof(batch), keys, sizeof(keys), ids,
	    sizeof(ids), &takeover), 2); /* held by a relay of the old cluster */
	ts_exec(c, "SELECT count(outbox.enqueue('t', 'unread-' || g, '{}')) FROM generate_series(1, 2) g");

	char path[512];
	snprintf(path, sizeof(path), "%s/sql/simulate_restore.sql", getenv("OUTBOX_TEST_DATA"));
	char *sim = ts_read_file(path);
	ck_assert_ptr_nonnull(sim);
	ts_exec(c, sim);
	free(sim);
	ts_exec(c, "SELECT pg_temp.simulate_restore(4294967296)");
	ts_exec(c, "SELECT outbox.enqueue('t', 'after', '{}')");

	/* Claims, and housekeeping passes that truncate everything done (the
	 * first adopts the restore): nothing lost, nothing sent twice that a
	 * consumer had answered */
	for (int i = 0; i < 20; i++) {
		if (claim_keys(c, 60000, batch, sizeof(batch), keys, sizeof(keys), ids, sizeof(ids),
		        &takeover) > 0) {
			record_delivered(c, batch, ids);
			append_csv(got, sizeof(got), keys);
		}
		ts_query_int(c, "SELECT count(*) FROM outbox.housekeep(1, 0, 60000, 1000, true)");
		if (ts_query_int(c, "SELECT outbox.backlog_empty()::int") == 1)
			break;
	}
	ck_assert_str_eq(got, "open-1,open-2,unread-1,unread-2,after");
	ck_assert_int_eq(ts_query_int(c, "SELECT outbox.backlog_empty()::int"), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT outbox.restored()::int"), 0);
	/* the pass that adopted it said how many it reads again; the batch the
	 * old cluster's relay held is closed (its late outcome is fenced out) */
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.batches"
	    " WHERE last_error LIKE 'closed when the outbox was restored%'"), 1);
	PQfinish(c);
}
END_TEST

/* Found by the protocol checker (tests/check/): a batch still open at the
 * dump that was its stream's first cut (a range from the beginning) also
 * covers, by transaction id, a message enqueued after the restore: reading
 * the batch's messages by its range put the new one in the old one's place,
 * and the old one was taken as assigned and lost. And a claim must not take
 * such a batch over before the restore is adopted. */
START_TEST(test_restore_keeps_an_open_first_cut)
{
	char db[TS_CONNINFO_MAX], batch[64], keys[256], ids[256], got[512] = "";
	bool takeover;
	ts_db_create("streams_restore_first", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	ts_exec(c, "SELECT outbox.enqueue('t', 'old', '{}')");
	ck_assert_int_eq(claim_keys(c, 0, batch, sizeof(batch), keys, sizeof(keys), ids,
	    sizeof(ids), &takeover), 1); /* a lease that has run out by the next step */
	char path[512];
	snprintf(path, sizeof(path), "%s/sql/simulate_restore.sql", getenv("OUTBOX_TEST_DATA"));
	char *sim = ts_read_file(path);
	ck_assert_ptr_nonnull(sim);
	ts_exec(c, sim);
	free(sim);
	ts_exec(c, "SELECT pg_temp.simulate_restore(4294967296)");
	ts_exec(c, "SELECT outbox.enqueue('t', 'new', '{}')");
	/* before the adoption nothing is claimed: not the old batch's range */
	ck_assert_int_eq(claim_keys(c, 60000, batch, sizeof(batch), keys, sizeof(keys), ids,
	    sizeof(ids), &takeover), 0);
	ck_assert_int_eq(ts_query_int(c, "SELECT read_again FROM outbox.housekeep(1, 0, 60000,"
	    " 1000, true)"), 2);
	for (int i = 0; i < 10 && ts_query_int(c, "SELECT outbox.backlog_empty()::int") == 0; i++)
		if (claim_keys(c, 60000, batch, sizeof(batch), keys, sizeof(keys), ids, sizeof(ids),
		        &takeover) > 0) {
			record_delivered(c, batch, ids);
			append_csv(got, sizeof(got), keys);
		}
	ck_assert_str_eq(got, "old,new");
	PQfinish(c);
}
END_TEST

/* Found by the protocol checker: after a restore, a topic new since the
 * dump is read by the relays at once (its stream's state is this
 * cluster's); adopting the restore later must not read what they
 * delivered again (the checker saw a recorded delivery claimed again). */
START_TEST(test_restore_leaves_a_new_stream_alone)
{
	char db[TS_CONNINFO_MAX], batch[64], keys[256], ids[256];
	bool takeover;
	ts_db_create("streams_restore_new", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	ts_exec(c, "SELECT outbox.enqueue('t', 'old', '{}')");
	ck_assert_int_eq(claim_keys(c, 60000, batch, sizeof(batch), keys, sizeof(keys), ids,
	    sizeof(ids), &takeover), 1);
	record_delivered(c, batch, ids);
	char path[512];
	snprintf(path, sizeof(path), "%s/sql/simulate_restore.sql", getenv("OUTBOX_TEST_DATA"));
	char *sim = ts_read_file(path);
	ck_assert_ptr_nonnull(sim);
	ts_exec(c, sim);
	free(sim);
	ts_exec(c, "SELECT pg_temp.simulate_restore(4294967296)");
	/* a new topic: its stream is cut and delivered before any adoption */
	ts_exec(c, "SELECT outbox.enqueue('u', 'fresh', '{}')");
	PGresult *r = PQexec(c, "SELECT batch_id, fence, array_agg(id) FROM outbox.claim(2, 'test',"
	    " 60000, 10, '{u}', '{}', false, false) GROUP BY 1, 2");
	ck_assert_int_eq(PQntuples(r), 1);
	snprintf(batch, sizeof(batch), "%s, %s", PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1));
	snprintf(ids, sizeof(ids), "%s", PQgetvalue(r, 0, 2));
	PQclear(r);
	record_delivered(c, batch, ids);
	ck_assert_int_eq(ts_query_int(c, "SELECT read_again FROM outbox.housekeep(1, 0, 60000,"
	    " 1000, true)"), 0);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.claim(2, 'test', 60000, 10,"
	    " '{u}', '{}', false, false)"), 0);
	ck_assert_int_eq(ts_query_int(c, "SELECT outbox.backlog_empty()::int"), 1);
	PQfinish(c);
}
END_TEST

/* Found by the protocol checker: a key's first message held by a batch
 * open at the dump is read again after the restore; the key's second
 * message, enqueued by a transaction that took its id before the
 * adoption and committed after it, comes first in the window (a lower
 * id). The key takes its lowest message read again next, so the second
 * waits: 1 then 2 (before: 2 went out first). */
START_TEST(test_restore_keeps_key_order)
{
	char db[TS_CONNINFO_MAX], batch[64], keys[256], ids[256], got[512] = "";
	bool takeover;
	ts_db_create("streams_restore_order", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db), *late = ts_connect(db);
	ts_exec(c, "SELECT outbox.enqueue('t', 'k-1', '{}', 'K')");
	ck_assert_int_eq(claim_keys(c, 60000, batch, sizeof(batch), keys, sizeof(keys), ids,
	    sizeof(ids), &takeover), 1); /* k-1 out when the dump is taken */
	char path[512];
	snprintf(path, sizeof(path), "%s/sql/simulate_restore.sql", getenv("OUTBOX_TEST_DATA"));
	char *sim = ts_read_file(path);
	ck_assert_ptr_nonnull(sim);
	ts_exec(c, sim);
	free(sim);
	ts_exec(c, "SELECT pg_temp.simulate_restore(4294967296)");
	ts_exec(late, "BEGIN");
	ts_exec(late, "SELECT pg_current_xact_id()"); /* its id comes before the adoption's */
	ck_assert_int_eq(ts_query_int(c, "SELECT read_again FROM outbox.housekeep(1, 0, 60000,"
	    " 1000, true)"), 1);
	ts_exec(late, "SELECT outbox.enqueue('t', 'k-2', '{}', 'K')");
	ts_exec(late, "COMMIT");
	for (int i = 0; i < 10 && ts_query_int(c, "SELECT outbox.backlog_empty()::int") == 0; i++)
		if (claim_keys(c, 60000, batch, sizeof(batch), keys, sizeof(keys), ids, sizeof(ids),
		        &takeover) > 0) {
			record_delivered(c, batch, ids);
			append_csv(got, sizeof(got), keys);
		}
	ck_assert_str_eq(got, "k-1,k-2");
	PQfinish(late);
	PQfinish(c);
}
END_TEST

/* A transaction that enqueues and then asks (housekeeping run in the
 * same transaction): its own message lies beyond its snapshot, which is
 * not a restore. */
START_TEST(test_own_message_is_no_restore)
{
	char db[TS_CONNINFO_MAX];
	ts_db_create("streams_own", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	ts_exec(c, "SELECT outbox.enqueue('t', 'a', '{}')");
	ts_exec(c, "SELECT count(*) FROM outbox.claim(2, 'test', 60000, 10, '{t}', '{}', false, false)");
	ts_exec(c, "BEGIN");
	ts_exec(c, "SELECT outbox.enqueue('t', 'b', '{}')");
	ck_assert_int_eq(ts_query_int(c, "SELECT outbox.restored()::int"), 0);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.housekeep(0, 0, 60000, 1000)"
	    " WHERE read_again IS NULL"), 1);
	ts_exec(c, "COMMIT");
	PQfinish(c);
}
END_TEST

/* The payload of the one notification that arrived on c ("" when it was
 * empty), or NULL when none did; fails on a second one. */
static char *
one_notification(PGconn *c)
{
	ts_exec(c, "SELECT 1"); /* notifications arrive before its answer */
	PGnotify *n = PQnotifies(c);
	if (n == NULL)
		return NULL;
	char *payload = strdup(n->extra);
	PQfreemem(n);
	PGnotify *more = PQnotifies(c);
	ck_assert_msg(more == NULL, "a second notification: '%s'", more ? more->extra : "");
	return payload;
}

/* An enqueue wakes one waiting worker, the one that announced last, and
 * names it (sql/outbox/013_wake_one.sql): 012's trigger took every
 * announcement and sent an empty payload, which woke every worker. */
START_TEST(test_enqueue_wakes_one_waiter)
{
	char db[TS_CONNINFO_MAX];
	ts_db_create("streams_wake", "outbox", db, sizeof(db));
	PGconn *relay = ts_connect(db), *app = ts_connect(db);
	ts_exec(relay, "LISTEN outbox_enqueued");
	/* the later announcement stands longer: 2 x wait + 1 s */
	ts_exec(relay, "SELECT outbox.relay_waiting('host:1:0', 1000)");
	ts_exec(relay, "SELECT outbox.relay_waiting('host:1:1', 5000)");
	ts_exec(app, "SELECT outbox.enqueue('t', 'w1', '{}')");
	char *p = one_notification(relay);
	ck_assert_msg(p != NULL, "no notification");
	ck_assert_str_eq(p, "host:1:1");
	free(p);
	ck_assert_int_eq(ts_query_int(relay, "SELECT count(*) FROM outbox.relay_waiters"
	    " WHERE owner = 'host:1:0'"), 1);
	ck_assert_int_eq(ts_query_int(relay, "SELECT count(*) FROM outbox.relay_waiters"), 1);
	/* the next enqueue wakes the other; then nobody waits: no notification */
	ts_exec(app, "SELECT outbox.enqueue('t', 'w2', '{}')");
	p = one_notification(relay);
	ck_assert_msg(p != NULL, "no notification");
	ck_assert_str_eq(p, "host:1:0");
	free(p);
	ts_exec(app, "SELECT outbox.enqueue('t', 'w3', '{}')");
	ck_assert_ptr_null(one_notification(relay));
	ck_assert_int_eq(ts_query_int(relay, "SELECT count(*) FROM outbox.relay_waiters"), 0);
	PQfinish(relay);
	PQfinish(app);
}
END_TEST

/* Claim of topic 't' with a byte budget: the idempotency keys, in order
 * ("k1,k2"), into keys; returns how many. */
static int
claim_bytes(PGconn *c, const char *max_bytes, char *keys, size_t klen)
{
	char sql[512];
	snprintf(sql, sizeof(sql), "SELECT count(*), string_agg(idempotency_key, ',' ORDER BY id)"
	    " FROM outbox.claim(protocol => 4, owner => 'test', lease_ms => 60000, max_n => 100,"
	    " include => '{t}', exclude => NULL, others => false, retries_first => false,"
	    " max_bytes => %s)", max_bytes);
	PGresult *r = PQexec(c, sql);
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	int n = atoi(PQgetvalue(r, 0, 0));
	snprintf(keys, klen, "%s", PQgetvalue(r, 0, 1));
	PQclear(r);
	return n;
}

/* A batch ends before the message that would take its payloads past the
 * claim's max_bytes (--batch-bytes), in the payload's JSON text as the
 * claim returns it; a message larger than the budget goes alone; the cut
 * goes on where the last one ended; a budget under 1 is refused and claims
 * nothing. */
START_TEST(test_claim_keeps_to_its_byte_budget)
{
	char db[TS_CONNINFO_MAX], keys[256];
	ts_db_create("streams_bytes", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	/* payloads of 10 bytes ({"x": "a"}) and one of 109 */
	ts_exec(c, "SELECT outbox.enqueue('t', 'k' || g, jsonb_build_object('x',"
	    " CASE WHEN g = 5 THEN repeat('a', 100) ELSE 'a' END))"
	    " FROM generate_series(1, 6) g");
	ck_assert_int_eq(ts_query_int(c, "SELECT octet_length(payload::text) FROM outbox.events"
	    " WHERE idempotency_key = 'k1'"), 10);
	ck_assert_int_eq(claim_bytes(c, "25", keys, sizeof(keys)), 2);
	ck_assert_str_eq(keys, "k1,k2");
	ck_assert_int_eq(claim_bytes(c, "30", keys, sizeof(keys)), 2);
	ck_assert_str_eq(keys, "k3,k4");
	ck_assert_int_eq(claim_bytes(c, "25", keys, sizeof(keys)), 1);
	ck_assert_str_eq(keys, "k5");
	/* bad budgets: an error, and nothing claimed */
	PGresult *r = PQexec(c, "SELECT * FROM outbox.claim(protocol => 4, owner => 'test',"
	    " lease_ms => 60000, max_n => 100, include => '{t}', exclude => NULL, others => false,"
	    " retries_first => false, max_bytes => 0)");
	ck_assert_str_eq(PQresultErrorField(r, PG_DIAG_SQLSTATE), "22023");
	ck_assert_ptr_nonnull(strstr(PQresultErrorMessage(r), "max_bytes must be at least 1"));
	PQclear(r);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.batches"), 3);
	/* no budget (a relay of protocol 3): all that is left */
	ck_assert_int_eq(claim_bytes(c, "NULL", keys, sizeof(keys)), 1);
	ck_assert_str_eq(keys, "k6");
	PQfinish(c);
}
END_TEST

/* One claim of every topic, up to max_n messages: how many, their keys
 * (comma separated, in order) and its `more` ("t" or "f"; "" for none). */
static int
claim_more(PGconn *c, int max_n, char *keys, size_t klen, char *more, size_t mlen)
{
	char sql[512];
	snprintf(sql, sizeof(sql), "SELECT count(*), string_agg(idempotency_key, ',' ORDER BY id),"
	    " left(bool_or(more)::text, 1) FROM outbox.claim(protocol => 5, owner => 'test',"
	    " lease_ms => 60000, max_n => %d, include => '{}', exclude => '{}', others => true,"
	    " retries_first => false)", max_n);
	PGresult *r = PQexec(c, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQresultErrorMessage(r));
	int n = atoi(PQgetvalue(r, 0, 0));
	snprintf(keys, klen, "%s", PQgetvalue(r, 0, 1));
	snprintf(more, mlen, "%s", PQgetvalue(r, 0, 2));
	PQclear(r);
	return n;
}

/* A claim says whether a claim made now would find anything (`more`,
 * relay protocol 5): yes while its window has messages past the cut, while
 * another stream has work, or when a stream had no row yet (made by the
 * claim, as an empty claim's discovery would); no when it took everything.
 * A relay that announced its wait waits on a no instead of claiming again
 * (an empty claim per wakeup at a steady rate). */
START_TEST(test_claim_says_whether_more_is_claimable)
{
	char db[TS_CONNINFO_MAX], keys[256], more[8];
	ts_db_create("streams_more", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	/* one window: the rest of it, then nothing */
	ts_exec(c, "SELECT outbox.enqueue('t', 'k' || g, '{}') FROM generate_series(1, 3) g");
	ck_assert_int_eq(claim_more(c, 2, keys, sizeof(keys), more, sizeof(more)), 2);
	ck_assert_str_eq(keys, "k1,k2");
	ck_assert_str_eq(more, "t");
	ck_assert_int_eq(claim_more(c, 10, keys, sizeof(keys), more, sizeof(more)), 1);
	ck_assert_str_eq(keys, "k3");
	ck_assert_str_eq(more, "f");
	ck_assert_int_eq(claim_more(c, 10, keys, sizeof(keys), more, sizeof(more)), 0);
	/* a stream with no row yet beside one with work */
	ts_exec(c, "SELECT outbox.enqueue('t', 'k4', '{}')");
	ts_exec(c, "SELECT outbox.enqueue('u', 'u1', '{}')");
	ck_assert_int_eq(claim_more(c, 10, keys, sizeof(keys), more, sizeof(more)), 1);
	ck_assert_str_eq(keys, "k4");
	ck_assert_str_eq(more, "t");
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.streams WHERE topic = 'u'"),
	    1);
	ck_assert_int_eq(claim_more(c, 10, keys, sizeof(keys), more, sizeof(more)), 1);
	ck_assert_str_eq(keys, "u1");
	ck_assert_str_eq(more, "f");
	/* two known streams with work: the first says so of the second */
	ts_exec(c, "SELECT outbox.enqueue('t', 'k5', '{}')");
	ts_exec(c, "SELECT outbox.enqueue('u', 'u2', '{}')");
	ck_assert_int_eq(claim_more(c, 10, keys, sizeof(keys), more, sizeof(more)), 1);
	ck_assert_str_eq(more, "t");
	ck_assert_int_eq(claim_more(c, 10, keys, sizeof(keys), more, sizeof(more)), 1);
	ck_assert_str_eq(more, "f");
	ck_assert_int_eq(claim_more(c, 10, keys, sizeof(keys), more, sizeof(more)), 0);
	PQfinish(c);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("streams");
	TCase *tc = tcase_create("streams");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_stream_reads_a_late_commit);
	tcase_add_test(tc, test_slot_switch_keeps_keys_unique);
	tcase_add_test(tc, test_switch_waits_for_an_enqueue_between_look_and_insert);
	tcase_add_test(tc, test_truncate_waits_for_a_holder);
	tcase_add_test(tc, test_undiscovered_stream_is_kept);
	tcase_add_test(tc, test_enqueue_wakes_one_waiter);
	tcase_add_test(tc, test_poison_message_ends_dead_alone);
	tcase_add_test(tc, test_restore_into_a_younger_cluster);
	tcase_add_test(tc, test_restore_keeps_an_open_first_cut);
	tcase_add_test(tc, test_restore_leaves_a_new_stream_alone);
	tcase_add_test(tc, test_restore_keeps_key_order);
	tcase_add_test(tc, test_own_message_is_no_restore);
	tcase_add_test(tc, test_claim_keeps_to_its_byte_budget);
	tcase_add_test(tc, test_claim_says_whether_more_is_claimable);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
