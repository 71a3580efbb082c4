/*
 * test_relay_skipped.c - messages the relay skips at send time (over
 * --max-payload) keep their own outcome while other frames of the same
 * worker are in flight (issue 29, defect 2): the real outbox-relay with
 * several frames out to a real, slowed outbox-consumer; every small
 * message is delivered and applied exactly once, every oversized one is
 * dead naming --max-payload and never applied, and no message is recorded
 * delivered without its effect in the inbox.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>

#include "testsupport.h"
#include "ts_consumer.h"
#include "ts_relay.h"

#define T_SEC 1000
#define MESSAGES 60
#define BIG_EVERY 3     /* every third message is over --max-payload: 20 of 60 */
#define MAX_PAYLOAD "300"
#define BIG_PAD 400     /* bytes of padding in an oversized payload */
#define SHOWN 8         /* offending keys listed in a failure */

/* Whether message i (0-based) is an oversized one. Spread so that the
 * skipped positions differ from batch to batch of 5: a skipped message's
 * position in one frame is a sent message's in the frames next to it. */
static bool
is_big(int i)
{
	return i % BIG_EVERY == BIG_EVERY - 1;
}

static void
enqueue_mix(PGconn *conn)
{
	char key[64], payload[BIG_PAD + 64], pad[BIG_PAD + 1];
	memset(pad, 'x', BIG_PAD);
	pad[BIG_PAD] = '\0';
	for (int i = 0; i < MESSAGES; i++) {
		snprintf(key, sizeof(key), "%s-%d", is_big(i) ? "big" : "small", i);
		if (is_big(i))
			snprintf(payload, sizeof(payload), "{\"n\": %d, \"pad\": \"%s\"}", i, pad);
		else
			snprintf(payload, sizeof(payload), "{\"n\": %d}", i);
		ts_enqueue_one(conn, "t", key, payload);
	}
}

/* The count of rows of table in the inbox for one key. */
static int64_t
inbox_rows(PGconn *in, const char *table, const char *key)
{
	const char *params[1] = { key };
	char sql[128];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s WHERE idempotency_key = $1", table);
	PGresult *r = PQexecParams(in, sql, 1, NULL, params, NULL, NULL, 0);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQresultErrorMessage(r));
	int64_t n = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return n;
}

/* Offending keys, comma-separated, the first SHOWN of them. */
struct offenders {
	int n;
	char keys[SHOWN * 24];
};

static void
offend(struct offenders *o, const char *key)
{
	if (o->n++ < SHOWN) {
		size_t len = strlen(o->keys);
		snprintf(o->keys + len, sizeof(o->keys) - len, "%s%s", len ? "," : "", key);
	}
}

START_TEST(test_skipped_keep_their_outcome)
{
	char odb[TS_CONNINFO_MAX], idb[TS_CONNINFO_MAX], url[256], route[300];
	char clog[256], rlog[256], ready[300];
	ts_db_create("skipout", "outbox", odb, sizeof(odb));
	ts_db_create("skipin", "inbox", idb, sizeof(idb));
	PGconn *out = ts_connect(odb), *in = ts_connect(idb);
	/* All of them pending before the relay starts: full batches of 5. */
	enqueue_mix(out);
	ck_assert_int_eq(ts_query_int(out, "SELECT count(*) FROM outbox.messages"), MESSAGES);

	ts_ipc_url("skipped", url, sizeof(url));
	snprintf(route, sizeof(route), "*=%s", url);
	snprintf(ready, sizeof(ready), "%s/consumer.ready", ts_tmpdir());
	/* Every frame held 200 ms before its COMMIT: the worker's 4 frames are
	 * out at once, and they finish one after another. */
	const char *cextra[] = { "--ready-file", ready, "--fault-slow", "1000000",
		"--fault-slow-ms", "200ms", NULL };
	pid_t cpid = ts_consumer_spawn(clog, idb, url, cextra);
	free(ts_wait_ready_file(ready, cpid, clog, 60 * T_SEC));
	const char *rextra[] = { "--max-payload", MAX_PAYLOAD, "--batch", "5",
		"--max-inflight", "4", "--poll-ms", "100", NULL };
	pid_t rpid = ts_relay_spawn(rlog, odb, route, rextra);

	int64_t pending = ts_wait_value(out,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'pending'", 0, 120 * T_SEC);
	ts_stop(rpid, SIGTERM);
	ts_stop(cpid, SIGTERM);
	ck_assert_msg(pending == 0, "%" PRId64 " messages still pending after 120 s (relay log %s)",
	    pending, rlog);

	PGresult *r = PQexec(out, "SELECT idempotency_key, status, coalesce(last_error, '')"
	    " FROM outbox.messages ORDER BY id");
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQresultErrorMessage(r));
	ck_assert_int_eq(PQntuples(r), MESSAGES);
	struct offenders lost = { 0 }, small_bad = { 0 }, big_bad = { 0 };
	int small_ok = 0, big_ok = 0;
	for (int i = 0; i < PQntuples(r); i++) {
		const char *key = PQgetvalue(r, i, 0), *status = PQgetvalue(r, i, 1);
		const char *err = PQgetvalue(r, i, 2);
		int64_t effects = inbox_rows(in, "inbox.notifications", key);
		int64_t processed = inbox_rows(in, "inbox.processed", key);
		bool delivered = strcmp(status, "delivered") == 0;
		if (delivered && effects == 0)
			offend(&lost, key);
		if (strncmp(key, "small-", 6) == 0) {
			if (delivered && effects == 1 && processed == 1)
				small_ok++;
			else
				offend(&small_bad, key);
		} else {
			if (strcmp(status, "dead") == 0 && strstr(err, "--max-payload") != NULL &&
			    effects == 0 && processed == 0)
				big_ok++;
			else
				offend(&big_bad, key);
		}
	}
	PQclear(r);
	ck_assert_msg(lost.n == 0, "%d messages recorded delivered that the consumer never"
	    " applied (%s%s); small ok %d of %d, oversized dead and unapplied %d of %d"
	    " (relay log %s)", lost.n, lost.keys, lost.n > SHOWN ? ",..." : "", small_ok,
	    MESSAGES - MESSAGES / BIG_EVERY, big_ok, MESSAGES / BIG_EVERY, rlog);
	ck_assert_msg(small_bad.n == 0, "%d small messages not delivered and applied exactly once"
	    " (%s%s)", small_bad.n, small_bad.keys, small_bad.n > SHOWN ? ",..." : "");
	ck_assert_msg(big_bad.n == 0, "%d oversized messages not dead for --max-payload, or"
	    " applied (%s%s)", big_bad.n, big_bad.keys, big_bad.n > SHOWN ? ",..." : "");
	ck_assert_int_eq(small_ok, MESSAGES - MESSAGES / BIG_EVERY);
	ck_assert_int_eq(big_ok, MESSAGES / BIG_EVERY);
	/* The inbox holds nothing else: one effect per small message. */
	ck_assert_int_eq(ts_query_int(in, "SELECT count(*) FROM inbox.notifications"),
	    MESSAGES - MESSAGES / BIG_EVERY);
	ck_assert_int_eq(ts_query_int(in, "SELECT count(*) FROM inbox.processed"),
	    MESSAGES - MESSAGES / BIG_EVERY);
	PQfinish(out);
	PQfinish(in);
}
END_TEST

static Suite *
relay_skipped_suite(void)
{
	Suite *s = suite_create("relay_skipped");
	TCase *tc = tcase_create("skipped");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_skipped_keep_their_outcome);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	int rc = ts_run_suite(relay_skipped_suite());
	nng_fini();
	return rc;
}
