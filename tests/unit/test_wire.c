/*
 * test_wire.c - the relay <-> consumer frame codec.
 *
 * Round trips at every limit, every malformed class with its exact error
 * code (table-driven from tests/data/wire/cases.txt), truncation at every
 * byte offset, and encoders that refuse without touching the buffer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/err.h"
#include "outbox/wire.h"
#include "testsupport.h"

static const struct ob_wire_limits deflim = {
	OB_WIRE_DEFAULT_MAX_PAYLOAD, OB_WIRE_DEFAULT_MAX_BATCH
};
static const struct ob_wire_limits maxlim = {
	OB_WIRE_MAX_PAYLOAD, OB_WIRE_MAX_BATCH
};

/* Error codes are compared by name so a failure reads "wire.key". */
#define ck_assert_err(got, want)                                          \
	do {                                                              \
		int g_ = (got), w_ = (want);                              \
		ck_assert_msg(g_ == w_, "%s: got %s, want %s", #got,      \
		    ob_err_name(g_), ob_err_name(w_));                    \
	} while (0)

static char big[OB_WIRE_MAX_DETAIL * 2 + 1]; /* filler for long fields */

static void
fill_big(void)
{
	for (size_t i = 0; i < sizeof(big) - 1; i++)
		big[i] = (char)('a' + i % 26);
	big[sizeof(big) - 1] = '\0';
}

static struct ob_wire_msg
mkmsg(uint64_t id)
{
	struct ob_wire_msg m = {
		.id = id,
		.fence = 0x0102030405060708ull,
		.attempt = 3,
		.created_at_us = 1700000000123456ll,
		.ordering_seq = id * 10,
		.topic = "orders",
		.topic_len = 6,
		.key = "order-key",
		.key_len = 9,
		.ordering_key = "customer-1",
		.ordering_key_len = 10,
		.payload = "{\"n\":1}",
		.payload_len = 7,
	};

	return m;
}

static bool
mem_eq(const char *a, const char *b, size_t n)
{
	return n == 0 || memcmp(a, b, n) == 0;
}

static void
assert_msg_eq(const struct ob_wire_msg *a, const struct ob_wire_msg *b)
{
	ck_assert_uint_eq(a->id, b->id);
	ck_assert_uint_eq(a->fence, b->fence);
	ck_assert_uint_eq(a->attempt, b->attempt);
	ck_assert_int_eq(a->created_at_us, b->created_at_us);
	ck_assert_uint_eq(a->ordering_seq, b->ordering_seq);
	ck_assert_uint_eq(a->topic_len, b->topic_len);
	ck_assert(mem_eq(a->topic, b->topic, a->topic_len));
	ck_assert_uint_eq(a->key_len, b->key_len);
	ck_assert(mem_eq(a->key, b->key, a->key_len));
	ck_assert_uint_eq(a->ordering_key_len, b->ordering_key_len);
	ck_assert(mem_eq(a->ordering_key, b->ordering_key,
	    a->ordering_key_len));
	ck_assert_uint_eq(a->payload_len, b->payload_len);
	ck_assert(mem_eq(a->payload, b->payload, a->payload_len));
}

/* Encode msgs as version (0 = the default encoder), decode them again with
 * lim, compare field by field. */
static void
roundtrip_request_v(int version, const struct ob_wire_msg *msgs, uint32_t n,
    const struct ob_wire_limits *lim)
{
	struct ob_buf b = OB_BUF_INIT;
	struct ob_wire_request req;

	if (version == 0)
		ck_assert_err(ob_wire_encode_request(&b, msgs, n, lim), OB_OK);
	else
		ck_assert_err(ob_wire_encode_request_v(&b, version, msgs, n, lim), OB_OK);
	ck_assert_err(ob_wire_decode_request(b.data, b.len, lim, &req), OB_OK);
	ck_assert_uint_eq(req.count, n);
	ck_assert_uint_eq(req.version, version == 0 ? OB_WIRE_VERSION : version);
	for (uint32_t i = 0; i < n; i++) {
		const struct ob_wire_msg *m = &req.msgs[i];

		assert_msg_eq(m, &msgs[i]);
		/* zero copy: strings point into the frame */
		ck_assert(m->topic >= b.data && m->topic < b.data + b.len);
		ck_assert(m->key >= b.data && m->key < b.data + b.len);
		if (m->ordering_key_len == 0)
			ck_assert_ptr_null(m->ordering_key);
		else
			ck_assert(m->ordering_key > b.data &&
			    m->ordering_key < b.data + b.len);
	}
	ob_wire_request_fini(&req);
	ck_assert_ptr_null(req.msgs);
	ob_buf_fini(&b);
}

/* Every version the codec speaks, the same messages. */
static void
roundtrip_request(const struct ob_wire_msg *msgs, uint32_t n,
    const struct ob_wire_limits *lim)
{
	roundtrip_request_v(0, msgs, n, lim);
	for (int v = OB_WIRE_VERSION_MIN; v <= OB_WIRE_VERSION; v++)
		roundtrip_request_v(v, msgs, n, lim);
}

START_TEST(test_request_roundtrip)
{
	struct ob_wire_msg m[3] = { mkmsg(1), mkmsg(2), mkmsg(UINT64_MAX) };

	m[1].payload = NULL; /* empty payload, no pointer */
	m[1].payload_len = 0;
	m[1].ordering_key = NULL; /* no ordering key */
	m[1].ordering_key_len = 0;
	m[1].ordering_seq = 0;
	m[2].created_at_us = -1; /* i64 travels as its u64 bits */
	m[2].attempt = UINT32_MAX;
	m[2].fence = UINT64_MAX;
	roundtrip_request(m, 3, &deflim);

	m[0].created_at_us = INT64_MIN;
	m[2].created_at_us = INT64_MAX;
	roundtrip_request(m, 3, &deflim);
	roundtrip_request(m, 1, &deflim);
}
END_TEST

