/*
 * test_consumer_common.h - helpers shared by the test_consumer_* suites: a
 * real nng REQ client that sends frames to a running outbox-consumer and
 * decodes its replies, and a way to wait for a log line. Header-only (all
 * static) so that each suite stays one file.
 */
#ifndef OUTBOX_TEST_CONSUMER_COMMON_H
#define OUTBOX_TEST_CONSUMER_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "outbox/buf.h"
#include "outbox/err.h"
#include "outbox/wire.h"
#include "testsupport.h"

#define CC_REPLY_TIMEOUT_MS 30000
#define CC_API static __attribute__((unused))

static const struct ob_wire_limits cc_limits = { OB_WIRE_MAX_PAYLOAD, OB_WIRE_MAX_BATCH };

struct cc_conn {
	nng_socket sock;
};

/* A reply and the message it borrows its strings from. */
struct cc_reply {
	nng_msg *msg;
	struct ob_wire_reply rep;
};

CC_API int64_t
cc_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* A message created now, fence 1, attempt 1, no ordering key. Strings are
 * borrowed. */
CC_API struct ob_wire_msg
cc_msg(uint64_t id, const char *topic, const char *key, const char *payload)
{
	struct ob_wire_msg m;
	memset(&m, 0, sizeof(m));
	m.id = id;
	m.fence = 1;
	m.attempt = 1;
	m.created_at_us = cc_now_us();
	m.topic = topic;
	m.topic_len = (uint16_t)strlen(topic);
	m.key = key;
	m.key_len = (uint16_t)strlen(key);
	m.payload = payload;
	m.payload_len = (uint32_t)strlen(payload);
	return m;
}

CC_API void
cc_open(struct cc_conn *c, const char *url)
{
	ck_assert_int_eq(nng_req0_open(&c->sock), 0);
	nng_socket_set_ms(c->sock, NNG_OPT_RECVTIMEO, CC_REPLY_TIMEOUT_MS);
	nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, 0);
	/* Non-blocking dial: connects (and reconnects) in the background. */
	ck_assert_int_eq(nng_dial(c->sock, url, NULL, NNG_FLAG_NONBLOCK), 0);
}

CC_API void
cc_close(struct cc_conn *c)
{
	nng_close(c->sock);
}

CC_API void
cc_send_raw(struct cc_conn *c, const void *p, size_t n)
{
	ck_assert_int_eq(nng_send(c->sock, (void *)p, n, 0), 0);
}

CC_API void
cc_send(struct cc_conn *c, const struct ob_wire_msg *msgs, uint32_t n)
{
	struct ob_buf b = OB_BUF_INIT;
	ck_assert_int_eq(ob_wire_encode_request(&b, msgs, n, &cc_limits), OB_OK);
	cc_send_raw(c, b.data, b.len);
	ob_buf_fini(&b);
}

/* Receive and decode one reply; returns the nng error (0 = r filled). */
CC_API int
cc_recv(struct cc_conn *c, struct cc_reply *r, int timeout_ms)
{
	nng_socket_set_ms(c->sock, NNG_OPT_RECVTIMEO, timeout_ms);
	int rv = nng_recvmsg(c->sock, &r->msg, 0);
	if (rv != 0)
		return rv;
	ck_assert_int_eq(ob_wire_decode_reply(nng_msg_body(r->msg), nng_msg_len(r->msg),
	    &cc_limits, &r->rep), OB_OK);
	return 0;
}

CC_API void
cc_reply_fini(struct cc_reply *r)
{
	ob_wire_reply_fini(&r->rep);
	nng_msg_free(r->msg);
}

/* Send and wait for the reply (asserting one arrives). */
CC_API void
cc_call(struct cc_conn *c, const struct ob_wire_msg *msgs, uint32_t n, struct cc_reply *r)
{
	cc_send(c, msgs, n);
	ck_assert_int_eq(cc_recv(c, r, CC_REPLY_TIMEOUT_MS), 0);
	ck_assert_int_eq(r->rep.frame_err, 0);
	ck_assert_uint_eq(r->rep.count, n);
}

/* One message, one status; detail copied into detail (may be NULL). */
CC_API int
cc_call1(struct cc_conn *c, struct ob_wire_msg m, char *detail, size_t detaillen)
{
	struct cc_reply r;
	cc_call(c, &m, 1, &r);
	int st = r.rep.results[0].status;
	if (detail != NULL)
		snprintf(detail, detaillen, "%.*s", (int)r.rep.results[0].detail_len,
		    r.rep.results[0].detail ? r.rep.results[0].detail : "");
	cc_reply_fini(&r);
	return st;
}

#endif
