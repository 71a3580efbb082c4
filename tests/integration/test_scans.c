/*
 * test_scans.c - the hot paths stay index lookups when the tables are big.
 * A relay and a consumer drain messages into a database that already holds
 * many delivered records and dedup records, and a producer serves requests
 * over many stored keys and reports; PostgreSQL's own statistics
 * (pg_stat_user_tables.seq_scan) must show that no statement of theirs read
 * a whole table. A plan that scans would make every batch cost O(table),
 * which no short functional test notices (it was found by a profile: the
 * dedup lookup compared a "C"-collated key with the "default"-collated
 * primary key and scanned inbox.processed on every request).
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <jansson.h>
#include <nng/nng.h>

#include "outbox/buf.h"
#include "outbox/wire.h"
#include "testsupport.h"
#include "ts_consumer.h"
#include "ts_relay.h"
#include "ts_producer.h"

#define OLD_ROWS 50000  /* history already in the tables */
#define NEW_MESSAGES 1000
#define REUSED_KEYS 100 /* of the new messages, keys the consumer has seen */
#define ORDERED 200     /* of the new messages, with an ordering key */
#define PRODUCER_REQUESTS 100 /* creates, each replayed and looked up */

#define STR_(x) #x
#define STR(x) STR_(x)
#define HISTORY " FROM generate_series(1, " STR(OLD_ROWS) ") g"

/* Delivered messages from before the test, in every database it makes:
 * history (lane -1, as sql/outbox/012 carries delivered rows over) in the
 * current slot, which the relay's stream reads share. */
static const char old_messages_sql[] =
    "INSERT INTO outbox.events (slot, id, txid, lane, topic, idempotency_key, payload)"
    " SELECT 0, nextval('outbox.event_ids'), pg_current_xact_id(), -1, 'old', 'old-' || g,"
    " '{}'" HISTORY;
/* The partition holding them: the one a scan would read. */
#define EVENTS_SLOT "outbox.events_0"

static int64_t
table_stat(PGconn *conn, const char *column, const char *table)
{
	char sql[256];
	snprintf(sql, sizeof(sql),
	    "SELECT coalesce(%s, 0) FROM pg_stat_user_tables WHERE relid = '%s'::regclass",
	    column, table);
	return ts_query_int(conn, sql);
}

/* Sequential scans of some tables, counted from scan_watch_start on. */
struct scan_watch {
	const char *const *tables;
	size_t n;
	int64_t before[4];
};

static void
scan_watch_start(PGconn *conn, struct scan_watch *w)
{
	/* Every other backend of this database gone first (ts_db_create's
	 * migration flushed its counts, its index builds being counted scans,
	 * before it closed), then this session's own counts flushed, so that
	 * what follows is counted alone. */
	ck_assert_int_eq(ts_wait_value(conn, "SELECT count(*) FROM pg_stat_activity"
	    " WHERE datname = current_database() AND pid <> pg_backend_pid()", 0, 30000), 0);
	ts_stats_flush(conn);
	ck_assert(w->n <= sizeof(w->before) / sizeof(w->before[0]));
	for (size_t t = 0; t < w->n; t++)
		w->before[t] = table_stat(conn, "seq_scan", w->tables[t]);
}

/* A backend's statistics reach the shared counters when it exits: wait
 * until inserted_table counts min_inserted inserts (the programs under test
 * have exited and been counted), then assert no table was scanned. */
static void
scan_watch_check(PGconn *conn, const struct scan_watch *w, const char *inserted_table,
    int64_t min_inserted, const char *during)
{
	char sql[256];
	snprintf(sql, sizeof(sql),
	    "SELECT (n_tup_ins >= %lld)::int FROM pg_stat_user_tables"
	    " WHERE relid = '%s'::regclass", (long long)min_inserted, inserted_table);
	ck_assert_int_eq(ts_wait_value(conn, sql, 1, 30000), 1);
	for (size_t t = 0; t < w->n; t++) {
		int64_t scans = table_stat(conn, "seq_scan", w->tables[t]) - w->before[t];
		ck_assert_msg(scans == 0, "%lld sequential scans of %s during %s",
		    (long long)scans, w->tables[t], during);
	}
}

/* What autovacuum does in time, done before the count starts: its VACUUM
 * summarises the BRIN ranges of inbox.processed's processed_at, and each
 * range summarised is a heap scan that pg_stat_user_tables counts as a
 * sequential scan (5 for this history: a run under load once saw exactly
 * that, autovacuum having come late, inside the watch). */
