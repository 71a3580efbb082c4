/*
 * test_ordering.c - per-key ordering: messages sharing an ordering key are
 * delivered one at a time in id order, across workers; a failing head
 * blocks only its own key; a dead head blocks or is skipped as configured;
 * a lease takeover keeps the order; concurrent producers of one key whose
 * transaction ids are in the other order still go in enqueue order; a dead
 * head outlives --dead-retention while it blocks its key. Each property is
 * first shown broken on the deliberately broken --no-ordering mode (or on
 * the state the old code left), then kept on the real one.
 *
 * The scripted consumer here is an nng REP thread in the test process that
 * logs every arrival and answers per message from a policy, so the
 * interleavings are explicit (a head fails until the other keys are done),
 * never left to timing.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "outbox/buf.h"
#include "outbox/err.h"
#include "outbox/wire.h"
#include "testsupport.h"
#include "ts_consumer.h"
#include "ts_relay.h"

#define MAX_ARRIVALS 20000

struct arrival {
	char key[64];       /* idempotency key */
	int status;         /* what the consumer answered */
};

/* The scripted consumer. policy() decides the status of each message. */
struct script {
	nng_socket sock;
	pthread_t thread;
	pthread_mutex_t mu;
	struct arrival log[MAX_ARRIVALS];
	int n;
	int (*policy)(struct script *s, const struct ob_wire_msg *m);
	int fail_head_until_applied; /* FAILING-HEAD policy: B keys to wait for */
};

static int
count_applied_prefix(struct script *s, const char *prefix)
{
	int n = 0;
	for (int i = 0; i < s->n; i++)
		if (s->log[i].status == OB_WIRE_APPLIED &&
		    strncmp(s->log[i].key, prefix, strlen(prefix)) == 0)
			n++;
	return n;
}

/* First index at which key arrived (any answer), or -1. */
static int
first_arrival(struct script *s, const char *key)
{
	for (int i = 0; i < s->n; i++)
		if (strcmp(s->log[i].key, key) == 0)
			return i;
	return -1;
}

/* Index of the APPLIED answer to key, or -1. */
static int
applied_at(struct script *s, const char *key)
{
	for (int i = 0; i < s->n; i++)
		if (strcmp(s->log[i].key, key) == 0 && s->log[i].status == OB_WIRE_APPLIED)
			return i;
	return -1;
}

/* The head "a-1" answers retry on its first arrival (whenever the relay
 * sends it) and until every "b-" message was applied. */
static int
policy_failing_head(struct script *s, const struct ob_wire_msg *m)
{
	if (m->key_len == 3 && memcmp(m->key, "a-1", 3) == 0 &&
	    (first_arrival(s, "a-1") < 0 ||
	        count_applied_prefix(s, "b-") < s->fail_head_until_applied))
		return OB_WIRE_RETRY;
	return OB_WIRE_APPLIED;
}

/* The heads "a-1" and "z-1" are rejected (dead-lettered) until requeued. */
static _Atomic bool reject_head = true;
static int
policy_reject_head(struct script *s, const struct ob_wire_msg *m)
{
	if (m->key_len == 3 && (memcmp(m->key, "a-1", 3) == 0 || memcmp(m->key, "z-1", 3) == 0) &&
	    atomic_load(&reject_head))
		return OB_WIRE_REJECT;
	return OB_WIRE_APPLIED;
}

static void *
script_serve(void *arg)
{
	struct script *s = arg;
	struct ob_wire_limits lim = { OB_WIRE_MAX_PAYLOAD, OB_WIRE_MAX_BATCH };
	for (;;) {
		nng_msg *m = NULL;
		if (nng_recvmsg(s->sock, &m, 0) != 0)
			return NULL;
		struct ob_wire_request req;
		struct ob_buf out = OB_BUF_INIT;
		if (ob_wire_decode_request(nng_msg_body(m), nng_msg_len(m), &lim, &req) == OB_OK) {
			struct ob_wire_result *res = calloc(req.count, sizeof(*res));
			pthread_mutex_lock(&s->mu);
			for (uint32_t i = 0; i < req.count; i++) {
				res[i].id = req.msgs[i].id;
				res[i].status = (uint8_t)s->policy(s, &req.msgs[i]);
				if (s->n < MAX_ARRIVALS) {
					struct arrival *a = &s->log[s->n++];
					snprintf(a->key, sizeof(a->key), "%.*s", (int)req.msgs[i].key_len,
					    req.msgs[i].key);
					a->status = res[i].status;
				}
			}
			pthread_mutex_unlock(&s->mu);
			ob_wire_encode_reply(&out, res, req.count);
			free(res);
			ob_wire_request_fini(&req);
		}
		nng_msg_free(m);
		nng_msg *r = NULL;
		if (nng_msg_alloc(&r, 0) == 0 && nng_msg_append(r, out.data, out.len) == 0) {
			if (nng_sendmsg(s->sock, r, 0) != 0)
				nng_msg_free(r);
		} else if (r != NULL)
			nng_msg_free(r);
		ob_buf_fini(&out);
	}
}

