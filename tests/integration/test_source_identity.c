/*
 * test_source_identity.c - several producer databases into one consumer
 * (issue 18, part 2): the dedup identity is (source, topic, key), the
 * source named by each relay (--source, default derived from its
 * database) in every frame (wire version 3).
 *
 * Two producer databases on the test server enqueue the SAME keys on the
 * same topic, with the same payloads; a relay per database delivers to
 * ONE consumer. First the collision: both relays forced to one --source,
 * and the second database's messages are answered duplicate - marked
 * delivered, never applied (N effects for 2 x N messages). Then the fix,
 * with the derived sources: 2 x N records and effects, a redelivery of each
 * answered duplicate. The same with the webhook handler: the downstream
 * sees 2 x N distinct Idempotency-Keys and acts once per key (N with one
 * source). Last, the upgrade path: records written before inbox 008 get
 * source '', and a version 2 request (an old relay) still deduplicates
 * against them, and so does the same key from a named source (it inherits
 * the records of source ''; test_source_legacy: a real relay upgraded);
 * --no-source keeps a single database on that identity.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/supplemental/util/platform.h>

#include "outbox/err.h"
#include "outbox/migrate.h"
#include "outbox/wire.h"
#include "testsupport.h"
#include "ts_consumer.h"
#include "ts_pgserver.h"
#include "ts_relay.h"
#include "webhook_target.h"

#define T_SEC 1000
#define N 20                 /* keys per producer database */
#define TOPIC "orders"
#define INBOX_BEFORE_SOURCE 7 /* the last inbox migration before 008 */

struct run {
	char src[2][OB_WIRE_MAX_SOURCE + 1]; /* each relay's source, from its log */
	int64_t records, effects, sources;   /* in the consumer's inbox */
	int wt_keys, wt_total;               /* the webhook downstream's */
	int wt_once;                         /* keys it acted on exactly once */
};

/* The second server of test_two_servers_one_name: made and stopped here
 * (the teardown runs in the parent process, after a failure too). */
static char server_b_base[64], server_b_dir[128];

/* N messages in each of two producer databases (the same keys, the same
 * payloads), delivered by one relay each (same_source: both --source
 * "shop"; else derived) to one consumer (webhook: the webhook handler to a
 * downstream, else the record handler), one database after the other, so
 * that the second is the one that collides. server_b: the second database
 * is on that server (conninfo), under the same name as the first. */
static void
two_databases_at(const char *tag, bool same_source, bool webhook, const char *server_b,
    struct run *out)
{
	char db[2][TS_CONNINFO_MAX], in[TS_CONNINFO_MAX], url[256], route[300], clog[256],
	    rlog[2][256], name[64], hook[256];
	PGconn *p[2];
	for (int i = 0; i < 2; i++) {
		if (server_b != NULL) { /* one name, two servers */
			snprintf(name, sizeof(name), "%s_%d", tag, (int)getpid());
			ts_pgserver_db_create(i == 0 ? ts_server_conninfo() : server_b, name,
			    "outbox", db[i], sizeof(db[i]));
		} else {
			snprintf(name, sizeof(name), "%s_%c", tag, 'a' + i);
			ts_db_create(name, "outbox", db[i], sizeof(db[i]));
		}
		p[i] = ts_connect(db[i]);
		ts_enqueue_n(p[i], TOPIC, "order", N);
	}
	snprintf(name, sizeof(name), "%s_in", tag);
	ts_db_create(name, "inbox", in, sizeof(in));
	PGconn *ic = ts_connect(in);

	struct wt_target *t = NULL;
	const char *wextra[] = { "--handler", "webhook", "--webhook-url", hook, NULL };
	if (webhook)
		ck_assert_ptr_nonnull(t = wt_start(hook, sizeof(hook)));
	ts_ipc_url(tag, url, sizeof(url));
	snprintf(route, sizeof(route), "*=%s", url);
	pid_t cpid = ts_consumer_spawn(clog, in, url, webhook ? wextra : NULL);
	for (int i = 0; i < 2; i++) {
		const char *forced[] = { "--poll-ms", "100", "--source", "shop", NULL };
		const char *derived[] = { "--poll-ms", "100", NULL };
		pid_t rpid = ts_relay_spawn(rlog[i], db[i], route, same_source ? forced : derived);
		ts_log_wait_field(rlog[i], "relay.source", "source", out->src[i], sizeof(out->src[i]),
		    30 * T_SEC);
		int64_t done = ts_wait_value(p[i], "SELECT count(*) FROM outbox.messages"
		    " WHERE status = 'delivered'", N, 60 * T_SEC);
		ts_stop(rpid, SIGTERM);
		ck_assert_msg(done == N, "database %d: %lld of %d delivered (logs %s, %s)", i,
		    (long long)done, N, clog, rlog[i]);
		ck_assert_int_eq(ts_query_int(p[i],
		    "SELECT count(*) FROM outbox.messages WHERE status <> 'delivered'"), 0);
	}
	out->records = ts_query_int(ic, "SELECT count(*) FROM inbox.processed");
	out->sources = ts_query_int(ic, "SELECT count(DISTINCT source) FROM inbox.processed");
	out->effects = webhook ? 0 : ts_query_int(ic, "SELECT count(*) FROM inbox.notifications");