static void
settle(PGconn *conn)
{
	ts_exec(conn, "VACUUM (ANALYZE)");
}

static void
fill_history(PGconn *conn)
{
	ts_exec(conn, old_messages_sql);
	/* The dedup records are of topic 'new': the new messages that reuse
	 * their keys (enqueue_new) find them by (topic, key). */
	ts_exec(conn, "INSERT INTO inbox.processed (idempotency_key, topic, message_id, fence,"
	    " fingerprint) SELECT 'old-' || g, 'new', g, 1, md5(g::text)" HISTORY);
	ts_exec(conn, "INSERT INTO inbox.notifications (idempotency_key, topic, payload,"
	    " message_id) SELECT 'old-' || g, 'old', '{}', g" HISTORY);
	settle(conn);
}

static void
enqueue_new(PGconn *conn)
{
	char sql[512];
	/* Keys old-1..old-REUSED_KEYS come back on topic 'new' with another
	 * payload: the consumer finds their dedup records by (topic, key)
	 * (fingerprint mismatch, dead-lettered). */
	snprintf(sql, sizeof(sql),
	    "SELECT count(outbox.enqueue('new', CASE WHEN g <= %d THEN 'old-' || g"
	    " ELSE 'new-' || g END, jsonb_build_object('n', g),"
	    " CASE WHEN g > %d - %d THEN 'key-' || (g %% 20) END))"
	    " FROM generate_series(1, %d) g",
	    REUSED_KEYS, NEW_MESSAGES, ORDERED, NEW_MESSAGES);
	ck_assert_int_eq(ts_query_int(conn, sql), NEW_MESSAGES);
}

START_TEST(test_drain_never_scans_a_big_table)
{
	char db[TS_CONNINFO_MAX], url[256], route[300];
	ts_db_create("scans", "all", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	fill_history(conn);
	enqueue_new(conn);

	static const char *const tables[] = { EVENTS_SLOT, "inbox.processed",
		"inbox.notifications" };
	struct scan_watch watch = { tables, 3, { 0 } };
	scan_watch_start(conn, &watch);
	int64_t inserted_before = table_stat(conn, "n_tup_ins", "inbox.notifications");

	ts_ipc_url("consumer", url, sizeof(url));
	snprintf(route, sizeof(route), "*=%s", url);
	/* Big batches: the larger the batch, the likelier a planner that
	 * misjudges the pending rows prefers a scan to as many lookups. */
	const char *relay_extra[] = { "--workers", "1", "--batch", "1000", "--poll-ms", "100",
		NULL };
	pid_t cpid = ts_consumer_spawn(NULL, db, url, NULL);
	pid_t rpid = ts_relay_spawn(NULL, db, route, relay_extra);
	/* Nothing left to deliver (a few index probes per stream). This query
	 * must not scan either: this session's counts are flushed too. */
	int64_t empty = ts_wait_value(conn, "SELECT outbox.backlog_empty()::int", 1, 60000);
	ts_stop(rpid, SIGTERM);
	ts_stop(cpid, SIGTERM);
	ck_assert_int_eq(empty, 1);

	scan_watch_check(conn, &watch, "inbox.notifications",
	    inserted_before + NEW_MESSAGES - REUSED_KEYS, "the drain");
	/* What the drain did: new keys applied, reused keys refused. */
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM inbox.notifications WHERE topic = 'new'"),
	    NEW_MESSAGES - REUSED_KEYS);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE topic = 'new' AND status = 'dead'"
	    " AND last_error LIKE '%different payload%'"), REUSED_KEYS);
	PQfinish(conn);
}
END_TEST

/* The per-message path's dedup upsert of a named source, which looks for
 * the record of source '' first (the legacy identity, consumer/inbox.c
 * sql_dedup): over many records of '' it probes the primary key. A key
 * twice in one batch takes that path (the set statement cannot decide it):
 * a key of the history with another payload (reused: rejected from its ''
 * record) and a new one (applied, then duplicate). */