static void
script_start(struct script *s, const char *url)
{
	pthread_mutex_init(&s->mu, NULL);
	ck_assert_int_eq(nng_rep0_open(&s->sock), 0);
	ck_assert_int_eq(nng_listen(s->sock, url, NULL, 0), 0);
	ck_assert_int_eq(pthread_create(&s->thread, NULL, script_serve, s), 0);
}

static void
script_stop(struct script *s)
{
	nng_close(s->sock);
	pthread_join(s->thread, NULL);
}

static pid_t
start_relay(const char *db, const char *url, const char *extra1, const char *extra2)
{
	static char route[300];
	snprintf(route, sizeof(route), "*=%s", url);
	const char *extra[] = { "--poll-ms", "50", "--backoff-base-ms", "20", "--backoff-cap-ms",
		"100", "--max-attempts", "1000", "--workers", "2", "--batch", "10", extra1, extra2,
		NULL };
	return ts_relay_spawn(NULL, db, route, extra);
}

/* Enqueue prefix-1..n under ordering key okey (NULL = unordered). */
static void
enqueue_keyed(PGconn *c, const char *prefix, const char *okey, int n)
{
	char sql[512];
	if (okey != NULL)
		snprintf(sql, sizeof(sql), "SELECT count(outbox.enqueue('t', '%s-' || g,"
		    " jsonb_build_object('n', g), '%s')) FROM generate_series(1, %d) g",
		    prefix, okey, n);
	else
		snprintf(sql, sizeof(sql), "SELECT count(outbox.enqueue('t', '%s-' || g,"
		    " jsonb_build_object('n', g))) FROM generate_series(1, %d) g", prefix, n);
	ts_exec(c, sql);
}

/* Run the failing-head scenario; returns whether a-2 overtook a-1. */
static bool
failing_head_overtaken(bool broken)
{
	char db[TS_CONNINFO_MAX], url[256];
	ts_db_create(broken ? "ord_fail_broken" : "ord_fail", "outbox", db, sizeof(db));
	ts_ipc_url(broken ? "ordfb" : "ordf", url, sizeof(url));
	static struct script s;
	memset(&s, 0, sizeof(s));
	s.policy = policy_failing_head;
	s.fail_head_until_applied = 20;
	script_start(&s, url);
	PGconn *c = ts_connect(db);
	enqueue_keyed(c, "a", "A", 5);   /* key A: a-1 (the failing head) .. a-5 */
	enqueue_keyed(c, "b", "B", 20);  /* key B keeps flowing meanwhile */
	pid_t relay = start_relay(db, url, broken ? "--no-ordering" : NULL, NULL);

	int64_t done = ts_wait_value(c,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'", 25, 60000);
	ts_stop(relay, SIGTERM);
	script_stop(&s);
	ck_assert_int_eq(done, 25);
	/* The head really failed: it was retried while B flowed. */
	int a1_arrivals = 0;
	for (int i = 0; i < s.n; i++)
		a1_arrivals += strcmp(s.log[i].key, "a-1") == 0;
	char order[1024] = "";
	for (int i = 0; i < s.n && strlen(order) + 24 < sizeof(order); i++)
		snprintf(order + strlen(order), sizeof(order) - strlen(order), " %s:%d",
		    s.log[i].key, s.log[i].status);
	ck_assert_msg(a1_arrivals > 1, "a-1 arrived %d times (%s mode); arrivals:%s", a1_arrivals,
	    broken ? "broken" : "real", order);
	int a1_applied = applied_at(&s, "a-1");
	ck_assert_int_ge(a1_applied, 0);
	/* B was never held back by A's failing head. */
	ck_assert_int_eq(count_applied_prefix(&s, "b-"), 20);
	bool overtaken = false;
	for (int k = 2; k <= 5; k++) {
		char key[16];
		snprintf(key, sizeof(key), "a-%d", k);
		int first = first_arrival(&s, key);
		ck_assert_int_ge(first, 0);
		overtaken |= first < a1_applied;
	}
	if (!broken) {
		/* Every message of A arrived after its predecessor was applied. */
		for (int k = 2; k <= 5; k++) {
			char prev[16], key[16];
			snprintf(prev, sizeof(prev), "a-%d", k - 1);
			snprintf(key, sizeof(key), "a-%d", k);
			ck_assert_int_gt(first_arrival(&s, key), applied_at(&s, prev));
		}
	}
	PQfinish(c);
	return overtaken;
}

START_TEST(test_failing_head_blocks_only_its_key)
{
	/* Broken mode first: without ordering, a-2.. overtake the failing head. */
	ck_assert_msg(failing_head_overtaken(true),
	    "--no-ordering should let a-2 overtake the failing head a-1");
	ck_assert_msg(!failing_head_overtaken(false), "a message overtook its failing head");
}
END_TEST

/* A dead head: block keeps the rest of its key waiting until requeued;
 * skip lets the next message go. */
START_TEST(test_dead_head_block_then_requeue_and_skip)
{
	char db[TS_CONNINFO_MAX], url[256], out[2048];
	ts_db_create("ord_dead", "outbox", db, sizeof(db));
	ts_ipc_url("ordd", url, sizeof(url));
	static struct script s;
	memset(&s, 0, sizeof(s));
	s.policy = policy_reject_head;
	atomic_store(&reject_head, true);
	script_start(&s, url);
	PGconn *c = ts_connect(db);
	enqueue_keyed(c, "a", "A", 3);
	pid_t relay = start_relay(db, url, NULL, NULL);
	ck_assert_int_eq(ts_wait_value(c, "SELECT count(*) FROM outbox.messages"
	    " WHERE idempotency_key = 'a-1' AND status = 'dead'", 1, 30000), 1);
	/* Barrier: an unordered message enqueued after is delivered, so the
	 * relay has claimed since; a-2 and a-3 still wait behind the dead head. */
	enqueue_keyed(c, "free", NULL, 1);
	ck_assert_int_eq(ts_wait_value(c, "SELECT count(*) FROM outbox.messages"
	    " WHERE idempotency_key = 'free-1' AND status = 'delivered'", 1, 30000), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages"
	    " WHERE idempotency_key IN ('a-2', 'a-3') AND status = 'pending' AND attempts = 0"), 2);
	ck_assert_int_eq(first_arrival(&s, "a-2"), -1);
	/* The operator sees the blocked key. */
	char *status[] = { "outboxctl", "status", "--db", db, "--json", NULL };
	ck_assert_int_eq(ts_run(status, NULL, out, sizeof(out), 30000), 0);
	ck_assert_msg(strstr(out, "\"blocked_keys\": 1") != NULL ||
	    strstr(out, "\"blocked_keys\":1") != NULL, "%s", out);

	/* Re-drive the head: the key flows again, in order. */
	atomic_store(&reject_head, false);
	char id[32];
	snprintf(id, sizeof(id), "%lld", (long long)ts_query_int(c,
	    "SELECT id FROM outbox.messages WHERE idempotency_key = 'a-1'"));
	char *requeue[] = { "outboxctl", "dead", "requeue", "--db", db, id, NULL };
	ck_assert_int_eq(ts_run(requeue, NULL, out, sizeof(out), 30000), 0);
	ck_assert_int_eq(ts_wait_value(c, "SELECT count(*) FROM outbox.messages"
	    " WHERE ordering_key = 'A' AND status = 'delivered'", 3, 30000), 3);
	ck_assert_int_lt(applied_at(&s, "a-1"), first_arrival(&s, "a-2"));
	ck_assert_int_lt(applied_at(&s, "a-2"), first_arrival(&s, "a-3"));
	ts_stop(relay, SIGTERM);

	/* skip: a dead head no longer blocks its key. */
	atomic_store(&reject_head, true);
	enqueue_keyed(c, "z", "Z", 3);
	relay = start_relay(db, url, "--on-dead-head", "skip");
	ck_assert_int_eq(ts_wait_value(c, "SELECT count(*) FROM outbox.messages"
	    " WHERE ordering_key = 'Z' AND status = 'delivered'", 2, 30000), 2);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages"
	    " WHERE idempotency_key = 'z-1' AND status = 'dead'"), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.ordering_blocks"
	    " WHERE ordering_key = 'Z'"), 0);
	ts_stop(relay, SIGTERM);
	script_stop(&s);
	PQfinish(c);
}
END_TEST

