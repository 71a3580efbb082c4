/*
 * test_consumer_dedup.c - the consumer's idempotency contract against a
 * running outbox-consumer, a real PostgreSQL and real nng REQ sockets:
 * fingerprints (duplicate vs. reused key), an explicit interleaving of two
 * consumers applying one key (broken mode first, then the real one), batch
 * apply with per-message failures and a failing COMMIT, retention, and
 * several consumers on one database.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>

#include "outbox/buf.h"
#include "outbox/err.h"
#include "outbox/wire.h"
#include "testsupport.h"
#include "ts_consumer.h"

static pid_t
start_consumer(const char *db, const char *url, char *log, char *const extra[])
{
	static const char *const debug[] = { "--log-level", "debug", NULL };
	const char *args[32];
	return ts_consumer_spawn(log, db, url,
	    ts_args_cat(args, 32, debug, (const char *const *)extra));
}

START_TEST(test_fingerprint_contract)
{
	char db[TS_CONNINFO_MAX], url[256], log[256], detail[512];
	ts_db_create("fp", "inbox", db, sizeof(db));
	ts_ipc_url("fp", url, sizeof(url));
	pid_t pid = start_consumer(db, url, log, NULL);
	struct ts_consumer_conn c;
	ts_consumer_open(&c, url);

	ck_assert_int_eq(ts_consumer_call1(&c, ts_consumer_msg(1, "t", "k1", "{\"a\":1}"), detail,
	    sizeof(detail)), OB_WIRE_APPLIED);
	/* Same key, same topic and payload: duplicate with the stored outcome. */
	ck_assert_int_eq(ts_consumer_call1(&c, ts_consumer_msg(1, "t", "k1", "{\"a\":1}"), detail,
	    sizeof(detail)), OB_WIRE_DUPLICATE);
	ck_assert_msg(strstr(detail, "already applied at ") != NULL, "%s", detail);
	/* Same key, another payload: the 422 case, nothing applied. */
	ck_assert_int_eq(ts_consumer_call1(&c, ts_consumer_msg(2, "t", "k1", "{\"a\":2}"), detail,
	    sizeof(detail)), OB_WIRE_REJECT);
	ck_assert_str_eq(detail, "idempotency key reused with a different payload");
	/* Same key and payload on another topic is another message: the
	 * identity is (topic, key), as enqueue's (test_dedup_identity). */
	ck_assert_int_eq(ts_consumer_call1(&c, ts_consumer_msg(3, "u", "k1", "{\"a\":1}"), NULL, 0),
	    OB_WIRE_APPLIED);

	/* A batch mixing new keys, a duplicate, a reused key and one key twice. */
	struct ob_wire_msg batch[5] = {
		ts_consumer_msg(10, "t", "k2", "{}"),
		ts_consumer_msg(11, "t", "k1", "{\"a\":1}"),
		ts_consumer_msg(12, "t", "k1", "{\"a\":3}"),
		ts_consumer_msg(13, "t", "k3", "[1]"),
		ts_consumer_msg(14, "t", "k3", "[1]"),
	};
	struct ts_consumer_reply r;
	ts_consumer_call(&c, batch, 5, &r);
	int want[5] = { OB_WIRE_APPLIED, OB_WIRE_DUPLICATE, OB_WIRE_REJECT, OB_WIRE_APPLIED,
		OB_WIRE_DUPLICATE };
	for (int i = 0; i < 5; i++) {
		ck_assert_uint_eq(r.rep.results[i].id, batch[i].id);
		ck_assert_msg(r.rep.results[i].status == want[i], "message %d: status %d", i,
		    r.rep.results[i].status);
	}
	ts_consumer_reply_fini(&r);

	/* The same answers when no key repeats inside the batch (the set path
	 * answers it in one statement; the batch above needed the per-message
	 * path). */
	struct ob_wire_msg again[3] = {
		ts_consumer_msg(20, "t", "k2", "{}"),
		ts_consumer_msg(21, "t", "k1", "{\"a\":9}"),
		ts_consumer_msg(22, "t", "k4", "{}"),
	};
	ts_consumer_call(&c, again, 3, &r);
	ck_assert_int_eq(r.rep.results[0].status, OB_WIRE_DUPLICATE);
	ck_assert_int_eq(r.rep.results[1].status, OB_WIRE_REJECT);
	ck_assert_int_eq(r.rep.results[2].status, OB_WIRE_APPLIED);
	ck_assert(memmem(r.rep.results[0].detail, r.rep.results[0].detail_len, "already applied at", 18));
	ts_consumer_reply_fini(&r);

	PGconn *conn = ts_connect(db);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.notifications"), 5);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM inbox.notifications WHERE idempotency_key = 'k1'"
	    " AND topic = 't'"), 1);
	/* The fingerprint is sha256 over topic, 0x00, payload, by PostgreSQL. */
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM inbox.processed WHERE idempotency_key = 'k1'"
	    " AND fingerprint = encode(sha256(convert_to('t', 'UTF8') || '\\x00'::bytea"
	    " || convert_to('{\"a\":1}', 'UTF8')), 'hex') AND outcome = 'applied'"
	    " AND created_at > now() - interval '1 hour'"), 1);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.processed"), 5);
	PQfinish(conn);
	ts_consumer_close(&c);
	ts_stop(pid, SIGTERM);
	ck_assert_msg(ts_log_wait(log, "fingerprint_mismatch=3", 1, 1000) >= 1, "counter not logged");
	ck_assert_msg(ts_log_wait(log, "duplicate=4", 1, 1000) >= 1, "duplicates not counted");
}
END_TEST

