/*
 * test_bus_tls_reload.c - SIGHUP re-reads the TLS files of relay and
 * consumer (same paths, new contents), against the real programs, a real
 * PostgreSQL and certificates made with openssl (ts_tls.h), on loopback
 * TCP with ports bound as 0 and read back.
 *
 * Under load: the relay delivers 2,000 messages over tls+tcp:// to a
 * consumer slowed a little per batch, so frames are in flight throughout;
 * mid-stream both programs' files are replaced with certificates of a NEW
 * CA (each side trusting only the new CA) and both get SIGHUP. Every
 * message is applied exactly once (as many effects and dedup records as
 * messages, one per key, none dead), both log their reload and count it,
 * and after it the consumer refuses a client certificate of the old CA and
 * serves one of the new.
 *
 * A bad file on SIGHUP (the consumer's key not its certificate's, the
 * relay's certificate not PEM): each says why in one warning, counts a
 * failed reload, and keeps serving with the configuration it had; new
 * connections too (a client with the old certificates is served, and the
 * relay re-dials with its kept one after the consumer re-opens); a CA
 * file holding two CAs admits client certificates of both.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

#include "outbox/wire.h"
#include "testsupport.h"
#include "ts_consumer.h"
#include "ts_relay.h"
#include "ts_tls.h"

#define T_SEC 1000
#define N_LOAD 2000
#define RELOAD_AT 200       /* delivered when the files are swapped */
#define N_SMALL 20

#define DELIVERED "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'"
#define DEAD "SELECT count(*) FROM outbox.messages WHERE status = 'dead'"

/* One program's TLS files, copies of its own that the test replaces. */
struct files {
	char cert[TS_TLS_PATH_MAX], key[TS_TLS_PATH_MAX], ca[TS_TLS_PATH_MAX];
};

static void
files_set(struct files *f, const char *cert, const char *key, const char *ca)
{
	ts_tls_replace(f->cert, cert);
	ts_tls_replace(f->key, key);
	ts_tls_replace(f->ca, ca);
}

static void
files_make(struct files *f, const char *who, const char *cert, const char *key,
    const char *ca)
{
	static int n;
	n++;
	snprintf(f->cert, sizeof(f->cert), "%s/%s-%d-cert.pem", ts_tls_certs()->dir, who, n);
	snprintf(f->key, sizeof(f->key), "%s/%s-%d-key.pem", ts_tls_certs()->dir, who, n);
	snprintf(f->ca, sizeof(f->ca), "%s/%s-%d-ca.pem", ts_tls_certs()->dir, who, n);
	files_set(f, cert, key, ca);
}

struct consumer {
	pid_t pid;
	char log[256];
	char *url;        /* from the ready file: the bound port */
	int metrics_port;
};

/* slow_ms > 0: every batch sleeps that long before its COMMIT, so that
 * requests are being applied whenever the listener is re-opened. */
static void
consumer_start(struct consumer *c, const char *db, const struct files *f, const char *slow_ms)
{
	char ready[512];
	static int n;
	snprintf(ready, sizeof(ready), "%s/reload-consumer-%d.ready", ts_tmpdir(), ++n);
	const char *base[] = { "--ready-file", ready, "--metrics", "127.0.0.1:0",
		"--threads", "2", "--tls-cert", f->cert, "--tls-key", f->key, "--tls-ca", f->ca,
		NULL };
	const char *slow[] = { "--fault-slow", "1000000000", "--fault-slow-ms", slow_ms, NULL };
	const char *args[24];
	ts_args_cat(args, 24, base, slow_ms != NULL ? slow : NULL);
	c->pid = ts_consumer_spawn(c->log, db, "tls+tcp://127.0.0.1:0", args);
	c->url = ts_wait_ready_file(ready, c->pid, c->log, 60 * T_SEC);
	c->metrics_port = ts_log_wait_port(c->log, "consumer.metrics.listening", 30 * T_SEC);
}