/* Exactly once and in order per key at the real consumer, for a mix of
 * ordered and unordered messages, through a stalled worker's lease
 * takeover. Order is checked in inbox.notifications (the record handler
 * stores each message's ordering_seq). */
static int64_t
out_of_order_keys(PGconn *c)
{
	return ts_query_int(c,
	    "SELECT count(*) FROM (SELECT ordering_seq,"
	    "   lag(ordering_seq) OVER (PARTITION BY ordering_key ORDER BY id) AS prev"
	    "   FROM inbox.notifications WHERE ordering_key IS NOT NULL) x"
	    " WHERE prev IS NOT NULL AND ordering_seq <= prev");
}

START_TEST(test_takeover_keeps_order_at_real_consumer)
{
	char db[TS_CONNINFO_MAX], url[256];
	ts_db_create("ord_real", "all", db, sizeof(db));
	ts_ipc_url("ordr", url, sizeof(url));
	PGconn *c = ts_connect(db);
	ts_exec(c, "SELECT count(outbox.enqueue('t', 'k' || k || '-' || g, jsonb_build_object('g', g),"
	           " 'key-' || k)) FROM (SELECT g, k FROM generate_series(1, 20) g,"
	           " generate_series(1, 10) k ORDER BY g, k) x");
	enqueue_keyed(c, "free", NULL, 100);
	pid_t cpid = ts_consumer_spawn(NULL, db, url, NULL);
	char route[300];
	snprintf(route, sizeof(route), "*=%s", url);
	/* Worker stalls once after a claim, past its lease: the other worker
	 * takes the heads over; the stalled one is fenced out when it wakes.
	 * The stall outlasts the lease by 4.5 s, so that the other worker's
	 * takeover lands first even on a loaded machine (with 1.5 s, a CI run
	 * with docker builds beside it once woke the stalled worker before
	 * the takeover: it recorded its own batch, nothing to fence). */
	const char *relay_extra[] = { "--workers", "2", "--poll-ms", "50", "--lease-ms", "1500",
		"--delivery-timeout-ms", "400", "--batch", "5", "--fault-stall-after-claim", "1",
		"--fault-stall-ms", "6000", NULL };
	char log[256];
	pid_t rpid = ts_relay_spawn(log, db, route, relay_extra);
	int64_t done = ts_wait_value(c,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'", 300, 90000);
	/* Let the stalled worker wake and try its stale write. */
	int64_t end = ts_now_ms() + 15000;
	char *text = NULL;
	while (ts_now_ms() < end) {
		free(text);
		text = ts_read_file(log);
		if (text != NULL && strstr(text, "relay.record.fenced_out") != NULL)
			break;
		usleep(100 * 1000);
	}
	ck_assert_msg(text != NULL && strstr(text, "relay.record.fenced_out") != NULL,
	    "the stalled worker was not fenced out");
	free(text);
	ts_stop(rpid, SIGTERM);
	ts_stop(cpid, SIGTERM);
	ck_assert_int_eq(done, 300);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM inbox.notifications"), 300);
	ck_assert_int_eq(ts_query_int(c,
	    "SELECT count(DISTINCT idempotency_key) FROM inbox.notifications"), 300);
	ck_assert_int_eq(out_of_order_keys(c), 0);
	/* Each key's 20 messages arrived, numbered 1..20. */
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM (SELECT ordering_key FROM"
	    " inbox.notifications WHERE ordering_key IS NOT NULL GROUP BY ordering_key"
	    " HAVING count(*) = 20 AND min(ordering_seq) = 1 AND max(ordering_seq) = 20) x"), 10);
	PQfinish(c);
}
END_TEST