	/* A redelivery of every message of both, as a relay sends it after a
	 * crash: each answered duplicate, nothing applied again. */
	struct ts_consumer_conn c;
	ts_consumer_open(&c, url);
	for (int i = 0; i < 2; i++) {
		struct ob_wire_msg m[N];
		char keys[N][32];
		for (int k = 0; k < N; k++) {
			snprintf(keys[k], sizeof(keys[k]), "order-%d", k + 1);
			m[k] = ts_consumer_msg((uint64_t)(k + 1), TOPIC, keys[k], "");
			m[k].source = out->src[i];
			m[k].source_len = (uint8_t)strlen(out->src[i]);
		}
		/* the payloads as outbox.messages holds them (the fingerprint) */
		char sql[256], *pl[N];
		for (int k = 0; k < N; k++) {
			snprintf(sql, sizeof(sql), "SELECT payload::text FROM outbox.messages"
			    " WHERE idempotency_key = 'order-%d'", k + 1);
			PGresult *r = PQexec(p[i], sql);
			ck_assert_int_eq(PQntuples(r), 1);
			pl[k] = strdup(PQgetvalue(r, 0, 0));
			PQclear(r);
			m[k].payload = pl[k];
			m[k].payload_len = (uint32_t)strlen(pl[k]);
		}
		struct ts_consumer_reply r;
		ts_consumer_call(&c, m, N, &r);
		for (int k = 0; k < N; k++)
			ck_assert_msg(r.rep.results[k].status == OB_WIRE_DUPLICATE,
			    "redelivery of %s %s: status %d (%.*s)", out->src[i], keys[k],
			    r.rep.results[k].status, (int)r.rep.results[k].detail_len,
			    r.rep.results[k].detail);
		ts_consumer_reply_fini(&r);
		for (int k = 0; k < N; k++)
			free(pl[k]);
	}
	ts_consumer_close(&c);
	ck_assert_int_eq(ts_query_int(ic, "SELECT count(*) FROM inbox.processed"), out->records);
	if (!webhook)
		ck_assert_int_eq(ts_query_int(ic, "SELECT count(*) FROM inbox.notifications"),
		    out->effects);
	ts_stop(cpid, SIGTERM);

	if (webhook) {
		out->wt_keys = wt_keys(t);
		out->wt_total = wt_total(t);
		out->wt_once = 0;
		for (int i = 0; i < 2; i++)
			for (int k = 0; k < N; k++) {
				char key[256];
				snprintf(key, sizeof(key), "%s/%s/order-%d", out->src[i], TOPIC, k + 1);
				out->wt_once += wt_effects(t, key) == 1;
			}
		wt_stop(t);
	}
	PQfinish(ic);
	PQfinish(p[0]);
	PQfinish(p[1]);
	if (server_b != NULL) { /* the first one is on the shared server */
		PGconn *admin = ts_connect(ts_server_conninfo());
		char sql[128];
		snprintf(sql, sizeof(sql), "DROP DATABASE \"%s_%d\"", tag, (int)getpid());
		ts_exec(admin, sql);
		PQfinish(admin);
	}
}

static void
two_databases(const char *tag, bool same_source, bool webhook, struct run *out)
{
	two_databases_at(tag, same_source, webhook, NULL, out);
}

/* One database name on two servers (a second initdb): the derived sources
 * differ by the system identifier, and every message of both is applied. */
