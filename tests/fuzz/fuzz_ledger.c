/*
 * fuzz_ledger.c - libFuzzer target for the ledger reader
 * (client/ledger.c: ledger_last_state), what `outbox-producer submit`
 * reads back after a crash: a file of JSON lines, possibly torn.
 *
 * Each input is written as the whole ledger file. The reader must succeed
 * (a line that is not a JSON object with string key and state is skipped)
 * and return a NUL-terminated state that fits its buffer. Then a line is
 * appended with ledger_append and must be what the reader returns next,
 * whatever garbage came before it. Anything else aborts.
 *
 * Built and run by ctest (tests/fuzz.cmake); by hand:
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE \
 *       -I common/include -I client tests/fuzz/fuzz_ledger.c client/ledger.c \
 *       common/err.c common/clock.c -ljansson -o /tmp/fuzz_ledger
 *   mkdir -p /tmp/led-new && /tmp/fuzz_ledger -max_total_time=60 /tmp/led-new tests/data/fuzz-ledger
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ledger.h"
#include "outbox/err.h"

#define CHECK(c)                 \
	do {                     \
		if (!(c))        \
			abort(); \
	} while (0)

static char path[64];

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* tmpfs where there is one: the append fsyncs, every run */
	const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(path, sizeof(path), "%s/fuzz_ledger.%d.jsonl", dir, (int)getpid());
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	CHECK(write(fd, data, size) == (ssize_t)size);
	close(fd);

	char state[16], err[256];
	memset(state, 'x', sizeof(state));
	CHECK(ledger_last_state(path, "k-1", state, sizeof(state), err, sizeof(err)) == OB_OK);
	CHECK(memchr(state, '\0', sizeof(state)) != NULL);

	/* An entry appended after any garbage is the last state. A torn last
	 * line (no newline) glues onto it: then only that line is lost. */
	if (size > 0 && data[size - 1] == '\n') {
		CHECK(ledger_append(path, "tool", "k-1", "uncertain", NULL, err, sizeof(err)) == OB_OK);
		CHECK(ledger_last_state(path, "k-1", state, sizeof(state), err, sizeof(err)) == OB_OK);
		CHECK(strcmp(state, "uncertain") == 0);
	}
	unlink(path);
	return 0;
}