/* A lane has one batch out at a time and a batch holds at most one message
 * of a key (sql/outbox/012_streams.sql): one hot key goes one message per
 * batch, in order, and a worker stopped in the middle leaves no lease
 * behind (a released batch is taken again at once); a second relay
 * finishes the key in order. Shown broken first: with --no-ordering a
 * batch carries several messages of the key. */
static int64_t
hot_key_batches(const char *name, bool broken, int64_t *multi)
{
	char db[TS_CONNINFO_MAX], url[256], route[300], log[256];
	ts_db_create(name, "all", db, sizeof(db));
	ts_ipc_url(name, url, sizeof(url));
	snprintf(route, sizeof(route), "*=%s", url);
	PGconn *c = ts_connect(db);
	enqueue_keyed(c, "c", "C", 300);
	pid_t cpid = ts_consumer_spawn(NULL, db, url, NULL);
	const char *relay_extra[] = { "--workers", "1", "--poll-ms", "50", "--log-level", "debug",
		broken ? "--no-ordering" : NULL, NULL };
	pid_t rpid = ts_relay_spawn(log, db, route, relay_extra);
	ck_assert_int_ge(ts_wait_value(c,
	    "SELECT least(count(*), 30) FROM outbox.messages WHERE status = 'delivered'", 30, 60000),
	    30);
	ts_stop(rpid, SIGTERM);
	int64_t batches = ts_log_count(log, "event=relay.batch ");
	*multi = batches - ts_log_count(log, " kind=s messages=1 ");
	if (!broken) {
		ck_assert_int_eq(ts_query_int(c,
		    "SELECT count(*) FROM outbox.batches WHERE state = 'leased' AND owner IS NOT NULL"), 0);
		rpid = ts_relay_spawn(NULL, db, route, relay_extra);
		ck_assert_int_eq(ts_wait_value(c,
		    "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'", 300, 60000), 300);
		ts_stop(rpid, SIGTERM);
		ck_assert_int_eq(ts_query_int(c,
		    "SELECT count(DISTINCT idempotency_key) FROM inbox.notifications"), 300);
		ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM inbox.notifications"), 300);
		ck_assert_int_eq(out_of_order_keys(c), 0);
	}
	ts_stop(cpid, SIGTERM);
	PQfinish(c);
	return batches;
}

START_TEST(test_hot_key_one_message_per_batch)
{
	int64_t multi;
	ck_assert_int_gt(hot_key_batches("ord_hot_broken", true, &multi), 0);
	ck_assert_msg(multi > 0, "--no-ordering should put several messages of the key in a batch");
	ck_assert_int_ge(hot_key_batches("ord_hot", false, &multi), 30);
	ck_assert_msg(multi == 0, "%lld batches carried more than one message of the key",
	    (long long)multi);
}
END_TEST

/* The race between freeing a key and parking behind it, in both orders,
 * with two connections and explicit lock waits (no timing luck). Key K
 * waits behind its retry h-1 (outbox.ordering_blocks); h-2 is in the
 * stream. If the lane cut did not see the block (still there) while the
 * record of h-1 did not see h-2 parked (not committed yet), h-2 would wait
 * behind a block nobody frees: the key stuck. */
static bool send_until_blocked(PGconn *watch, PGconn *conn, const char *sql);
static void finish_sent(PGconn *conn);

/* K's head h-1 made a retry and claimed again in a retry batch; h-2
 * enqueued. Returns the retry batch's "id, fence". */