START_TEST(test_per_message_dedup_never_scans)
{
	char db[TS_CONNINFO_MAX], url[256];
	ts_db_create("scans_each", "inbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	ts_exec(conn, "INSERT INTO inbox.processed (idempotency_key, topic, message_id, fence,"
	    " fingerprint) SELECT 'old-' || g, 'new', g, 1, md5(g::text)" HISTORY);
	settle(conn);
	static const char *const tables[] = { "inbox.processed" };
	struct scan_watch watch = { tables, 1, { 0 } };
	scan_watch_start(conn, &watch);
	int64_t inserted_before = table_stat(conn, "n_tup_ins", "inbox.notifications");

	ts_ipc_url("consumer_each", url, sizeof(url));
	pid_t cpid = ts_consumer_spawn(NULL, db, url, NULL);
	struct ts_consumer_conn c;
	ts_consumer_open(&c, url);
	static const struct { const char *key; int status; } cases[] = {
		{ "old-7", OB_WIRE_REJECT }, { "fresh-1", OB_WIRE_APPLIED },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ob_wire_msg m[2];
		for (int k = 0; k < 2; k++) {
			m[k] = ts_consumer_msg((uint64_t)(k + 1), "new", cases[i].key, "{\"n\": 1}");
			m[k].source = "shop-b";
			m[k].source_len = 6;
		}
		struct ts_consumer_reply r;
		ts_consumer_call(&c, m, 2, &r);
		ck_assert_int_eq(r.rep.results[0].status, cases[i].status);
		ck_assert_int_eq(r.rep.results[1].status,
		    cases[i].status == OB_WIRE_APPLIED ? OB_WIRE_DUPLICATE : cases[i].status);
		ts_consumer_reply_fini(&r);
	}
	ts_consumer_close(&c);
	ts_stop(cpid, SIGTERM);
	scan_watch_check(conn, &watch, "inbox.notifications", inserted_before + 1,
	    "the per-message path");
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM inbox.processed WHERE source = 'shop-b'"), 1);
	PQfinish(conn);
}
END_TEST

/* The set path on an inbox that starts empty, its statistics saying so
 * (a fresh consumer; ANALYZE as autovacuum leaves a new table): the
 * consumer's prepared set statement is planned then and kept while the
 * table grows. Priced on an empty table, a scan is the cheapest lookup, and
 * a kept plan that scans reads the whole table for every message of every
 * frame (a 50,000-message drain took 5-9 s instead of 1.2, bench/peers).
 * Frames of fresh keys, then one frame of keys seen (answered from their
 * records), must probe the primary key only. The first and the last frame
 * hold one key twice, so they go message by message: the per-message
 * lookup (inbox.dedup_lookup, whose plan PL/pgSQL keeps for the session)
 * is planned on the empty table too, and must still probe the key when
 * the table holds the other frames' records. */
#define EMPTY_FRAMES 8
#define EMPTY_FRAME 500
START_TEST(test_set_path_from_an_empty_inbox_never_scans)
{
	char db[TS_CONNINFO_MAX], url[256];
	static char keys[EMPTY_FRAME][32];
	ts_db_create("scans_empty", "inbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	ts_exec(conn, "ANALYZE inbox.processed");
	static const char *const tables[] = { "inbox.processed" };
	struct scan_watch watch = { tables, 1, { 0 } };
	scan_watch_start(conn, &watch);

	ts_ipc_url("consumer_empty", url, sizeof(url));
	/* no purge: its scan of a small table is the planner's right choice */
	const char *extra[] = { "--purge-interval", "0", NULL };
	pid_t cpid = ts_consumer_spawn(NULL, db, url, extra);
	struct ts_consumer_conn c;
	ts_consumer_open(&c, url);
	static struct ob_wire_msg m[EMPTY_FRAME];
	/* the last round repeats the first one's keys: every one a duplicate */
	for (int f = 0; f <= EMPTY_FRAMES; f++) {
		int keyf = f < EMPTY_FRAMES ? f : 0;
		bool twice = f == 0 || f == EMPTY_FRAMES; /* the last key is the first again */
		for (int i = 0; i < EMPTY_FRAME; i++) {
			snprintf(keys[i], sizeof(keys[i]), "e-%d-%d", keyf,
			    twice && i == EMPTY_FRAME - 1 ? 0 : i);
			m[i] = ts_consumer_msg((uint64_t)(f * EMPTY_FRAME + i + 1), "new", keys[i],
			    "{\"n\": 1}");
		}
		struct ts_consumer_reply r;
		ts_consumer_call(&c, m, EMPTY_FRAME, &r);
		for (int i = 0; i < EMPTY_FRAME; i++) {
			int want = f < EMPTY_FRAMES && !(twice && i == EMPTY_FRAME - 1) ? OB_WIRE_APPLIED
			                                                              : OB_WIRE_DUPLICATE;
			ck_assert_msg(r.rep.results[i].status == want, "frame %d message %d: status %d",
			    f, i, r.rep.results[i].status);
		}
		ts_consumer_reply_fini(&r);
	}
	ts_consumer_close(&c);
	ts_stop(cpid, SIGTERM);
	scan_watch_check(conn, &watch, "inbox.notifications", EMPTY_FRAMES * EMPTY_FRAME - 1,
	    "the set path from an empty inbox");
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.processed"),
	    EMPTY_FRAMES * EMPTY_FRAME - 1);
	PQfinish(conn);
}
END_TEST

/* A database of its own with a backlog of n messages of topic (keys
 * topic-1..topic-n) enqueued in one transaction, analysed as autovacuum
 * would in time, its stream discovered; its connection returned. */
static PGconn *
one_stream_backlog(const char *name, const char *topic, int n, char *db, size_t dblen)
{
	char sql[256];
	ts_db_create(name, "outbox", db, dblen);
	PGconn *conn = ts_connect(db);
	snprintf(sql, sizeof(sql), "SELECT count(outbox.enqueue('%s', '%s-' || g, '{}'))"
	    " FROM generate_series(1, %d) g", topic, topic, n);
	ck_assert_int_eq(ts_query_int(conn, sql), n);
	ts_exec(conn, "VACUUM (ANALYZE) outbox.events");
	ts_exec(conn, "SELECT outbox.discover_streams()");
	return conn;
}

/* A backlog enqueued in one transaction (a backfill), analysed: every
 * message has the same txid, so the planner, which judges "(txid, id) >
 * (t, i)" by txid alone, expects no rows past the stream's position, and
 * would sort the whole rest of the stream to take the next batch. A claim
 * must read about a batch of messages, however long the backlog. */
#define BACKFILL 20000
#define BACKFILL_BATCH 100
START_TEST(test_claim_reads_a_batch_of_a_backfill)
{
	char db[TS_CONNINFO_MAX], sql[256];
	PGconn *conn = one_stream_backlog("scanfill", "fill", BACKFILL, db, sizeof(db));
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM outbox.claim(2, 'test', 60000, %d,"
	    " '{}', '{}', true, false)", BACKFILL_BATCH);
	/* this session's reads of the partition not yet flushed to the
	 * shared counters (they add up across transactions until then) */
	static const char reads_sql[] = "SELECT COALESCE(idx_tup_fetch, 0)"
	    " + COALESCE(seq_tup_read, 0) FROM pg_stat_xact_user_tables"
	    " WHERE relid = '" EVENTS_SLOT "'::regclass";
	for (int round = 0; round < 5; round++) {
		ts_exec(conn, "BEGIN");
		int64_t before = ts_query_int(conn, reads_sql);
		ck_assert_int_eq(ts_query_int(conn, sql), BACKFILL_BATCH);
		int64_t fetched = ts_query_int(conn, reads_sql) - before;
		ts_exec(conn, "COMMIT");
		ck_assert_msg(fetched <= 4 * BACKFILL_BATCH,
		    "claim %d of %d messages read %lld rows of %s", round, BACKFILL_BATCH,
		    (long long)fetched, EVENTS_SLOT);
	}
	PQfinish(conn);
}
END_TEST

/* A stream with a long history already cut, and a producer transaction
 * held open in it while others commit: every new window's floor then lists
 * that transaction in progress. Reading "messages of transactions in
 * progress at the floor" with "txid = ANY(xip)" in an ordered index scan
 * cannot bound the scan by the array, and a new window's read from no
 * position bounded itself by the position alone: both filtered the whole
 * history of the stream on every claim (a relay's session runs the generic
 * plans, forced here). A claim must read about what it takes; the held
 * message is delivered once its transaction commits. */
#define OPEN_HISTORY 20000
#define OPEN_ROUNDS 5
START_TEST(test_claim_with_a_transaction_held_open_reads_no_history)
{
	char db[TS_CONNINFO_MAX], sql[256];
	PGconn *conn = one_stream_backlog("scanopen", "live", OPEN_HISTORY, db, sizeof(db));
	PGconn *held = ts_connect(db);
	ts_exec(conn, "SET plan_cache_mode = force_generic_plan");
	static const char claim_sql[] = "SELECT count(*) FROM outbox.claim(2, 'test', 60000,"
	    " 1000, '{}', '{}', true, false)";
	int64_t cut = 0;
	for (int64_t got; (got = ts_query_int(conn, claim_sql)) > 0;)
		cut += got;
	ck_assert_int_eq(cut, OPEN_HISTORY);

	ts_exec(held, "BEGIN");
	ck_assert_int_gt(ts_query_int(held, "SELECT outbox.enqueue('live', 'held', '{}')"), 0);
	static const char reads_sql[] = "SELECT COALESCE(idx_tup_fetch, 0)"
	    " + COALESCE(seq_tup_read, 0) FROM pg_stat_xact_user_tables"
	    " WHERE relid = '" EVENTS_SLOT "'::regclass";
	for (int round = 0; round < OPEN_ROUNDS; round++) {
		snprintf(sql, sizeof(sql), "SELECT outbox.enqueue('live', 'n-%d', '{}')", round);
		ts_exec(conn, sql);
		ts_exec(conn, "BEGIN");
		int64_t before = ts_query_int(conn, reads_sql);
		ck_assert_int_eq(ts_query_int(conn, claim_sql), 1);
		ck_assert_int_eq(ts_query_int(conn, claim_sql), 0); /* window used up */
		int64_t fetched = ts_query_int(conn, reads_sql) - before;
		ts_exec(conn, "COMMIT");
		ck_assert_msg(fetched <= 100, "round %d: two claims of one message read %lld"
		    " rows of %s (history %d)", round, (long long)fetched, EVENTS_SLOT,
		    OPEN_HISTORY);
	}
	ts_exec(held, "COMMIT");
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.claim(2, 'test', 60000,"
	    " 1000, '{}', '{}', true, false) WHERE idempotency_key = 'held'"), 1);
	PQfinish(held);
	PQfinish(conn);
}
END_TEST

