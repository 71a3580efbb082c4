/*
 * test_faultmatrix.c - the fault matrix (issue 3, item 10) asserted cell by
 * cell: rows are modes (no dedup; dedup without fencing; full), columns are
 * faults, each cell the number of effect rows for ONE message.
 *
 * The matrix is run by the demo program itself (tools/fault-matrix,
 * `outbox-fault-matrix --format kv`) on the fixture's server, one fresh
 * database per cell, so the test and the demo can never disagree. The test
 * asserts the WHOLE table: the broken rows DO show the duplicate where the
 * fault makes one (that proves the fault fired and the broken mode is
 * really broken), the full row shows exactly one everywhere, and each
 * cell's bookkeeping (final status, attempts, fenced_out, the fault fired,
 * the restart or takeover happened) is what the interleaving implies.
 * docs/faults.md explains every cell.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testsupport.h"

#define OUT_MAX (256 * 1024)
#define ROW_TIMEOUT_MS (170 * 1000)

struct expect {
	const char *mode;
	const char *fault;
	int64_t effects;
	int64_t attempts_min, attempts_max;
	int64_t claims_min, claims_max;   /* the final fence: every claim bumps it */
	int64_t fenced_out;
	int64_t dups_min, dups_max;       /* 'duplicate' replies of the consumer */
	int consumer_restarts;
	int relay_takeovers;
};

/* The whole table (docs/faults.md explains each cell).
 * attempts: a lost reply, a dead consumer, a dead or stalled relay each cost
 *   exactly one more counted attempt; a slow consumer may cost two (the
 *   retry that waits on the slow transaction's key lock can time out too).
 * claims: a claim made while the consumer is down (restarting) bumps the
 *   fence but refunds the attempt, so the consumer-death cells have a range.
 * fenced_out: exactly the stalled worker's late write, and only with fencing.
 * dups: with dedup, every redelivery of an applied message is answered
 *   'duplicate'; without dedup it is applied again (a second effect row). */
#define ANY 100
/* On a loaded machine (CI runs two tests at once on two cores) the
 * redelivery's own round trip can also time out: one more attempt, one more
 * claim, one more 'duplicate' answer. Effects and fenced_out stay exact,
 * except in the no-dedup row, where that extra delivery is applied again
 * (seen under ASan: 3 effects in no-dedup/die-after-commit): there the
 * effects may exceed the table by the slack, never fall below it. */
#define LOAD_SLACK 2
static const struct expect table[] = {
	/* no dedup (relay fenced): every redelivery of an applied message is a
	 * second effect. A relay that dies after claim or a stalled relay that
	 * is stopped never sent: no second effect. */
	{ "no-dedup", "none", 1, 1, 1, 1, 1, 0, 0, 0, 0, 0 },
	{ "no-dedup", "drop-reply", 2, 2, 2, 2, 2, 0, 0, 0, 0, 0 },
	{ "no-dedup", "die-before-commit", 1, 2, 2, 2, ANY, 0, 0, 0, 1, 0 },
	{ "no-dedup", "die-after-commit", 2, 2, 2, 2, ANY, 0, 0, 0, 1, 0 },
	{ "no-dedup", "slow", 2, 2, 2, 2, 2, 0, 0, 0, 0, 0 },
	{ "no-dedup", "relay-die-after-claim", 1, 2, 2, 2, 2, 0, 0, 0, 0, 1 },
	{ "no-dedup", "relay-die-after-send", 2, 2, 2, 2, 2, 0, 0, 0, 0, 1 },
	{ "no-dedup", "relay-stall", 2, 2, 2, 2, 2, 1, 0, 0, 0, 1 },
	{ "no-dedup", "relay-stall-release", 1, 2, 2, 2, 2, 1, 0, 0, 0, 1 },
	/* dedup without fencing: one effect everywhere, but the stalled worker's
	 * stale writes land (fenced_out 0); the stale release puts the delivered
	 * message back to pending: a third claim and a redelivery. */
	{ "no-fencing", "none", 1, 1, 1, 1, 1, 0, 0, 0, 0, 0 },
	{ "no-fencing", "drop-reply", 1, 2, 2, 2, 2, 0, 1, 1, 0, 0 },
	{ "no-fencing", "die-before-commit", 1, 2, 2, 2, ANY, 0, 0, 0, 1, 0 },
	{ "no-fencing", "die-after-commit", 1, 2, 2, 2, ANY, 0, 1, 1, 1, 0 },
	{ "no-fencing", "slow", 1, 2, 4, 2, 4, 0, 1, 3, 0, 0 },
	{ "no-fencing", "relay-die-after-claim", 1, 2, 2, 2, 2, 0, 0, 0, 0, 1 },
	{ "no-fencing", "relay-die-after-send", 1, 2, 2, 2, 2, 0, 1, 1, 0, 1 },
	{ "no-fencing", "relay-stall", 1, 2, 2, 2, 2, 0, 1, 1, 0, 1 },
	{ "no-fencing", "relay-stall-release", 1, 2, 2, 3, 3, 0, 1, 1, 0, 1 },
	/* full: exactly one, and the stalled worker is fenced out. */
	{ "full", "none", 1, 1, 1, 1, 1, 0, 0, 0, 0, 0 },
	{ "full", "drop-reply", 1, 2, 2, 2, 2, 0, 1, 1, 0, 0 },
	{ "full", "die-before-commit", 1, 2, 2, 2, ANY, 0, 0, 0, 1, 0 },
	{ "full", "die-after-commit", 1, 2, 2, 2, ANY, 0, 1, 1, 1, 0 },
	{ "full", "slow", 1, 2, 4, 2, 4, 0, 1, 3, 0, 0 },
	{ "full", "relay-die-after-claim", 1, 2, 2, 2, 2, 0, 0, 0, 0, 1 },
	{ "full", "relay-die-after-send", 1, 2, 2, 2, 2, 0, 1, 1, 0, 1 },
	{ "full", "relay-stall", 1, 2, 2, 2, 2, 1, 1, 1, 0, 1 },
	{ "full", "relay-stall-release", 1, 2, 2, 2, 2, 1, 0, 0, 0, 1 },
};

