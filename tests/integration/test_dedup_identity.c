/*
 * test_dedup_identity.c - the consumer's dedup identity is (topic,
 * idempotency_key), the same as outbox.enqueue's uniqueness (issue 15,
 * item 2; sql/inbox/005_dedup_topic_key.sql, consumer protocol 2).
 *
 * One key on two topics through the real relay and consumer: first with
 * the old identity put back (a unique index on the key alone, what
 * inbox/001 made the primary key): the second message is dead-lettered, one
 * effect; then for real: both applied once, nothing dead. A redelivery of
 * one (topic, key) is still a duplicate, on both apply paths; a handler's
 * detail is stored in its own record, and the purge forgets a record by
 * its row, not by its key. Migration 005 on a table
 * that has records keeps them and goes on deduplicating them, built in
 * place or from an index built by hand beforehand (CONCURRENTLY). A
 * consumer of protocol 1 is refused by the new schema, the new consumer by
 * the old schema, each with one line.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>

#include "outbox/err.h"
#include "outbox/migrate.h"
#include "outbox/protocol.h"
#include "outbox/wire.h"
#include "testsupport.h"
#include "ts_consumer.h"
#include "ts_relay.h"
#include "webhook_target.h"

#define T_SEC 1000
#define INBOX_BEFORE_IDENTITY 4 /* the last inbox migration before 005 */

struct two_topics {
	int64_t delivered, dead, effects, records;
	char last_error[512];
};

/* enqueue('topic.a', 'k') and enqueue('topic.b', 'k'), the same payload,
 * delivered by a relay to a consumer until neither is pending. key_alone:
 * the consumer's old identity, the key alone, put back as a unique index. */
