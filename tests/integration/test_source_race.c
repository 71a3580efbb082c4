/*
 * test_source_race.c - the empty source and a named one of one key never
 * both apply, even when their frames are in two consumers at once (the
 * race upgrade_mixed_relays found: an old relay's frame still uncommitted
 * in a slow consumer while an upgraded relay redelivers it under its
 * derived source; sql/inbox/009_source_gate.sql).
 *
 * Explicit interleaving, no timing guesses: consumer A sleeps before every
 * COMMIT (--fault-slow), so a frame sent to it is inserted and left
 * uncommitted; the test waits until A's transaction is open (idle in
 * transaction in pg_stat_activity), then sends the other identity of the
 * same (topic, key) to consumer B, on the same inbox:
 * - broken mode (B --no-source-gate): B applies it, A commits too: two
 *   effects for one message;
 * - the real mode: B waits for A's transaction (its --lock-timeout is long)
 *   and answers duplicate, one effect; both directions ('' in flight, then
 *   named; named in flight, then '');
 * - with a short --lock-timeout (consumer C) the other kind is answered
 *   retry, saying it waits for the source gate, and nothing is applied;
 * - frames of one kind never wait for each other: with A's named frame
 *   open, C applies another named source's frame of the same key, and
 *   another '' frame while A's '' frame is open.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "outbox/wire.h"
#include "testsupport.h"
#include "ts_consumer.h"

#define T_SEC 1000
#define TOPIC "orders"
#define SLOW_MS "5s" /* how long A holds each transaction open: the margin for B and C to
                      * be served while it is (each case is served in milliseconds) */

struct race {
	char db[TS_CONNINFO_MAX];
	PGconn *conn;
	char url_a[256], url_b[256], url_c[256];
	pid_t a, b, c;
	struct ts_consumer_conn ca, cb, cc;
};

static void
race_start(struct race *r, const char *tag, bool broken)
{
	char log[256], name[64];
	ts_db_create(tag, "inbox", r->db, sizeof(r->db));
	r->conn = ts_connect(r->db);
	snprintf(name, sizeof(name), "%s_a", tag);
	ts_ipc_url(name, r->url_a, sizeof(r->url_a));
	snprintf(name, sizeof(name), "%s_b", tag);
	ts_ipc_url(name, r->url_b, sizeof(r->url_b));
	snprintf(name, sizeof(name), "%s_c", tag);
	ts_ipc_url(name, r->url_c, sizeof(r->url_c));
	const char *slow[] = { "--fault-slow", "1000", "--fault-slow-ms", SLOW_MS, NULL };
	const char *waits[] = { "--lock-timeout", "60s", NULL };
	const char *waits_broken[] = { "--lock-timeout", "60s", "--no-source-gate", NULL };
	const char *impatient[] = { "--lock-timeout", "200ms", NULL };
	r->a = ts_consumer_spawn(log, r->db, r->url_a, slow);
	r->b = ts_consumer_spawn(log, r->db, r->url_b, broken ? waits_broken : waits);
	r->c = ts_consumer_spawn(log, r->db, r->url_c, impatient);
	ts_consumer_open(&r->ca, r->url_a);
	ts_consumer_open(&r->cb, r->url_b);
	ts_consumer_open(&r->cc, r->url_c);
}

static void
race_stop(struct race *r)
{
	ts_consumer_close(&r->ca);
	ts_consumer_close(&r->cb);
	ts_consumer_close(&r->cc);
	ts_stop(r->a, SIGTERM);
	ts_stop(r->b, SIGTERM);
	ts_stop(r->c, SIGTERM);
	PQfinish(r->conn);
}

static struct ob_wire_msg
msg(uint64_t id, const char *key, const char *source)
{
	struct ob_wire_msg m = ts_consumer_msg(id, TOPIC, key, "{\"n\":1}");
	m.source = source;
	m.source_len = (uint8_t)strlen(source);
	return m;
}

/* Send m as its relay would: a wire version 2 frame for the empty source
 * (an old relay), the current version for a named one. */
static void
send_as_relay(struct ts_consumer_conn *c, const struct ob_wire_msg *m)
{
	if (m->source_len == 0)
		ts_consumer_send_v(c, 2, m, 1);
	else
		ts_consumer_send(c, m, 1);
}

/* Send m to A and wait until A's transaction holds it uncommitted. */
static void
open_in_a(struct race *r, struct ob_wire_msg m)
{
	send_as_relay(&r->ca, &m);
	ck_assert_int_eq(ts_wait_value(r->conn, "SELECT count(*) FROM pg_stat_activity"
	    " WHERE datname = current_database() AND state = 'idle in transaction'", 1,
	    30 * T_SEC), 1);
}

/* A's reply: the message it held is applied. */
static void
a_applied(struct race *r)
{
	struct ts_consumer_reply rep;
	ck_assert_int_eq(ts_consumer_recv(&r->ca, &rep, TS_CONSUMER_REPLY_TIMEOUT_MS), 0);
	ck_assert_msg(rep.rep.results[0].status == OB_WIRE_APPLIED, "A: status %d (%.*s)",
	    rep.rep.results[0].status, (int)rep.rep.results[0].detail_len,
	    rep.rep.results[0].detail);
	ts_consumer_reply_fini(&rep);
}

