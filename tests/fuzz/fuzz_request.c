/*
 * fuzz_request.c - libFuzzer target for the consumer's request front end:
 * what outbox-consumer runs on a received frame before it touches the
 * database (consumer/request.c: decode, refuse with an error reply and a
 * counter; consumer/inbox_plan.c: the retention pre-pass and the binary
 * array parameters of the set-based statement), then the reply encoder.
 *
 * Every input must either be refused with a decodable error reply (count 0,
 * frame_err = the decoder's code, the counter bumped once, in the version
 * ob_wire_reply_version_for names) or be accepted and produce a reply in
 * the request's version with one result per message, ids echoed in order.
 * Anything else aborts.
 *
 * Built and run by ctest (tests/consumer.cmake) when clang can link
 * -fsanitize=fuzzer; by hand:
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE \
 *       -I common/include -I consumer -I /usr/include/postgresql \
 *       tests/fuzz/fuzz_request.c consumer/request.c consumer/inbox_plan.c \
 *       common/wire.c common/buf.c common/err.c common/log.c common/clock.c \
 *       -o /tmp/fuzz_request
 *   mkdir -p /tmp/req-new
 *   /tmp/fuzz_request -max_total_time=60 /tmp/req-new tests/data/wire-corpus
 *
 * (libFuzzer adds new inputs to the FIRST directory: the seed corpus goes
 * second so that it stays the small set made from tests/data/wire.)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "inbox.h"
#include "outbox/log.h"
#include "server.h"

#define CHECK(c)                 \
	do {                     \
		if (!(c))        \
			abort(); \
	} while (0)

/* The consumer's defaults, made small so that the limits are reachable. */
static const struct ob_wire_limits lim = { 4096, 100 };
static struct inbox_options opt = { true, NULL, NULL, 7LL * 86400000, 1000, NULL };
static struct inbox_batch batch;
static struct consumer_counters counters;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	ob_log_init("fuzz_request", OB_LOG_ERROR, OB_LOG_TEXT); /* no line per input */
	CHECK(inbox_batch_init(&batch, lim.max_batch) == OB_OK);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ob_wire_request req;
	struct ob_wire_reply rep;
	struct ob_buf reply = OB_BUF_INIT;
	uint64_t bad_before = counters.bad_frames;

	int rc = consumer_request_decode(data, size, &lim, &counters, &req, &reply);
	if (rc != OB_OK) {
		CHECK(counters.bad_frames == bad_before + 1);
		CHECK(reply.len > 0);
		CHECK(ob_wire_decode_reply(reply.data, reply.len, &lim, &rep) == OB_OK);
		CHECK(rep.frame_err == rc && rep.count == 0);
		CHECK(rep.version == ob_wire_reply_version_for(data, size));
		ob_wire_reply_fini(&rep);
		ob_buf_fini(&reply);
		return 0;
	}
	CHECK(req.count >= 1 && req.count <= lim.max_batch);
	/* "now" from the input, so that the retention check sees both sides. */
	int64_t now = size >= 8 ? (int64_t)((uint64_t)data[size - 1] << 50) : 0;
	uint32_t left = inbox_plan(&opt, &req, now, &batch);
	CHECK(left <= req.count);
	CHECK(inbox_set_args(&req, &batch) == OB_OK);
	/* array header: ndim 1, then the element count of pending messages */
	CHECK(batch.args[0].len >= 20 && batch.args[0].data[3] == 1);
	CHECK(ob_wire_encode_reply_v(&reply, req.version, batch.results, req.count) == OB_OK);
	CHECK(ob_wire_decode_reply(reply.data, reply.len, &lim, &rep) == OB_OK);
	CHECK(rep.frame_err == 0 && rep.count == req.count && rep.version == req.version);
	for (uint32_t i = 0; i < req.count; i++)
		CHECK(rep.results[i].id == req.msgs[i].id);
	ob_wire_reply_fini(&rep);
	ob_wire_request_fini(&req);
	ob_buf_fini(&reply);
	return 0;
}
