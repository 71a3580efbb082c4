/*
 * test_bus_tls.c - mutual TLS between relay and consumer, against the real
 * programs, a real PostgreSQL and certificates made with openssl
 * (ts_tls.h), on loopback TCP with ports bound as 0 and read back.
 *
 * First the attack: a hand-made nng REQ client reaches a plain consumer and
 * gets an effect written. With --listen tls+tcp:// the same client is
 * refused, and so is a TLS client without a certificate or with one from
 * another CA; each refusal writes nothing, is a warning with its class and
 * a metric. Then relays: wrong CA, expired certificate, wrong server name
 * and plain tcp:// each deliver nothing, leave every message pending (not
 * dead, attempts refunded, even with --max-attempts 2), log a warning and
 * count a metric; a relay with the right certificate then delivers every
 * message once. Last, the start-up refusals: missing or unreadable files
 * exit 2 with one line naming the file.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/tls/tls.h>

#include "outbox/wire.h"
#include "testsupport.h"
#include "ts_consumer.h"
#include "ts_relay.h"
#include "ts_tls.h"

#define T_SEC 1000
#define N_MSGS 20

/* A running consumer and what it tells us about itself. */
struct consumer {
	pid_t pid;
	char log[256];
	char *url;        /* from the ready file: the bound port */
	int metrics_port; /* 0 without --metrics */
};

static void
consumer_start(struct consumer *c, const char *db, const char *listen, bool tls)
{
	const struct ts_tls *t = ts_tls_certs();
	char ready[512];
	static int n;
	snprintf(ready, sizeof(ready), "%s/consumer-%d.ready", ts_tmpdir(), ++n);
	const char *plain[] = { "--ready-file", ready, "--metrics", "127.0.0.1:0",
		"--threads", "2", NULL };
	const char *with_tls[] = { "--tls-cert", t->server_cert, "--tls-key", t->server_key,
		"--tls-ca", t->ca, NULL };
	const char *args[16];
	ts_args_cat(args, 16, plain, tls ? with_tls : NULL);
	c->pid = ts_consumer_spawn(c->log, db, listen, args);
	c->url = ts_wait_ready_file(ready, c->pid, c->log, 60 * T_SEC);
	c->metrics_port = ts_log_wait_port(c->log, "consumer.metrics.listening", 30 * T_SEC);
}

static void
consumer_stop(struct consumer *c)
{
	ts_stop(c->pid, SIGTERM);
	free(c->url);
}

/* The port of a URL "scheme://127.0.0.1:PORT". */
static int
url_port(const char *url)
{
	const char *colon = strrchr(url, ':');
	ck_assert_ptr_nonnull(colon);
	return atoi(colon + 1);
}

/* The consumer's refusals, all classes. */
static double
consumer_refused(const struct consumer *c)
{
	static const char *const reasons[] = { "tls_auth", "protocol", "timeout", "closed" };
	char *text = ts_scrape(c->metrics_port);
	double sum = 0;
	for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) {
		char series[128];
		snprintf(series, sizeof(series),
		    "outbox_consumer_handshake_refused_total{reason=\"%s\"}", reasons[i]);
		double v = ts_metric_value(text, series);
		ck_assert_msg(v >= 0, "series %s missing", series);
		sum += v;
	}
	free(text);
	return sum;
}

/* Poll until the consumer's refusal count exceeds before. */
static double
wait_consumer_refused(const struct consumer *c, double before)
{
	int64_t end = ts_now_ms() + 30 * T_SEC;
	double now;
	while ((now = consumer_refused(c)) <= before && ts_now_ms() < end) {
		struct timespec ts = { 0, 100 * 1000000L };
		nanosleep(&ts, NULL);
	}
	return now;
}

/* Assert that within 30 s the log at path has a line of event at level
 * warn that contains want (NULL: anything). */