/* Plans arrive as NOTICEs (auto_explain.log_level); keep them all. */
static void
keep_notice(void *arg, const char *message)
{
	struct ob_buf *plans = arg;
	(void)ob_buf_append(plans, message, strlen(message)); /* lost text fails the test below */
}

/* The relay's claim and outcome write, planned by PostgreSQL as a relay's
 * long session plans them (generically, parameters unknown): every
 * statement inside outbox.claim and outbox.record must find the messages
 * of a stream by index, next to a big history in the same partition. Tiny
 * bookkeeping tables may be scanned; outbox.events never. */
START_TEST(test_claim_and_record_plans_use_indexes)
{
	char db[TS_CONNINFO_MAX];
	ts_db_create("scanplan", "outbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	ts_exec(conn, old_messages_sql);
	ts_exec(conn, "SELECT count(outbox.enqueue('new', 'new-' || g, '{}',"
	    " CASE WHEN g > 500 THEN 'key-' || (g % 5) END)) FROM generate_series(1, 600) g");
	ts_exec(conn, "ANALYZE");

	struct ob_buf plans;
	ob_buf_init(&plans);
	PQsetNoticeProcessor(conn, keep_notice, &plans);
	ts_exec(conn, "LOAD 'auto_explain'");
	ts_exec(conn, "SET auto_explain.log_min_duration = 0");
	ts_exec(conn, "SET auto_explain.log_nested_statements = on");
	ts_exec(conn, "SET auto_explain.log_level = notice");
	/* A relay calls them thousands of times per session: PL/pgSQL soon
	 * plans its statements once, generically. */
	ts_exec(conn, "SET plan_cache_mode = force_generic_plan");
	/* Claim and record everything, as a relay would (batches of 100; the
	 * ordered ones one per key and lane). */
	int64_t delivered = 0;
	for (int round = 0; round < 100; round++) {
		PGresult *res = PQexec(conn,
		    "SELECT batch_id, fence, count(*) FROM outbox.claim(2, 'test', 60000, 100,"
		    " '{}', '{}', true, false) GROUP BY 1, 2");
		ck_assert_int_eq(PQresultStatus(res), PGRES_TUPLES_OK);
		if (PQntuples(res) == 0) {
			PQclear(res);
			break;
		}
		char sql[256];
		snprintf(sql, sizeof(sql), "SELECT outbox.record(2, %s, %s, true, 'done', 0, false,"
		    " '{}', '{}', '{}', '{}', false)::int", PQgetvalue(res, 0, 0),
		    PQgetvalue(res, 0, 1));
		delivered += atoll(PQgetvalue(res, 0, 2));
		ck_assert_int_eq(ts_query_int(conn, sql), 1);
		PQclear(res);
	}
	ts_exec(conn, "SET auto_explain.log_min_duration = -1");
	PQsetNoticeProcessor(conn, NULL, NULL);
	ob_buf_append(&plans, "", 1);
	ck_assert_int_eq(delivered, 600);
	ck_assert_msg(strstr(plans.data, "Index Scan using events_0_topic_lane_txid_id_idx") != NULL
	    || strstr(plans.data, "Index Only Scan using events_0_topic_lane_txid_id_idx") != NULL,
	    "no stream read by index was captured");
	const char *scan = strstr(plans.data, "Seq Scan on events_0");
	if (scan != NULL)
		fprintf(stderr, "%s\n", plans.data);
	ck_assert_msg(scan == NULL, "the claim or the record scans outbox.events (plans above)");
	ck_assert_int_eq(ts_query_int(conn, "SELECT outbox.backlog_empty()::int"), 1);
	ob_buf_fini(&plans);
	PQfinish(conn);
}
END_TEST

/* The producer's requests on big key and report tables: creates, replays,
 * a key reused for another body, and the recovery lookups an agent makes.
 * None of them may scan app.idempotency_keys, app.bug_reports or
 * outbox.events. */
START_TEST(test_producer_requests_never_scan)
{
	static const char *const tables[] = { "app.idempotency_keys", "app.bug_reports",
		EVENTS_SLOT };
	char db[TS_CONNINFO_MAX], key[64], path[128];
	ts_db_create("scanprod", "outbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	ts_exec(conn, "INSERT INTO app.bug_reports (title, module, severity, idempotency_key)"
	    " SELECT 'old', 'editor', 'low', 'old-' || g" HISTORY);
	ts_exec(conn, old_messages_sql);
	ts_exec(conn, "INSERT INTO app.idempotency_keys (idempotency_key, fingerprint, state,"
	    " fence, lease_until, response_status, response_body)"
	    " SELECT 'old-' || g, md5(g::text), 'done', 1, now(), 201, '{}'" HISTORY);
	settle(conn);
	struct scan_watch watch = { tables, 3, { 0 } };
	scan_watch_start(conn, &watch);

	struct ts_producer_server srv;
	ts_producer_serve(db, NULL, &srv);
	struct ts_producer_reply r;
	for (int i = 0; i < PRODUCER_REQUESTS; i++) {
		snprintf(key, sizeof(key), "scan-%d", i);
		ts_producer_post(srv.url, key, TS_PRODUCER_BODY, &r);
		ck_assert_msg(r.rv == 0 && r.status == 201, "create %s: rv %d status %d %s", key,
		    r.rv, r.status, r.body);
		ts_producer_post(srv.url, key, TS_PRODUCER_BODY, &r); /* the retry of a lost answer */
		ck_assert_msg(r.status == 201 && r.replayed, "replay %s: %d %s", key, r.status,
		    r.body);
		snprintf(path, sizeof(path), "/v1/reports?idempotency_key=%s", key);
		ts_producer_http(srv.url, "GET", path, NULL, NULL, 0, &r);
		ck_assert_msg(r.status == 200, "lookup %s: %d %s", key, r.status, r.body);
	}
	ts_producer_post(srv.url, "old-7", TS_PRODUCER_BODY, &r); /* an old key, another body */
	ck_assert_msg(r.status == 422, "reused key: %d %s", r.status, r.body);
	ts_producer_http(srv.url, "GET", "/v1/reports?idempotency_key=old-9", NULL, NULL, 0, &r);
	ck_assert_msg(r.status == 200, "old lookup: %d %s", r.status, r.body);
	ts_stop(srv.pid, SIGTERM);

	scan_watch_check(conn, &watch, "app.bug_reports", OLD_ROWS + PRODUCER_REQUESTS,
	    "the requests");
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM app.bug_reports WHERE idempotency_key LIKE 'scan-%'"),
	    PRODUCER_REQUESTS);
	PQfinish(conn);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("scans");
	TCase *tc = tcase_create("drain");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_drain_never_scans_a_big_table);
	tcase_add_test(tc, test_per_message_dedup_never_scans);
	tcase_add_test(tc, test_set_path_from_an_empty_inbox_never_scans);
	tcase_add_test(tc, test_claim_and_record_plans_use_indexes);
	tcase_add_test(tc, test_claim_reads_a_batch_of_a_backfill);
	tcase_add_test(tc, test_claim_with_a_transaction_held_open_reads_no_history);
	tcase_add_test(tc, test_producer_requests_never_scan);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