static void
key_waits_behind_retry(PGconn *c, char *batch, size_t len)
{
	ts_exec(c, "SELECT outbox.enqueue('t', 'h-1', '{}', 'K')");
	PGresult *r = PQexec(c, "SELECT batch_id, fence FROM outbox.claim(2, 'test', 60000, 10,"
	    " '{t}', '{}', false, false)");
	ck_assert_int_eq(PQntuples(r), 1);
	char sql[256];
	snprintf(sql, sizeof(sql), "SELECT outbox.record(2, %s, %s, true, 'done', 0, false,"
	    " ARRAY[(SELECT id FROM outbox.events WHERE idempotency_key = 'h-1')], '{retry}',"
	    " '{0}', '{busy}', false)::int", PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1));
	PQclear(r);
	ck_assert_int_eq(ts_query_int(c, sql), 1);
	r = PQexec(c, "SELECT batch_id, fence FROM outbox.claim(2, 'test', 60000, 10,"
	    " '{t}', '{}', false, true)");
	ck_assert_int_eq(PQntuples(r), 1);
	snprintf(batch, len, "%s, %s", PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1));
	PQclear(r);
	ts_exec(c, "SELECT outbox.enqueue('t', 'h-2', '{}', 'K')");
}

static const char *
record_h1_delivered(const char *batch, char *sql, size_t len)
{
	snprintf(sql, len, "SELECT outbox.record(2, %s, true, 'done', 0, false,"
	    " ARRAY[(SELECT id FROM outbox.events WHERE idempotency_key = 'h-1')],"
	    " '{delivered}', '{0}', '{\"\"}', false)::int", batch);
	return sql;
}

static const char cut_lane[] =
    "SELECT count(*) FROM outbox.claim(2, 'test', 60000, 10, '{t}', '{}', false, false)";

START_TEST(test_unblock_and_park_race_both_orders)
{
	char db[TS_CONNINFO_MAX], sql[512], batch[64];
	ts_db_create("ord_race", "outbox", db, sizeof(db));
	PGconn *watch = ts_connect(db), *relay = ts_connect(db), *cutter = ts_connect(db);

	/* 1. The record of h-1 first: the cut must wait for it, then see the
	 *    key free and take h-2 itself. */
	key_waits_behind_retry(watch, batch, sizeof(batch));
	ts_exec(relay, "BEGIN");
	ck_assert_int_eq(ts_query_int(relay, record_h1_delivered(batch, sql, sizeof(sql))), 1);
	bool blocked = send_until_blocked(watch, cutter, cut_lane);
	ts_exec(relay, "COMMIT");
	finish_sent(cutter);
	ck_assert_msg(blocked, "the lane cut did not wait for the key's unblock");
	ck_assert_int_eq(ts_query_int(watch, "SELECT count(*) FROM outbox.ordering_blocks"), 0);
	ck_assert_int_eq(ts_query_int(watch, "SELECT count(*) FROM outbox.retries"), 0);
	ck_assert_int_eq(ts_query_int(watch, "SELECT count(*) FROM outbox.messages"
	    " WHERE idempotency_key = 'h-2' AND status = 'pending' AND lease_owner = 'test'"), 1);

	/* 2. The cut first (it parks h-2 behind h-1, uncommitted): the record
	 *    must wait for it, then see h-2 waiting and keep the key blocked;
	 *    h-2 is next, as a retry of its own. */
	ts_exec(watch, "UPDATE outbox.batches SET state = 'done' WHERE state = 'leased'");
	ts_exec(watch, "UPDATE outbox.streams SET inflight = NULL");
	ts_exec(watch, "UPDATE outbox.ordering_seqs SET last_seq = 0");
	ts_exec(watch, "DELETE FROM outbox.ordering_next");
	ts_exec(watch, "TRUNCATE outbox.events_0");
	ts_exec(watch, "DELETE FROM outbox.streams");
	key_waits_behind_retry(watch, batch, sizeof(batch));
	ts_exec(cutter, "BEGIN");
	ck_assert_int_eq(ts_query_int(cutter, cut_lane), 0); /* h-2 parked, nothing to send */
	blocked = send_until_blocked(watch, relay, record_h1_delivered(batch, sql, sizeof(sql)));
	ts_exec(cutter, "COMMIT");
	finish_sent(relay);
	ck_assert_msg(blocked, "the unblock did not wait for the lane cut");
	ck_assert_int_eq(ts_query_int(watch, "SELECT count(*) FROM outbox.ordering_blocks"
	    " WHERE ordering_key = 'K' AND state = 'retry'"), 1);
	ck_assert_int_eq(ts_query_int(watch, "SELECT count(*) FROM outbox.retries"
	    " WHERE idempotency_key = 'h-2' AND batch_id IS NULL"), 1);
	/* and the key is not stuck: h-2 is claimable, and then the key is free */
	PGresult *r = PQexec(watch, "SELECT batch_id, fence, idempotency_key FROM outbox.claim(2,"
	    " 'test', 60000, 10, '{t}', '{}', false, true)");
	ck_assert_int_eq(PQntuples(r), 1);
	ck_assert_str_eq(PQgetvalue(r, 0, 2), "h-2");
	snprintf(sql, sizeof(sql), "SELECT outbox.record(2, %s, %s, true, 'done', 0, false,"
	    " ARRAY[(SELECT id FROM outbox.events WHERE idempotency_key = 'h-2')],"
	    " '{delivered}', '{0}', '{\"\"}', false)::int", PQgetvalue(r, 0, 0),
	    PQgetvalue(r, 0, 1));
	PQclear(r);
	ck_assert_int_eq(ts_query_int(watch, sql), 1);
	ck_assert_int_eq(ts_query_int(watch, "SELECT count(*) FROM outbox.ordering_blocks"), 0);
	PQfinish(watch);
	PQfinish(relay);
	PQfinish(cutter);
}
END_TEST