static void
consumer_stop(struct consumer *c)
{
	ts_stop(c->pid, SIGTERM);
	free(c->url);
}

struct relay {
	pid_t pid;
	char log[256];
	int metrics_port;
};

static void
relay_start(struct relay *r, const char *db, const char *consumer_url, const struct files *f)
{
	char route[256];
	snprintf(route, sizeof(route), "t=%s", consumer_url);
	const char *args[] = { "--tls-cert", f->cert, "--tls-key", f->key, "--tls-ca", f->ca,
		"--tls-server-name", TS_TLS_SERVER_NAME, "--metrics", "127.0.0.1:0",
		"--poll-ms", "100", "--batch", "5", "--max-inflight", "4",
		"--delivery-timeout-ms", "5s", "--lease-ms", "10s",
		"--backoff-base-ms", "10ms", "--backoff-cap-ms", "200ms",
		"--breaker-probe-interval", "200ms", NULL };
	r->pid = ts_relay_spawn(r->log, db, route, args);
	r->metrics_port = ts_log_wait_port(r->log, "relay.metrics.listening", 30 * T_SEC);
}

/* The level of the last line of event in the log at path (within 60 s). */
static void
assert_level(const char *path, const char *event, const char *level)
{
	char v[32];
	ts_log_wait_field(path, event, "level", v, sizeof(v), 60 * T_SEC);
	ck_assert_msg(strcmp(v, level) == 0, "%s in %s: level=%s, want %s", event, path, v,
	    level);
}

static void
assert_metric(int port, const char *series, double want, const char *log)
{
	double v = ts_wait_metric(port, series, want, 30 * T_SEC);
	ck_assert_msg(v == want, "%s = %g, want %g (%s)", series, v, want, log);
}

/* Every message of topic t applied exactly once, none dead. */
static void
assert_exactly_once(PGconn *conn, int n, const char *rlog, const char *clog)
{
	int64_t delivered = ts_wait_value(conn, DELIVERED, n, 180 * T_SEC);
	ck_assert_msg(delivered == n, "delivered %lld of %d (%s, %s)", (long long)delivered, n,
	    rlog, clog);
	ck_assert_int_eq(ts_query_int(conn, DEAD), 0);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(*) FROM inbox.notifications WHERE topic = 't'"), n);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(DISTINCT idempotency_key)"
	    " FROM inbox.notifications WHERE topic = 't'"), n);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.processed"
	    " WHERE idempotency_key NOT LIKE 'rogue-%'"), n);
}