static void
warned(const char *path, const char *event, const char *want)
{
	char ev[128];
	snprintf(ev, sizeof(ev), "event=%s ", event);
	int64_t end = ts_now_ms() + 30 * T_SEC;
	for (;;) {
		char *text = ts_read_file(path);
		bool found = false;
		for (char *line = text; line != NULL && *line != '\0' && !found;) {
			char *nl = strchr(line, '\n');
			if (nl != NULL)
				*nl = '\0';
			found = strstr(line, ev) != NULL && strstr(line, " level=warn ") != NULL &&
			    (want == NULL || strstr(line, want) != NULL);
			line = nl != NULL ? nl + 1 : NULL;
		}
		free(text);
		if (found)
			return;
		ck_assert_msg(ts_now_ms() < end, "no warning %s (%s) in %s", event,
		    want ? want : "", path);
		struct timespec ts = { 0, 50 * 1000000L };
		nanosleep(&ts, NULL);
	}
}

static int64_t
rogue_rows(PGconn *conn)
{
	return ts_query_int(conn, "SELECT count(*) FROM inbox.notifications WHERE topic = 'rogue'");
}

START_TEST(test_rogue_client_refused)
{
	const struct ts_tls *t = ts_tls_certs();
	char db[TS_CONNINFO_MAX];
	ts_db_create("tlsrogue", "inbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);

	/* The attack: anyone who reaches a plain consumer writes effects. */
	struct consumer plain;
	consumer_start(&plain, db, "tcp://127.0.0.1:0", false);
	ck_assert_int_eq(ts_tls_call(plain.url, NULL, 1, "forged-1"), OB_WIRE_APPLIED);
	ck_assert_int_eq(rogue_rows(conn), 1);
	consumer_stop(&plain);

	struct consumer c;
	consumer_start(&c, db, "tls+tcp://127.0.0.1:0", true);
	ck_assert_msg(strncmp(c.url, "tls+tcp://127.0.0.1:", 20) == 0, "ready file: %s", c.url);
	ts_assert_logged(c.log, "tls=mutual");
	char plain_url[128];
	snprintf(plain_url, sizeof(plain_url), "tcp://127.0.0.1:%d", url_port(c.url));
	double refused = consumer_refused(&c);
	ck_assert(refused == 0);

	/* The same client, plain tcp:// to the TLS port: refused. */
	ck_assert_int_eq(ts_tls_call(plain_url, NULL, 2, "forged-2"), 0);
	refused = wait_consumer_refused(&c, refused);
	ck_assert_msg(refused >= 1, "plain client not counted: %s", c.log);
	warned(c.log, "consumer.handshake.refused", NULL);

	/* TLS without a client certificate: refused (tls_auth). */
	nng_tls_config *none = ts_tls_client_config(t->ca, NULL, NULL);
	ck_assert_int_eq(ts_tls_call(c.url, none, 3, "forged-3"), 0);
	nng_tls_config_free(none);
	refused = wait_consumer_refused(&c, refused);
	warned(c.log, "consumer.handshake.refused", "reason=tls_auth");

	/* A client certificate from another CA: refused. */
	double before = refused;
	nng_tls_config *other = ts_tls_client_config(t->ca, t->other_cert, t->other_key);
	ck_assert_int_eq(ts_tls_call(c.url, other, 4, "forged-4"), 0);
	nng_tls_config_free(other);
	refused = wait_consumer_refused(&c, before);
	ck_assert_msg(refused > before, "other-CA client not counted: %s", c.log);
	ck_assert_int_eq(rogue_rows(conn), 1); /* the plain consumer's only */
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.processed"), 1);

	/* The listener still serves a client with the right certificate. */
	nng_tls_config *good = ts_tls_client_config(t->ca, t->client_cert, t->client_key);
	ck_assert_int_eq(ts_tls_call(c.url, good, 5, "allowed-5"), OB_WIRE_APPLIED);
	nng_tls_config_free(good);
	ck_assert_int_eq(rogue_rows(conn), 2);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.notifications"
	    " WHERE idempotency_key LIKE 'forged-%' AND idempotency_key <> 'forged-1'"), 0);
	consumer_stop(&c);
	PQfinish(conn);
}
END_TEST