/* Send sql on conn without waiting, then wait until conn's backend waits
 * for a lock held by the other transaction (true), or sql finished (false). */
static bool
send_until_blocked(PGconn *watch, PGconn *conn, const char *sql)
{
	char q[200];
	ck_assert_int_eq(PQsendQuery(conn, sql), 1);
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

static void
finish_sent(PGconn *conn)
{
	PGresult *r;
	while ((r = PQgetResult(conn)) != NULL) {
		ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK || PQresultStatus(r) == PGRES_COMMAND_OK,
		    "%s", PQresultErrorMessage(r));
		PQclear(r);
	}
}

/* Claim topic 't' (max_n per batch; ordering false: the BROKEN
 * --no-ordering claim) until nothing comes, recording every batch
 * delivered (each message listed, so that a retry batch is done too); the
 * keys in the order they went out, comma separated, into order. */
static void
drain_order(PGconn *c, int max_n, bool ordering, char *order, size_t len)
{
	char n[16];
	snprintf(n, sizeof(n), "%d", max_n);
	order[0] = '\0';
	for (int round = 0; round < 1000; round++) {
		const char *cp[2] = { n, ordering ? "true" : "false" };
		PGresult *r = PQexecParams(c, "SELECT batch_id, fence, array_agg(id ORDER BY ord),"
		    " string_agg(idempotency_key, ',' ORDER BY ord)"
		    " FROM outbox.claim(2, 'test', 60000, $1::int, '{t}', '{}', false, false, $2::boolean)"
		    " WITH ORDINALITY x(batch_id, kind, fence, attempt, takeover, id, created_us, topic,"
		    "  idempotency_key, payload, ordering_key, ordering_seq, ord)"
		    " GROUP BY 1, 2", 2, NULL, cp, NULL, NULL, 0);
		ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQresultErrorMessage(r));
		if (PQntuples(r) == 0) {
			PQclear(r);
			/* a claim that only parked returns nothing: one more look */
			r = PQexec(c, "SELECT count(*) FROM outbox.messages WHERE status = 'pending'");
			bool pending = atoi(PQgetvalue(r, 0, 0)) > 0;
			PQclear(r);
			if (!pending)
				return;
			continue;
		}
		size_t used = strlen(order);
		snprintf(order + used, len - used, "%s%s", used ? "," : "", PQgetvalue(r, 0, 3));
		const char *rp[3] = { PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2) };
		PGresult *w = PQexecParams(c, "SELECT outbox.record(2, $1::bigint, $2::bigint, true,"
		    " 'done', 0, false, $3::bigint[], array_fill('delivered'::text,"
		    " ARRAY[cardinality($3::bigint[])]), array_fill(0::bigint,"
		    " ARRAY[cardinality($3::bigint[])]), array_fill(''::text,"
		    " ARRAY[cardinality($3::bigint[])]), false)::int", 3, NULL, rp, NULL, NULL, 0);
		ck_assert_msg(PQresultStatus(w) == PGRES_TUPLES_OK && strcmp(PQgetvalue(w, 0, 0), "1") == 0,
		    "record: %s", PQresultErrorMessage(w));
		PQclear(w);
		PQclear(r);
	}
	ck_abort_msg("the claims did not drain topic t");
}

/* Issue 29, defect 1: a key's order under concurrent producers. A takes its
 * transaction id first; B enqueues k1 with key K (sequence 1) and holds K;
 * A's enqueue of k2 waits for B, gets sequence 2 when B commits, and
 * commits with the LOWER transaction id. Within one window the stream is
 * read by transaction id, so k2 came first. Shown broken on the
 * --no-ordering claim; then k1, k2 with batches of 1 (the trap: the
 * window's first chunk is k2 alone) and of 10. */
static void
inverted_producers(const char *db)
{
	PGconn *a = ts_connect(db), *b = ts_connect(db), *watch = ts_connect(db);
	ts_exec(a, "BEGIN");
	ts_exec(a, "SELECT pg_current_xact_id()");
	ts_exec(b, "BEGIN");
	ts_exec(b, "SELECT outbox.enqueue('t', 'k1', '{}', 'K')");
	bool waited = send_until_blocked(watch, a, "SELECT outbox.enqueue('t', 'k2', '{}', 'K')");
	ts_exec(b, "COMMIT");
	finish_sent(a);
	ts_exec(a, "COMMIT");
	ck_assert_msg(waited, "k2's enqueue did not wait for K's row");
	/* the inversion the claim has to undo */
	ck_assert_int_eq(ts_query_int(watch, "SELECT count(*) FROM outbox.events e1, outbox.events e2"
	    " WHERE e1.idempotency_key = 'k1' AND e2.idempotency_key = 'k2'"
	    " AND e1.ordering_seq = 1 AND e2.ordering_seq = 2 AND e2.txid < e1.txid"), 1);
	PQfinish(a);
	PQfinish(b);
	PQfinish(watch);
}