static void
two_topics_one_key(bool key_alone, struct two_topics *out)
{
	char db[TS_CONNINFO_MAX], url[256], route[300], clog[256], rlog[256];
	ts_db_create(key_alone ? "ident_key" : "ident", "all", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	if (key_alone)
		ts_exec(conn, "CREATE UNIQUE INDEX processed_key_alone"
		    " ON inbox.processed (idempotency_key)");
	int64_t a = ts_query_int(conn, "SELECT outbox.enqueue('topic.a', 'k', '{\"n\":1}')");
	int64_t b = ts_query_int(conn, "SELECT outbox.enqueue('topic.b', 'k', '{\"n\":1}')");
	ck_assert_int_ne(a, b); /* two messages at the producer */

	ts_ipc_url(key_alone ? "identk" : "ident", url, sizeof(url));
	snprintf(route, sizeof(route), "*=%s", url);
	const char *relay_extra[] = { "--poll-ms", "100", NULL };
	pid_t cpid = ts_consumer_spawn(clog, db, url, NULL);
	pid_t rpid = ts_relay_spawn(rlog, db, route, relay_extra);
	int64_t done = ts_wait_value(conn, "SELECT count(*) FROM outbox.messages"
	    " WHERE status IN ('delivered', 'dead')", 2, 60 * T_SEC);
	ts_stop(rpid, SIGTERM);
	ts_stop(cpid, SIGTERM);
	ck_assert_msg(done == 2, "%lld of 2 messages settled (logs %s, %s)", (long long)done, clog,
	    rlog);

	out->delivered = ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'");
	out->dead = ts_query_int(conn, "SELECT count(*) FROM outbox.messages WHERE status = 'dead'");
	out->effects = ts_query_int(conn,
	    "SELECT count(*) FROM inbox.notifications WHERE idempotency_key = 'k'");
	out->records = ts_query_int(conn,
	    "SELECT count(*) FROM inbox.processed WHERE idempotency_key = 'k'");
	out->last_error[0] = '\0';
	PGresult *r = PQexec(conn, "SELECT topic || ': ' || coalesce(last_error, '')"
	    " FROM outbox.messages WHERE status = 'dead'");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	if (PQntuples(r) > 0)
		snprintf(out->last_error, sizeof(out->last_error), "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	if (!key_alone) {
		/* one effect and one record per topic, each the message sent */
		ck_assert_int_eq(ts_query_int(conn,
		    "SELECT count(*) FROM outbox.messages m JOIN inbox.notifications n"
		    "  ON n.topic = m.topic AND n.idempotency_key = m.idempotency_key"
		    " AND n.message_id = m.id AND n.payload = m.payload"), 2);
		ck_assert_int_eq(ts_query_int(conn,
		    "SELECT count(DISTINCT topic) FROM inbox.processed WHERE idempotency_key = 'k'"),
		    2);
	}
	PQfinish(conn);
}

START_TEST(test_one_key_two_topics_end_to_end)
{
	struct two_topics t;
	/* The old identity: the second topic's message is a reused key. */
	two_topics_one_key(true, &t);
	ck_assert_int_eq(t.dead, 1);
	ck_assert_int_eq(t.delivered, 1);
	ck_assert_int_eq(t.effects, 1);
	ck_assert_int_eq(t.records, 1);
	ck_assert_msg(strstr(t.last_error, "processed_key_alone") != NULL, "%s", t.last_error);
	/* (topic, key): both applied, exactly once each, nothing dead. */
	two_topics_one_key(false, &t);
	ck_assert_msg(t.dead == 0, "dead: %s", t.last_error);
	ck_assert_int_eq(t.delivered, 2);
	ck_assert_int_eq(t.effects, 2);
	ck_assert_int_eq(t.records, 2);
}
END_TEST

/* The statuses of a batch, checked against want. */
static void
call_expect(struct ts_consumer_conn *c, const struct ob_wire_msg *msgs, uint32_t n,
    const int *want, const char *what)
{
	struct ts_consumer_reply r;
	ts_consumer_call(c, msgs, n, &r);
	for (uint32_t i = 0; i < n; i++)
		ck_assert_msg(r.rep.results[i].status == want[i], "%s, message %u: status %d (%.*s)",
		    what, i, r.rep.results[i].status, (int)r.rep.results[i].detail_len,
		    r.rep.results[i].detail);
	ts_consumer_reply_fini(&r);
}

START_TEST(test_redelivery_of_topic_and_key)
{
	char db[TS_CONNINFO_MAX], url[256], log[256], detail[512];
	ts_db_create("ident_redeliver", "inbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	/* For the purge: key 'p' of topic 'x' is 8 days old, of topic 'y' new. */
	ts_exec(conn, "INSERT INTO inbox.processed (idempotency_key, topic, message_id, fence,"
	    " processed_at) VALUES ('p', 'x', 1, 1, now() - interval '8 days'),"
	    " ('p', 'y', 2, 1, now())");
	ts_ipc_url("identr", url, sizeof(url));
	const char *extra[] = { "--purge-interval", "200ms", "--dedup-retention", "1h", NULL };
	pid_t pid = ts_consumer_spawn(log, db, url, extra);
	struct ts_consumer_conn c;
	ts_consumer_open(&c, url);

	/* One key on two topics in one batch (the set path): two messages. */
	struct ob_wire_msg both[2] = {
		ts_consumer_msg(1, "a", "k", "{\"n\":1}"),
		ts_consumer_msg(2, "b", "k", "{\"n\":1}"),
	};
	const int applied2[2] = { OB_WIRE_APPLIED, OB_WIRE_APPLIED };
	const int dup2[2] = { OB_WIRE_DUPLICATE, OB_WIRE_DUPLICATE };
	call_expect(&c, both, 2, applied2, "two topics");
	/* Redelivered, together and alone: each a duplicate of itself. */
	call_expect(&c, both, 2, dup2, "two topics again");
	ck_assert_int_eq(ts_consumer_call1(&c, both[1], detail, sizeof(detail)), OB_WIRE_DUPLICATE);
	ck_assert_msg(strstr(detail, "already applied at ") != NULL, "%s", detail);
	/* Another payload under (a, k): still the reused-key case. */
	ck_assert_int_eq(ts_consumer_call1(&c, ts_consumer_msg(3, "a", "k", "{\"n\":2}"), detail,
	    sizeof(detail)), OB_WIRE_REJECT);
	ck_assert_str_eq(detail, "idempotency key reused with a different payload");
	/* A third topic with that payload is a third message. */
	ck_assert_int_eq(ts_consumer_call1(&c, ts_consumer_msg(4, "c", "k", "{\"n\":2}"), NULL, 0),
	    OB_WIRE_APPLIED);

	/* A (topic, key) twice in one batch: the per-message path decides. */
	struct ob_wire_msg twice[3] = {
		ts_consumer_msg(5, "a", "k2", "{}"),
		ts_consumer_msg(6, "b", "k2", "{}"),
		ts_consumer_msg(7, "a", "k2", "{}"),
	};
	const int want_twice[3] = { OB_WIRE_APPLIED, OB_WIRE_APPLIED, OB_WIRE_DUPLICATE };
	call_expect(&c, twice, 3, want_twice, "a pair twice");
	const int dup3[3] = { OB_WIRE_DUPLICATE, OB_WIRE_DUPLICATE, OB_WIRE_DUPLICATE };
	call_expect(&c, twice, 3, dup3, "a pair twice, again");

	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.notifications"), 5);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM (SELECT 1 FROM inbox.notifications"
	    " GROUP BY topic, idempotency_key HAVING count(*) > 1) x"), 0);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM inbox.processed WHERE idempotency_key IN ('k', 'k2')"), 5);

	/* The purge forgot (x, p), and kept (y, p), the same key. */
	ck_assert_int_eq(ts_wait_value(conn,
	    "SELECT count(*) FROM inbox.processed WHERE idempotency_key = 'p'", 1, 30 * T_SEC), 1);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM inbox.processed WHERE idempotency_key = 'p' AND topic = 'y'"), 1);
	ts_consumer_close(&c);
	ts_stop(pid, SIGTERM);
	PQfinish(conn);
}
END_TEST