START_TEST(test_reload_under_load)
{
	const struct ts_tls *t = ts_tls_certs();
	char db[TS_CONNINFO_MAX];
	ts_db_create("tlsreload", "all", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	ts_enqueue_n(conn, "t", "m", N_LOAD);

	struct files cf, rf;
	files_make(&cf, "consumer", t->server_cert, t->server_key, t->ca);
	files_make(&rf, "relay", t->client_cert, t->client_key, t->ca);
	struct consumer c;
	consumer_start(&c, db, &cf, "20ms");
	struct relay r;
	relay_start(&r, db, c.url, &rf);

	/* Before the swap a client certificate of CA 1 is served (what the
	 * reload must take away). */
	nng_tls_config *ca1 = ts_tls_client_config(t->ca, t->client_cert, t->client_key);
	ck_assert_int_eq(ts_tls_call(c.url, ca1, 900000, "rogue-before"), OB_WIRE_APPLIED);
	nng_tls_config_free(ca1);

	/* Mid-stream: both move to CA 2, each trusting only it. */
	int64_t before = ts_wait_at_least(conn, DELIVERED, RELOAD_AT, 120 * T_SEC);
	ck_assert_msg(before >= RELOAD_AT, "only %lld delivered (%s, %s)", (long long)before,
	    r.log, c.log);
	files_set(&cf, t->server2_cert, t->server2_key, t->ca2);
	files_set(&rf, t->other_cert, t->other_key, t->ca2);
	ck_assert_int_eq(kill(c.pid, SIGHUP), 0);
	ck_assert_int_eq(kill(r.pid, SIGHUP), 0);
	int64_t at_reload = ts_query_int(conn, DELIVERED);
	ck_assert_msg(at_reload < N_LOAD, "the stream was over before the reload (%lld)",
	    (long long)at_reload);
	ck_assert_int_eq(ts_log_wait(c.log, "event=consumer.tls.reloaded", 1, 60 * T_SEC), 1);
	ck_assert_int_eq(ts_log_wait(r.log, "event=relay.tls.reloaded", 1, 60 * T_SEC), 1);
	int64_t at_both = ts_query_int(conn, DELIVERED);
	assert_level(c.log, "consumer.tls.reloaded", "info");
	assert_level(r.log, "relay.tls.reloaded", "info");

	assert_exactly_once(conn, N_LOAD, r.log, c.log);
	fprintf(stderr, "test_reload_under_load: delivered %lld before the swap, %lld at the"
	    " SIGHUPs, %lld once both had reloaded; consumer answered duplicate %g times\n",
	    (long long)before, (long long)at_reload, (long long)at_both,
	    ts_metric(c.metrics_port, "outbox_consumer_duplicate_total{topic=\"t\"}"));
	ck_assert_int_eq(ts_log_count(c.log, "consumer.tls.reload_failed"), 0);
	ck_assert_int_eq(ts_log_count(r.log, "relay.tls.reload_failed"), 0);
	assert_metric(c.metrics_port, "outbox_consumer_tls_reload_total{result=\"ok\"}", 1, c.log);
	assert_metric(c.metrics_port, "outbox_consumer_tls_reload_total{result=\"failed\"}", 0,
	    c.log);
	assert_metric(r.metrics_port, "outbox_relay_tls_reload_total{result=\"ok\"}", 1, r.log);

	/* Handshakes now go by CA 2: the old CA's client certificate is
	 * refused, writing nothing; the new one's is served. */
	nng_tls_config *old = ts_tls_client_config(t->ca2, t->client_cert, t->client_key);
	ck_assert_int_eq(ts_tls_call(c.url, old, 900001, "rogue-old-ca"), 0);
	nng_tls_config_free(old);
	nng_tls_config *fresh = ts_tls_client_config(t->ca2, t->other_cert, t->other_key);
	ck_assert_int_eq(ts_tls_call(c.url, fresh, 900002, "rogue-new-ca"), OB_WIRE_APPLIED);
	nng_tls_config_free(fresh);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.notifications"
	    " WHERE idempotency_key = 'rogue-old-ca'"), 0);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.notifications"
	    " WHERE idempotency_key = 'rogue-new-ca'"), 1);

	ts_stop(r.pid, SIGTERM);
	consumer_stop(&c);
	PQfinish(conn);
}
END_TEST