/* The relay flags of one case: route and TLS settings. */
struct relay_case {
	const char *name;
	const char *scheme;       /* "tls+tcp" or "tcp" */
	const char *cert, *key, *ca, *server_name;
	const char *relay_reason; /* the class the relay's warning must carry, or NULL */
	bool consumer_counts;     /* the consumer refuses it (and counts it) */
};

static pid_t
relay_start(const struct relay_case *rc, const char *db, int port, char *log)
{
	char route[256];
	snprintf(route, sizeof(route), "t=%s://127.0.0.1:%d", rc->scheme, port);
	const char *base[] = { "--poll-ms", "100", "--metrics", "127.0.0.1:0",
		"--breaker-threshold", "2", "--breaker-probe-interval", "200ms",
		"--delivery-timeout-ms", "2s", "--lease-ms", "5s", "--max-attempts", "2",
		"--backoff-base-ms", "10ms", "--backoff-cap-ms", "100ms", "--log-level", "debug", NULL };
	const char *tls[12];
	int n = 0;
	if (rc->cert != NULL) {
		tls[n++] = "--tls-cert";
		tls[n++] = rc->cert;
		tls[n++] = "--tls-key";
		tls[n++] = rc->key;
		tls[n++] = "--tls-ca";
		tls[n++] = rc->ca;
	}
	if (rc->server_name != NULL) {
		tls[n++] = "--tls-server-name";
		tls[n++] = rc->server_name;
	}
	tls[n] = NULL;
	const char *args[40];
	ts_args_cat(args, 40, base, tls);
	return ts_relay_spawn(log, db, route, args);
}

