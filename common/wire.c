/*
 * wire.c - encoder and decoder of the relay <-> consumer frames (v1..v3).
 *
 * The decoder is the one piece of the project that reads bytes chosen by
 * someone else, so it is written defensively: every read goes through the
 * rd_* helpers, which compare the wanted length against the bytes left and
 * never compute an end pointer that could wrap. Each kind of malformed
 * input gets its own OB_EWIRE_* code so a refused frame can be diagnosed
 * from the log line alone. Decoded strings borrow the input buffer.
 *
 * The encoders check the same limits before writing a single byte, so a
 * refused message leaves the caller's buffer exactly as it was.
 *
 * Versions: every version in [OB_WIRE_VERSION_MIN, OB_WIRE_VERSION] is
 * decoded and can be encoded; the layouts differ only where a field is
 * read or written "from version N on" (has_retry_after, has_source).
 * docs/protocol.md is the byte-by-byte description of the format.
 */
#include <stdlib.h>
#include <string.h>

#include "outbox/err.h"
#include "outbox/wire.h"

#define REQ_MAGIC "OBRQ"
#define REP_MAGIC "OBRP"
#define KIND_REQUEST 1
#define KIND_REPLY 2

/* Fixed bytes of one message (ids, counters, the four length fields) and of
 * one result (id, status, detail_len). */
#define REQ_MSG_FIXED (8 + 8 + 4 + 8 + 8 + 2 + 2 + 2 + 4)
_Static_assert(REQ_MSG_FIXED == OB_WIRE_REQ_MSG_FIXED, "wire.h states the layout");
_Static_assert(OB_WIRE_REP_RESULT == 8 + 1 + 2, "v1 result");
_Static_assert(OB_WIRE_REP_RESULT_V2 == 8 + 1 + 4 + 2, "v2 result");

_Static_assert(OB_WIRE_REQ_HEADER == 4 + 1 + 1 + 2 + 4, "request header");
_Static_assert(OB_WIRE_REP_HEADER == 4 + 1 + 1 + 2 + 1 + 1 + 2 + 4,
    "reply header");

const char *
ob_wire_status_name(int status)
{
	switch (status) {
	case OB_WIRE_APPLIED:
		return "applied";
	case OB_WIRE_DUPLICATE:
		return "duplicate";
	case OB_WIRE_RETRY:
		return "retry";
	case OB_WIRE_REJECT:
		return "reject";
	default:
		return "unknown";
	}
}

static bool
limits_ok(const struct ob_wire_limits *lim)
{
	return lim != NULL && lim->max_batch >= 1 &&
	    lim->max_batch <= OB_WIRE_MAX_BATCH &&
	    lim->max_payload <= OB_WIRE_MAX_PAYLOAD;
}

static bool
version_ok(int version)
{
	return version >= OB_WIRE_VERSION_MIN && version <= OB_WIRE_VERSION;
}

/* Does a reply of this version carry retry_after_ms in its results? */
static bool
has_retry_after(int version)
{
	return version >= OB_WIRE_VERSION_RETRY_AFTER;
}

/* Does a request of this version carry a source after count? */
static bool
has_source(int version)
{
	return version >= OB_WIRE_VERSION_SOURCE;
}