struct cell {
	char mode[64], fault[64], status[16];
	int64_t effects, attempts, fence, fenced_out, dups;
	int fired, consumer_restarts, relay_takeovers, completed;
};

static bool
parse_cell(const char *line, struct cell *c)
{
	return sscanf(line, "cell mode=%63s fault=%63s effects=%" SCNd64 " status=%15s"
	    " attempts=%" SCNd64 " fence=%" SCNd64 " fenced_out=%" SCNd64 " fired=%d"
	    " consumer_restarts=%d relay_takeovers=%d dup_replies=%" SCNd64 " completed=%d",
	    c->mode, c->fault, &c->effects, c->status, &c->attempts, &c->fence,
	    &c->fenced_out, &c->fired, &c->consumer_restarts, &c->relay_takeovers,
	    &c->dups, &c->completed) == 12;
}

/* Find the line starting with prefix and containing needle. */
static const char *
find_line(const char *out, const char *prefix, const char *needle)
{
	for (const char *l = out; l != NULL && *l; ) {
		const char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);
		if (strncmp(l, prefix, strlen(prefix)) == 0) {
			char buf[1024];
			snprintf(buf, sizeof(buf), "%.*s", (int)len, l);
			if (strstr(buf, needle) != NULL)
				return l;
		}
		l = nl ? nl + 1 : NULL;
	}
	return NULL;
}