START_TEST(test_two_servers_one_name)
{
	char conn_b[TS_CONNINFO_MAX];
	struct run r;
	ts_pgserver_start(server_b_dir, conn_b, sizeof(conn_b));
	two_databases_at("src_twosrv", false, false, conn_b, &r);
	ck_assert_str_ne(r.src[0], r.src[1]);
	ck_assert_str_eq(r.src[0] + 16, r.src[1] + 16); /* the same name */
	ck_assert_int_eq(r.records, 2 * N);
	ck_assert_int_eq(r.effects, 2 * N);
	ck_assert_int_eq(r.sources, 2);
	ts_pgserver_stop_quiet(server_b_dir);
}
END_TEST

static void
stop_server_b(void)
{
	ts_pgserver_stop_quiet(server_b_dir);
	rmdir(server_b_base);
}

START_TEST(test_two_databases_one_consumer)
{
	struct run r;
	/* The collision: one source for both databases. Every message of the
	 * second is answered duplicate (the same key and payload as the
	 * first's) and marked delivered, yet none of them was applied. */
	two_databases("src_same", true, false, &r);
	ck_assert_str_eq(r.src[0], "shop");
	ck_assert_str_eq(r.src[1], "shop");
	ck_assert_int_eq(r.records, N);
	ck_assert_int_eq(r.effects, N);
	ck_assert_int_eq(r.sources, 1);

	/* The fix: each relay's derived source (two databases of one server:
	 * one system identifier, two names). Every message of both applied
	 * once: 2 x N records, 2 x N effects. */
	two_databases("src_derived", false, false, &r);
	ck_assert_str_ne(r.src[0], r.src[1]);
	for (int i = 0; i < 2; i++)
		ck_assert_msg(ob_wire_source_ok(r.src[i], strlen(r.src[i])) &&
		    strlen(r.src[i]) > 17 && r.src[i][16] == '.', "derived source '%s'", r.src[i]);
	ck_assert_int_eq(strncmp(r.src[0], r.src[1], 16), 0); /* one server */
	ck_assert_int_eq(r.records, 2 * N);
	ck_assert_int_eq(r.effects, 2 * N);
	ck_assert_int_eq(r.sources, 2);
}
END_TEST

START_TEST(test_two_databases_webhook)
{
	struct run r;
	/* One source: the downstream sees N keys; the second database's
	 * messages never reach it. */
	two_databases("srcw_same", true, true, &r);
	ck_assert_int_eq(r.records, N);
	ck_assert_int_eq(r.wt_keys, N);
	ck_assert_int_eq(r.wt_total, N);
	/* Derived sources: 2 x N distinct keys SOURCE/TOPIC/KEY, each acted on
	 * once, one request each. */
	two_databases("srcw_derived", false, true, &r);
	ck_assert_int_eq(r.records, 2 * N);
	ck_assert_int_eq(r.wt_keys, 2 * N);
	ck_assert_int_eq(r.wt_total, 2 * N);
	ck_assert_int_eq(r.wt_once, 2 * N);
}
END_TEST

/* Records from before inbox 008, then migrated: source ''. A version 2
 * request (an old relay) deduplicates against them; version 3 with no
 * source is the same identity; a named source inherits them.
 * prebuilt: the operator built the new index CONCURRENTLY first (008's
 * comment), and the migration makes it the primary key without a rebuild. */