START_TEST(test_reload_bad_file_kept)
{
	const struct ts_tls *t = ts_tls_certs();
	char db[TS_CONNINFO_MAX];
	ts_db_create("tlsreloadbad", "all", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	ts_enqueue_n(conn, "t", "a", N_SMALL);

	struct files cf, rf;
	files_make(&cf, "consumer", t->server_cert, t->server_key, t->ca);
	files_make(&rf, "relay", t->client_cert, t->client_key, t->ca);
	struct consumer c;
	consumer_start(&c, db, &cf, NULL);
	struct relay r;
	relay_start(&r, db, c.url, &rf);
	ck_assert_int_eq(ts_wait_value(conn, DELIVERED, N_SMALL, 120 * T_SEC), N_SMALL);

	/* The consumer's key is another certificate's; the relay's
	 * certificate is no PEM at all. */
	ts_tls_replace(cf.key, t->client_key);
	ts_tls_replace(rf.cert, t->garbage);
	ck_assert_int_eq(kill(c.pid, SIGHUP), 0);
	ck_assert_int_eq(kill(r.pid, SIGHUP), 0);
	char err[1024], want[1024];
	ts_log_wait_field(c.log, "consumer.tls.reload_failed", "err", err, sizeof(err),
	    60 * T_SEC);
	snprintf(want, sizeof(want), "--tls-key %s: not the private key of --tls-cert %s",
	    cf.key, cf.cert);
	ck_assert_msg(strstr(err, want) != NULL, "consumer: err=%s", err);
	ts_log_wait_field(r.log, "relay.tls.reload_failed", "err", err, sizeof(err), 60 * T_SEC);
	snprintf(want, sizeof(want), "--tls-cert %s: not a PEM certificate", rf.cert);
	ck_assert_msg(strstr(err, want) != NULL, "relay: err=%s", err);
	assert_level(c.log, "consumer.tls.reload_failed", "warn");
	assert_level(r.log, "relay.tls.reload_failed", "warn");
	assert_metric(c.metrics_port, "outbox_consumer_tls_reload_total{result=\"failed\"}", 1,
	    c.log);
	assert_metric(r.metrics_port, "outbox_relay_tls_reload_total{result=\"failed\"}", 1,
	    r.log);
	ck_assert_int_eq(ts_log_count(c.log, "consumer.tls.reload_failed"), 1);
	ck_assert_int_eq(ts_log_count(r.log, "relay.tls.reload_failed"), 1);
	ck_assert_int_eq(ts_log_count(c.log, "consumer.tls.reloaded"), 0);
	ck_assert_int_eq(ts_log_count(r.log, "relay.tls.reloaded"), 0);

	/* Deliveries go on, and a new connection with the old certificates is
	 * served: the running configuration was kept. */
	ts_enqueue_n(conn, "t", "b", N_SMALL);
	ck_assert_int_eq(ts_wait_value(conn, DELIVERED, 2 * N_SMALL, 120 * T_SEC), 2 * N_SMALL);
	nng_tls_config *same = ts_tls_client_config(t->ca, t->client_cert, t->client_key);
	ck_assert_int_eq(ts_tls_call(c.url, same, 900003, "rogue-kept"), OB_WIRE_APPLIED);
	nng_tls_config_free(same);

	/* The consumer's key put right, and its CA file now holding CA 1 and
	 * CA 2 (the first step of a CA change without an outage): it re-opens
	 * (closing the relay's connection), the relay re-dials with the
	 * configuration it kept (its certificate file is still garbage), and
	 * a client certificate of either CA is served. */
	ts_tls_replace(cf.key, t->server_key);
	ts_tls_replace(cf.ca, t->ca_both);
	ck_assert_int_eq(kill(c.pid, SIGHUP), 0);
	ck_assert_int_eq(ts_log_wait(c.log, "event=consumer.tls.reloaded", 1, 60 * T_SEC), 1);
	ts_enqueue_n(conn, "t", "c", N_SMALL);
	assert_exactly_once(conn, 3 * N_SMALL, r.log, c.log);
	assert_metric(c.metrics_port, "outbox_consumer_tls_reload_total{result=\"ok\"}", 1, c.log);
	nng_tls_config *ca2 = ts_tls_client_config(t->ca, t->other_cert, t->other_key);
	ck_assert_int_eq(ts_tls_call(c.url, ca2, 900004, "rogue-ca2"), OB_WIRE_APPLIED);
	nng_tls_config_free(ca2);

	ts_stop(r.pid, SIGTERM);
	consumer_stop(&c);
	PQfinish(conn);
}
END_TEST

static Suite *
bus_tls_reload_suite(void)
{
	Suite *s = suite_create("bus_tls_reload");
	TCase *tc = tcase_create("reload");
	tcase_set_timeout(tc, 400);
	tcase_add_test(tc, test_reload_under_load);
	tcase_add_test(tc, test_reload_bad_file_kept);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return ts_run_suite(bus_tls_reload_suite());
}