/* A handler's detail is stored in the record of its (topic, key) only: the
 * webhook handler's ("downstream answered 201"), next to a record of the
 * same key on another topic, which keeps its own. */
START_TEST(test_detail_stored_per_topic_and_key)
{
	char db[TS_CONNINFO_MAX], url[256], hook[256], log[256], detail[512];
	ts_db_create("ident_detail", "inbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	ts_exec(conn, "INSERT INTO inbox.processed (idempotency_key, topic, message_id, fence,"
	    " detail) VALUES ('wk', 'other', 1, 1, 'its own')");
	struct wt_target *target = wt_start(hook, sizeof(hook));
	ck_assert_ptr_nonnull(target);
	ts_ipc_url("identd", url, sizeof(url));
	const char *extra[] = { "--handler", "webhook", "--webhook-url", hook, NULL };
	pid_t pid = ts_consumer_spawn(log, db, url, extra);
	struct ts_consumer_conn c;
	ts_consumer_open(&c, url);
	struct ob_wire_msg m = ts_consumer_msg(2, "a", "wk", "{}");
	ck_assert_int_eq(ts_consumer_call1(&c, m, detail, sizeof(detail)), OB_WIRE_APPLIED);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.processed"
	    " WHERE idempotency_key = 'wk' AND topic = 'a' AND detail LIKE '%201%'"), 1);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.processed"
	    " WHERE idempotency_key = 'wk' AND topic = 'other' AND detail = 'its own'"), 1);
	/* redelivered: answered from the handler's claim, no second call */
	ck_assert_int_eq(ts_consumer_call1(&c, m, detail, sizeof(detail)), OB_WIRE_DUPLICATE);
	ck_assert_msg(strstr(detail, "201") != NULL, "%s", detail);
	ck_assert_int_eq(wt_requests(target, "wk"), 1);
	ts_consumer_close(&c);
	ts_stop(pid, SIGTERM);
	wt_stop(target);
	PQfinish(conn);
}
END_TEST

/* Records as consumer protocol 1 wrote them: 'k1' with its fingerprint,
 * 'k2' from before inbox/002 (no fingerprint), and a history of records of
 * topic 'h' and payload {}. */
#define HISTORY_ROWS 5000
static void
fill_protocol1_records(PGconn *conn)
{
	char sql[512];
	ts_exec(conn, "INSERT INTO inbox.processed (idempotency_key, topic, message_id, fence,"
	    " fingerprint) VALUES ('k1', 't', 1, 1, encode(sha256(convert_to('t', 'UTF8')"
	    " || '\\x00'::bytea || convert_to('{\"a\":1}', 'UTF8')), 'hex')),"
	    " ('k2', 't', 2, 1, NULL)");
	snprintf(sql, sizeof(sql), "INSERT INTO inbox.processed (idempotency_key, topic,"
	    " message_id, fence, fingerprint) SELECT 'h-' || g, 'h', g, 1,"
	    " encode(sha256(convert_to('h', 'UTF8') || '\\x00'::bytea || convert_to('{}', 'UTF8')),"
	    " 'hex') FROM generate_series(1, %d) g", HISTORY_ROWS);
	ts_exec(conn, sql);
	ts_exec(conn, "INSERT INTO inbox.notifications (idempotency_key, topic, payload,"
	    " message_id) VALUES ('k1', 't', '{\"a\":1}', 1), ('k2', 't', '{\"a\":1}', 2)");
}