/* Run one row of the matrix and assert every cell of it. */
static void
check_row(const char *mode)
{
	char *out = malloc(OUT_MAX);
	ck_assert(out != NULL);
	char server[TS_CONNINFO_MAX];
	snprintf(server, sizeof(server), "%s", ts_server_conninfo());
	char *argv[] = { "outbox-fault-matrix", "--server", server, "--modes", (char *)mode,
		"--format", "kv", NULL };
	int code = ts_run(argv, NULL, out, OUT_MAX, ROW_TIMEOUT_MS);
	/* A cell that did not settle within its deadline (seen once in five
	 * loaded CI runs: a restarted consumer the relay did not reach for 60 s)
	 * is a liveness hiccup of the run, not a wrong count: run the row once
	 * more, say so, and assert everything on that run. A wrong effect count
	 * is never retried. */
	if (code != 0 && strstr(out, "completed=0") != NULL &&
	    strstr(out, "DID-NOT-SETTLE") != NULL) {
		fprintf(stderr, "test_faultmatrix: row %s had a cell that did not settle;"
		    " running the row again:\n%s\n", mode, out);
		code = ts_run(argv, NULL, out, OUT_MAX, ROW_TIMEOUT_MS);
	}
	/* The tool exits 0 when the full row is all 1s (or not run) and every
	 * cell settled with its fault fired. */
	ck_assert_msg(code == 0, "outbox-fault-matrix --modes %s exited %d:\n%s", mode, code, out);
	int checked = 0;
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		const struct expect *e = &table[i];
		if (strcmp(e->mode, mode) != 0)
			continue;
		char needle[128];
		snprintf(needle, sizeof(needle), " fault=%s ", e->fault);
		/* Every column's fault flag exists: nothing may be skipped. */
		ck_assert_msg(find_line(out, "skipped ", needle) == NULL,
		    "%s / %s was not run (a fault flag is missing):\n%s", mode, e->fault, out);
		const char *line = find_line(out, "cell ", needle);
		ck_assert_msg(line != NULL, "no cell %s / %s in:\n%s", mode, e->fault, out);
		struct cell c;
		ck_assert_msg(parse_cell(line, &c), "cannot parse: %.300s", line);
		const char *what = e->fault;
		int64_t slack = strcmp(e->fault, "none") == 0 ? 0 : LOAD_SLACK;
		ck_assert_msg(c.completed == 1, "%s/%s did not settle:\n%s", mode, what, out);
		ck_assert_msg(strcmp(c.status, "delivered") == 0, "%s/%s: status %s", mode, what,
		    c.status);
		int64_t effects_max = e->effects + (strcmp(mode, "no-dedup") == 0 ? slack : 0);
		ck_assert_msg(c.effects >= e->effects && c.effects <= effects_max,
		    "%s/%s: %" PRId64 " effect rows, expected %" PRId64 "..%" PRId64 "\n%s", mode,
		    what, c.effects, e->effects, effects_max, out);
		ck_assert_msg(c.attempts >= e->attempts_min && c.attempts <= e->attempts_max + slack,
		    "%s/%s: attempts %" PRId64 ", expected %" PRId64 "..%" PRId64 "\n%s", mode, what,
		    c.attempts, e->attempts_min, e->attempts_max + slack, out);
		ck_assert_msg(c.fence >= e->claims_min && c.fence <= e->claims_max + slack,
		    "%s/%s: %" PRId64 " claims, expected %" PRId64 "..%" PRId64 "\n%s", mode, what,
		    c.fence, e->claims_min, e->claims_max + slack, out);
		ck_assert_msg(c.fenced_out == e->fenced_out,
		    "%s/%s: fenced_out %" PRId64 ", expected %" PRId64 "\n%s", mode, what,
		    c.fenced_out, e->fenced_out, out);
		/* Without dedup there is no 'duplicate' answer at all: exact. */
		int64_t dslack = strcmp(e->mode, "no-dedup") == 0 ? 0 : slack;
		ck_assert_msg(c.dups >= e->dups_min && c.dups <= e->dups_max + dslack,
		    "%s/%s: %" PRId64 " duplicate replies, expected %" PRId64 "..%" PRId64 "\n%s",
		    mode, what, c.dups, e->dups_min, e->dups_max + dslack, out);
		ck_assert_msg(c.fired == (strcmp(e->fault, "none") == 0 ? 0 : 1),
		    "%s/%s: the fault fired %d times\n%s", mode, what, c.fired, out);
		ck_assert_msg(c.consumer_restarts == e->consumer_restarts,
		    "%s/%s: %d consumer restarts", mode, what, c.consumer_restarts);
		ck_assert_msg(c.relay_takeovers == e->relay_takeovers,
		    "%s/%s: %d relay takeovers", mode, what, c.relay_takeovers);
		checked++;
	}
	ck_assert_msg(checked == 9, "only %d cells of %s checked:\n%s", checked, mode, out);
	ck_assert_msg(strstr(out, "verdict pass") != NULL, "%s", out);
	free(out);
}

START_TEST(test_row_no_dedup)
{
	check_row("no-dedup");
}
END_TEST

START_TEST(test_row_no_fencing)
{
	check_row("no-fencing");
}
END_TEST

START_TEST(test_row_full)
{
	check_row("full");
}
END_TEST

START_TEST(test_bad_input)
{
	char out[4096];
	char *bad_mode[] = { "outbox-fault-matrix", "--modes", "nope", NULL };
	ck_assert_int_eq(ts_run(bad_mode, NULL, out, sizeof(out), 20000), 2);
	ck_assert_msg(strstr(out, "unknown mode 'nope'") != NULL, "%s", out);
	char *bad_fault[] = { "outbox-fault-matrix", "--faults", "gremlins", NULL };
	ck_assert_int_eq(ts_run(bad_fault, NULL, out, sizeof(out), 20000), 2);
	ck_assert_msg(strstr(out, "unknown fault 'gremlins'") != NULL, "%s", out);
	/* A stall that does not outlast the lease would prove nothing. */
	char *short_stall[] = { "outbox-fault-matrix", "--stall-ms", "2s", NULL };
	ck_assert_int_eq(ts_run(short_stall, NULL, out, sizeof(out), 20000), 2);
	ck_assert_msg(strstr(out, "--stall-ms") != NULL, "%s", out);
	char *bad_lease[] = { "outbox-fault-matrix", "--lease-ms", "1s", NULL };
	ck_assert_int_eq(ts_run(bad_lease, NULL, out, sizeof(out), 20000), 2);
	ck_assert_msg(strstr(out, "--lease-ms") != NULL, "%s", out);
	char *help[] = { "outbox-fault-matrix", "--help", NULL };
	ck_assert_int_eq(ts_run(help, NULL, out, sizeof(out), 20000), 0);
	ck_assert_msg(strstr(out, "OUTBOX_FM_SERVER") != NULL, "%s", out);
}
END_TEST

static Suite *
faultmatrix_suite(void)
{
	Suite *s = suite_create("faultmatrix");
	TCase *tc = tcase_create("matrix");
	tcase_set_timeout(tc, 2 * ROW_TIMEOUT_MS / 1000 + 30); /* a row may run twice */
	tcase_add_test(tc, test_bad_input);
	tcase_add_test(tc, test_row_no_dedup);
	tcase_add_test(tc, test_row_no_fencing);
	tcase_add_test(tc, test_row_full);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return ts_run_suite(faultmatrix_suite());
}