START_TEST(test_request_exact_bytes)
{
	struct ob_wire_msg m = mkmsg(0x1122334455667788ull);
	struct ob_buf b = OB_BUF_INIT;
	static const uint8_t head[] = {
		'O', 'B', 'R', 'Q', OB_WIRE_VERSION, 1, 0, 0, 0, 0, 0, 1,
		0, /* source_len: no source */
		0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
		0, 0, 0, 3,
	};

	ck_assert_err(ob_wire_encode_request(&b, &m, 1, &deflim), OB_OK);
	ck_assert_mem_eq(b.data, head, sizeof(head));
	ck_assert_uint_eq(b.len, OB_WIRE_REQ_HEADER + 1 + 46 + m.topic_len +
	    m.key_len + m.ordering_key_len + m.payload_len);

	/* versions 1 and 2: the same bytes but the version byte and without
	 * source_len */
	for (int v = 1; v <= 2; v++) {
		struct ob_buf b1 = OB_BUF_INIT;
		ck_assert_err(ob_wire_encode_request_v(&b1, v, &m, 1, &deflim), OB_OK);
		ck_assert_uint_eq(b1.len, b.len - 1);
		ck_assert_uint_eq((uint8_t)b1.data[4], v);
		ck_assert_mem_eq(b1.data + 5, b.data + 5, OB_WIRE_REQ_HEADER - 5);
		ck_assert_mem_eq(b1.data + OB_WIRE_REQ_HEADER, b.data + OB_WIRE_REQ_HEADER + 1,
		    b1.len - OB_WIRE_REQ_HEADER);
		ob_buf_fini(&b1);
	}

	/* version 3 with a source: its length and bytes after count, once
	 * for the frame; every decoded message points at it */
	struct ob_wire_msg two[2] = { m, mkmsg(2) };
	two[0].source = two[1].source = "db-a.1";
	two[0].source_len = two[1].source_len = 6;
	struct ob_buf b3 = OB_BUF_INIT;
	ck_assert_err(ob_wire_encode_request(&b3, two, 2, &deflim), OB_OK);
	ck_assert_mem_eq(b3.data + OB_WIRE_REQ_HEADER, "\x06" "db-a.1", 7);
	struct ob_wire_request req;
	ck_assert_err(ob_wire_decode_request(b3.data, b3.len, &deflim, &req), OB_OK);
	ck_assert_uint_eq(req.source_len, 6);
	ck_assert_mem_eq(req.source, "db-a.1", 6);
	ck_assert_uint_eq(req.msgs[1].source_len, 6);
	ck_assert_mem_eq(req.msgs[1].source, "db-a.1", 6);
	ob_wire_request_fini(&req);
	/* no room for it before version 3; one source a frame; a bad name */
	size_t before = b3.len;
	ck_assert_err(ob_wire_encode_request_v(&b3, 2, two, 2, &deflim), OB_EINVAL);
	two[1].source = "db-b.1";
	ck_assert_err(ob_wire_encode_request(&b3, two, 2, &deflim), OB_EINVAL);
	two[1].source_len = 0;
	ck_assert_err(ob_wire_encode_request(&b3, two, 2, &deflim), OB_EINVAL);
	two[0].source = two[1].source = "db/a";
	two[0].source_len = two[1].source_len = 4;
	ck_assert_err(ob_wire_encode_request(&b3, two, 2, &deflim), OB_EWIRE_SOURCE);
	ck_assert_uint_eq(b3.len, before); /* every refusal left it alone */
	ob_buf_fini(&b3);
	ob_buf_fini(&b);
}
END_TEST

START_TEST(test_request_max_sizes)
{
	struct ob_wire_msg m[2] = { mkmsg(1), mkmsg(2) };
	char *payload = malloc(OB_WIRE_DEFAULT_MAX_PAYLOAD);

	ck_assert_ptr_nonnull(payload);
	memset(payload, '7', OB_WIRE_DEFAULT_MAX_PAYLOAD);
	m[0].topic = big;
	m[0].topic_len = OB_WIRE_MAX_TOPIC;
	m[0].key = big + 1;
	m[0].key_len = OB_WIRE_MAX_KEY;
	m[0].ordering_key = big + 2;
	m[0].ordering_key_len = OB_WIRE_MAX_ORDKEY;
	m[0].payload = payload;
	m[0].payload_len = OB_WIRE_DEFAULT_MAX_PAYLOAD;
	m[1].topic_len = 1; /* and the smallest */
	m[1].key_len = 1;
	roundtrip_request(m, 2, &deflim);

	/* one byte over the configured limit is refused both ways */
	struct ob_wire_limits small = { OB_WIRE_DEFAULT_MAX_PAYLOAD - 1, 10 };
	struct ob_buf b = OB_BUF_INIT;
	struct ob_wire_request req;

	ck_assert_err(ob_wire_encode_request(&b, m, 2, &small),
	    OB_EWIRE_PAYLOAD);
	ck_assert_err(ob_wire_encode_request(&b, m, 2, &deflim), OB_OK);
	ck_assert_err(ob_wire_decode_request(b.data, b.len, &small, &req),
	    OB_EWIRE_PAYLOAD);
	ob_buf_fini(&b);
	free(payload);
}
END_TEST

START_TEST(test_request_max_batch)
{
	struct ob_wire_msg *m = calloc(OB_WIRE_MAX_BATCH + 1, sizeof(*m));
	struct ob_wire_request req;
	struct ob_buf b = OB_BUF_INIT;

	ck_assert_ptr_nonnull(m);
	for (uint32_t i = 0; i <= OB_WIRE_MAX_BATCH; i++)
		m[i] = mkmsg(i + 1);
	roundtrip_request(m, OB_WIRE_DEFAULT_MAX_BATCH, &deflim);
	roundtrip_request(m, OB_WIRE_MAX_BATCH, &maxlim);

	/* a batch legal under the hard ceiling, over the configured one */
	ck_assert_err(ob_wire_encode_request(&b, m, OB_WIRE_DEFAULT_MAX_BATCH + 1,
	    &maxlim), OB_OK);
	ck_assert_err(ob_wire_decode_request(b.data, b.len, &deflim, &req),
	    OB_EWIRE_COUNT);
	ck_assert_err(ob_wire_decode_request(b.data, b.len, &maxlim, &req),
	    OB_OK);
	ob_wire_request_fini(&req);
	ob_buf_fini(&b);
	free(m);
}
END_TEST

/* Encode res as version (0 = the default encoder), decode, compare; a
 * version 1 reply has no retry_after_ms (decoded as 0). */
