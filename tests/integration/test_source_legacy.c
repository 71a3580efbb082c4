/*
 * test_source_legacy.c - relays switching from source '' (wire v1/v2, or
 * --no-source) to a named source (the default since wire v3) apply no
 * message twice: a named source inherits the records and webhook claims of
 * the empty source (docs/consumer.md, "Identity").
 *
 * One database (producer and inbox), N messages, all sent first by an old
 * relay (a wire version 2 request: records under source '', webhook claims
 * under the key alone) whose outcomes were never recorded (killed after
 * the send, or the reply lost), so they are still pending. Then a relay of
 * the derived source delivers them again. Each is answered duplicate: no second
 * record or effect, and the webhook downstream sees only the key alone,
 * acting once per message; a claim parked under that key stays parked
 * (the message is rejected with the resolve command naming the key alone).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/wire.h"
#include "outbox/webhook_key.h"
#include "testsupport.h"
#include "ts_consumer.h"
#include "ts_relay.h"
#include "webhook_target.h"

#define T_SEC 1000
#define N 10 /* messages */
#define TOPIC "orders"

struct legacy_run {
	char src[OB_WIRE_MAX_SOURCE + 1]; /* the second relay's derived source */
	int64_t records, named, effects;  /* inbox.processed, of them not '', notifications */
	int key_alone_once;               /* downstream: keys order-K acted on once */
	int named_requests;               /* downstream: requests under SOURCE/TOPIC/KEY */
	int wt_total;
	int64_t dead;                     /* messages rejected on the second delivery */
	char dead_error[512];             /* the parked message's last_error */
};

static void
deliver(const char *db, PGconn *conn, const char *route, const char *const *extra,
    char *src, size_t srclen, const char *clog)
{
	char rlog[256];
	pid_t rpid = ts_relay_spawn(rlog, db, route, extra);
	ts_log_wait_field(rlog, "relay.source", "source", src, srclen, 30 * T_SEC);
	int64_t done = ts_wait_value(conn, "SELECT count(*) FROM outbox.messages"
	    " WHERE status <> 'pending'", N, 60 * T_SEC);
	ts_stop(rpid, SIGTERM);
	ck_assert_msg(done == N, "%lld of %d delivered (logs %s, %s)", (long long)done, N, clog,
	    rlog);
}

static void
switch_source(const char *tag, bool webhook, struct legacy_run *out)
{
	char db[TS_CONNINFO_MAX], url[256], route[300], clog[256], hook[256];
	memset(out, 0, sizeof(*out));
	ts_db_create(tag, "all", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	ts_enqueue_n(conn, TOPIC, "order", N);
	struct wt_target *t = NULL;
	if (webhook)
		ck_assert_ptr_nonnull(t = wt_start(hook, sizeof(hook)));
	const char *wextra[] = { "--handler", "webhook", "--webhook-url", hook, NULL };
	ts_ipc_url(tag, url, sizeof(url));
	snprintf(route, sizeof(route), "*=%s", url);
	pid_t cpid = ts_consumer_spawn(clog, db, url, webhook ? wextra : NULL);

	/* before the upgrade: an old relay (wire version 2, source '') sent
	 * every message, and its outcomes were never recorded (killed after
	 * the send, or the reply lost): all still pending */
	struct ts_consumer_conn c;
	ts_consumer_open(&c, url);
	struct ob_wire_msg m[N];
	char keys[N][32], *pl[N];
	for (int k = 0; k < N; k++) {
		char sql[256];
		snprintf(keys[k], sizeof(keys[k]), "order-%d", k + 1);
		/* the message as outbox.messages holds it (the fingerprint) */
		snprintf(sql, sizeof(sql), "SELECT id, payload::text FROM outbox.messages"
		    " WHERE idempotency_key = '%s'", keys[k]);
		PGresult *res = PQexec(conn, sql);
		ck_assert_int_eq(PQntuples(res), 1);
		pl[k] = strdup(PQgetvalue(res, 0, 1));
		m[k] = ts_consumer_msg((uint64_t)strtoull(PQgetvalue(res, 0, 0), NULL, 10), TOPIC,
		    keys[k], pl[k]);
		PQclear(res);
	}
	struct ts_consumer_reply rep;
	ts_consumer_send_v(&c, 2, m, N);
	ck_assert_int_eq(ts_consumer_recv(&c, &rep, TS_CONSUMER_REPLY_TIMEOUT_MS), 0);
	for (int k = 0; k < N; k++)
		ck_assert_msg(rep.rep.results[k].status == OB_WIRE_APPLIED, "v2 %s: status %d (%.*s)",
		    keys[k], rep.rep.results[k].status, (int)rep.rep.results[k].detail_len,
		    rep.rep.results[k].detail);
	ts_consumer_reply_fini(&rep);
	ts_consumer_close(&c);
	for (int k = 0; k < N; k++)
		free(pl[k]);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM inbox.processed WHERE source = ''"), N);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'pending'"), N);
	if (webhook) {
		ck_assert_int_eq(wt_keys(t), N);
		/* order-1's call parked, as at most once leaves a call whose
		 * outcome is unknown (ob_keyclaim_park's write) */
		ts_exec(conn, "UPDATE inbox.webhook_calls SET state = 'unknown',"
		    " lease_until = 'infinity', topic = '" TOPIC "', parked_at = now(),"
		    " parked_error = 'test: reply lost' WHERE idempotency_key = 'order-1'");
	}

	/* after it: the derived source, sent in every frame */
	const char *named[] = { "--poll-ms", "100", NULL };
	deliver(db, conn, route, named, out->src, sizeof(out->src), clog);
	ck_assert_msg(strlen(out->src) > 0, "derived source");
	ts_stop(cpid, SIGTERM);

	out->records = ts_query_int(conn, "SELECT count(*) FROM inbox.processed");
	out->named = ts_query_int(conn, "SELECT count(*) FROM inbox.processed WHERE source <> ''");
	out->effects = ts_query_int(conn, "SELECT count(*) FROM inbox.notifications");
	out->dead = ts_query_int(conn, "SELECT count(*) FROM outbox.messages WHERE status = 'dead'");
	PGresult *r = PQexec(conn, "SELECT coalesce(last_error, '') FROM outbox.messages"
	    " WHERE idempotency_key = 'order-1'");
	ck_assert_int_eq(PQntuples(r), 1);
	snprintf(out->dead_error, sizeof(out->dead_error), "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	if (webhook) {
		out->wt_total = wt_total(t);
		for (int k = 1; k <= N; k++) {
			char key[32], skey[160];
			snprintf(key, sizeof(key), "order-%d", k);
			snprintf(skey, sizeof(skey), "%s/%s/order-%d", out->src, TOPIC, k);
			out->key_alone_once += wt_effects(t, key) == 1;
			out->named_requests += wt_requests(t, skey);
		}
		wt_stop(t);
	}
	PQfinish(conn);
}