/* Two consumers, one key at the same moment: A holds its transaction open
 * at the --fault-slow point (dedup record and effect written, COMMIT not yet
 * sent) while B gets the same key. */
static void
interleave(bool dedup, int *b_first, int *b_second, int64_t *rows)
{
	char db[TS_CONNINFO_MAX], url_a[256], url_b[256], log_a[256], log_b[256];
	ts_db_create(dedup ? "race" : "racebroken", "inbox", db, sizeof(db));
	ts_ipc_url(dedup ? "race-a" : "raceb-a", url_a, sizeof(url_a));
	ts_ipc_url(dedup ? "race-b" : "raceb-b", url_b, sizeof(url_b));
	char *slow[] = { "--fault-slow", "1", "--fault-slow-ms", "4s",
		dedup ? "--lock-timeout" : "--no-dedup", dedup ? "300ms" : NULL, NULL };
	char *plain[] = { "--lock-timeout", "300ms", dedup ? NULL : "--no-dedup", NULL };
	pid_t a = start_consumer(db, url_a, log_a, slow);
	pid_t b = start_consumer(db, url_b, log_b, plain);
	struct ts_consumer_conn ca, cb;
	ts_consumer_open(&ca, url_a);
	ts_consumer_open(&cb, url_b);

	struct ob_wire_msg m = ts_consumer_msg(7, "t", "same-key", "{\"n\":7}");
	ts_consumer_send(&ca, &m, 1);
	/* A has written the dedup record and the effect and now sleeps before
	 * its COMMIT. */
	ck_assert_msg(ts_log_wait(log_a, "fault=consumer.slow", 1, 20000) >= 1, "A never held");
	int64_t t0 = ts_now_ms();
	*b_first = ts_consumer_call1(&cb, m, NULL, 0);
	if (dedup)
		ck_assert_msg(ts_now_ms() - t0 < 3500, "B waited for A instead of answering");
	struct ts_consumer_reply r;
	ck_assert_int_eq(ts_consumer_recv(&ca, &r, TS_CONSUMER_REPLY_TIMEOUT_MS), 0);
	ck_assert_int_eq(r.rep.results[0].status, OB_WIRE_APPLIED);
	ts_consumer_reply_fini(&r);
	/* A committed: B now answers from the stored record. */
	*b_second = ts_consumer_call1(&cb, m, NULL, 0);

	PGconn *conn = ts_connect(db);
	*rows = ts_query_int(conn,
	    "SELECT count(*) FROM inbox.notifications WHERE idempotency_key = 'same-key'");
	PQfinish(conn);
	ts_consumer_close(&ca);
	ts_consumer_close(&cb);
	ts_stop(a, SIGTERM);
	ts_stop(b, SIGTERM);
}

