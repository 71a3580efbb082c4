/*
 * test_consumer_badinput.c - malformed requests against a running
 * outbox-consumer over a real nng REQ socket: each class of bad frame gets
 * an error reply naming the decoder's error, one log line and a counter,
 * writes nothing, and the consumer keeps serving. Also nngcat sending
 * garbage, and the consumer library with a custom handler (the C API).
 */
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
#include "server.h"
#include "testsupport.h"
#include "ts_consumer.h"

/* A valid one-message frame: topic "t", key "key", payload plen bytes. */
static void
valid_frame(struct ob_buf *b, size_t plen)
{
	char *payload = malloc(plen + 1);
	ck_assert_ptr_nonnull(payload);
	memset(payload, 'x', plen);
	payload[plen] = '\0';
	struct ob_wire_msg m = ts_consumer_msg(1, "t", "key", payload);
	ob_buf_reset(b);
	ck_assert_int_eq(ob_wire_encode_request(b, &m, 1, &ts_consumer_limits), OB_OK);
	free(payload);
}

/* Offsets in a one-message frame with topic "t" and no source (version
 * 3: source_len 0 after count). */
#define OFF_VERSION 4
#define OFF_FLAGS 6
#define OFF_COUNT 8
#define OFF_SOURCE_LEN OB_WIRE_REQ_HEADER
#define OFF_KEYLEN (OB_WIRE_REQ_HEADER + 1 + 36 + 2 + 1)

struct bad_case {
	const char *name;
	int want;
};

/* The refusal of frame p: want as frame_err, in reply version version,
 * its detail containing needle (NULL: any). */
static void
expect_refused_v(struct ts_consumer_conn *c, const void *p, size_t n, int want, const char *name,
    int version, const char *needle)
{
	ts_consumer_send_raw(c, p, n);
	struct ts_consumer_reply r;
	ck_assert_msg(ts_consumer_recv(c, &r, TS_CONSUMER_REPLY_TIMEOUT_MS) == 0, "%s: no reply", name);
	ck_assert_msg(r.rep.frame_err == want, "%s: frame_err %d, want %d (%s)", name,
	    r.rep.frame_err, want, ob_err_name(want));
	ck_assert_uint_eq(r.rep.count, 0);
	ck_assert_msg(r.rep.version == version, "%s: reply version %u, want %d", name,
	    r.rep.version, version);
	ck_assert_msg(r.rep.detail_len > 0, "%s: no detail", name);
	if (needle != NULL) {
		char d[OB_WIRE_MAX_DETAIL + 1];
		snprintf(d, sizeof(d), "%.*s", (int)r.rep.detail_len, r.rep.detail);
		ck_assert_msg(strstr(d, needle) != NULL, "%s: detail %s", name, d);
	}
	ts_consumer_reply_fini(&r);
}

/* A frame of the current version (or none readable): refused in the
 * request's version when it has one we speak, else version 1. */
static void
expect_refused(struct ts_consumer_conn *c, const void *p, size_t n, int want, const char *name)
{
	expect_refused_v(c, p, n, want, name, ob_wire_reply_version_for(p, n), NULL);
}