static void
roundtrip_reply_v(int version, const struct ob_wire_result *res, uint32_t n,
    const struct ob_wire_limits *lim)
{
	struct ob_buf b = OB_BUF_INIT;
	struct ob_wire_reply rep;
	int v = version == 0 ? OB_WIRE_VERSION : version;

	if (version == 0)
		ck_assert_err(ob_wire_encode_reply(&b, res, n), OB_OK);
	else
		ck_assert_err(ob_wire_encode_reply_v(&b, version, res, n), OB_OK);
	ck_assert_err(ob_wire_decode_reply(b.data, b.len, lim, &rep), OB_OK);
	ck_assert_uint_eq(rep.version, v);
	ck_assert_uint_eq(rep.frame_err, 0);
	ck_assert_uint_eq(rep.detail_len, 0);
	ck_assert_ptr_null(rep.detail);
	ck_assert_uint_eq(rep.count, n);
	for (uint32_t i = 0; i < n; i++) {
		const struct ob_wire_result *r = &rep.results[i];
		uint16_t want = res[i].detail_len > OB_WIRE_MAX_DETAIL ?
		    OB_WIRE_MAX_DETAIL : res[i].detail_len;

		ck_assert_uint_eq(r->id, res[i].id);
		ck_assert_uint_eq(r->status, res[i].status);
		ck_assert_uint_eq(r->retry_after_ms,
		    v >= OB_WIRE_VERSION_RETRY_AFTER ? res[i].retry_after_ms : 0);
		ck_assert_uint_eq(r->detail_len, want);
		if (want == 0)
			ck_assert_ptr_null(r->detail);
		else
			ck_assert_mem_eq(r->detail, res[i].detail, want);
	}
	ob_wire_reply_fini(&rep);
	ck_assert_ptr_null(rep.results);
	ob_buf_fini(&b);
}

static void
roundtrip_reply(const struct ob_wire_result *res, uint32_t n,
    const struct ob_wire_limits *lim)
{
	roundtrip_reply_v(0, res, n, lim);
	for (int v = OB_WIRE_VERSION_MIN; v <= OB_WIRE_VERSION; v++)
		roundtrip_reply_v(v, res, n, lim);
}

START_TEST(test_reply_roundtrip)
{
	struct ob_wire_result r[5] = {
		{ 1, OB_WIRE_APPLIED, NULL, 0, 0 },
		{ 2, OB_WIRE_DUPLICATE, "seen", 4, 0 },
		{ 3, OB_WIRE_RETRY, big, OB_WIRE_MAX_DETAIL, 3000 },
		{ UINT64_MAX, OB_WIRE_REJECT, "bad json", 8, 0 },
		{ 5, OB_WIRE_APPLIED, big, OB_WIRE_MAX_DETAIL + 1, 0 },
	};

	roundtrip_reply(r, 5, &deflim);
	roundtrip_reply(r, 1, &deflim);
	r[2].retry_after_ms = UINT32_MAX; /* the whole u32 travels */
	roundtrip_reply(r, 5, &deflim);

	/* detail over the maximum is truncated, never refused */
	r[0].detail = big;
	r[0].detail_len = (uint16_t)(sizeof(big) - 1);
	roundtrip_reply(r, 1, &deflim);
}
END_TEST

START_TEST(test_reply_max_batch)
{
	struct ob_wire_result *r = calloc(OB_WIRE_MAX_BATCH, sizeof(*r));
	struct ob_wire_reply rep;
	struct ob_buf b = OB_BUF_INIT;

	ck_assert_ptr_nonnull(r);
	for (uint32_t i = 0; i < OB_WIRE_MAX_BATCH; i++)
		r[i] = (struct ob_wire_result){ i, 1 + i % 4, "d", i % 2, i };
	roundtrip_reply(r, OB_WIRE_DEFAULT_MAX_BATCH, &deflim);
	roundtrip_reply(r, OB_WIRE_MAX_BATCH, &maxlim);

	ck_assert_err(ob_wire_encode_reply(&b, r, OB_WIRE_MAX_BATCH), OB_OK);
	ck_assert_err(ob_wire_decode_reply(b.data, b.len, &deflim, &rep),
	    OB_EWIRE_COUNT);
	ob_buf_fini(&b);
	free(r);
}
END_TEST

START_TEST(test_error_reply)
{
	struct ob_buf b = OB_BUF_INIT;
	struct ob_wire_reply rep;

	ck_assert_err(ob_wire_encode_error_reply(&b, OB_EWIRE_KEY,
	    "empty key in message 3"), OB_OK);
	ck_assert_uint_eq(b.len, OB_WIRE_REP_HEADER + 22);
	ck_assert_err(ob_wire_decode_reply(b.data, b.len, &deflim, &rep), OB_OK);
	ck_assert_uint_eq(rep.frame_err, OB_EWIRE_KEY);
	ck_assert_uint_eq(rep.count, 0);
	ck_assert_ptr_null(rep.results);
	ck_assert_uint_eq(rep.detail_len, 22);
	ck_assert_mem_eq(rep.detail, "empty key in message 3", 22);
	ob_wire_reply_fini(&rep);

	/* no detail */
	ob_buf_reset(&b);
	ck_assert_err(ob_wire_encode_error_reply(&b, OB_EWIRE_TRUNC, NULL),
	    OB_OK);
	ck_assert_uint_eq(b.len, OB_WIRE_REP_HEADER);
	ck_assert_err(ob_wire_decode_reply(b.data, b.len, &deflim, &rep), OB_OK);
	ck_assert_uint_eq(rep.frame_err, OB_EWIRE_TRUNC);
	ck_assert_ptr_null(rep.detail);
	ck_assert_uint_eq(rep.detail_len, 0);
	ob_wire_reply_fini(&rep);

	/* long detail truncated; a frame_err no one knows passes through */
	ob_buf_reset(&b);
	ck_assert_err(ob_wire_encode_error_reply(&b, 255, big), OB_OK);
	ck_assert_err(ob_wire_decode_reply(b.data, b.len, &deflim, &rep), OB_OK);
	ck_assert_uint_eq(rep.frame_err, 255);
	ck_assert_uint_eq(rep.detail_len, OB_WIRE_MAX_DETAIL);
	ck_assert_mem_eq(rep.detail, big, OB_WIRE_MAX_DETAIL);
	ob_wire_reply_fini(&rep);

	/* 0 would mean "accepted"; the field is one byte */
	ob_buf_reset(&b);
	ck_assert_err(ob_wire_encode_error_reply(&b, 0, "x"), OB_EINVAL);
	ck_assert_err(ob_wire_encode_error_reply(&b, 256, "x"), OB_EINVAL);
	ck_assert_err(ob_wire_encode_error_reply(&b, -1, "x"), OB_EINVAL);
	ck_assert_uint_eq(b.len, 0);
	ob_buf_fini(&b);
}
END_TEST