static void
upgrade(bool prebuilt)
{
	char db[TS_CONNINFO_MAX], url[256], log[256], err[1024];
	ts_db_create_at(prebuilt ? "src_upgrade_pre" : "src_upgrade", "inbox",
	    INBOX_BEFORE_SOURCE, db, sizeof(db));
	PGconn *conn = ts_connect(db);
	ts_exec(conn, "INSERT INTO inbox.processed (idempotency_key, topic, message_id, fence,"
	    " fingerprint) VALUES ('k1', 't', 1, 1,"
	    " encode(sha256('t'::bytea || '\\x00'::bytea || convert_to('{\"a\":1}', 'UTF8')),"
	    " 'hex'))");
	int64_t index_oid = 0;
	if (prebuilt) {
		ts_exec(conn, "ALTER TABLE inbox.processed ADD COLUMN IF NOT EXISTS source text"
		    " NOT NULL DEFAULT ''");
		ts_exec(conn, "CREATE UNIQUE INDEX CONCURRENTLY processed_key_topic_source"
		    " ON inbox.processed (idempotency_key, topic, source)");
		index_oid = ts_query_int(conn,
		    "SELECT 'inbox.processed_key_topic_source'::regclass::oid");
	}
	struct ob_migrate_report rep;
	ck_assert_msg(ob_migrate(conn, &(struct ob_migrate_opts){ .set = "inbox" }, &rep, err, sizeof(err)) == OB_OK, "migrate: %s",
	    err);
	ck_assert_int_eq(rep.migrations, TS_INBOX_LATEST - INBOX_BEFORE_SOURCE);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM inbox.processed WHERE source = '' AND idempotency_key = 'k1'"),
	    1);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT (pg_get_indexdef('inbox.processed_pkey'::regclass)"
	    " LIKE '%(idempotency_key, topic, source)')::int"), 1);
	ck_assert_int_eq(ts_query_int(conn, "SELECT min_version * 10 + max_version"
	    " FROM inbox.protocols WHERE component = 'consumer'"), 35); /* 3..5 since 010 */
	if (prebuilt) /* taken over, not built again */
		ck_assert_int_eq(ts_query_int(conn, "SELECT 'inbox.processed_pkey'::regclass::oid"),
		    index_oid);

	ts_ipc_url(prebuilt ? "srcupp" : "srcup", url, sizeof(url));
	pid_t pid = ts_consumer_spawn(log, db, url, NULL);
	struct ts_consumer_conn c;
	ts_consumer_open(&c, url);
	struct ob_wire_msg m = ts_consumer_msg(1, "t", "k1", "{\"a\":1}");
	struct ts_consumer_reply r;
	/* an old relay (version 2): its old message is a duplicate */
	ts_consumer_send_v(&c, 2, &m, 1);
	ck_assert_int_eq(ts_consumer_recv(&c, &r, TS_CONSUMER_REPLY_TIMEOUT_MS), 0);
	ck_assert_uint_eq(r.rep.version, 2);
	ck_assert_int_eq(r.rep.results[0].status, OB_WIRE_DUPLICATE);
	ts_consumer_reply_fini(&r);
	/* ... and with another payload, a reused key */
	struct ob_wire_msg other = ts_consumer_msg(1, "t", "k1", "{\"a\":2}");
	ts_consumer_send_v(&c, 2, &other, 1);
	ck_assert_int_eq(ts_consumer_recv(&c, &r, TS_CONSUMER_REPLY_TIMEOUT_MS), 0);
	ck_assert_int_eq(r.rep.results[0].status, OB_WIRE_REJECT);
	ts_consumer_reply_fini(&r);
	/* version 3 without a source: the same identity */
	ck_assert_int_eq(ts_consumer_call1(&c, m, NULL, 0), OB_WIRE_DUPLICATE);
	/* a named source inherits the records of source '' (a relay upgraded
	 * while k1 was in flight sends it again under its source): duplicate,
	 * and with another payload a reused key, in the set path (one
	 * message) and in the per-message path (the key twice in one batch) */
	m.source = "shop-b";
	m.source_len = 6;
	other.source = m.source;
	other.source_len = m.source_len;
	ck_assert_int_eq(ts_consumer_call1(&c, m, NULL, 0), OB_WIRE_DUPLICATE);
	ck_assert_int_eq(ts_consumer_call1(&c, other, NULL, 0), OB_WIRE_REJECT);
	struct ob_wire_msg twice[2][2] = { { m, m }, { other, other } };
	for (int i = 0; i < 2; i++) {
		ts_consumer_call(&c, twice[i], 2, &r);
		for (int k = 0; k < 2; k++)
			ck_assert_msg(r.rep.results[k].status ==
			    (i == 0 ? OB_WIRE_DUPLICATE : OB_WIRE_REJECT), "batch %d, %d: status %d"
			    " (%.*s)", i, k, r.rep.results[k].status, (int)r.rep.results[k].detail_len,
			    r.rep.results[k].detail);
		ts_consumer_reply_fini(&r);
	}
	/* a key the source '' never sent: this source's own */
	struct ob_wire_msg k3 = ts_consumer_msg(3, "t", "k3", "{}");
	k3.source = m.source;
	k3.source_len = m.source_len;
	ck_assert_int_eq(ts_consumer_call1(&c, k3, NULL, 0), OB_WIRE_APPLIED);
	ck_assert_int_eq(ts_consumer_call1(&c, k3, NULL, 0), OB_WIRE_DUPLICATE);
	/* a new key from an old relay is recorded under source '' */
	struct ob_wire_msg k2 = ts_consumer_msg(2, "t", "k2", "{}");
	ts_consumer_send_v(&c, 2, &k2, 1);
	ck_assert_int_eq(ts_consumer_recv(&c, &r, TS_CONSUMER_REPLY_TIMEOUT_MS), 0);
	ck_assert_int_eq(r.rep.results[0].status, OB_WIRE_APPLIED);
	ts_consumer_reply_fini(&r);
	/* and the other way round: an old relay's frame of a key a named source
	 * applied (its late frame after the new relay took the lease over) is a
	 * duplicate of that record, in the set path and the per-message path,
	 * and with another payload a reused key */
	struct ob_wire_msg late[2] = { ts_consumer_msg(3, "t", "k3", "{}"),
		ts_consumer_msg(3, "t", "k3", "{}") };
	for (uint32_t n = 1; n <= 2; n++) {
		ts_consumer_send_v(&c, 2, late, n);
		ck_assert_int_eq(ts_consumer_recv(&c, &r, TS_CONSUMER_REPLY_TIMEOUT_MS), 0);
		for (uint32_t k = 0; k < n; k++)
			ck_assert_msg(r.rep.results[k].status == OB_WIRE_DUPLICATE, "late '' %u/%u:"
			    " status %d (%.*s)", k, n, r.rep.results[k].status,
			    (int)r.rep.results[k].detail_len, r.rep.results[k].detail);
		ts_consumer_reply_fini(&r);
	}
	late[0] = ts_consumer_msg(3, "t", "k3", "{\"other\":1}");
	ts_consumer_send_v(&c, 2, late, 1);
	ck_assert_int_eq(ts_consumer_recv(&c, &r, TS_CONSUMER_REPLY_TIMEOUT_MS), 0);
	ck_assert_int_eq(r.rep.results[0].status, OB_WIRE_REJECT);
	ts_consumer_reply_fini(&r);
	ts_consumer_close(&c);
	ts_stop(pid, SIGTERM);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.processed"), 3);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM inbox.processed WHERE source = 'shop-b' AND idempotency_key = 'k1'"),
	    0);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM inbox.processed WHERE source = 'shop-b' AND idempotency_key = 'k3'"),
	    1);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM inbox.notifications WHERE source = 'shop-b'"), 1);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM inbox.notifications WHERE source = '' AND idempotency_key = 'k2'"),
	    1);
	PQfinish(conn);
}