START_TEST(test_concurrent_producers_keep_key_order)
{
	static const struct {
		bool ordering;
		int batch;
		const char *want;
	} cases[] = {
		{ false, 1, "k2,k1" }, { false, 10, "k2,k1" }, /* broken: enqueue order lost */
		{ true, 1, "k1,k2" }, { true, 10, "k1,k2" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char db[TS_CONNINFO_MAX], order[256];
		ts_db_create("ord_inverted", "outbox", db, sizeof(db));
		inverted_producers(db);
		PGconn *c = ts_connect(db);
		drain_order(c, cases[i].batch, cases[i].ordering, order, sizeof(order));
		ck_assert_msg(strcmp(order, cases[i].want) == 0,
		    "ordering=%d batch=%d: delivered %s, expected %s", cases[i].ordering,
		    cases[i].batch, order, cases[i].want);
		/* a key's numbers have no gap: an enqueue that lost its key to a
		 * concurrent one gives its number back */
		ck_assert_int_eq(ts_query_int(c, "SELECT last_seq FROM outbox.ordering_seqs"
		    " WHERE ordering_key = 'K'"), 2);
		PQfinish(c);
	}
}
END_TEST

/* Issue 29, defect 3: housekeeping deleted a dead letter after
 * --dead-retention but not the block it held (--on-dead-head block), so
 * nothing could free the key again. A dead letter that blocks its key is
 * kept until requeued; one that blocks nothing still goes; a dead block
 * whose dead letter is gone (what the old housekeeping left) is lifted:
 * its key's parked messages go first, in order. */
static void
dead_head(PGconn *c, const char *key)
{
	char sql[512];
	snprintf(sql, sizeof(sql), "SELECT batch_id, fence, id FROM outbox.claim(2, 'test', 60000,"
	    " 10, '{t}', '{}', false, false) WHERE idempotency_key = '%s'", key);
	PGresult *r = PQexec(c, sql);
	/* a claim that only parked (or found a new stream) returns nothing */
	for (int i = 0; i < 3 && PQntuples(r) == 0; i++) {
		PQclear(r);
		r = PQexec(c, sql);
	}
	ck_assert_int_eq(PQntuples(r), 1);
	snprintf(sql, sizeof(sql), "SELECT outbox.record(2, %s, %s, true, 'done', 0, false,"
	    " ARRAY[%s]::bigint[], '{dead}', '{0}', '{\"rejected by consumer: test\"}', false)::int",
	    PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2));
	PQclear(r);
	ck_assert_int_eq(ts_query_int(c, sql), 1);
}

START_TEST(test_dead_head_outlives_dead_retention)
{
	char db[TS_CONNINFO_MAX], order[256], sql[256];
	ts_db_create("ord_dead_ret", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	ts_exec(c, "SELECT outbox.enqueue('t', 'h-1', '{}', 'K')");
	dead_head(c, "h-1");
	ts_exec(c, "SELECT outbox.enqueue('t', 'h-2', '{}', 'K')");
	ts_exec(c, "SELECT outbox.enqueue('t', 'u-1', '{}')");
	dead_head(c, "u-1");
	/* h-2 parks behind the dead head */
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.claim(2, 'test', 60000, 10,"
	    " '{t}', '{}', false, false)"), 0);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.retries"
	    " WHERE idempotency_key = 'h-2'"), 1);

	/* both dead letters are older than the retention (a day) */
	ts_exec(c, "UPDATE outbox.dead SET died_at = now() - interval '10 days'");
	ck_assert_int_eq(ts_query_int(c, "SELECT dead_deleted FROM outbox.housekeep(0, 86400000,"
	    " 60000, 200)"), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.dead"
	    " WHERE idempotency_key = 'h-1'"), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.dead"
	    " WHERE idempotency_key = 'u-1'"), 0);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.ordering_blocks"
	    " WHERE ordering_key = 'K' AND state = 'dead'"), 1);
	/* the operator can still act: requeue it, and the key goes on in order */
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.requeue_dead("
	    "ARRAY(SELECT id FROM outbox.dead WHERE idempotency_key = 'h-1'))"), 1);
	drain_order(c, 10, true, order, sizeof(order));
	ck_assert_str_eq(order, "h-1,h-2");
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.ordering_blocks"), 0);

	/* The state a version before 018 left: the dead head deleted, its block
	 * kept, j-2 parked behind it. Housekeeping lifts the block for j-2. */
	ts_exec(c, "SELECT outbox.enqueue('t', 'j-1', '{}', 'J')");
	dead_head(c, "j-1");
	ts_exec(c, "SELECT outbox.enqueue('t', 'j-2', '{}', 'J')");
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.claim(2, 'test', 60000, 10,"
	    " '{t}', '{}', false, false)"), 0);
	ts_exec(c, "DELETE FROM outbox.dead WHERE idempotency_key = 'j-1'");
	ts_query_int(c, "SELECT count(*) FROM outbox.housekeep(0, 0, 60000, 200)");
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.ordering_blocks"
	    " WHERE ordering_key = 'J' AND state = 'retry'"), 1);
	ts_exec(c, "SELECT outbox.enqueue('t', 'j-3', '{}', 'J')");
	drain_order(c, 10, true, order, sizeof(order));
	ck_assert_str_eq(order, "j-2,j-3");
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM outbox.ordering_blocks");
	ck_assert_int_eq(ts_query_int(c, sql), 0);
	PQfinish(c);
}
END_TEST