/* Every strict prefix of a valid frame must be reported as truncated. */
static void
assert_prefixes_truncated(const struct ob_buf *b, bool request)
{
	for (size_t n = 0; n < b->len; n++) {
		/* a private copy of exactly n bytes, so ASan/valgrind see any
		 * read past the end */
		char *p = malloc(n > 0 ? n : 1);
		int rv;

		ck_assert_ptr_nonnull(p);
		memcpy(p, b->data, n);
		if (request) {
			struct ob_wire_request req;

			rv = ob_wire_decode_request(p, n, &deflim, &req);
		} else {
			struct ob_wire_reply rep;

			rv = ob_wire_decode_reply(p, n, &deflim, &rep);
		}
		free(p);
		ck_assert_msg(rv == OB_EWIRE_TRUNC,
		    "prefix of %zu/%zu bytes: got %s", n, b->len,
		    ob_err_name(rv));
	}
}

START_TEST(test_truncation_every_offset)
{
	struct ob_wire_msg m[3] = { mkmsg(1), mkmsg(2), mkmsg(3) };
	struct ob_wire_result r[3] = {
		{ 1, OB_WIRE_APPLIED, NULL, 0, 0 },
		{ 2, OB_WIRE_RETRY, "lock timeout", 12, 0 },
		{ 3, OB_WIRE_REJECT, "x", 1, 0 },
	};
	struct ob_buf b = OB_BUF_INIT;

	m[1].ordering_key_len = 0;
	m[1].ordering_key = NULL;
	m[2].payload_len = 0;
	r[1].retry_after_ms = 0x01020304;
	for (int v = OB_WIRE_VERSION_MIN; v <= OB_WIRE_VERSION; v++) {
		ob_buf_reset(&b);
		ck_assert_err(ob_wire_encode_request_v(&b, v, m, 3, &deflim), OB_OK);
		assert_prefixes_truncated(&b, true);
		if (v >= OB_WIRE_VERSION_SOURCE) { /* and with a source */
			for (int i = 0; i < 3; i++)
				m[i].source = "relay-a", m[i].source_len = 7;
			ob_buf_reset(&b);
			ck_assert_err(ob_wire_encode_request_v(&b, v, m, 3, &deflim), OB_OK);
			assert_prefixes_truncated(&b, true);
			for (int i = 0; i < 3; i++)
				m[i].source = NULL, m[i].source_len = 0;
		}

		ob_buf_reset(&b);
		ck_assert_err(ob_wire_encode_reply_v(&b, v, r, 3), OB_OK);
		assert_prefixes_truncated(&b, false);

		ob_buf_reset(&b);
		ck_assert_err(ob_wire_encode_error_reply_v(&b, v, OB_EWIRE_VERSION, "old"),
		    OB_OK);
		assert_prefixes_truncated(&b, false);
	}

	ob_buf_reset(&b);
	ck_assert_err(ob_wire_encode_error_reply(&b, OB_EWIRE_MAGIC, "bad"),
	    OB_OK);
	assert_prefixes_truncated(&b, false);
	ob_buf_fini(&b);
}
END_TEST

/* Patch one byte of a valid frame and expect code; offsets per protocol.md. */
static void
assert_patched(const struct ob_buf *b, bool request, size_t off, uint8_t v,
    int want)
{
	char *p = malloc(b->len);
	bool untouched;
	int rv;

	ck_assert_ptr_nonnull(p);
	memcpy(p, b->data, b->len);
	p[off] = (char)v;
	if (request) {
		struct ob_wire_request req = { 77, NULL, 0, NULL, 0 };

		rv = ob_wire_decode_request(p, b->len, &deflim, &req);
		untouched = req.count == 77 && req.msgs == NULL;
		if (rv == OB_OK) { /* a patch that is still a valid frame */
			ob_wire_request_fini(&req);
			untouched = want == OB_OK;
		}
	} else {
		struct ob_wire_reply rep = { .count = 77 };

		rv = ob_wire_decode_reply(p, b->len, &deflim, &rep);
		untouched = rep.count == 77 && rep.results == NULL;
		if (rv == OB_OK) {
			ob_wire_reply_fini(&rep);
			untouched = want == OB_OK;
		}
	}
	free(p);
	ck_assert_msg(rv == want, "byte %zu = %u: got %s, want %s", off, v,
	    ob_err_name(rv), ob_err_name(want));
	ck_assert_msg(untouched, "byte %zu: *out written on failure", off);
}