START_TEST(test_upgrade_old_records_and_v2_requests)
{
	upgrade(false);
	upgrade(true);
}
END_TEST

/* --no-source: the empty source, the identity of relays before version 3
 * (one database upgrading): its records are source '' and the webhook's
 * downstream key is the key alone. */
START_TEST(test_no_source)
{
	char db[TS_CONNINFO_MAX], url[256], route[300], clog[256], rlog[256], hook[256];
	ts_db_create("src_none", "all", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	ts_enqueue_n(conn, TOPIC, "order", 3);
	struct wt_target *t = wt_start(hook, sizeof(hook));
	ck_assert_ptr_nonnull(t);
	ts_ipc_url("srcnone", url, sizeof(url));
	snprintf(route, sizeof(route), "*=%s", url);
	const char *cextra[] = { "--handler", "webhook", "--webhook-url", hook, NULL };
	const char *rextra[] = { "--poll-ms", "100", "--no-source", NULL };
	pid_t cpid = ts_consumer_spawn(clog, db, url, cextra);
	pid_t rpid = ts_relay_spawn(rlog, db, route, rextra);
	ts_assert_logged(rlog, "source=\"\" derived=0");
	ck_assert_int_eq(ts_wait_value(conn, "SELECT count(*) FROM outbox.messages"
	    " WHERE status = 'delivered'", 3, 60 * T_SEC), 3);
	ts_stop(rpid, SIGTERM);
	ts_stop(cpid, SIGTERM);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM inbox.processed WHERE source = ''"), 3);
	ck_assert_int_eq(wt_effects(t, "order-1"), 1);
	ck_assert_int_eq(wt_keys(t), 3);
	wt_stop(t);
	PQfinish(conn);
}
END_TEST

/* A consumer of wire versions 1..2 refuses the relay's version 3 with its
 * wire.version error reply: the relay logs consumer_too_old once, keeps
 * the message pending however many attempts and however long it waits
 * (a refused frame reached no consumer that could apply it: its batch
 * goes back whole, attempt refunded; before, --max-attempts 2 made it
 * dead at the second refusal),
 * and delivers it once the consumer is upgraded. */
START_TEST(test_old_consumer_refuses_v3)
{
	char db[TS_CONNINFO_MAX], url[256], route[300], rlog[256];
	struct ts_fake_consumer fc;
	ts_db_create("src_oldc", "outbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	ts_fake_consumer_routed(&fc, "srcoldc", "*", TS_FAKE_V2_ONLY, url, sizeof(url), route,
	    sizeof(route));
	const char *extra[] = { "--poll-ms", "100", "--backoff-base-ms", "50", "--backoff-cap-ms",
		"200", "--max-attempts", "2", "--max-age", "1s", NULL };
	pid_t rpid = ts_relay_spawn(rlog, db, route, extra);
	ts_query_int(conn, "SELECT outbox.enqueue('orders', 'old-consumer', '{}')");
	int64_t deadline = ts_now_ms() + 60 * T_SEC;
	/* refused more often than --max-attempts, for longer than --max-age */
	while ((atomic_load(&fc.frames) < 3 || ts_query_int(conn, "SELECT (now() - created_at"
	    " > interval '1.5 s')::int FROM outbox.events WHERE idempotency_key ="
	    " 'old-consumer'") == 0) && ts_now_ms() < deadline)
		nng_msleep(20);
	ck_assert_msg(atomic_load(&fc.frames) >= 3, "the relay stopped sending after %d refused"
	    " frames: %lld of the message dead (a refused frame must not count as an attempt;"
	    " log %s)", (int)atomic_load(&fc.frames), (long long)ts_query_int(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'dead'"), rlog);
	ck_assert_int_eq(ts_log_wait(rlog, "relay.deliver.consumer_too_old", 1, 10 * T_SEC), 1);
	ts_assert_logged(rlog, "upgrade consumers before relays");
	ck_assert_int_eq(ts_log_count(rlog, "relay.deliver.consumer_too_old"), 1);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM outbox.messages"
	    " WHERE status = 'pending'"), 1);
	/* no refusal counted: a consumer's first real failure after the
	 * upgrade starts from zero attempts */
	ck_assert_int_le(ts_query_int(conn, "SELECT max(attempts) FROM outbox.messages"), 1);
	atomic_store(&fc.mode, TS_FAKE_APPLIED); /* upgraded */
	ck_assert_int_eq(ts_wait_value(conn, "SELECT count(*) FROM outbox.messages"
	    " WHERE status = 'delivered'", 1, 60 * T_SEC), 1);
	ts_stop(rpid, SIGTERM);
	ts_fake_consumer_stop(&fc);
	PQfinish(conn);
}
END_TEST

/* --source is checked at start: a bad name is exit 2 with one line. */
START_TEST(test_source_flag_checked)
{
	char out[4096];
	const char *bad[] = { "a/b", "with space",
		"x123456789012345678901234567890123456789012345678901234567890123" };
	char *both[] = { "outbox-relay", "--db", "dbname=none", "--route", "*=ipc:///x",
		"--source", "a", "--no-source", NULL };
	ck_assert_int_eq(ts_run(both, NULL, out, sizeof(out), 30 * T_SEC), 2);
	ck_assert_msg(strstr(out, "--no-source and --source 'a': choose one") != NULL, "%s", out);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *argv[] = { "outbox-relay", "--db", "dbname=none", "--route", "*=ipc:///x",
			"--source", (char *)bad[i], NULL };
		ck_assert_int_eq(ts_run(argv, NULL, out, sizeof(out), 30 * T_SEC), 2);
		ck_assert_msg(strstr(out, "--source") != NULL && strstr(out, "[A-Za-z0-9._-]") != NULL,
		    "%s: %s", bad[i], out);
	}
}
END_TEST

int
main(void)
{
	snprintf(server_b_base, sizeof(server_b_base), "/tmp/obsrc.XXXXXX");
	if (mkdtemp(server_b_base) == NULL) {
		perror("mkdtemp");
		return EXIT_FAILURE;
	}
	snprintf(server_b_dir, sizeof(server_b_dir), "%s/b", server_b_base);
	Suite *s = suite_create("source_identity");
	TCase *tc = tcase_create("source");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_source_flag_checked);
	tcase_add_test(tc, test_upgrade_old_records_and_v2_requests);
	tcase_add_test(tc, test_two_databases_one_consumer);
	tcase_add_test(tc, test_two_databases_webhook);
	tcase_add_test(tc, test_no_source);
	tcase_add_test(tc, test_old_consumer_refuses_v3);
	tcase_add_test(tc, test_two_servers_one_name);
	tcase_add_unchecked_fixture(tc, NULL, stop_server_b);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