START_TEST(test_bad_frames)
{
	char db[TS_CONNINFO_MAX], url[256], log[256];
	ts_db_create("bad", "inbox", db, sizeof(db));
	ts_ipc_url("bad", url, sizeof(url));
	char *argv[] = { "outbox-consumer", "--db", db, "--listen", url, "--max-batch", "5",
		"--max-payload", "1k", NULL };
	pid_t pid = ts_spawn(argv, NULL, log);
	struct ts_consumer_conn c;
	ts_consumer_open(&c, url);
	struct ob_buf b = OB_BUF_INIT;
	int sent = 0;

	valid_frame(&b, 2);
	expect_refused(&c, b.data, b.len - 1, OB_EWIRE_TRUNC, "truncated"), sent++;
	expect_refused(&c, "", 0, OB_EWIRE_TRUNC, "empty"), sent++;
	expect_refused(&c, "hello", 5, OB_EWIRE_MAGIC, "garbage"), sent++;
	b.data[0] = 'X';
	expect_refused(&c, b.data, b.len, OB_EWIRE_MAGIC, "magic"), sent++;
	valid_frame(&b, 2);
	b.data[OFF_VERSION] = OB_WIRE_VERSION + 1; /* a newer relay than this consumer */
	expect_refused_v(&c, b.data, b.len, OB_EWIRE_VERSION, "version", OB_WIRE_VERSION_MIN,
	    "this consumer speaks wire versions 1..3"), sent++;
	/* an old relay's (version 1) bad frame is refused in version 1, a
	 * new one's in its version */
	valid_frame(&b, 2);
	b.data[OFF_VERSION] = 1;
	b.data[OFF_FLAGS + 1] = 1;
	expect_refused_v(&c, b.data, b.len, OB_EWIRE_FLAGS, "v1 flags", 1, NULL), sent++;
	b.data[OFF_VERSION] = 2;
	expect_refused_v(&c, b.data, b.len, OB_EWIRE_FLAGS, "v2 flags", 2, NULL), sent++;
	b.data[OFF_VERSION] = OB_WIRE_VERSION;
	expect_refused_v(&c, b.data, b.len, OB_EWIRE_FLAGS, "v3 flags", OB_WIRE_VERSION, NULL), sent++;
	/* a source of 64 bytes, or with a byte a name may not have */
	valid_frame(&b, 2);
	b.data[OFF_SOURCE_LEN] = OB_WIRE_MAX_SOURCE + 1;
	expect_refused(&c, b.data, b.len, OB_EWIRE_SOURCE, "source of 64 bytes"), sent++;
	valid_frame(&b, 2);
	b.data[OFF_SOURCE_LEN] = 8; /* the next 8 bytes, the message id, are no name */
	expect_refused(&c, b.data, b.len, OB_EWIRE_SOURCE, "source not of the charset"), sent++;
	valid_frame(&b, 2);
	b.data[OFF_FLAGS + 1] = 1;
	expect_refused(&c, b.data, b.len, OB_EWIRE_FLAGS, "flags"), sent++;
	valid_frame(&b, 2);
	memset(b.data + OFF_COUNT, 0, 4);
	expect_refused(&c, b.data, b.len, OB_EWIRE_COUNT, "count 0"), sent++;
	valid_frame(&b, 2);
	b.data[OFF_KEYLEN] = 0, b.data[OFF_KEYLEN + 1] = 0;
	expect_refused(&c, b.data, b.len, OB_EWIRE_KEY, "key of 0 bytes"), sent++;
	valid_frame(&b, 2);
	b.data[OFF_KEYLEN] = 1, b.data[OFF_KEYLEN + 1] = 0; /* 256 */
	expect_refused(&c, b.data, b.len, OB_EWIRE_KEY, "key of 256 bytes"), sent++;
	valid_frame(&b, 1025);
	expect_refused(&c, b.data, b.len, OB_EWIRE_PAYLOAD, "payload over --max-payload"), sent++;
	valid_frame(&b, 2);
	ob_buf_put_u8(&b, 0);
	expect_refused(&c, b.data, b.len, OB_EWIRE_TRAILING, "trailing byte"), sent++;
	/* A reply frame where a request belongs. */
	struct ob_wire_result res = { 1, OB_WIRE_APPLIED, NULL, 0, 0 };
	ob_buf_reset(&b);
	ck_assert_int_eq(ob_wire_encode_reply(&b, &res, 1), OB_OK);
	expect_refused(&c, b.data, b.len, OB_EWIRE_KIND, "reply kind"), sent++;
	/* Six messages where --max-batch is 5. */
	struct ob_wire_msg six[6];
	for (int i = 0; i < 6; i++)
		six[i] = ts_consumer_msg((uint64_t)i + 1, "t", "k", "{}");
	ob_buf_reset(&b);
	ck_assert_int_eq(ob_wire_encode_request(&b, six, 6, &ts_consumer_limits), OB_OK);
	expect_refused(&c, b.data, b.len, OB_EWIRE_COUNT, "batch over --max-batch"), sent++;

	/* nngcat, if installed, sending garbage: answered, and still serving. */
	char out[4096];
	char *nngcat[] = { "/usr/bin/nngcat", "--req", "--dial", url, "--data", "garbage",
		"--recv-timeout", "20", "--hex", NULL };
	if (access("/usr/bin/nngcat", X_OK) == 0) {
		ck_assert_int_eq(ts_run(nngcat, NULL, out, sizeof(out), 30000), 0);
		ck_assert_msg(strstr(out, "OBRP") != NULL || strstr(out, "\\x4f\\x42\\x52\\x50") != NULL,
		    "nngcat got no error reply: %s", out);
		sent++;
	}

	/* Nothing was written; the consumer still applies a good request. */
	PGconn *conn = ts_connect(db);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.processed"), 0);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.notifications"), 0);
	ck_assert_int_eq(ts_consumer_call1(&c, ts_consumer_msg(9, "t", "good", "{}"), NULL, 0), OB_WIRE_APPLIED);
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM inbox.notifications"), 1);
	PQfinish(conn);
	ob_buf_fini(&b);
	ts_consumer_close(&c);
	ts_stop(pid, SIGTERM);
	/* One log line per refused frame, and the counter. */
	ck_assert_int_eq(ts_log_count(log, "consumer.frame.bad"), sent);
	char want[64];
	snprintf(want, sizeof(want), "bad_frames=%d", sent);
	ck_assert_msg(ts_log_wait(log, want, 1, 1000) >= 1, "counter: want %s", want);
}
END_TEST