START_TEST(test_header_fields)
{
	struct ob_wire_msg m = mkmsg(1);
	struct ob_wire_result r = { 1, OB_WIRE_APPLIED, NULL, 0, 0 };
	struct ob_buf b = OB_BUF_INIT;

	ck_assert_err(ob_wire_encode_request_v(&b, 2, &m, 1, &deflim), OB_OK);
	assert_patched(&b, true, 0, 'X', OB_EWIRE_MAGIC);
	assert_patched(&b, true, 3, 'P', OB_EWIRE_KIND); /* reply magic */
	assert_patched(&b, true, 4, 0, OB_EWIRE_VERSION);
	assert_patched(&b, true, 4, OB_WIRE_VERSION + 1, OB_EWIRE_VERSION);
	assert_patched(&b, true, 4, 0xff, OB_EWIRE_VERSION);
	for (int v = OB_WIRE_VERSION_MIN; v < OB_WIRE_VERSION_SOURCE; v++)
		assert_patched(&b, true, 4, (uint8_t)v, OB_OK); /* same layout */
	/* read as version 3, the first message byte is source_len (0) and
	 * every field after it shifts by one: the topic length is then a byte
	 * of ordering_seq and the topic's high byte (0x01 00 = 256: too long) */
	assert_patched(&b, true, 4, OB_WIRE_VERSION_SOURCE, OB_EWIRE_TOPIC);
	assert_patched(&b, true, 5, 2, OB_EWIRE_KIND);
	assert_patched(&b, true, 5, 0, OB_EWIRE_KIND);
	assert_patched(&b, true, 6, 0x80, OB_EWIRE_FLAGS);
	assert_patched(&b, true, 7, 0x01, OB_EWIRE_FLAGS);
	assert_patched(&b, true, 11, 0, OB_EWIRE_COUNT);
	assert_patched(&b, true, 8, 1, OB_EWIRE_COUNT); /* 2^24 + 1 */
	assert_patched(&b, true, 11, 2, OB_EWIRE_TRUNC);
	/* message 1 at 12: topic_len 48, key_len 56, ordering_key_len 67,
	 * payload_len 79 (see mkmsg for the field lengths) */
	assert_patched(&b, true, 49, 0, OB_EWIRE_TOPIC);
	assert_patched(&b, true, 48, 1, OB_EWIRE_TOPIC);   /* 262 */
	assert_patched(&b, true, 56, 1, OB_EWIRE_KEY);     /* 265 */
	assert_patched(&b, true, 57, 0, OB_EWIRE_KEY);
	assert_patched(&b, true, 67, 1, OB_EWIRE_ORDKEY);  /* 266 */
	assert_patched(&b, true, 68, 0xff, OB_EWIRE_TRUNC); /* 255, past end */
	assert_patched(&b, true, 80, 0x10, OB_EWIRE_PAYLOAD); /* 1 MiB + 7 */
	assert_patched(&b, true, 82, 8, OB_EWIRE_TRUNC);   /* 8, 7 there */

	/* version 3: source_len at 12, the source "ab" at 13 */
	m.source = "ab";
	m.source_len = 2;
	ob_buf_reset(&b);
	ck_assert_err(ob_wire_encode_request(&b, &m, 1, &deflim), OB_OK);
	assert_patched(&b, true, 12, 64, OB_EWIRE_SOURCE);   /* over 63 */
	assert_patched(&b, true, 12, 0xff, OB_EWIRE_SOURCE);
	assert_patched(&b, true, 12, 63, OB_EWIRE_SOURCE);   /* in range: the bytes after are no name */
	assert_patched(&b, true, 13, '/', OB_EWIRE_SOURCE);  /* not of the charset */
	assert_patched(&b, true, 14, ' ', OB_EWIRE_SOURCE);
	assert_patched(&b, true, 14, 0, OB_EWIRE_SOURCE);
	assert_patched(&b, true, 14, 0x80, OB_EWIRE_SOURCE);
	assert_patched(&b, true, 13, '_', OB_OK);
	assert_patched(&b, true, 14, '.', OB_OK);
	m.source = NULL;
	m.source_len = 0;

	/* version 1: result at 16, status 24, detail_len 25 */
	ob_buf_reset(&b);
	ck_assert_err(ob_wire_encode_reply_v(&b, 1, &r, 1), OB_OK);
	assert_patched(&b, false, 1, 'X', OB_EWIRE_MAGIC);
	assert_patched(&b, false, 3, 'Q', OB_EWIRE_KIND); /* request magic */
	assert_patched(&b, false, 4, 9, OB_EWIRE_VERSION);
	assert_patched(&b, false, 4, 0, OB_EWIRE_VERSION);
	assert_patched(&b, false, 4, 2, OB_EWIRE_TRUNC); /* v2 wants 4 more bytes */
	assert_patched(&b, false, 5, 1, OB_EWIRE_KIND);
	assert_patched(&b, false, 6, 1, OB_EWIRE_FLAGS);
	assert_patched(&b, false, 8, 9, OB_EWIRE_COUNT);  /* error + result */
	assert_patched(&b, false, 9, 1, OB_EWIRE_FLAGS);  /* reserved */
	assert_patched(&b, false, 10, 5, OB_EWIRE_DETAIL); /* 1280 */
	assert_patched(&b, false, 11, 0xff, OB_EWIRE_TRUNC);
	assert_patched(&b, false, 15, 0, OB_EWIRE_COUNT);
	assert_patched(&b, false, 12, 1, OB_EWIRE_COUNT);
	assert_patched(&b, false, 24, 0, OB_EWIRE_STATUS);
	assert_patched(&b, false, 24, 5, OB_EWIRE_STATUS);
	assert_patched(&b, false, 24, 255, OB_EWIRE_STATUS);
	assert_patched(&b, false, 25, 5, OB_EWIRE_DETAIL);
	assert_patched(&b, false, 26, 1, OB_EWIRE_TRUNC);

	/* version 2: status 24, retry_after_ms 25..28, detail_len 29 */
	ob_buf_reset(&b);
	ck_assert_err(ob_wire_encode_reply_v(&b, 2, &r, 1), OB_OK);
	ck_assert_uint_eq(b.len, OB_WIRE_REP_HEADER + OB_WIRE_REP_RESULT_V2);
	assert_patched(&b, false, 4, OB_WIRE_VERSION + 1, OB_EWIRE_VERSION);
	assert_patched(&b, false, 4, 1, OB_EWIRE_TRAILING); /* v1 ends 4 bytes sooner */
	assert_patched(&b, false, 24, 5, OB_EWIRE_STATUS);
	assert_patched(&b, false, 25, 0xff, OB_OK); /* any u32 */
	assert_patched(&b, false, 28, 0xff, OB_OK);
	assert_patched(&b, false, 29, 5, OB_EWIRE_DETAIL);
	assert_patched(&b, false, 30, 1, OB_EWIRE_TRUNC);
	ob_buf_fini(&b);
}
END_TEST

START_TEST(test_trailing)
{
	struct ob_wire_msg m = mkmsg(1);
	struct ob_wire_result r = { 1, OB_WIRE_APPLIED, NULL, 0, 0 };
	struct ob_wire_request req;
	struct ob_wire_reply rep;
	struct ob_buf b = OB_BUF_INIT;

	ck_assert_err(ob_wire_encode_request(&b, &m, 1, &deflim), OB_OK);
	ck_assert_err(ob_buf_put_u8(&b, 0), OB_OK);
	ck_assert_err(ob_wire_decode_request(b.data, b.len, &deflim, &req),
	    OB_EWIRE_TRAILING);

	ob_buf_reset(&b);
	ck_assert_err(ob_wire_encode_reply(&b, &r, 1), OB_OK);
	ck_assert_err(ob_buf_puts(&b, "junk"), OB_OK);
	ck_assert_err(ob_wire_decode_reply(b.data, b.len, &deflim, &rep),
	    OB_EWIRE_TRAILING);

	/* two frames back to back are not one frame */
	ob_buf_reset(&b);
	ck_assert_err(ob_wire_encode_error_reply(&b, OB_EWIRE_KIND, "k"), OB_OK);
	ck_assert_err(ob_wire_encode_error_reply(&b, OB_EWIRE_KIND, "k"), OB_OK);
	ck_assert_err(ob_wire_decode_reply(b.data, b.len, &deflim, &rep),
	    OB_EWIRE_TRAILING);
	ob_buf_fini(&b);
}
END_TEST

