/*
 * fuzz_producer_input.c - libFuzzer target for what a client of the
 * producer API sends before anything is stored (producer/report_input.c):
 * the Idempotency-Key header value, the JSON body of POST /v1/reports and
 * that of POST /v1/messages (producer/message_input.c).
 *
 * Every input is tried as all three. A key is refused with a reason or accepted
 * as 1..PRODUCER_KEY_MAX printable ASCII bytes that report_check_key
 * accepts too. A body is refused with a reason or accepted with fields
 * within their limits and a canonical form that is valid JSON and parses
 * back to the same canonical form; a message's topic within its limits,
 * its payload valid JSON. Anything else aborts.
 *
 * Built and run by ctest (tests/fuzz.cmake); by hand:
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE \
 *       -I common/include -I producer -I /usr/include/postgresql \
 *       tests/fuzz/fuzz_producer_input.c producer/report_input.c producer/message_input.c \
 *       producer/json_members.c common/err.c \
 *       -ljansson -o /tmp/fuzz_producer_input
 *   mkdir -p /tmp/in-new && /tmp/fuzz_producer_input -max_total_time=60 /tmp/in-new tests/data/fuzz-producer
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "message_input.h"
#include "outbox/err.h"
#include "report_input.h"

#define CHECK(c)                 \
	do {                     \
		if (!(c))        \
			abort(); \
	} while (0)

static void
check_key(const char *header)
{
	char key[PRODUCER_KEY_MAX + 1], err[256];
	err[0] = '\0';
	if (report_parse_key(header, key, sizeof(key), err, sizeof(err)) != OB_OK) {
		CHECK(err[0] != '\0');
		return;
	}
	size_t n = strlen(key);
	CHECK(n >= 1 && n <= PRODUCER_KEY_MAX);
	for (size_t i = 0; i < n; i++)
		CHECK(key[i] >= 0x20 && key[i] <= 0x7e);
	CHECK(report_check_key(key, err, sizeof(err)) == OB_OK);
}

static void
check_body(const char *body, size_t len)
{
	struct report_input in, again;
	char err[256];
	memset(&in, 0, sizeof(in));
	err[0] = '\0';
	int rc = report_parse_body(body, len, &in, err, sizeof(err));
	if (rc != OB_OK) {
		CHECK(rc == OB_EINVAL || rc == OB_ENOMEM);
		CHECK(err[0] != '\0');
		return;
	}
	CHECK(in.canonical != NULL && in.canonical_len == strlen(in.canonical));
	memset(&again, 0, sizeof(again));
	CHECK(report_parse_body(in.canonical, in.canonical_len, &again, err, sizeof(err)) == OB_OK);
	CHECK(again.canonical_len == in.canonical_len &&
	    memcmp(again.canonical, in.canonical, in.canonical_len) == 0);
	report_input_fini(&again);
	report_input_fini(&in);
}

static void
check_message(const char *body, size_t len)
{
	struct message_input in, again;
	char err[256];
	memset(&in, 0, sizeof(in));
	err[0] = '\0';
	int rc = message_parse_body(body, len, &in, err, sizeof(err));
	if (rc != OB_OK) {
		CHECK(rc == OB_EINVAL || rc == OB_ENOMEM);
		CHECK(err[0] != '\0');
		return;
	}
	size_t tl = strlen(in.topic);
	CHECK(tl >= 1 && tl <= PRODUCER_TOPIC_MAX);
	for (size_t i = 0; i < tl; i++)
		CHECK(in.topic[i] > 0x20 && in.topic[i] < 0x7f);
	CHECK(in.ordering_key == NULL ||
	    (strlen(in.ordering_key) >= 1 && strlen(in.ordering_key) <= PRODUCER_ORDERING_KEY_MAX));
	json_t *p = json_loads(in.payload, 0, NULL);
	CHECK(json_is_object(p) || json_is_array(p));
	json_decref(p);
	memset(&again, 0, sizeof(again));
	CHECK(message_parse_body(in.canonical, in.canonical_len, &again, err, sizeof(err)) == OB_OK);
	CHECK(again.canonical_len == in.canonical_len &&
	    memcmp(again.canonical, in.canonical, in.canonical_len) == 0);
	message_input_fini(&again);
	message_input_fini(&in);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (text == NULL)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	check_key(text);
	check_body(text, size);
	check_message(text, size);
	free(text);
	return 0;
}
