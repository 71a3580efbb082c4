/*
 * request.c - the front of request handling, without the database: decode
 * a frame, refuse a bad one with an error reply (one log line, a counter,
 * nothing written), and count a batch's final statuses. Kept apart from
 * server.c so that the fuzzer drives exactly what the server runs.
 */
#include <stdio.h>

#include "outbox/log.h"
#include "server.h"

int
consumer_request_decode(const void *body, size_t len,
    const struct ob_wire_limits *lim, struct consumer_counters *c,
    struct ob_wire_request *req, struct ob_buf *reply)
{
	ob_buf_reset(reply);
	int rc = ob_wire_decode_request(body, len, lim, req);
	if (rc == OB_OK)
		return OB_OK;
	atomic_fetch_add(&c->bad_frames, 1);
	if (rc > 0 && rc < OB_ERR_COUNT)
		atomic_fetch_add(&c->bad_frames_by[rc], 1);
	ob_warn("consumer.frame.bad", "bytes=%zu err=%s", len, ob_err_name(rc));
	char detail[200];
	int n = snprintf(detail, sizeof(detail), "request refused: %s (%s)", ob_strerror(rc),
	    ob_err_name(rc));
	if (rc == OB_EWIRE_VERSION && n > 0 && (size_t)n < sizeof(detail))
		snprintf(detail + n, sizeof(detail) - (size_t)n,
		    "; this consumer speaks wire versions %d..%d", OB_WIRE_VERSION_MIN,
		    OB_WIRE_VERSION);
	/* in the layout the sender reads, when its version byte says it */
	if (ob_wire_encode_error_reply_v(reply, ob_wire_reply_version_for(body, len), rc,
	        detail) != OB_OK)
		ob_buf_reset(reply);
	return rc;
}

void
consumer_count_batch(struct consumer_counters *c, const struct inbox_batch *b,
    uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		unsigned why = b->why[i] < INBOX_WHY_COUNT ? b->why[i] : INBOX_WHY_DB;
		switch (b->results[i].status) {
		case OB_WIRE_APPLIED:
			atomic_fetch_add(&c->applied, 1);
			break;
		case OB_WIRE_DUPLICATE:
			atomic_fetch_add(&c->duplicate, 1);
			break;
		case OB_WIRE_RETRY:
			atomic_fetch_add(&c->retried, 1);
			atomic_fetch_add(&c->retried_by[why], 1);
			break;
		default:
			atomic_fetch_add(&c->rejected, 1);
			atomic_fetch_add(&c->rejected_by[why], 1);
			if (why == INBOX_WHY_MISMATCH)
				atomic_fetch_add(&c->fingerprint_mismatch, 1);
			break;
		}
	}
}