START_TEST(test_bad_limits)
{
	static const struct ob_wire_limits bad[] = {
		{ OB_WIRE_DEFAULT_MAX_PAYLOAD, 0 },
		{ OB_WIRE_DEFAULT_MAX_PAYLOAD, OB_WIRE_MAX_BATCH + 1 },
		{ OB_WIRE_MAX_PAYLOAD + 1, 1 },
	};
	struct ob_wire_msg m = mkmsg(1);
	struct ob_wire_request req;
	struct ob_wire_reply rep;
	struct ob_buf b = OB_BUF_INIT;
	struct ob_buf frame = OB_BUF_INIT;

	ck_assert_err(ob_wire_encode_request(&frame, &m, 1, &deflim), OB_OK);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_err(ob_wire_decode_request(frame.data, frame.len,
		    &bad[i], &req), OB_EINVAL);
		ck_assert_err(ob_wire_decode_reply(frame.data, frame.len,
		    &bad[i], &rep), OB_EINVAL);
		ck_assert_err(ob_wire_encode_request(&b, &m, 1, &bad[i]),
		    OB_EINVAL);
	}
	ck_assert_err(ob_wire_decode_request(frame.data, frame.len, NULL, &req),
	    OB_EINVAL);
	ck_assert_err(ob_wire_decode_request(NULL, 5, &deflim, &req),
	    OB_EINVAL);
	ck_assert_err(ob_wire_decode_reply(NULL, 0, &deflim, &rep),
	    OB_EWIRE_TRUNC);
	ck_assert_ptr_null(b.data);
	ob_buf_fini(&frame);
}
END_TEST

/* The encoder must refuse with code and leave "prefix" alone in b. */
static void
assert_refused(const struct ob_wire_msg *m, uint32_t n,
    const struct ob_wire_limits *lim, int want)
{
	struct ob_buf b = OB_BUF_INIT;

	ck_assert_err(ob_buf_puts(&b, "prefix"), OB_OK);
	ck_assert_err(ob_wire_encode_request(&b, m, n, lim), want);
	ck_assert_str_eq(b.data, "prefix");
	ck_assert_uint_eq(b.len, 6);
	ob_buf_fini(&b);
}

START_TEST(test_encoder_refuses)
{
	struct ob_wire_msg ok[OB_WIRE_DEFAULT_MAX_BATCH + 1];
	struct ob_wire_msg m[2];
	struct ob_wire_limits lim = { 16, 4 };

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		ok[i] = mkmsg(i + 1);
	assert_refused(ok, 0, &deflim, OB_EWIRE_COUNT);
	assert_refused(ok, OB_WIRE_DEFAULT_MAX_BATCH + 1, &deflim,
	    OB_EWIRE_COUNT);
	assert_refused(ok, 5, &lim, OB_EWIRE_COUNT);
	assert_refused(NULL, 1, &deflim, OB_EINVAL);

	/* each limit, violated by the SECOND message: nothing is written */
#define REFUSE(field, value, want)                                       \
	do {                                                             \
		m[0] = mkmsg(1);                                         \
		m[1] = mkmsg(2);                                         \
		m[1].field = (value);                                    \
		assert_refused(m, 2, &lim, (want));                      \
	} while (0)
	REFUSE(topic_len, 0, OB_EWIRE_TOPIC);
	REFUSE(topic_len, OB_WIRE_MAX_TOPIC + 1, OB_EWIRE_TOPIC);
	REFUSE(key_len, 0, OB_EWIRE_KEY);
	REFUSE(key_len, OB_WIRE_MAX_KEY + 1, OB_EWIRE_KEY);
	REFUSE(ordering_key_len, OB_WIRE_MAX_ORDKEY + 1, OB_EWIRE_ORDKEY);
	REFUSE(payload_len, 17, OB_EWIRE_PAYLOAD);
	REFUSE(payload_len, UINT32_MAX, OB_EWIRE_PAYLOAD);
	REFUSE(key, NULL, OB_EINVAL);
	REFUSE(topic, NULL, OB_EINVAL);
	REFUSE(payload, NULL, OB_EINVAL);
#undef REFUSE

	/* the first violated limit is the one reported */
	m[0] = mkmsg(1);
	m[0].key_len = 0;
	m[0].payload_len = 17;
	assert_refused(m, 1, &lim, OB_EWIRE_KEY);

	/* the limits themselves apply exactly */
	m[0] = mkmsg(1);
	m[0].topic = m[0].key = m[0].ordering_key = big;
	m[0].topic_len = OB_WIRE_MAX_TOPIC;
	m[0].key_len = OB_WIRE_MAX_KEY;
	m[0].ordering_key_len = OB_WIRE_MAX_ORDKEY;
	m[0].payload = big;
	m[0].payload_len = 16;
	for (int i = 0; i < 4; i++)
		ok[i] = m[0];
	roundtrip_request(ok, 4, &lim);
}
END_TEST

