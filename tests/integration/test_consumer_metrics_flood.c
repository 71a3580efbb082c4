/*
 * test_consumer_metrics_flood.c - a flood of idle connections on
 * outbox-consumer's metrics port does not stop delivery.
 *
 * Before (nng's HTTP server): connections were never closed and not
 * capped, so 1,100 idle connections under the usual 1,024 descriptor limit
 * took every descriptor and the consumer could accept no delivery. Now the
 * endpoint (common/http_endpoint.c) holds at most OB_HTTP_ENDPOINT_MAX_CONNS
 * connections, closing the idlest to make room: the consumer started under
 * a 1,024 limit takes 1,100 connections on its metrics port, still
 * applies every message delivered meanwhile, and its /metrics still
 * answers, showing the evictions.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/nng.h>

#include "outbox/http_endpoint.h"
#include "outbox/wire.h"
#include "testsupport.h"
#include "ts_consumer.h"

#define N_FLOOD 1100
#define N_MSGS 20

START_TEST(test_delivery_flows_while_metrics_port_flooded)
{
	char db[TS_CONNINFO_MAX], url[256], log[256], keys[N_MSGS][16];
	static int fds[N_FLOOD];
	ts_db_create("cflood", "inbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	ts_ipc_url("cflood", url, sizeof(url));
	const char *extra[] = { "--metrics", "127.0.0.1:0", "--threads", "2", NULL };
	long was = ts_set_nofile(1024); /* the consumer runs under 1,024 */
	pid_t pid = ts_consumer_spawn(log, db, url, extra);
	ck_assert_int_ge(ts_set_nofile(was > 4096 ? was : 4096), N_FLOOD + 256);
	ck_assert(ts_log_wait(log, "consumer.started", 1, 60000) >= 1);
	int port = ts_log_wait_port(log, "consumer.metrics.listening", 30000);

	for (int i = 0; i < N_FLOOD; i++)
		fds[i] = ts_tcp_connect(port);
	/* Every one was accepted, the idlest closed to make room: wait until
	 * the endpoint has seen them all (a scrape takes a slot too). */
	const char *evicted =
	    "outbox_http_connections_closed_total{server=\"metrics\",reason=\"evicted\"}";
	double ev = 0;
	for (int64_t end = ts_now_ms() + 30000; ts_now_ms() < end; usleep(100 * 1000))
		if ((ev = ts_metric(port, evicted)) >= N_FLOOD - OB_HTTP_ENDPOINT_MAX_CONNS)
			break;
	ck_assert_msg(ev >= N_FLOOD - OB_HTTP_ENDPOINT_MAX_CONNS, "evicted %g", ev);
	ck_assert_double_le(ts_metric(port, "outbox_http_connections_open{server=\"metrics\"}"),
	    OB_HTTP_ENDPOINT_MAX_CONNS);

	/* Delivery while the flood's connections are still open. */
	struct ts_consumer_conn c;
	ts_consumer_open(&c, url);
	struct ob_wire_msg msgs[N_MSGS];
	for (int i = 0; i < N_MSGS; i++) {
		snprintf(keys[i], sizeof(keys[i]), "fl-%d", i);
		msgs[i] = ts_consumer_msg((uint64_t)i + 1, "t", keys[i], "{\"n\":1}");
	}
	struct ts_consumer_reply r;
	ts_consumer_call(&c, msgs, N_MSGS, &r);
	for (int i = 0; i < N_MSGS; i++)
		ck_assert_int_eq(r.rep.results[i].status, OB_WIRE_APPLIED);
	ts_consumer_reply_fini(&r);
	ts_consumer_close(&c);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.notifications"), N_MSGS);
	ck_assert_int_eq(ts_http_local(port, "GET", "/healthz", NULL), 200);

	for (int i = 0; i < N_FLOOD; i++)
		close(fds[i]);
	ts_stop(pid, SIGTERM);
	PQfinish(conn);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("consumer_metrics_flood");
	TCase *tc = tcase_create("flood");
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, test_delivery_flows_while_metrics_port_flooded);
	suite_add_tcase(s, tc);
	int rc = ts_run_suite(s);
	nng_fini();
	return rc;
}