START_TEST(test_same_key_interleaved)
{
	int first, second;
	int64_t rows;
	/* Broken mode first: without the dedup record the effect happens twice. */
	interleave(false, &first, &second, &rows);
	ck_assert_int_eq(first, OB_WIRE_APPLIED);
	ck_assert_int_ge(rows, 2);
	/* Real mode: exactly once; B gets retry while A is uncommitted, then
	 * duplicate. */
	interleave(true, &first, &second, &rows);
	ck_assert_int_eq(first, OB_WIRE_RETRY);
	ck_assert_int_eq(second, OB_WIRE_DUPLICATE);
	ck_assert_int_eq(rows, 1);
}
END_TEST

START_TEST(test_batch_partial_failures)
{
	char db[TS_CONNINFO_MAX], url[256], log[256];
	ts_db_create("batch", "inbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	/* A transient failure (serialization_failure) for one payload, and a
	 * failure at COMMIT time (deferred constraint trigger) for another. */
	ts_exec(conn,
	    "CREATE FUNCTION public.flaky() RETURNS trigger LANGUAGE plpgsql AS $$"
	    " BEGIN IF NEW.payload->>'fail' = 'transient' AND TG_WHEN = 'BEFORE' THEN"
	    "   RAISE EXCEPTION 'try later' USING ERRCODE = '40001'; END IF;"
	    " IF NEW.payload->>'fail' = 'commit' AND TG_WHEN = 'AFTER' THEN"
	    "   RAISE EXCEPTION 'refused at commit' USING ERRCODE = '40001'; END IF;"
	    " RETURN NEW; END $$;"
	    "CREATE TRIGGER flaky BEFORE INSERT ON inbox.notifications"
	    " FOR EACH ROW EXECUTE FUNCTION public.flaky();"
	    "CREATE CONSTRAINT TRIGGER at_commit AFTER INSERT ON inbox.notifications"
	    " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.flaky();");
	ts_ipc_url("batch", url, sizeof(url));
	pid_t pid = start_consumer(db, url, log, NULL);
	struct ts_consumer_conn c;
	ts_consumer_open(&c, url);

	struct ob_wire_msg batch[5] = {
		ts_consumer_msg(1, "t", "b1", "{}"),
		ts_consumer_msg(2, "t", "b2", "not json"),
		ts_consumer_msg(3, "t", "b3", "{\"fail\":\"transient\"}"),
		ts_consumer_msg(4, "t", "b4", "{\"n\":4}"),
		ts_consumer_msg(5, "t", "b5", "{\"n\":5}"),
	};
	struct ts_consumer_reply r;
	ts_consumer_call(&c, batch, 5, &r);
	int want[5] = { OB_WIRE_APPLIED, OB_WIRE_REJECT, OB_WIRE_RETRY, OB_WIRE_APPLIED,
		OB_WIRE_APPLIED };
	for (int i = 0; i < 5; i++)
		ck_assert_msg(r.rep.results[i].status == want[i], "message %d: status %d (%.*s)",
		    i, r.rep.results[i].status, (int)r.rep.results[i].detail_len,
		    r.rep.results[i].detail);
	ck_assert_msg(r.rep.results[1].detail_len > 0, "reject without a reason");
	ts_consumer_reply_fini(&r);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.notifications"), 3);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.processed"), 3);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM inbox.processed WHERE idempotency_key IN ('b2', 'b3')"), 0);

	/* COMMIT fails: every message of the batch gets retry, nothing stays. */
	struct ob_wire_msg doomed[3] = {
		ts_consumer_msg(6, "t", "c1", "{}"),
		ts_consumer_msg(7, "t", "c2", "{\"fail\":\"commit\"}"),
		ts_consumer_msg(8, "t", "c3", "{}"),
	};
	ts_consumer_call(&c, doomed, 3, &r);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(r.rep.results[i].status, OB_WIRE_RETRY);
	ts_consumer_reply_fini(&r);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM inbox.processed WHERE idempotency_key LIKE 'c%'"), 0);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM inbox.notifications WHERE idempotency_key LIKE 'c%'"), 0);

	/* The transient one goes through on redelivery once the cause is gone. */
	ts_exec(conn, "DROP TRIGGER flaky ON inbox.notifications");
	ck_assert_int_eq(ts_consumer_call1(&c, batch[2], NULL, 0), OB_WIRE_APPLIED);
	PQfinish(conn);
	ts_consumer_close(&c);
	ts_stop(pid, SIGTERM);
}
END_TEST