START_TEST(test_record_handler)
{
	struct legacy_run r;
	switch_source("srcleg_rec", false, &r);
	/* each answered duplicate from its record of source '': one record and
	 * one effect per message, none under the new source (before the fix:
	 * 2 x N, N of them named) */
	ck_assert_int_eq(r.records, N);
	ck_assert_int_eq(r.named, 0);
	ck_assert_int_eq(r.effects, N);
	ck_assert_int_eq(r.dead, 0);
}
END_TEST

START_TEST(test_webhook_handler)
{
	struct legacy_run r;
	switch_source("srcleg_hook", true, &r);
	/* every message kept its key alone: the claims replayed, nothing sent
	 * again, no request under SOURCE/TOPIC/KEY (before the fix: N more
	 * requests under it, the parked one too) */
	ck_assert_int_eq(r.key_alone_once, N);
	ck_assert_int_eq(r.named_requests, 0);
	ck_assert_int_eq(r.wt_total, N);
	ck_assert_int_eq(r.records, N);
	ck_assert_int_eq(r.named, 0);
	/* the parked one stays parked under the key alone: rejected with the
	 * resolve command that names it */
	ck_assert_int_eq(r.dead, 1);
	ck_assert_msg(strstr(r.dead_error, "--key order-1 --as") != NULL, "last_error: %s",
	    r.dead_error);
}
END_TEST

/* outboxctl webhook resolve takes the claim key of a named source,
 * SOURCE/TOPIC/KEY, which is longer than a message key may be: the longest
 * there can be (webhook_key.h), parked, is resolved; one byte more is exit
 * 2 with the bound. */
START_TEST(test_resolve_named_claim_key)
{
	char db[TS_CONNINFO_MAX], out[4096], sql[OB_WEBHOOK_KEY_MAX + 512];
	static char key[OB_WEBHOOK_KEY_MAX + 1], topic[OB_WIRE_MAX_TOPIC + 1];
	ts_db_create("srcleg_resolve", "inbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	/* the longest claim key: a 63-byte source, a topic of 255 '/' (each
	 * written %2F), a 255-byte key */
	memset(topic, '/', OB_WIRE_MAX_TOPIC);
	topic[OB_WIRE_MAX_TOPIC] = '\0';
	size_t n = 0;
	memset(key, 's', OB_WIRE_MAX_SOURCE);
	n = OB_WIRE_MAX_SOURCE;
	key[n++] = '/';
	for (int i = 0; i < OB_WIRE_MAX_TOPIC; i++, n += 3)
		memcpy(key + n, "%2F", 3);
	key[n++] = '/';
	memset(key + n, 'k', OB_WIRE_MAX_KEY);
	n += OB_WIRE_MAX_KEY;
	key[n] = '\0';
	ck_assert_uint_eq(n, OB_WEBHOOK_KEY_MAX - 1);
	snprintf(sql, sizeof(sql), "INSERT INTO inbox.webhook_calls (idempotency_key, fingerprint,"
	    " state, fence, lease_until, topic, parked_at, parked_error) VALUES ('%s', 'x',"
	    " 'unknown', 1, 'infinity', '%s', now(), 'test')", key, topic);
	ts_exec(conn, sql);
	char *argv[] = { "outboxctl", "webhook", "resolve", "--inbox-db", db, "--topic", topic,
		"--key", key, "--as", "not-sent", NULL };
	ck_assert_msg(ts_run(argv, NULL, out, sizeof(out), 60 * T_SEC) == 0, "%s", out);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.webhook_calls"
	    " WHERE state = 'unknown'"), 0);
	/* one byte longer than any claim key: refused, nothing read */
	static char longer[OB_WEBHOOK_KEY_MAX + 1];
	memset(longer, 'k', OB_WEBHOOK_KEY_MAX);
	longer[OB_WEBHOOK_KEY_MAX] = '\0';
	argv[8] = longer;
	ck_assert_int_eq(ts_run(argv, NULL, out, sizeof(out), 60 * T_SEC), 2);
	ck_assert_msg(strstr(out, "--key: want 1..") != NULL, "%s", out);
	PQfinish(conn);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("source_legacy");
	TCase *tc = tcase_create("legacy");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_record_handler);
	tcase_add_test(tc, test_webhook_handler);
	tcase_add_test(tc, test_resolve_named_claim_key);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
