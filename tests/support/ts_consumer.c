/*
 * ts_consumer.c - the consumer's test fixtures (ts_consumer.h).
 */
#include <stdio.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "outbox/buf.h"
#include "outbox/clock.h"
#include "outbox/err.h"
#include "testsupport.h"
#include "ts_consumer.h"

const struct ob_wire_limits ts_consumer_limits = { OB_WIRE_MAX_PAYLOAD,
	OB_WIRE_MAX_BATCH };

pid_t
ts_consumer_spawn(char *log, const char *db, const char *url, const char *const *extra)
{
	char *argv[64];
	int n = 0;
	argv[n++] = "outbox-consumer";
	argv[n++] = "--db";
	argv[n++] = (char *)db;
	argv[n++] = "--listen";
	argv[n++] = (char *)url;
	for (int i = 0; extra != NULL && extra[i] != NULL && n < 62; i++)
		argv[n++] = (char *)extra[i];
	argv[n] = NULL;
	return ts_spawn(argv, NULL, log);
}

/* A message created now, fence 1, attempt 1, no ordering key. Strings are
 * borrowed. */
struct ob_wire_msg
ts_consumer_msg(uint64_t id, const char *topic, const char *key, const char *payload)
{
	struct ob_wire_msg m;
	memset(&m, 0, sizeof(m));
	m.id = id;
	m.fence = 1;
	m.attempt = 1;
	m.created_at_us = ob_wall_us();
	m.topic = topic;
	m.topic_len = (uint16_t)strlen(topic);
	m.key = key;
	m.key_len = (uint16_t)strlen(key);
	m.payload = payload;
	m.payload_len = (uint32_t)strlen(payload);
	return m;
}

void
ts_consumer_open(struct ts_consumer_conn *c, const char *url)
{
	ck_assert_int_eq(nng_req0_open(&c->sock), 0);
	nng_socket_set_ms(c->sock, NNG_OPT_RECVTIMEO, TS_CONSUMER_REPLY_TIMEOUT_MS);
	nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, 0);
	/* Non-blocking dial: connects (and reconnects) in the background. */
	ck_assert_int_eq(nng_dial(c->sock, url, NULL, NNG_FLAG_NONBLOCK), 0);
}

void
ts_consumer_close(struct ts_consumer_conn *c)
{
	nng_close(c->sock);
}

void
ts_consumer_send_raw(struct ts_consumer_conn *c, const void *p, size_t n)
{
	ck_assert_int_eq(nng_send(c->sock, (void *)p, n, 0), 0);
}

void
ts_consumer_send(struct ts_consumer_conn *c, const struct ob_wire_msg *msgs, uint32_t n)
{
	ts_consumer_send_v(c, OB_WIRE_VERSION, msgs, n);
}

void
ts_consumer_send_v(struct ts_consumer_conn *c, int version, const struct ob_wire_msg *msgs,
    uint32_t n)
{
	struct ob_buf b = OB_BUF_INIT;
	ck_assert_int_eq(ob_wire_encode_request_v(&b, version, msgs, n, &ts_consumer_limits),
	    OB_OK);
	ts_consumer_send_raw(c, b.data, b.len);
	ob_buf_fini(&b);
}

/* Receive and decode one reply; returns the nng error (0 = r filled). */
int
ts_consumer_recv(struct ts_consumer_conn *c, struct ts_consumer_reply *r, int timeout_ms)
{
	nng_socket_set_ms(c->sock, NNG_OPT_RECVTIMEO, timeout_ms);
	int rv = nng_recvmsg(c->sock, &r->msg, 0);
	if (rv != 0)
		return rv;
	ck_assert_int_eq(ob_wire_decode_reply(nng_msg_body(r->msg), nng_msg_len(r->msg),
	    &ts_consumer_limits, &r->rep), OB_OK);
	return 0;
}

void
ts_consumer_reply_fini(struct ts_consumer_reply *r)
{
	ob_wire_reply_fini(&r->rep);
	nng_msg_free(r->msg);
}

/* Send and wait for the reply (asserting one arrives). */
void
ts_consumer_call(struct ts_consumer_conn *c, const struct ob_wire_msg *msgs, uint32_t n, struct ts_consumer_reply *r)
{
	ts_consumer_send(c, msgs, n);
	ck_assert_int_eq(ts_consumer_recv(c, r, TS_CONSUMER_REPLY_TIMEOUT_MS), 0);
	ck_assert_int_eq(r->rep.frame_err, 0);
	ck_assert_uint_eq(r->rep.count, n);
}

/* The reply to one message sent before (asserting it arrives whole): its
 * status; its detail copied into detail (may be NULL). */
int
ts_consumer_recv1(struct ts_consumer_conn *c, char *detail, size_t detaillen)
{
	struct ts_consumer_reply r;
	ck_assert_int_eq(ts_consumer_recv(c, &r, TS_CONSUMER_REPLY_TIMEOUT_MS), 0);
	ck_assert_int_eq(r.rep.frame_err, 0);
	ck_assert_uint_eq(r.rep.count, 1);
	int st = r.rep.results[0].status;
	if (detail != NULL)
		snprintf(detail, detaillen, "%.*s", (int)r.rep.results[0].detail_len,
		    r.rep.results[0].detail ? r.rep.results[0].detail : "");
	ts_consumer_reply_fini(&r);
	return st;
}

/* One message, one status; detail copied into detail (may be NULL). */
int
ts_consumer_call1(struct ts_consumer_conn *c, struct ob_wire_msg m, char *detail, size_t detaillen)
{
	ts_consumer_send(c, &m, 1);
	return ts_consumer_recv1(c, detail, detaillen);
}