bool
ob_wire_source_ok(const char *s, size_t n)
{
	if (n > OB_WIRE_MAX_SOURCE || (s == NULL && n > 0))
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

static size_t
result_fixed(int version)
{
	return has_retry_after(version) ? OB_WIRE_REP_RESULT_V2 : OB_WIRE_REP_RESULT;
}

static bool
status_ok(unsigned status)
{
	return status >= OB_WIRE_APPLIED && status <= OB_WIRE_REJECT;
}

/* ---- reading ---------------------------------------------------------- */

struct rd {
	const uint8_t *p;
	size_t len;
	size_t pos; /* invariant: pos <= len */
};

static int
rd_uint(struct rd *r, size_t n, uint64_t *v)
{
	uint64_t x = 0;

	if (n > r->len - r->pos)
		return OB_EWIRE_TRUNC;
	for (size_t i = 0; i < n; i++)
		x = (x << 8) | r->p[r->pos + i];
	r->pos += n;
	*v = x;
	return OB_OK;
}

static int
rd_u8(struct rd *r, uint8_t *v)
{
	uint64_t x;
	int rv;

	if ((rv = rd_uint(r, 1, &x)) == OB_OK)
		*v = (uint8_t)x;
	return rv;
}

static int
rd_u16(struct rd *r, uint16_t *v)
{
	uint64_t x;
	int rv;

	if ((rv = rd_uint(r, 2, &x)) == OB_OK)
		*v = (uint16_t)x;
	return rv;
}

static int
rd_u32(struct rd *r, uint32_t *v)
{
	uint64_t x;
	int rv;

	if ((rv = rd_uint(r, 4, &x)) == OB_OK)
		*v = (uint32_t)x;
	return rv;
}

static int
rd_u64(struct rd *r, uint64_t *v)
{
	return rd_uint(r, 8, v);
}

/* Borrow n bytes of the input. The pointer is never NULL (a zero-length
 * field points at the current position). */
static int
rd_bytes(struct rd *r, size_t n, const char **s)
{
	if (n > r->len - r->pos)
		return OB_EWIRE_TRUNC;
	*s = (const char *)r->p + r->pos;
	r->pos += n;
	return OB_OK;
}

/* A u16 length, checked against min..max (err) before its bytes are
 * looked for (TRUNC): an impossible length is reported as such even when
 * the frame is also short. */
static int
rd_str16(struct rd *r, uint16_t min, uint16_t max, int err, const char **s,
    uint16_t *n)
{
	uint16_t len;
	int rv;

	if ((rv = rd_u16(r, &len)) != OB_OK)
		return rv;
	if (len < min || len > max)
		return err;
	if ((rv = rd_bytes(r, len, s)) != OB_OK)
		return rv;
	*n = len;
	return OB_OK;
}

/* Two's complement without relying on implementation-defined conversion. */
static int64_t
u64_to_i64(uint64_t v)
{
	if (v <= (uint64_t)INT64_MAX)
		return (int64_t)v;
	return -(int64_t)(UINT64_MAX - v) - 1;
}

/* Magic, version, kind, flags: the part both frames share. *version gets
 * the version read (one this codec speaks). */
static int
rd_header(struct rd *r, const char *magic, const char *other, uint8_t kind,
    uint8_t *version)
{
	const char *m;
	uint8_t ver, k;
	uint16_t flags;
	int rv;

	if ((rv = rd_bytes(r, 4, &m)) != OB_OK)
		return rv;
	if (memcmp(m, magic, 4) != 0)
		return memcmp(m, other, 4) == 0 ? OB_EWIRE_KIND : OB_EWIRE_MAGIC;
	if ((rv = rd_u8(r, &ver)) != OB_OK)
		return rv;
	if (!version_ok(ver))
		return OB_EWIRE_VERSION;
	*version = ver;
	if ((rv = rd_u8(r, &k)) != OB_OK)
		return rv;
	if (k != kind)
		return OB_EWIRE_KIND;
	if ((rv = rd_u16(r, &flags)) != OB_OK)
		return rv;
	if (flags != 0)
		return OB_EWIRE_FLAGS;
	return OB_OK;
}

static int
rd_msg(struct rd *r, const struct ob_wire_limits *lim, struct ob_wire_msg *m)
{
	uint64_t created;
	int rv;

	if ((rv = rd_u64(r, &m->id)) != OB_OK ||
	    (rv = rd_u64(r, &m->fence)) != OB_OK ||
	    (rv = rd_u32(r, &m->attempt)) != OB_OK ||
	    (rv = rd_u64(r, &created)) != OB_OK ||
	    (rv = rd_u64(r, &m->ordering_seq)) != OB_OK)
		return rv;
	m->created_at_us = u64_to_i64(created);

	if ((rv = rd_str16(r, 1, OB_WIRE_MAX_TOPIC, OB_EWIRE_TOPIC, &m->topic,
	         &m->topic_len)) != OB_OK ||
	    (rv = rd_str16(r, 1, OB_WIRE_MAX_KEY, OB_EWIRE_KEY, &m->key,
	         &m->key_len)) != OB_OK ||
	    (rv = rd_str16(r, 0, OB_WIRE_MAX_ORDKEY, OB_EWIRE_ORDKEY,
	         &m->ordering_key, &m->ordering_key_len)) != OB_OK)
		return rv;
	if (m->ordering_key_len == 0)
		m->ordering_key = NULL;

	if ((rv = rd_u32(r, &m->payload_len)) != OB_OK)
		return rv;
	if (m->payload_len > lim->max_payload)
		return OB_EWIRE_PAYLOAD;
	return rd_bytes(r, m->payload_len, &m->payload);
}

static int
rd_result(struct rd *r, int version, struct ob_wire_result *res)
{
	int rv;

	if ((rv = rd_u64(r, &res->id)) != OB_OK ||
	    (rv = rd_u8(r, &res->status)) != OB_OK)
		return rv;
	if (!status_ok(res->status))
		return OB_EWIRE_STATUS;
	res->retry_after_ms = 0;
	if (has_retry_after(version) && (rv = rd_u32(r, &res->retry_after_ms)) != OB_OK)
		return rv;
	if ((rv = rd_str16(r, 0, OB_WIRE_MAX_DETAIL, OB_EWIRE_DETAIL,
	         &res->detail, &res->detail_len)) != OB_OK)
		return rv;
	if (res->detail_len == 0)
		res->detail = NULL;
	return OB_OK;
}

/* One calloc for the whole array, after count has been validated. */
static void *
alloc_array(uint32_t count, size_t size)
{
	if (count == 0)
		return NULL;
	if (count > SIZE_MAX / size)
		return NULL;
	return calloc(count, size);
}

int
ob_wire_decode_request(const void *buf, size_t len,
    const struct ob_wire_limits *lim, struct ob_wire_request *out)
{
	struct rd r = { buf, len, 0 };
	struct ob_wire_msg *msgs;
	uint32_t count;
	uint8_t version, source_len = 0;
	const char *source = NULL;
	int rv;

	if (!limits_ok(lim) || out == NULL || (buf == NULL && len > 0))
		return OB_EINVAL;
	if ((rv = rd_header(&r, REQ_MAGIC, REP_MAGIC, KIND_REQUEST, &version)) != OB_OK ||
	    (rv = rd_u32(&r, &count)) != OB_OK)
		return rv;
	if (count < 1 || count > lim->max_batch)
		return OB_EWIRE_COUNT;
	if (has_source(version)) {
		/* the length against its range, then its bytes, then their charset */
		if ((rv = rd_u8(&r, &source_len)) != OB_OK)
			return rv;
		if (source_len > OB_WIRE_MAX_SOURCE)
			return OB_EWIRE_SOURCE;
		if ((rv = rd_bytes(&r, source_len, &source)) != OB_OK)
			return rv;
		if (!ob_wire_source_ok(source, source_len))
			return OB_EWIRE_SOURCE;
		if (source_len == 0)
			source = NULL;
	}

	if ((msgs = alloc_array(count, sizeof(*msgs))) == NULL)
		return OB_ENOMEM;
	for (uint32_t i = 0; i < count; i++) {
		if ((rv = rd_msg(&r, lim, &msgs[i])) != OB_OK)
			goto fail;
		msgs[i].source = source;
		msgs[i].source_len = source_len;
	}
	if (r.pos != r.len) {
		rv = OB_EWIRE_TRAILING;
		goto fail;
	}
	out->count = count;
	out->msgs = msgs;
	out->version = version;
	out->source = source;
	out->source_len = source_len;
	return OB_OK;

fail:
	free(msgs);
	return rv;
}

void
ob_wire_request_fini(struct ob_wire_request *req)
{
	if (req == NULL)
		return;
	free(req->msgs);
	req->msgs = NULL;
	req->count = 0;
}

int
ob_wire_decode_reply(const void *buf, size_t len,
    const struct ob_wire_limits *lim, struct ob_wire_reply *out)
{
	struct rd r = { buf, len, 0 };
	struct ob_wire_result *res = NULL;
	const char *detail;
	uint16_t detail_len = 0;
	uint8_t frame_err, reserved, version;
	uint32_t count;
	int rv;

	if (!limits_ok(lim) || out == NULL || (buf == NULL && len > 0))
		return OB_EINVAL;
	if ((rv = rd_header(&r, REP_MAGIC, REQ_MAGIC, KIND_REPLY, &version)) != OB_OK ||
	    (rv = rd_u8(&r, &frame_err)) != OB_OK ||
	    (rv = rd_u8(&r, &reserved)) != OB_OK)
		return rv;
	if (reserved != 0)
		return OB_EWIRE_FLAGS;
	if ((rv = rd_str16(&r, 0, OB_WIRE_MAX_DETAIL, OB_EWIRE_DETAIL, &detail,
	         &detail_len)) != OB_OK ||
	    (rv = rd_u32(&r, &count)) != OB_OK)
		return rv;
	/* A refused request carries no results; an accepted one at least one. */
	if (frame_err != 0 ? count != 0 : (count < 1 || count > lim->max_batch))
		return OB_EWIRE_COUNT;

	if (count > 0 && (res = alloc_array(count, sizeof(*res))) == NULL)
		return OB_ENOMEM;
	for (uint32_t i = 0; i < count; i++)
		if ((rv = rd_result(&r, version, &res[i])) != OB_OK)
			goto fail;
	if (r.pos != r.len) {
		rv = OB_EWIRE_TRAILING;
		goto fail;
	}
	out->frame_err = frame_err;
	out->detail = detail_len > 0 ? detail : NULL;
	out->detail_len = detail_len;
	out->count = count;
	out->results = res;
	out->version = version;
	return OB_OK;

fail:
	free(res);
	return rv;
}

int
ob_wire_reply_version_for(const void *buf, size_t len)
{
	const uint8_t *p = buf;

	if (buf == NULL || len < 5 || memcmp(p, REQ_MAGIC, 4) != 0 || !version_ok(p[4]))
		return OB_WIRE_VERSION_MIN;
	return p[4];
}

void
ob_wire_reply_fini(struct ob_wire_reply *rep)
{
	if (rep == NULL)
		return;
	free(rep->results);
	rep->results = NULL;
	rep->count = 0;
}

/* ---- writing ---------------------------------------------------------- */

/* The encoders reserve the exact frame size first, then write into it with
 * these: once the reserve succeeded nothing can fail half-way. */
static uint8_t *
wr_uint(uint8_t *w, uint64_t v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		w[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
	return w + n;
}

static uint8_t *
wr_bytes(uint8_t *w, const void *s, size_t n)
{
	if (n > 0)
		memcpy(w, s, n);
	return w + n;
}

static uint8_t *
wr_header(uint8_t *w, const char *magic, int version, uint8_t kind)
{
	w = wr_bytes(w, magic, 4);
	w = wr_uint(w, (uint64_t)version, 1);
	w = wr_uint(w, kind, 1);
	return wr_uint(w, 0, 2); /* flags */
}

/* Reserve n bytes at the end of out and return where to write them. */
static int
wr_begin(struct ob_buf *out, size_t n, uint8_t **w)
{
	int rv;

	if ((rv = ob_buf_reserve(out, n)) != OB_OK)
		return rv;
	*w = (uint8_t *)out->data + out->len;
	return OB_OK;
}

static void
wr_end(struct ob_buf *out, const uint8_t *w)
{
	out->len = (size_t)((const char *)w - out->data);
	out->data[out->len] = '\0';
}

static int
check_msg(const struct ob_wire_msg *m, const struct ob_wire_limits *lim)
{
	if (m->topic_len < 1 || m->topic_len > OB_WIRE_MAX_TOPIC)
		return OB_EWIRE_TOPIC;
	if (m->key_len < 1 || m->key_len > OB_WIRE_MAX_KEY)
		return OB_EWIRE_KEY;
	if (m->ordering_key_len > OB_WIRE_MAX_ORDKEY)
		return OB_EWIRE_ORDKEY;
	if (m->payload_len > lim->max_payload)
		return OB_EWIRE_PAYLOAD;
	if (m->topic == NULL || m->key == NULL ||
	    (m->ordering_key == NULL && m->ordering_key_len > 0) ||
	    (m->payload == NULL && m->payload_len > 0))
		return OB_EINVAL;
	return OB_OK;
}

int
ob_wire_encode_request(struct ob_buf *out, const struct ob_wire_msg *msgs,
    uint32_t n, const struct ob_wire_limits *lim)
{
	return ob_wire_encode_request_v(out, OB_WIRE_VERSION, msgs, n, lim);
}

int
ob_wire_encode_request_v(struct ob_buf *out, int version,
    const struct ob_wire_msg *msgs, uint32_t n, const struct ob_wire_limits *lim)
{
	size_t total = OB_WIRE_REQ_HEADER;
	uint8_t *w;
	int rv;

	if (out == NULL || !limits_ok(lim) || !version_ok(version))
		return OB_EINVAL;
	if (n < 1 || n > lim->max_batch)
		return OB_EWIRE_COUNT;
	if (msgs == NULL)
		return OB_EINVAL;
	const char *source = msgs[0].source;
	uint8_t source_len = msgs[0].source_len;
	if (!ob_wire_source_ok(source, source_len))
		return OB_EWIRE_SOURCE;
	if (source_len > 0 && !has_source(version))
		return OB_EINVAL; /* a version 1 or 2 request has no room for it */
	if (has_source(version))
		total += 1 + (size_t)source_len;
	for (uint32_t i = 0; i < n; i++) {
		const struct ob_wire_msg *m = &msgs[i];
		size_t sz;

		if (m->source_len != source_len ||
		    (source_len > 0 && (m->source == NULL ||
		    memcmp(m->source, source, source_len) != 0)))
			return OB_EINVAL; /* one source a frame */
		if ((rv = check_msg(m, lim)) != OB_OK)
			return rv;
		/* Bounded by the limits, but 1000 * 16 MiB can wrap a 32-bit
		 * size_t: add with a check. */
		sz = (size_t)REQ_MSG_FIXED + m->topic_len + m->key_len +
		    m->ordering_key_len;
		if (m->payload_len > SIZE_MAX - sz)
			return OB_ENOMEM;
		sz += m->payload_len;
		if (sz > SIZE_MAX - total)
			return OB_ENOMEM;
		total += sz;
	}

	if ((rv = wr_begin(out, total, &w)) != OB_OK)
		return rv;
	w = wr_header(w, REQ_MAGIC, version, KIND_REQUEST);
	w = wr_uint(w, n, 4);
	if (has_source(version)) {
		w = wr_uint(w, source_len, 1);
		w = wr_bytes(w, source, source_len);
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct ob_wire_msg *m = &msgs[i];

		w = wr_uint(w, m->id, 8);
		w = wr_uint(w, m->fence, 8);
		w = wr_uint(w, m->attempt, 4);
		w = wr_uint(w, (uint64_t)m->created_at_us, 8);
		w = wr_uint(w, m->ordering_seq, 8);
		w = wr_uint(w, m->topic_len, 2);
		w = wr_bytes(w, m->topic, m->topic_len);
		w = wr_uint(w, m->key_len, 2);
		w = wr_bytes(w, m->key, m->key_len);
		w = wr_uint(w, m->ordering_key_len, 2);
		w = wr_bytes(w, m->ordering_key, m->ordering_key_len);
		w = wr_uint(w, m->payload_len, 4);
		w = wr_bytes(w, m->payload, m->payload_len);
	}
	wr_end(out, w);
	return OB_OK;
}

static uint16_t
clamp_detail(size_t n)
{
	return n > OB_WIRE_MAX_DETAIL ? OB_WIRE_MAX_DETAIL : (uint16_t)n;
}

/* Reply header up to and including count; detail may be NULL if dlen 0. */
static uint8_t *
wr_reply_header(uint8_t *w, int version, uint8_t frame_err, const char *detail,
    uint16_t dlen, uint32_t count)
{
	w = wr_header(w, REP_MAGIC, version, KIND_REPLY);
	w = wr_uint(w, frame_err, 1);
	w = wr_uint(w, 0, 1); /* reserved */
	w = wr_uint(w, dlen, 2);
	w = wr_bytes(w, detail, dlen);
	return wr_uint(w, count, 4);
}

int
ob_wire_encode_reply(struct ob_buf *out, const struct ob_wire_result *res,
    uint32_t n)
{
	return ob_wire_encode_reply_v(out, OB_WIRE_VERSION, res, n);
}

int
ob_wire_encode_reply_v(struct ob_buf *out, int version,
    const struct ob_wire_result *res, uint32_t n)
{
	size_t total = OB_WIRE_REP_HEADER;
	uint8_t *w;
	int rv;

	if (out == NULL || !version_ok(version))
		return OB_EINVAL;
	if (n < 1 || n > OB_WIRE_MAX_BATCH)
		return OB_EWIRE_COUNT;
	if (res == NULL)
		return OB_EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		if (!status_ok(res[i].status))
			return OB_EWIRE_STATUS;
		if (res[i].detail == NULL && res[i].detail_len > 0)
			return OB_EINVAL;
		total += result_fixed(version) + clamp_detail(res[i].detail_len);
	}

	if ((rv = wr_begin(out, total, &w)) != OB_OK)
		return rv;
	w = wr_reply_header(w, version, 0, NULL, 0, n);
	for (uint32_t i = 0; i < n; i++) {
		uint16_t dlen = clamp_detail(res[i].detail_len);

		w = wr_uint(w, res[i].id, 8);
		w = wr_uint(w, res[i].status, 1);
		if (has_retry_after(version))
			w = wr_uint(w, res[i].retry_after_ms, 4);
		w = wr_uint(w, dlen, 2);
		w = wr_bytes(w, res[i].detail, dlen);
	}
	wr_end(out, w);
	return OB_OK;
}

int
ob_wire_encode_error_reply(struct ob_buf *out, int frame_err,
    const char *detail)
{
	return ob_wire_encode_error_reply_v(out, OB_WIRE_VERSION_MIN, frame_err, detail);
}

int
ob_wire_encode_error_reply_v(struct ob_buf *out, int version, int frame_err,
    const char *detail)
{
	uint16_t dlen;
	uint8_t *w;
	int rv;

	/* 0 would read as "accepted" and the field is one byte wide. */
	if (out == NULL || frame_err < 1 || frame_err > UINT8_MAX || !version_ok(version))
		return OB_EINVAL;
	dlen = detail != NULL ? clamp_detail(strlen(detail)) : 0;

	if ((rv = wr_begin(out, (size_t)OB_WIRE_REP_HEADER + dlen, &w)) != OB_OK)
		return rv;
	w = wr_reply_header(w, version, (uint8_t)frame_err, detail, dlen, 0);
	wr_end(out, w);
	return OB_OK;
}