START_TEST(test_relay_mtls)
{
	const struct ts_tls *t = ts_tls_certs();
	char db[TS_CONNINFO_MAX];
	ts_db_create("tlsrelay", "all", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	ts_enqueue_n(conn, "t", "m", N_MSGS);
	struct consumer c;
	consumer_start(&c, db, "tls+tcp://127.0.0.1:0", true);
	int port = url_port(c.url);

	const struct relay_case bad[] = {
		{ "wrong CA", "tls+tcp", t->other_cert, t->other_key, t->ca, TS_TLS_SERVER_NAME,
		  NULL, true },
		{ "expired certificate", "tls+tcp", t->expired_cert, t->expired_key, t->ca,
		  TS_TLS_SERVER_NAME, NULL, true },
		{ "wrong server name", "tls+tcp", t->client_cert, t->client_key, t->ca,
		  "other.test", "reason=tls_auth", false },
		{ "plaintext relay", "tcp", NULL, NULL, NULL, NULL, NULL, true },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const struct relay_case *rc = &bad[i];
		char log[256];
		double before = consumer_refused(&c);
		pid_t rpid = relay_start(rc, db, port, log);
		/* the relay says so at warn level, with a class, and counts it */
		if (ts_log_wait(log, "relay.handshake.refused", 1, 60 * T_SEC) < 1) {
			char *text = ts_read_file(log), *ctext = ts_read_file(c.log);
			size_t n = text ? strlen(text) : 0, cn = ctext ? strlen(ctext) : 0;
			ck_abort_msg("%s: no relay.handshake.refused in %s; its end:\n%s\nconsumer's"
			    " end:\n%s", rc->name, log, text ? text + (n > 3000 ? n - 3000 : 0) : "",
			    ctext ? ctext + (cn > 1500 ? cn - 1500 : 0) : "");
		}
		warned(log, "relay.handshake.refused", rc->relay_reason);
		warned(log, "relay.breaker.open", NULL);
		int mport = ts_log_wait_port(log, "relay.metrics.listening", 30 * T_SEC);
		char *text = ts_scrape(mport);
		double rsum = 0;
		static const char *const reasons[] = { "tls_auth", "protocol", "timeout", "closed" };
		for (size_t k = 0; k < 4; k++) {
			char series[128];
			snprintf(series, sizeof(series),
			    "outbox_relay_handshake_refused_total{reason=\"%s\"}", reasons[k]);
			double v = ts_metric_value(text, series);
			ck_assert_msg(v >= 0, "%s: series %s missing", rc->name, series);
			rsum += v;
		}
		free(text);
		ck_assert_msg(rsum >= 1, "%s: relay metric not counted (%s)", rc->name, log);
		if (rc->consumer_counts) {
			double after = wait_consumer_refused(&c, before);
			ck_assert_msg(after > before, "%s: consumer did not count it (%s)", rc->name,
			    c.log);
		}
		ts_stop(rpid, SIGTERM);
		/* nothing written, nothing burnt: every message still pending */
		ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.notifications"), 0);
		ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.processed"), 0);
		ck_assert_int_eq(ts_query_int(conn,
		    "SELECT count(*) FROM outbox.messages WHERE status = 'dead'"), 0);
		ck_assert_int_eq(ts_query_int(conn,
		    "SELECT count(*) FROM outbox.messages WHERE status = 'pending'"), N_MSGS);
	}
	ts_assert_logged(c.log, "consumer.handshake.refused");

	/* The right certificate: every message delivered, once. */
	const struct relay_case good = { "good", "tls+tcp", t->client_cert, t->client_key, t->ca,
		TS_TLS_SERVER_NAME, NULL, false };
	char log[256];
	pid_t rpid = relay_start(&good, db, port, log);
	int64_t delivered = ts_wait_value(conn,
	    "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'", N_MSGS, 60 * T_SEC);
	ts_stop(rpid, SIGTERM);
	ck_assert_msg(delivered == N_MSGS, "delivered %lld of %d over mTLS (%s, %s)",
	    (long long)delivered, N_MSGS, log, c.log);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.notifications"), N_MSGS);
	ck_assert_int_eq(ts_query_int(conn,
	    "SELECT count(DISTINCT idempotency_key) FROM inbox.notifications"), N_MSGS);
	ck_assert_int_eq(ts_log_count(log, "relay.handshake.refused"), 0);
	consumer_stop(&c);
	PQfinish(conn);
}
END_TEST

/* Run a program that must refuse to start: exit 2 and exactly one line,
 * containing want. */
static void
refuses(char *const argv[], char *const env[], const char *want)
{
	char out[4096];
	int rc = ts_run(argv, env, out, sizeof(out), 30 * T_SEC);
	ck_assert_msg(rc == 2, "%s: exit %d, want 2:\n%s", argv[0], rc, out);
	ck_assert_msg(strstr(out, want) != NULL, "%s: want '%s' in:\n%s", argv[0], want, out);
	char *nl = strchr(out, '\n');
	ck_assert_msg(nl != NULL && nl[1] == '\0', "%s: not one line:\n%s", argv[0], out);
}

START_TEST(test_tls_start_refused)
{
	struct ts_tls copy = *ts_tls_certs(); /* argv wants char * */
	struct ts_tls *t = &copy;
	char missing[4096];
	snprintf(missing, sizeof(missing), "%.*s/missing.pem", (int)sizeof(t->dir), t->dir);
	const char *db = "host=/nonexistent dbname=none";
	const char *tls_url = "tls+tcp://127.0.0.1:0";
#define CONSUMER(...) (char *[]){ "outbox-consumer", "--db", (char *)db, __VA_ARGS__, NULL }
#define RELAY(...) (char *[]){ "outbox-relay", "--db", (char *)db, __VA_ARGS__, NULL }

	/* tls+tcp:// without the files */
	refuses(CONSUMER("--listen", (char *)tls_url), NULL,
	    "outbox-consumer: --listen tls+tcp://127.0.0.1:0 needs --tls-cert, --tls-key and"
	    " --tls-ca");
	refuses(CONSUMER("--listen", (char *)tls_url, "--tls-cert", t->server_cert,
	    "--tls-key", t->server_key), NULL, "needs --tls-cert, --tls-key and --tls-ca");
	refuses(RELAY("--route", "t=tls+tcp://127.0.0.1:1"), NULL,
	    "outbox-relay: --route tls+tcp://127.0.0.1:1 needs --tls-cert, --tls-key and"
	    " --tls-ca");
	/* TLS files that protect nothing */
	refuses(CONSUMER("--listen", "tcp://127.0.0.1:0", "--tls-ca", t->ca), NULL,
	    "--tls-ca is set but no --listen is a tls+tcp:// URL");
	refuses(RELAY("--route", "t=tcp://127.0.0.1:1", "--tls-ca", t->ca), NULL,
	    "--tls-ca is set but no --route is a tls+tcp:// URL");

	/* a file that cannot be read: named, with the reason */
	char want[8192];
	snprintf(want, sizeof(want), "--tls-cert %s: No such file or directory", missing);
	refuses(CONSUMER("--listen", (char *)tls_url, "--tls-cert", missing, "--tls-key",
	    t->server_key, "--tls-ca", t->ca), NULL, want);
	refuses(RELAY("--route", "t=tls+tcp://127.0.0.1:1", "--tls-cert", missing, "--tls-key",
	    t->client_key, "--tls-ca", t->ca), NULL, want);

	/* files that do not parse: which one, and why */
	snprintf(want, sizeof(want), "--tls-cert %s: not a PEM certificate", t->garbage);
	refuses(CONSUMER("--listen", (char *)tls_url, "--tls-cert", t->garbage, "--tls-key",
	    t->server_key, "--tls-ca", t->ca), NULL, want);
	snprintf(want, sizeof(want), "--tls-key %s: not an unencrypted PEM private key",
	    t->server_cert);
	refuses(CONSUMER("--listen", (char *)tls_url, "--tls-cert", t->server_cert, "--tls-key",
	    t->server_cert, "--tls-ca", t->ca), NULL, want);
	snprintf(want, sizeof(want), "--tls-ca %s: not a PEM CA certificate", t->garbage);
	refuses(RELAY("--route", "t=tls+tcp://127.0.0.1:1", "--tls-cert", t->client_cert,
	    "--tls-key", t->client_key, "--tls-ca", t->garbage), NULL, want);
	snprintf(want, sizeof(want), "--tls-key %s: not an unencrypted PEM private key",
	    t->garbage);
	refuses(RELAY("--route", "t=tls+tcp://127.0.0.1:1", "--tls-cert", t->client_cert,
	    "--tls-key", t->garbage, "--tls-ca", t->ca), NULL, want);

	/* the same settings from the environment */
	char e_cert[8192], e_key[8192], e_ca[8192];
	snprintf(e_cert, sizeof(e_cert), "OUTBOX_TLS_CERT=%s", t->garbage);
	snprintf(e_key, sizeof(e_key), "OUTBOX_TLS_KEY=%s", t->client_key);
	snprintf(e_ca, sizeof(e_ca), "OUTBOX_TLS_CA=%s", t->ca);
	char *env[] = { e_cert, e_key, e_ca, NULL };
	snprintf(want, sizeof(want), "--tls-cert %s: not a PEM certificate", t->garbage);
	refuses(RELAY("--route", "t=tls+tcp://127.0.0.1:1"), env, want);
	refuses(CONSUMER("--listen", (char *)tls_url), env, want);
#undef CONSUMER
#undef RELAY
}
END_TEST

static Suite *
bus_tls_suite(void)
{
	Suite *s = suite_create("bus_tls");
	TCase *tc = tcase_create("mtls");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_tls_start_refused);
	tcase_add_test(tc, test_rogue_client_refused);
	tcase_add_test(tc, test_relay_mtls);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return ts_run_suite(bus_tls_suite());
}