/* The C API: a custom handler in the consumer library, served in-process.
 * It writes to its own table in the open transaction and says retry or
 * reject for some payloads; those roll back alone. */
static int
custom_apply(PGconn *tx, const struct ob_wire_msg *m, void *arg,
    struct inbox_handler_call *call, char *detail, size_t detaillen)
{
	int *calls = arg;
	__atomic_add_fetch(calls, 1, __ATOMIC_SEQ_CST);
	const char *params[1] = { m->key };
	int lens[1] = { m->key_len }, formats[1] = { 1 };
	PGresult *res = PQexecParams(tx, "INSERT INTO public.custom_effect (k)"
	    " VALUES (convert_from($1, 'UTF8'))", 1, (const Oid[]){ 17 }, params, lens,
	    formats, 0);
	bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;
	PQclear(res);
	if (!ok) {
		snprintf(detail, detaillen, "insert failed");
		return OB_WIRE_RETRY;
	}
	if (m->payload_len >= 5 && memcmp(m->payload, "\"bad\"", 5) == 0) {
		snprintf(detail, detaillen, "custom says no");
		return OB_WIRE_REJECT;
	}
	if (m->payload_len >= 7 && memcmp(m->payload, "\"later\"", 7) == 0) {
		snprintf(detail, detaillen, "custom says later");
		return OB_WIRE_RETRY;
	}
	snprintf(detail, detaillen, "custom ok");
	return OB_WIRE_APPLIED;
}

START_TEST(test_custom_handler)
{
	char db[TS_CONNINFO_MAX], url[256], err[512];
	ts_db_create("custom", "inbox", db, sizeof(db));
	PGconn *conn = ts_connect(db);
	ts_exec(conn, "CREATE TABLE public.custom_effect (k text NOT NULL)");
	ts_ipc_url("custom", url, sizeof(url));
	int calls = 0;
	struct inbox_handler h = { "custom", custom_apply, NULL, NULL, &calls };
	struct consumer_server_config cfg = {
		.db = db, .listen = url, .threads = 2,
		.limits = { OB_WIRE_DEFAULT_MAX_PAYLOAD, OB_WIRE_DEFAULT_MAX_BATCH },
		.inbox = { true, &h, NULL, 0, 1000, NULL },
	};
	struct consumer_server *srv;
	ck_assert_msg(consumer_server_start(&cfg, &srv, err, sizeof(err)) == OB_OK, "%s", err);
	ck_assert_str_eq(consumer_server_url(srv), url); /* no TCP port: as given */
	struct ts_consumer_conn c;
	ts_consumer_open(&c, url);
	struct ob_wire_msg batch[4] = {
		ts_consumer_msg(1, "t", "c1", "1"),
		ts_consumer_msg(2, "t", "c2", "\"bad\""),
		ts_consumer_msg(3, "t", "c3", "\"later\""),
		ts_consumer_msg(4, "t", "c4", "4"),
	};
	struct ts_consumer_reply r;
	ts_consumer_call(&c, batch, 4, &r);
	int want[4] = { OB_WIRE_APPLIED, OB_WIRE_REJECT, OB_WIRE_RETRY, OB_WIRE_APPLIED };
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(r.rep.results[i].status, want[i]);
	ts_consumer_reply_fini(&r);
	/* Redelivery: duplicates replay the stored detail; the handler is not run. */
	int before = calls;
	ts_consumer_call(&c, batch, 4, &r);
	ck_assert_int_eq(r.rep.results[0].status, OB_WIRE_DUPLICATE);
	ck_assert_msg(r.rep.results[0].detail_len > 0 &&
	    memmem(r.rep.results[0].detail, r.rep.results[0].detail_len, "custom ok", 9) != NULL,
	    "stored detail not replayed");
	ck_assert_int_eq(r.rep.results[3].status, OB_WIRE_DUPLICATE);
	ts_consumer_reply_fini(&r);
	ck_assert_int_eq(calls - before, 2); /* only c2 and c3 ran again */
	ck_assert_int_eq(ts_query_int(conn, "SELECT count(*) FROM public.custom_effect"), 2);
	const struct consumer_counters *k = consumer_server_counters(srv);
	ck_assert_uint_eq(k->applied, 2);
	ck_assert_uint_eq(k->duplicate, 2);
	ck_assert_uint_eq(k->rejected_by[INBOX_WHY_HANDLER], 2);
	ck_assert_uint_eq(k->retried_by[INBOX_WHY_HANDLER], 2);
	ts_consumer_close(&c);
	consumer_server_stop(srv);
	PQfinish(conn);
}
END_TEST

static Suite *
badinput_suite(void)
{
	Suite *s = suite_create("consumer_badinput");
	TCase *tc = tcase_create("frames");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_bad_frames);
	tcase_add_test(tc, test_custom_handler);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	int rc = ts_run_suite(badinput_suite());
	nng_fini();
	return rc;
}