/* Found by the protocol checker (tests/check/): under --on-dead-head skip,
 * a key's dead head requeued while the key's next message is out in its
 * lane's batch went out at once: two messages of one key in flight. A
 * retry of a key now waits until no other message of the key is out. */
START_TEST(test_requeued_head_waits_for_the_key_in_flight)
{
	char db[TS_CONNINFO_MAX], sql[512];
	ts_db_create("ord_requeue_inflight", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	ts_exec(c, "SELECT outbox.enqueue('t', 'h-1', '{}', 'K')");
	/* h-1 dead, skipped (skip_dead_heads true) */
	PGresult *r = PQexec(c, "SELECT batch_id, fence, id FROM outbox.claim(2, 'test', 60000, 10,"
	    " '{t}', '{}', false, false)");
	ck_assert_int_eq(PQntuples(r), 1);
	snprintf(sql, sizeof(sql), "SELECT outbox.record(2, %s, %s, true, 'done', 0, false,"
	    " ARRAY[%s]::bigint[], '{dead}', '{0}', '{\"rejected by consumer: test\"}', true)::int",
	    PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2));
	PQclear(r);
	ck_assert_int_eq(ts_query_int(c, sql), 1);
	/* h-2 goes out and stays out */
	ts_exec(c, "SELECT outbox.enqueue('t', 'h-2', '{}', 'K')");
	r = PQexec(c, "SELECT batch_id, fence, idempotency_key FROM outbox.claim(2, 'test', 60000,"
	    " 10, '{t}', '{}', false, false)");
	ck_assert_int_eq(PQntuples(r), 1);
	ck_assert_str_eq(PQgetvalue(r, 0, 2), "h-2");
	char batch[64];
	snprintf(batch, sizeof(batch), "%s, %s", PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1));
	PQclear(r);
	/* the operator requeues h-1: it waits while h-2 is out */
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.requeue_dead("
	    "ARRAY(SELECT id FROM outbox.dead))"), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.claim(2, 'test', 60000, 10,"
	    " '{t}', '{}', false, true)"), 0);
	snprintf(sql, sizeof(sql), "SELECT outbox.record(2, %s, true, 'done', 0, false, '{}', '{}',"
	    " '{}', '{}', true)::int", batch);
	ck_assert_int_eq(ts_query_int(c, sql), 1);
	r = PQexec(c, "SELECT idempotency_key FROM outbox.claim(2, 'test', 60000, 10, '{t}', '{}',"
	    " false, true)");
	ck_assert_int_eq(PQntuples(r), 1);
	ck_assert_str_eq(PQgetvalue(r, 0, 0), "h-1");
	PQclear(r);
	PQfinish(c);
}
END_TEST

START_TEST(test_enqueue_numbers_and_lanes)
{
	char db[TS_CONNINFO_MAX];
	ts_db_create("ord_enq", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	enqueue_keyed(c, "a", "A", 3);
	enqueue_keyed(c, "b", "B", 1);
	enqueue_keyed(c, "n", NULL, 2);
	/* A key's messages share one lane (1..16); unordered ones are lane 0;
	 * sequence 1..n per key; a repeated enqueue adds no number. */
	ck_assert_int_eq(ts_query_int(c, "SELECT count(DISTINCT lane) FROM outbox.events"
	    " WHERE ordering_key = 'A'"), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.events"
	    " WHERE ordering_key IS NOT NULL AND lane BETWEEN 1 AND outbox.ordering_lanes()"), 4);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.events"
	    " WHERE ordering_key IS NULL AND lane = 0"), 2);
	ck_assert_int_eq(ts_query_int(c, "SELECT ordering_seq FROM outbox.messages"
	    " WHERE idempotency_key = 'a-3'"), 3);
	enqueue_keyed(c, "a", "A", 3);
	ck_assert_int_eq(ts_query_int(c, "SELECT last_seq FROM outbox.ordering_seqs"
	    " WHERE topic = 't' AND ordering_key = 'A'"), 3);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM outbox.messages"
	    " WHERE ordering_key IS NULL AND ordering_seq IS NOT NULL"), 0);
	PQfinish(c);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("ordering");
	TCase *tc = tcase_create("ordering");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_enqueue_numbers_and_lanes);
	tcase_add_test(tc, test_failing_head_blocks_only_its_key);
	tcase_add_test(tc, test_dead_head_block_then_requeue_and_skip);
	tcase_add_test(tc, test_takeover_keeps_order_at_real_consumer);
	tcase_add_test(tc, test_hot_key_one_message_per_batch);
	tcase_add_test(tc, test_unblock_and_park_race_both_orders);
	tcase_add_test(tc, test_concurrent_producers_keep_key_order);
	tcase_add_test(tc, test_dead_head_outlives_dead_retention);
	tcase_add_test(tc, test_requeued_head_waits_for_the_key_in_flight);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
