/*
 * ts_demo.c - the stack of scripts/demo.sh --web for tests (ts_demo.h),
 * as test_web_demo.c first started it (now through this).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "ts_consumer.h"
#include "ts_demo.h"
#include "ts_relay.h"

#define TS_DEMO_WAIT_MS 30000 /* a program's listener up */

void
ts_demo_start(struct ts_demo_stack *s, const char *tag, const char *matrix_faults)
{
	char itag[64];
	snprintf(itag, sizeof(itag), "%s_in", tag);
	ts_db_create(tag, "outbox", s->db, sizeof(s->db));
	ts_db_create(itag, "inbox", s->idb, sizeof(s->idb));
	s->pconn = ts_connect(s->db);
	s->iconn = ts_connect(s->idb);
	char *pargs[] = { "--metrics", "127.0.0.1:0", "--demo-admin", NULL };
	ts_producer_serve(s->db, pargs, &s->p);
	snprintf(s->padmin, sizeof(s->padmin), "http://127.0.0.1:%d",
	    ts_log_wait_port(s->p.log, "producer.metrics.listening", TS_DEMO_WAIT_MS));
	ts_ipc_url("demo-consumer", s->curl, sizeof(s->curl));
	const char *const cargs[] = { "--metrics", "127.0.0.1:0", "--demo-admin", NULL };
	s->consumer = ts_consumer_spawn(s->clog, s->idb, s->curl, cargs);
	snprintf(s->cadmin, sizeof(s->cadmin), "http://127.0.0.1:%d",
	    ts_log_wait_port(s->clog, "consumer.metrics.listening", TS_DEMO_WAIT_MS));
	char route[300];
	snprintf(route, sizeof(route), "report.created=%s", s->curl);
	/* as scripts/demo.sh --web: the steps' topics are the steps' relays'
	 * (a topic with no route waits: --unrouted wait, the default) */
	const char *const rargs[] = { "--poll-ms", "200", NULL };
	s->relay = ts_relay_spawn(s->rlog, s->db, route, rargs);

	const char *bindir = getenv("OUTBOX_BIN_DIR");
	ck_assert_msg(bindir != NULL, "OUTBOX_BIN_DIR is not set");
	char text[4096];
	snprintf(text, sizeof(text),
	    "# written by the test, as scripts/demo.sh --web writes it\n"
	    "producer_url=%s\nproducer_admin=%s\nconsumer_admin=%s\nconsumer_listen=%s\n"
	    "relay_db=%s\nbin_dir=%s\nwork_dir=%s\n%s%s%s", s->p.url, s->padmin, s->cadmin,
	    s->curl, s->db, bindir, ts_tmpdir(), matrix_faults != NULL ? "matrix_faults=" : "",
	    matrix_faults != NULL ? matrix_faults : "", matrix_faults != NULL ? "\n" : "");
	snprintf(s->conf, sizeof(s->conf), "%s/demo.conf", ts_tmpdir());
	ts_write_file(s->conf, text);
}

void
ts_demo_stop(struct ts_demo_stack *s)
{
	ts_stop(s->relay, SIGTERM);
	ts_stop(s->consumer, SIGTERM);
	ts_stop(s->p.pid, SIGTERM);
	PQfinish(s->pconn);
	PQfinish(s->iconn);
}
