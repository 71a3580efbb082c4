/*
 * inbox_plan.c - the part of applying a batch that needs no database: which
 * messages are answered before any transaction (older than the dedup
 * retention), and the set-based statement's parameters as binary
 * PostgreSQL arrays. Pure functions over a decoded request, so the fuzzer
 * can drive them with anything the decoder accepts.
 */
#include <stdlib.h>
#include <string.h>

#include "inbox.h"
#include "outbox/err.h"

/* Binary array element types (pg_type OIDs). */
#define OID_BYTEA 17
#define OID_INT8 20
#define OID_TEXT 25
#define OID_TIMESTAMPTZ 1184

static const char *const why_names[INBOX_WHY_COUNT] = {
	[INBOX_WHY_NONE] = "none",
	[INBOX_WHY_DUPLICATE] = "duplicate",
	[INBOX_WHY_MISMATCH] = "fingerprint_mismatch",
	[INBOX_WHY_TOO_OLD] = "older_than_retention",
	[INBOX_WHY_BAD_DATA] = "bad_data",
	[INBOX_WHY_HANDLER] = "handler",
	[INBOX_WHY_LOCKED] = "key_in_flight",
	[INBOX_WHY_DB] = "database",
};

const char *
inbox_why_name(enum inbox_why why)
{
	return (unsigned)why < INBOX_WHY_COUNT ? why_names[why] : "unknown";
}

int
inbox_batch_init(struct inbox_batch *b, uint32_t cap)
{
	memset(b, 0, sizeof(*b));
	b->results = calloc(cap, sizeof(*b->results));
	b->details = calloc(cap, sizeof(*b->details));
	b->why = calloc(cap, sizeof(*b->why));
	b->done = calloc(cap, sizeof(*b->done));
	b->calls = calloc(cap, sizeof(*b->calls));
	b->cap = cap;
	for (size_t i = 0; i < sizeof(b->args) / sizeof(b->args[0]); i++)
		ob_buf_init(&b->args[i]);
	ob_buf_init(&b->fp);
	if (b->results == NULL || b->details == NULL || b->why == NULL ||
	    b->done == NULL || b->calls == NULL) {
		inbox_batch_fini(b);
		return OB_ENOMEM;
	}
	return OB_OK;
}

void
inbox_batch_fini(struct inbox_batch *b)
{
	free(b->results);
	free(b->details);
	free(b->why);
	free(b->done);
	free(b->calls);
	for (size_t i = 0; i < sizeof(b->args) / sizeof(b->args[0]); i++)
		ob_buf_fini(&b->args[i]);
	ob_buf_fini(&b->fp);
	memset(b, 0, sizeof(*b));
}

uint32_t
inbox_plan(const struct inbox_options *opt, const struct ob_wire_request *req,
    int64_t now_us, struct inbox_batch *b)
{
	uint32_t left = 0;
	int64_t oldest = opt->retention_ms > 0 ? now_us - opt->retention_ms * 1000 : INT64_MIN;
	for (uint32_t i = 0; i < req->count; i++) {
		const struct ob_wire_msg *m = &req->msgs[i];
		b->done[i] = false;
		b->why[i] = INBOX_WHY_NONE;
		b->details[i][0] = '\0';
		b->calls[i] = (struct inbox_handler_call){ NULL, NULL, 0 };
		b->results[i] = (struct ob_wire_result){ m->id, OB_WIRE_RETRY, b->details[i], 0, 0 };
		if (opt->dedup && m->created_at_us < oldest) {
			b->done[i] = true;
			b->why[i] = INBOX_WHY_TOO_OLD;
			b->results[i].status = OB_WIRE_REJECT;
			size_t n = strlen(INBOX_REASON_TOO_OLD);
			memcpy(b->details[i], INBOX_REASON_TOO_OLD, n + 1);
			b->results[i].detail_len = (uint16_t)n;
			continue;
		}
		left++;
	}
	return left;
}

/* One-dimensional binary array header: ndim, has-null flag, element type,
 * then the dimension's size and lower bound. */
static int
array_start(struct ob_buf *a, uint32_t oid, uint32_t n, bool nulls)
{
	ob_buf_reset(a);
	int rc = ob_buf_put_u32(a, 1);
	rc |= ob_buf_put_u32(a, nulls ? 1 : 0);
	rc |= ob_buf_put_u32(a, oid);
	rc |= ob_buf_put_u32(a, n);
	rc |= ob_buf_put_u32(a, 1);
	return rc;
}

static int
array_bytes(struct ob_buf *a, const void *p, size_t n, bool null)
{
	if (null)
		return ob_buf_put_u32(a, 0xffffffffu); /* length -1 = NULL */
	int rc = ob_buf_put_u32(a, (uint32_t)n);
	return rc | ob_buf_append(a, p, n);
}

static int
array_int8(struct ob_buf *a, uint64_t v, bool null)
{
	if (null)
		return ob_buf_put_u32(a, 0xffffffffu);
	int rc = ob_buf_put_u32(a, 8);
	return rc | ob_buf_put_u64(a, v);
}

int
inbox_set_args(const struct ob_wire_request *req, struct inbox_batch *b)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < req->count; i++)
		n += b->done[i] ? 0 : 1;
	/* keys, topics and ordering keys are text (their bytes: a text
	 * element in binary form), created_at a timestamptz (microseconds
	 * since PostgreSQL's epoch): inbox.apply_notifications's arguments */
	int rc = array_start(&b->args[0], OID_TEXT, n, false);
	rc |= array_start(&b->args[1], OID_TEXT, n, false);
	rc |= array_start(&b->args[2], OID_BYTEA, n, false);
	rc |= array_start(&b->args[3], OID_INT8, n, false);
	rc |= array_start(&b->args[4], OID_INT8, n, false);
	rc |= array_start(&b->args[5], OID_TIMESTAMPTZ, n, false);
	rc |= array_start(&b->args[6], OID_TEXT, n, true);
	rc |= array_start(&b->args[7], OID_INT8, n, true);
	for (uint32_t i = 0; i < req->count; i++) {
		const struct ob_wire_msg *m = &req->msgs[i];
		if (b->done[i])
			continue;
		bool ordered = m->ordering_key_len > 0;
		rc |= array_bytes(&b->args[0], m->key, m->key_len, false);
		rc |= array_bytes(&b->args[1], m->topic, m->topic_len, false);
		rc |= array_bytes(&b->args[2], m->payload, m->payload_len, false);
		rc |= array_int8(&b->args[3], m->id, false);
		rc |= array_int8(&b->args[4], m->fence, false);
		rc |= array_int8(&b->args[5], (uint64_t)(m->created_at_us - INBOX_PG_EPOCH_US), false);
		rc |= array_bytes(&b->args[6], m->ordering_key, m->ordering_key_len, !ordered);
		rc |= array_int8(&b->args[7], m->ordering_seq, !ordered);
	}
	return rc == OB_OK ? OB_OK : OB_ENOMEM;
}