START_TEST(test_reply_encoder_refuses)
{
	struct ob_wire_result r[2] = {
		{ 1, OB_WIRE_APPLIED, NULL, 0, 0 },
		{ 2, OB_WIRE_REJECT, "no", 2, 0 },
	};
	struct ob_wire_result *many = calloc(OB_WIRE_MAX_BATCH + 1,
	    sizeof(*many));
	struct ob_buf b = OB_BUF_INIT;
	int codes[] = { 0, 5, 255 };

	ck_assert_ptr_nonnull(many);
	for (uint32_t i = 0; i <= OB_WIRE_MAX_BATCH; i++)
		many[i] = r[0];
	ck_assert_err(ob_buf_puts(&b, "prefix"), OB_OK);
	ck_assert_err(ob_wire_encode_reply(&b, r, 0), OB_EWIRE_COUNT);
	ck_assert_err(ob_wire_encode_reply(&b, many, OB_WIRE_MAX_BATCH + 1),
	    OB_EWIRE_COUNT);
	ck_assert_err(ob_wire_encode_reply(&b, NULL, 1), OB_EINVAL);
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		r[1].status = (uint8_t)codes[i];
		ck_assert_err(ob_wire_encode_reply(&b, r, 2), OB_EWIRE_STATUS);
	}
	r[1].status = OB_WIRE_RETRY;
	r[1].detail = NULL;
	ck_assert_err(ob_wire_encode_reply(&b, r, 2), OB_EINVAL);
	ck_assert_str_eq(b.data, "prefix");
	ck_assert_uint_eq(b.len, 6);

	/* a version this codec does not speak */
	r[1].detail = "no";
	ck_assert_err(ob_wire_encode_reply_v(&b, 0, r, 2), OB_EINVAL);
	ck_assert_err(ob_wire_encode_reply_v(&b, OB_WIRE_VERSION + 1, r, 2), OB_EINVAL);
	ck_assert_err(ob_wire_encode_error_reply_v(&b, 0, OB_EWIRE_KEY, "k"), OB_EINVAL);
	ck_assert_err(ob_wire_encode_error_reply_v(&b, OB_WIRE_VERSION + 1, OB_EWIRE_KEY,
	    "k"), OB_EINVAL);
	ck_assert_str_eq(b.data, "prefix");
	ck_assert_uint_eq(b.len, 6);

	/* and a successful encode appends after what was there */
	ck_assert_err(ob_wire_encode_reply(&b, r, 1), OB_OK);
	ck_assert_uint_eq(b.len, 6 + OB_WIRE_REP_HEADER + OB_WIRE_REP_RESULT_V2);
	ck_assert_mem_eq(b.data, "prefixOBRP", 10);
	ob_buf_fini(&b);
	free(many);
}
END_TEST

/* The version rules of docs/protocol.md: a request says the highest
 * reply version its sender reads; the reply answers in min(that, ours);
 * an undecodable frame is answered in a version its sender reads. */
START_TEST(test_versions)
{
	struct ob_wire_msg m = mkmsg(1);
	struct ob_wire_result r = { 1, OB_WIRE_RETRY, "later", 5, 3000 };
	struct ob_wire_request req;
	struct ob_wire_reply rep;
	struct ob_buf b = OB_BUF_INIT;

	ck_assert_int_eq(OB_WIRE_VERSION_MIN, 1);
	ck_assert_int_eq(OB_WIRE_VERSION, 3);

	/* reply_version_for: a request's own version, else the lowest */
	for (int v = OB_WIRE_VERSION_MIN; v <= OB_WIRE_VERSION; v++) {
		ob_buf_reset(&b);
		ck_assert_err(ob_wire_encode_request_v(&b, v, &m, 1, &deflim), OB_OK);
		ck_assert_int_eq(ob_wire_reply_version_for(b.data, b.len), v);
		ck_assert_int_eq(ob_wire_reply_version_for(b.data, 5), v);
		ck_assert_int_eq(ob_wire_reply_version_for(b.data, 4), OB_WIRE_VERSION_MIN);
		b.data[4] = (char)(OB_WIRE_VERSION + 1); /* a newer sender than us */
		ck_assert_int_eq(ob_wire_reply_version_for(b.data, b.len), OB_WIRE_VERSION_MIN);
		b.data[4] = 0;
		ck_assert_int_eq(ob_wire_reply_version_for(b.data, b.len), OB_WIRE_VERSION_MIN);
	}
	ck_assert_int_eq(ob_wire_reply_version_for(NULL, 0), OB_WIRE_VERSION_MIN);
	ck_assert_int_eq(ob_wire_reply_version_for("OBRP\x02", 5), OB_WIRE_VERSION_MIN);

	/* a v1 request decodes as such */
	ob_buf_reset(&b);
	ck_assert_err(ob_wire_encode_request_v(&b, 1, &m, 1, &deflim), OB_OK);
	ck_assert_err(ob_wire_decode_request(b.data, b.len, &deflim, &req), OB_OK);
	ck_assert_uint_eq(req.version, 1);
	ob_wire_request_fini(&req);
	ck_assert_err(ob_wire_encode_request_v(&b, 0, &m, 1, &deflim), OB_EINVAL);
	ck_assert_err(ob_wire_encode_request_v(&b, OB_WIRE_VERSION + 1, &m, 1, &deflim),
	    OB_EINVAL);

	/* v2 result bytes: id, status, retry_after_ms, detail_len, detail */
	static const uint8_t v2[] = {
		'O', 'B', 'R', 'P', 2, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
		0, 0, 0, 0, 0, 0, 0, 1, 3, 0x00, 0x00, 0x0b, 0xb8, 0, 5,
		'l', 'a', 't', 'e', 'r',
	};
	ob_buf_reset(&b);
	ck_assert_err(ob_wire_encode_reply_v(&b, 2, &r, 1), OB_OK);
	ck_assert_uint_eq(b.len, sizeof(v2));
	ck_assert_mem_eq(b.data, v2, sizeof(v2));
	ck_assert_err(ob_wire_decode_reply(b.data, b.len, &deflim, &rep), OB_OK);
	ck_assert_uint_eq(rep.version, 2);
	ck_assert_uint_eq(rep.results[0].retry_after_ms, 3000);
	ob_wire_reply_fini(&rep);

	/* v1 has no room for it: the same result, 4 bytes shorter, none */
	ob_buf_reset(&b);
	ck_assert_err(ob_wire_encode_reply_v(&b, 1, &r, 1), OB_OK);
	ck_assert_uint_eq(b.len, sizeof(v2) - 4);
	ck_assert_uint_eq((uint8_t)b.data[4], 1);
	ck_assert_err(ob_wire_decode_reply(b.data, b.len, &deflim, &rep), OB_OK);
	ck_assert_uint_eq(rep.version, 1);
	ck_assert_uint_eq(rep.results[0].retry_after_ms, 0);
	ob_wire_reply_fini(&rep);

	/* error replies: the lowest version by default (any relay reads it),
	 * or the one asked for; the same layout in both */
	for (int v = 0; v <= OB_WIRE_VERSION; v++) {
		ob_buf_reset(&b);
		if (v == 0)
			ck_assert_err(ob_wire_encode_error_reply(&b, OB_EWIRE_VERSION, "old"), OB_OK);
		else
			ck_assert_err(ob_wire_encode_error_reply_v(&b, v, OB_EWIRE_VERSION, "old"),
			    OB_OK);
		ck_assert_uint_eq(b.len, OB_WIRE_REP_HEADER + 3);
		ck_assert_err(ob_wire_decode_reply(b.data, b.len, &deflim, &rep), OB_OK);
		ck_assert_uint_eq(rep.version, v == 0 ? OB_WIRE_VERSION_MIN : v);
		ck_assert_uint_eq(rep.frame_err, OB_EWIRE_VERSION);
		ob_wire_reply_fini(&rep);
	}
	ob_buf_fini(&b);
}
END_TEST