START_TEST(test_retention)
{
	char db[TS_CONNINFO_MAX], url[256], log[256], detail[512];
	ts_db_create("ret", "inbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	/* 2,500 records from 8 days ago, 10 fresh ones. */
	ts_exec(conn,
	    "INSERT INTO inbox.processed (idempotency_key, topic, message_id, fence,"
	    " processed_at) SELECT 'old-' || g, 't', g, 1, now() - interval '8 days'"
	    " FROM generate_series(1, 2500) g;"
	    "INSERT INTO inbox.processed (idempotency_key, topic, message_id, fence)"
	    " SELECT 'new-' || g, 't', g, 1 FROM generate_series(1, 10) g");
	ts_ipc_url("ret", url, sizeof(url));
	char *extra[] = { "--purge-interval", "200ms", "--purge-batch", "1000",
		"--dedup-retention", "1h", NULL };
	pid_t pid = start_consumer(db, url, log, extra);
	ck_assert_int_eq(ts_wait_value(conn,
	    "SELECT count(*) FROM inbox.processed WHERE idempotency_key LIKE 'old-%'", 0,
	    30000), 0);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.processed"), 10);
	/* Told the relay redelivers for 24 h: warned that 1 h is shorter. */
	ck_assert(ts_log_wait(log, "consumer.retention.short", 1, 5000) >= 1);

	/* A message older than the retention is never applied blindly. */
	struct ts_consumer_conn c;
	ts_consumer_open(&c, url);
	struct ob_wire_msg m = ts_consumer_msg(1, "t", "old-1", "{}");
	m.created_at_us -= 2LL * 3600 * 1000000;
	ck_assert_int_eq(ts_consumer_call1(&c, m, detail, sizeof(detail)), OB_WIRE_REJECT);
	ck_assert_msg(strstr(detail, "duplicate of a purged record") != NULL, "%s", detail);
	/* In a batch, only that message is refused. */
	struct ob_wire_msg batch[2] = { m, ts_consumer_msg(2, "t", "fresh", "{}") };
	struct ts_consumer_reply r;
	ts_consumer_call(&c, batch, 2, &r);
	ck_assert_int_eq(r.rep.results[0].status, OB_WIRE_REJECT);
	ck_assert_int_eq(r.rep.results[1].status, OB_WIRE_APPLIED);
	ts_consumer_reply_fini(&r);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.notifications"), 1);
	ts_consumer_close(&c);
	ts_stop(pid, SIGTERM);
	ck_assert(ts_log_wait(log, "purged=2500", 1, 1000) >= 1);
	PQfinish(conn);

	/* A retention shorter than its minimum is refused before anything opens. */
	char out[2048];
	char *bad[] = { "outbox-consumer", "--db", db, "--dedup-retention", "10s", NULL };
	ck_assert_int_eq(ts_run(bad, NULL, out, sizeof(out), 20000), 2);
	ck_assert_msg(strstr(out, "--dedup-retention") != NULL, "%s", out);
}
END_TEST

/* Scale out: two consumer processes on one database, three clients sending
 * the same 300 keys at once, each retrying what it is told to retry: one
 * per consumer (opposite orders), and one REQ socket dialing both, which
 * nng balances across them (what a relay route with several URLs does).
 * Every key is applied exactly once. */
struct sender {
	const char *url;
	const char *url2; /* NULL, or a second consumer the same socket dials */
	bool reverse;
	int applied, duplicate;
};

#define SCALE_KEYS 300
#define SCALE_BATCH 20

static void *
send_all(void *arg)
{
	struct sender *s = arg;
	struct ts_consumer_conn c;
	ts_consumer_open(&c, s->url);
	if (s->url2 != NULL)
		ck_assert_int_eq(nng_dial(c.sock, s->url2, NULL, NNG_FLAG_NONBLOCK), 0);
	char (*keys)[16] = calloc(SCALE_KEYS, 16);
	for (int i = 0; i < SCALE_KEYS; i++)
		snprintf(keys[i], sizeof(keys[i]), "s-%d", i);
	bool done[SCALE_KEYS] = { false };
	int left = SCALE_KEYS;
	for (int round = 0; left > 0 && round < 200; round++) {
		struct ob_wire_msg batch[SCALE_BATCH];
		int idx[SCALE_BATCH], n = 0;
		for (int j = 0; j < SCALE_KEYS && n < SCALE_BATCH; j++) {
			int i = s->reverse ? SCALE_KEYS - 1 - j : j;
			if (!done[i]) {
				idx[n] = i;
				batch[n++] = ts_consumer_msg((uint64_t)i + 1, "t", keys[i], "{\"scale\":true}");
			}
		}
		struct ts_consumer_reply r;
		ts_consumer_call(&c, batch, (uint32_t)n, &r);
		for (int j = 0; j < n; j++) {
			int st = r.rep.results[j].status;
			if (st == OB_WIRE_APPLIED || st == OB_WIRE_DUPLICATE) {
				done[idx[j]] = true;
				left--;
				if (st == OB_WIRE_APPLIED)
					s->applied++;
				else
					s->duplicate++;
			}
		}
		ts_consumer_reply_fini(&r);
	}
	free(keys);
	ts_consumer_close(&c);
	return NULL;
}

START_TEST(test_scale_out)
{
	char db[TS_CONNINFO_MAX], url_a[256], url_b[256], log_a[256], log_b[256];
	ts_db_create("scale", "inbox", db, sizeof(db));
	ts_ipc_url("scale-a", url_a, sizeof(url_a));
	ts_ipc_url("scale-b", url_b, sizeof(url_b));
	pid_t a = start_consumer(db, url_a, log_a, NULL);
	pid_t b = start_consumer(db, url_b, log_b, NULL);
	struct sender sa = { url_a, NULL, false, 0, 0 }, sb = { url_b, NULL, true, 0, 0 };
	struct sender sc = { url_a, url_b, false, 0, 0 };
	pthread_t ta, tb, tc;
	pthread_create(&ta, NULL, send_all, &sa);
	pthread_create(&tb, NULL, send_all, &sb);
	pthread_create(&tc, NULL, send_all, &sc);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	pthread_join(tc, NULL);
	ck_assert_int_eq(sa.applied + sb.applied + sc.applied, SCALE_KEYS);
	ck_assert_int_eq(sa.applied + sa.duplicate, SCALE_KEYS);
	ck_assert_int_eq(sb.applied + sb.duplicate, SCALE_KEYS);
	ck_assert_int_eq(sc.applied + sc.duplicate, SCALE_KEYS);
	/* Both consumers did part of the work. */
	ck_assert(ts_log_count(log_a, "consumer.batch.done") > 0);
	ck_assert(ts_log_count(log_b, "consumer.batch.done") > 0);
	PGconn *conn = ts_connect(db);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.notifications"),
	    SCALE_KEYS);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(DISTINCT idempotency_key) FROM inbox.notifications"), SCALE_KEYS);
	PQfinish(conn);
	ts_stop(a, SIGTERM);
	ts_stop(b, SIGTERM);
}
END_TEST

static Suite *
dedup_suite(void)
{
	Suite *s = suite_create("consumer_dedup");
	TCase *tc = tcase_create("contract");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_fingerprint_contract);
	tcase_add_test(tc, test_same_key_interleaved);
	tcase_add_test(tc, test_batch_partial_failures);
	tcase_add_test(tc, test_retention);
	tcase_add_test(tc, test_scale_out);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return ts_run_suite(dedup_suite());
}