enum prebuilt { PREBUILT_NONE, PREBUILT_CONCURRENTLY, PREBUILT_WRONG };

static void
migrate_with_records(enum prebuilt prebuilt)
{
	static const char *const tags[] = { "ident_mig", "ident_migcc", "ident_migwrong" };
	char db[TS_CONNINFO_MAX], url[256], log[256], err[1024];
	ts_db_create_at(tags[prebuilt], "inbox", INBOX_BEFORE_IDENTITY, db, sizeof(db));
	PGconn *conn = ts_connect(db);
	fill_protocol1_records(conn);
	int64_t index_oid = 0;
	if (prebuilt == PREBUILT_CONCURRENTLY) {
		/* what the migration's comment tells an operator of a big table */
		ts_exec(conn, "CREATE UNIQUE INDEX CONCURRENTLY processed_key_topic"
		    " ON inbox.processed (idempotency_key, topic)");
		index_oid = ts_query_int(conn, "SELECT 'inbox.processed_key_topic'::regclass::oid");
	} else if (prebuilt == PREBUILT_WRONG) {
		/* the name, another definition: not taken for the primary key */
		ts_exec(conn, "CREATE UNIQUE INDEX processed_key_topic"
		    " ON inbox.processed (topic, idempotency_key)");
	}

	struct ob_migrate_report rep;
	ck_assert_msg(ob_migrate(conn, &(struct ob_migrate_opts){ .set = "inbox" }, &rep, err, sizeof(err)) == OB_OK, "migrate: %s",
	    err);
	/* 005 and those after it (006 and 007 change nothing of
	 * inbox.processed; 008 adds its source, test_source_identity) */
	ck_assert_int_eq(rep.migrations, TS_INBOX_LATEST - INBOX_BEFORE_IDENTITY);
	/* Every record kept, with its topic. */
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.processed"),
	    HISTORY_ROWS + 2);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.processed"
	    " WHERE topic = 'h' AND idempotency_key LIKE 'h-%'"), HISTORY_ROWS);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT (pg_get_indexdef('inbox.processed_pkey'::regclass)"
	    " LIKE '%UNIQUE INDEX processed_pkey ON inbox.processed USING btree"
	    " (idempotency_key, topic, source)')::int"), 1);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM pg_class WHERE relname = 'processed_key_topic'"), 0);
	/* 005 took the index built beforehand over, and 008 (source) then
	 * swapped the key again: its own takeover is test_source_identity's */
	(void)index_oid;
	ck_assert_int_eq(ts_query_int(conn, "SELECT min_version * 10 + max_version"
	    " FROM inbox.protocols WHERE component = 'consumer'"), 35); /* 3..5 since 010 */

	/* The migrated records go on deduplicating. */
	ts_ipc_url(tags[prebuilt], url, sizeof(url));
	pid_t pid = ts_consumer_spawn(log, db, url, NULL);
	struct ts_consumer_conn c;
	ts_consumer_open(&c, url);
	ck_assert_int_eq(ts_consumer_call1(&c, ts_consumer_msg(1, "t", "k1", "{\"a\":1}"), NULL, 0),
	    OB_WIRE_DUPLICATE);
	ck_assert_int_eq(ts_consumer_call1(&c, ts_consumer_msg(1, "t", "k1", "{\"a\":2}"), NULL, 0),
	    OB_WIRE_REJECT);
	/* no fingerprint (before inbox/002): treated as matching, as before */
	ck_assert_int_eq(ts_consumer_call1(&c, ts_consumer_msg(2, "t", "k2", "{\"a\":1}"), NULL, 0),
	    OB_WIRE_DUPLICATE);
	struct ob_wire_msg batch[4] = {
		ts_consumer_msg(3, "h", "h-7", "{}"),         /* a record of the history */
		ts_consumer_msg(4, "h", "h-8", "{\"x\":1}"),  /* ... with another payload */
		ts_consumer_msg(5, "u", "k1", "{\"a\":1}"),   /* k1 of another topic: new */
		ts_consumer_msg(6, "t", "k3", "{}"),          /* new */
	};
	struct ts_consumer_reply r;
	ts_consumer_call(&c, batch, 4, &r);
	const int want[4] = { OB_WIRE_DUPLICATE, OB_WIRE_REJECT, OB_WIRE_APPLIED,
		OB_WIRE_APPLIED };
	for (int i = 0; i < 4; i++)
		ck_assert_msg(r.rep.results[i].status == want[i], "message %d: status %d (%.*s)", i,
		    r.rep.results[i].status, (int)r.rep.results[i].detail_len,
		    r.rep.results[i].detail);
	ts_consumer_reply_fini(&r);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.notifications"), 4);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM inbox.notifications WHERE idempotency_key = 'k1'"), 2);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.processed"),
	    HISTORY_ROWS + 4);
	ts_consumer_close(&c);
	ts_stop(pid, SIGTERM);
	PQfinish(conn);
}