static int64_t
effects(struct race *r, const char *key)
{
	char sql[256];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM inbox.notifications"
	    " WHERE topic = '" TOPIC "' AND idempotency_key = '%s'", key);
	return ts_query_int(r->conn, sql);
}

/* The other identity of an open key, to B (which waits): its status. */
static int
other_to_b(struct race *r, struct ob_wire_msg m, char *detail, size_t len)
{
	struct ts_consumer_reply rep;
	send_as_relay(&r->cb, &m);
	ck_assert_int_eq(ts_consumer_recv(&r->cb, &rep, 90 * T_SEC), 0);
	int st = rep.rep.results[0].status;
	snprintf(detail, len, "%.*s", (int)rep.rep.results[0].detail_len,
	    rep.rep.results[0].detail);
	ts_consumer_reply_fini(&rep);
	return st;
}

START_TEST(test_broken_mode_applies_twice)
{
	struct race r;
	char detail[512];
	race_start(&r, "srcrace_broken", true);
	/* an old relay's frame open in A, the upgraded relay's redelivery in B */
	open_in_a(&r, msg(1, "k1", ""));
	int st = other_to_b(&r, msg(1, "k1", "shop-a"), detail, sizeof(detail));
	ck_assert_msg(st == OB_WIRE_APPLIED, "B: status %d (%s)", st, detail);
	a_applied(&r);
	/* the duplicate: one message, two effects */
	ck_assert_int_eq(effects(&r, "k1"), 2);
	race_stop(&r);
}
END_TEST

START_TEST(test_gate_makes_the_other_identity_wait)
{
	struct race r;
	char detail[512];
	race_start(&r, "srcrace_gate", false);
	/* '' open in A, then the named redelivery: B waits, then duplicate */
	open_in_a(&r, msg(1, "k1", ""));
	int st = other_to_b(&r, msg(1, "k1", "shop-a"), detail, sizeof(detail));
	ck_assert_msg(st == OB_WIRE_DUPLICATE, "B, named after '': status %d (%s)", st, detail);
	a_applied(&r);
	ck_assert_int_eq(effects(&r, "k1"), 1);
	/* named open in A, then an old relay's late frame of it: duplicate */
	open_in_a(&r, msg(2, "k2", "shop-a"));
	st = other_to_b(&r, msg(2, "k2", ""), detail, sizeof(detail));
	ck_assert_msg(st == OB_WIRE_DUPLICATE, "B, '' after named: status %d (%s)", st, detail);
	a_applied(&r);
	ck_assert_int_eq(effects(&r, "k2"), 1);
	ck_assert_int_eq(ts_query_int(r.conn, "SELECT count(*) FROM inbox.processed"), 2);
	race_stop(&r);
}
END_TEST

START_TEST(test_gate_timeout_is_retry_and_kinds_do_not_wait)
{
	struct race r;
	char detail[512];
	race_start(&r, "srcrace_kinds", false);
	/* '' open in A: C (200 ms) answers the named frame retry, applies nothing */
	open_in_a(&r, msg(1, "k1", ""));
	int st = ts_consumer_call1(&r.cc, msg(1, "k1", "shop-a"), detail, sizeof(detail));
	ck_assert_msg(st == OB_WIRE_RETRY && strstr(detail, "source gate") != NULL,
	    "C, named after '': status %d (%s)", st, detail);
	/* ... but another '' frame of another key is applied at once */
	struct ts_consumer_reply rep;
	struct ob_wire_msg k9 = msg(9, "k9", "");
	ts_consumer_send_v(&r.cc, 2, &k9, 1);
	ck_assert_int_eq(ts_consumer_recv(&r.cc, &rep, TS_CONSUMER_REPLY_TIMEOUT_MS), 0);
	ck_assert_msg(rep.rep.results[0].status == OB_WIRE_APPLIED, "C, '' beside '': %d (%.*s)",
	    rep.rep.results[0].status, (int)rep.rep.results[0].detail_len,
	    rep.rep.results[0].detail);
	ts_consumer_reply_fini(&rep);
	a_applied(&r);
	ck_assert_int_eq(effects(&r, "k1"), 1);
	/* the retry, once A committed: duplicate */
	st = ts_consumer_call1(&r.cc, msg(1, "k1", "shop-a"), detail, sizeof(detail));
	ck_assert_msg(st == OB_WIRE_DUPLICATE, "C, named again: status %d (%s)", st, detail);
	/* named open in A: another named source's frame of the same key is
	 * another message, applied without waiting (C would answer retry) */
	open_in_a(&r, msg(3, "k3", "shop-a"));
	st = ts_consumer_call1(&r.cc, msg(3, "k3", "shop-b"), detail, sizeof(detail));
	ck_assert_msg(st == OB_WIRE_APPLIED, "C, named beside named: status %d (%s)", st, detail);
	a_applied(&r);
	ck_assert_int_eq(effects(&r, "k3"), 2);
	race_stop(&r);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("source_race");
	TCase *tc = tcase_create("race");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_broken_mode_applies_twice);
	tcase_add_test(tc, test_gate_makes_the_other_identity_wait);
	tcase_add_test(tc, test_gate_timeout_is_retry_and_kinds_do_not_wait);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