START_TEST(test_names)
{
	ck_assert_str_eq(ob_wire_status_name(OB_WIRE_APPLIED), "applied");
	ck_assert_str_eq(ob_wire_status_name(OB_WIRE_DUPLICATE), "duplicate");
	ck_assert_str_eq(ob_wire_status_name(OB_WIRE_RETRY), "retry");
	ck_assert_str_eq(ob_wire_status_name(OB_WIRE_REJECT), "reject");
	ck_assert_str_eq(ob_wire_status_name(0), "unknown");
	ck_assert_str_eq(ob_wire_status_name(5), "unknown");
	ck_assert_str_eq(ob_wire_status_name(-1), "unknown");

	ck_assert_str_eq(ob_err_name(OB_OK), "ok");
	ck_assert_str_eq(ob_err_name(OB_EDB), "db");
	ck_assert_str_eq(ob_err_name(OB_EFENCED), "fenced");
	ck_assert_str_eq(ob_err_name(OB_EWIRE_TRUNC), "wire.truncated");
	ck_assert_str_eq(ob_err_name(OB_ERR_COUNT), "unknown");
	ck_assert_str_eq(ob_err_name(-1), "unknown");
	ck_assert_str_eq(ob_strerror(OB_ERR_COUNT), "unknown");
	ck_assert_str_eq(ob_strerror(1000), "unknown");
	/* every code has a distinct name and some text */
	for (int i = 0; i < OB_ERR_COUNT; i++) {
		ck_assert_str_ne(ob_err_name(i), "unknown");
		ck_assert_str_ne(ob_strerror(i), "unknown");
		for (int j = 0; j < i; j++)
			ck_assert_str_ne(ob_err_name(i), ob_err_name(j));
	}
}
END_TEST

/* ---- table-driven cases from tests/data/wire ------------------------- */

/* Read a .hex file: hex digit pairs, whitespace and '#' comments ignored. */
static bool
load_hex(const char *path, struct ob_buf *out)
{
	FILE *f = fopen(path, "r");
	int c, hi = -1;
	bool comment = false;

	if (f == NULL)
		return false;
	while ((c = fgetc(f)) != EOF) {
		int v;

		if (comment) {
			comment = c != '\n';
			continue;
		}
		if (c == '#') {
			comment = true;
			continue;
		}
		if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
			continue;
		if (c >= '0' && c <= '9')
			v = c - '0';
		else if (c >= 'a' && c <= 'f')
			v = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v = c - 'A' + 10;
		else
			break; /* not hex: reported below */
		if (hi < 0) {
			hi = v;
		} else {
			ck_assert_err(ob_buf_put_u8(out, (uint8_t)(hi << 4 | v)),
			    OB_OK);
			hi = -1;
		}
	}
	fclose(f);
	return c == EOF && hi < 0;
}

START_TEST(test_data_cases)
{
	const char *dir = getenv("OUTBOX_TEST_DATA");
	char path[4096], line[512], file[256], want[64];
	int ncases = 0, nok = 0;
	FILE *f;

	ck_assert_msg(dir != NULL, "OUTBOX_TEST_DATA not set");
	snprintf(path, sizeof(path), "%s/wire/cases.txt", dir);
	ck_assert_msg((f = fopen(path, "r")) != NULL, "cannot open %s", path);
	while (fgets(line, sizeof(line), f) != NULL) {
		struct ob_buf frame = OB_BUF_INIT;
		int rv;

		if (line[0] == '#' ||
		    sscanf(line, "%255s %63s", file, want) != 2)
			continue;
		snprintf(path, sizeof(path), "%s/wire/%s", dir, file);
		ck_assert_msg(load_hex(path, &frame), "bad hex file %s", path);

		if (strncmp(file, "req_", 4) == 0) {
			struct ob_wire_request req;

			rv = ob_wire_decode_request(frame.data, frame.len,
			    &deflim, &req);
			if (rv == OB_OK)
				ob_wire_request_fini(&req);
		} else {
			struct ob_wire_reply rep;

			ck_assert_msg(strncmp(file, "rep_", 4) == 0,
			    "%s: name must start with req_ or rep_", file);
			rv = ob_wire_decode_reply(frame.data, frame.len,
			    &deflim, &rep);
			if (rv == OB_OK)
				ob_wire_reply_fini(&rep);
		}
		ck_assert_msg(strcmp(ob_err_name(rv), want) == 0,
		    "%s: got %s, want %s", file, ob_err_name(rv), want);
		ncases++;
		nok += rv == OB_OK;
		ob_buf_fini(&frame);
	}
	fclose(f);
	ck_assert_int_ge(ncases, 10);
	ck_assert_int_ge(nok, 2);
}
END_TEST

static Suite *
wire_suite(void)
{
	Suite *s = suite_create("wire");
	TCase *tc = tcase_create("wire");

	fill_big();
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_request_roundtrip);
	tcase_add_test(tc, test_request_exact_bytes);
	tcase_add_test(tc, test_request_max_sizes);
	tcase_add_test(tc, test_request_max_batch);
	tcase_add_test(tc, test_reply_roundtrip);
	tcase_add_test(tc, test_reply_max_batch);
	tcase_add_test(tc, test_error_reply);
	tcase_add_test(tc, test_truncation_every_offset);
	tcase_add_test(tc, test_header_fields);
	tcase_add_test(tc, test_trailing);
	tcase_add_test(tc, test_bad_limits);
	tcase_add_test(tc, test_encoder_refuses);
	tcase_add_test(tc, test_reply_encoder_refuses);
	tcase_add_test(tc, test_versions);
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_data_cases);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return ts_run_suite(wire_suite());
}