START_TEST(test_migration_keeps_records)
{
	migrate_with_records(PREBUILT_NONE);
}
END_TEST

START_TEST(test_migration_takes_an_index_built_beforehand)
{
	migrate_with_records(PREBUILT_CONCURRENTLY);
	migrate_with_records(PREBUILT_WRONG);
}
END_TEST

/* Exactly one line of output. */
static bool
one_line(const char *s)
{
	const char *nl = strchr(s, '\n');
	return nl != NULL && nl[1] == '\0';
}

START_TEST(test_protocol_refusals)
{
	char db[TS_CONNINFO_MAX], url[256], out[4096], err[512];
	/* This consumer (protocol 5) against a schema of before 005. */
	ts_db_create_at("ident_old", "inbox", INBOX_BEFORE_IDENTITY, db, sizeof(db));
	ts_ipc_url("identold", url, sizeof(url));
	char *consumer[] = { "outbox-consumer", "--db", db, "--listen", url, NULL };
	ck_assert_int_eq(ts_run(consumer, NULL, out, sizeof(out), 30 * T_SEC), 2);
	ck_assert_msg(strstr(out, "inbox schema serves consumer protocol 1..1, this program"
	    " speaks 5: run outboxctl migrate") != NULL, "%s", out);
	ck_assert_msg(one_line(out), "%s", out);

	/* A consumer of protocol 1 (identity: the key alone) against 005: it
	 * asks the schema what a released consumer 1 asks. */
	ts_db_create("ident_new", "inbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	ck_assert_int_eq(ob_protocol_check(conn, "inbox", "consumer", 1, err, sizeof(err)),
	    OB_EPROTO);
	ck_assert_str_eq(err, "inbox schema serves consumer protocol 3..5, this program speaks 1:"
	    " upgrade the program");
	ck_assert_int_eq(ob_protocol_check(conn, "inbox", "consumer", 2, err, sizeof(err)),
	    OB_EPROTO);
	ck_assert_str_eq(err, "inbox schema serves consumer protocol 3..5, this program speaks 2:"
	    " upgrade the program");
	/* protocol 3 (no source gate) still runs: the gate only matters while
	 * relays of the empty source and named ones overlap (009); protocol 4
	 * (its own statements, the same records) too (010) */
	ck_assert_int_eq(ob_protocol_check(conn, "inbox", "consumer", 3, err, sizeof(err)),
	    OB_OK);
	ck_assert_int_eq(ob_protocol_check(conn, "inbox", "consumer", 4, err, sizeof(err)),
	    OB_OK);
	ck_assert_int_eq(ob_protocol_check(conn, "inbox", "consumer", OB_PROTOCOL_CONSUMER, err,
	    sizeof(err)), OB_OK);
	PQfinish(conn);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("dedup_identity");
	TCase *tc = tcase_create("identity");
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, test_one_key_two_topics_end_to_end);
	tcase_add_test(tc, test_redelivery_of_topic_and_key);
	tcase_add_test(tc, test_detail_stored_per_topic_and_key);
	tcase_add_test(tc, test_migration_keeps_records);
	tcase_add_test(tc, test_migration_takes_an_index_built_beforehand);
	tcase_add_test(tc, test_protocol_refusals);
	suite_add_tcase(s, tc);
	int rc = ts_run_suite(s);
	nng_fini();
	return rc;
}
