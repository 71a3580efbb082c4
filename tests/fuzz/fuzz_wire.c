/*
 * fuzz_wire.c - libFuzzer target for the frame decoders.
 *
 * Feeds each input to both decoders with the default limits. Whatever
 * decodes must survive a re-encode and a second decode unchanged, and the
 * re-encoded frame must equal the input byte for byte (each value has one
 * encoding; the one exception is a frame detail on an accepted reply, which
 * ob_wire_encode_reply cannot write), re-encoded in the version it was
 * decoded from (every version in OB_WIRE_VERSION_MIN..OB_WIRE_VERSION).
 * Any mismatch aborts.
 *
 *   clang -fsanitize=fuzzer,address,undefined -I common/include \
 *       tests/fuzz/fuzz_wire.c common/wire.c common/buf.c common/err.c \
 *       -o /tmp/fuzz_wire
 *   mkdir -p /tmp/wire-new
 *   /tmp/fuzz_wire -max_total_time=60 /tmp/wire-new tests/data/wire-corpus
 *
 * (libFuzzer adds new inputs to the FIRST directory: keep the seed corpus
 * second so it stays the small set made from the tests/data/wire .hex files.)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/err.h"
#include "outbox/wire.h"

static const struct ob_wire_limits lim = {
	OB_WIRE_DEFAULT_MAX_PAYLOAD, OB_WIRE_DEFAULT_MAX_BATCH
};

#define CHECK(c)                 \
	do {                     \
		if (!(c))        \
			abort(); \
	} while (0)

static int
same(const void *a, const void *b, size_t n)
{
	return n == 0 || memcmp(a, b, n) == 0;
}

static void
check_request(const uint8_t *data, size_t size)
{
	struct ob_wire_request a, b;
	struct ob_buf out = OB_BUF_INIT;

	if (ob_wire_decode_request(data, size, &lim, &a) != OB_OK)
		return;
	CHECK(a.version >= OB_WIRE_VERSION_MIN && a.version <= OB_WIRE_VERSION);
	CHECK(ob_wire_encode_request_v(&out, a.version, a.msgs, a.count, &lim) == OB_OK);
	CHECK(out.len == size && memcmp(out.data, data, size) == 0);
	CHECK(ob_wire_decode_request(out.data, out.len, &lim, &b) == OB_OK);
	CHECK(a.count == b.count && a.version == b.version);
	CHECK(a.source_len == b.source_len && same(a.source, b.source, a.source_len));
	CHECK(ob_wire_source_ok(a.source, a.source_len));
	for (uint32_t i = 0; i < a.count; i++) {
		const struct ob_wire_msg *x = &a.msgs[i], *y = &b.msgs[i];

		CHECK(x->source_len == a.source_len && same(x->source, a.source, a.source_len));

		CHECK(x->id == y->id && x->fence == y->fence &&
		    x->attempt == y->attempt &&
		    x->created_at_us == y->created_at_us &&
		    x->ordering_seq == y->ordering_seq);
		CHECK(x->topic_len == y->topic_len &&
		    same(x->topic, y->topic, x->topic_len));
		CHECK(x->key_len == y->key_len &&
		    same(x->key, y->key, x->key_len));
		CHECK(x->ordering_key_len == y->ordering_key_len &&
		    same(x->ordering_key, y->ordering_key,
		        x->ordering_key_len));
		CHECK(x->payload_len == y->payload_len &&
		    same(x->payload, y->payload, x->payload_len));
	}
	ob_wire_request_fini(&b);
	ob_wire_request_fini(&a);
	ob_buf_fini(&out);
}

static void
check_reply(const uint8_t *data, size_t size)
{
	struct ob_wire_reply a, b;
	struct ob_buf out = OB_BUF_INIT;
	int rv;

	if (ob_wire_decode_reply(data, size, &lim, &a) != OB_OK)
		return;
	if (a.frame_err != 0) {
		/* the error encoder takes a C string: only comparable when the
		 * detail has no NUL in it */
		if (memchr(a.detail != NULL ? a.detail : "", '\0',
		        a.detail_len) != NULL)
			goto done;
		char *d = strndup(a.detail != NULL ? a.detail : "",
		    a.detail_len);
		CHECK(d != NULL);
		rv = ob_wire_encode_error_reply_v(&out, a.version, a.frame_err, d);
		free(d);
	} else {
		rv = ob_wire_encode_reply_v(&out, a.version, a.results, a.count);
	}
	CHECK(rv == OB_OK);
	CHECK(ob_wire_decode_reply(out.data, out.len, &lim, &b) == OB_OK);
	CHECK(a.frame_err == b.frame_err && a.count == b.count && a.version == b.version);
	/* A frame detail on an accepted reply decodes but the result
	 * encoder never writes one: compare it only when it can match. */
	if (a.frame_err != 0 || a.detail_len == 0) {
		CHECK(out.len == size && memcmp(out.data, data, size) == 0);
		CHECK(a.detail_len == b.detail_len &&
		    same(a.detail, b.detail, a.detail_len));
	}
	for (uint32_t i = 0; i < a.count; i++) {
		const struct ob_wire_result *x = &a.results[i];
		const struct ob_wire_result *y = &b.results[i];

		CHECK(x->id == y->id && x->status == y->status &&
		    x->retry_after_ms == y->retry_after_ms &&
		    (a.version >= OB_WIRE_VERSION_RETRY_AFTER || x->retry_after_ms == 0) &&
		    x->detail_len == y->detail_len &&
		    same(x->detail, y->detail, x->detail_len));
	}
	ob_wire_reply_fini(&b);
done:
	ob_wire_reply_fini(&a);
	ob_buf_fini(&out);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_request(data, size);
	check_reply(data, size);
	return 0;
}
