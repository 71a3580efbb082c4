/*
 * test_prove.c - `outboxctl prove`, the history checker, against real runs
 * of outbox-relay and outbox-consumer on the throwaway PostgreSQL (a
 * producer database and a consumer database each).
 *
 * The checker must be able to fail: each class a broken mode of the
 * programs really produces is shown failing on it (exit 1, the class
 * named, exactly the ids an independent SQL count over the inbox names),
 * then passing on the real mode with the same faults:
 *   duplicated    consumer --no-dedup with --fault-drop-reply
 *   out_of_order  relay --no-ordering with a head answered retry (its key
 *                 held by another transaction: the consumer's lock timeout)
 * The classes no broken mode produces reliably (phantom, lost, delivered
 * not applied) are made by hand in the inbox after a real run, with the
 * others beside them, and prove must name exactly those ids. A clean run
 * of 50,000 messages proves committed = delivered = applied and finishes
 * in seconds. Bad input: exit 2 with one line.
 */
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testsupport.h"
#include "ts_consumer.h"
#include "ts_relay.h"

#define OUT_MAX (1 << 20) /* --json */
#define TEXT_MAX 65536     /* text */
#define RUN_TIMEOUT_MS 120000
#define DRAIN_TIMEOUT_MS 300000
#define BIG 50000              /* messages of the clean run */
#define BIG_PROVE_MAX_MS 10000 /* "a few seconds" for it (0.5 s measured) */
#define SOURCE "prove-src"

/* A producer database, a consumer database, and the start of the window
 * (the producer database's clock before anything was enqueued). */
struct pipe {
	char out_db[TS_CONNINFO_MAX];
	char in_db[TS_CONNINFO_MAX];
	char since[64];
	char relay_log[256];
	PGconn *out, *in;
};

static void
pipe_new(struct pipe *p, const char *tag)
{
	char t[64];
	memset(p, 0, sizeof *p);
	snprintf(t, sizeof t, "%s_out", tag);
	ts_db_create(t, "outbox", p->out_db, sizeof p->out_db);
	snprintf(t, sizeof t, "%s_in", tag);
	ts_db_create(t, "inbox", p->in_db, sizeof p->in_db);
	p->out = ts_connect(p->out_db);
	p->in = ts_connect(p->in_db);
	PGresult *r = PQexec(p->out,
	    "SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	snprintf(p->since, sizeof p->since, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
}

static void
pipe_free(struct pipe *p)
{
	PQfinish(p->out);
	PQfinish(p->in);
}

/* A consumer and a relay (routing topic to the consumer) of a pipe. */
struct procs {
	pid_t consumer, relay;
};

/* Start a consumer, then (once it listens: frames sent before would fail
 * and shrink the relay's window for it) a relay. */
static struct procs
pipe_start(struct pipe *p, const char *topic, const char *const *relay_extra,
    const char *const *consumer_extra)
{
	char url[256], route[300], ready[512], log[256];
	static int n;
	const char *extra[32];
	struct procs pr;
	ts_ipc_url("prove", url, sizeof url);
	snprintf(route, sizeof route, "%s=%s", topic, url);
	snprintf(ready, sizeof ready, "%s/prove-consumer-%d.ready", ts_tmpdir(), ++n);
	const char *const ready_args[] = { "--ready-file", ready, NULL };
	ts_args_cat(extra, sizeof extra / sizeof extra[0], consumer_extra, ready_args);
	pr.consumer = ts_consumer_spawn(log, p->in_db, url, extra);
	free(ts_wait_ready_file(ready, pr.consumer, log, 30000));
	pr.relay = ts_relay_spawn(p->relay_log, p->out_db, route, relay_extra);
	return pr;
}

/* Wait until the outbox's backlog is empty (every message delivered or
 * dead), then stop both. */
static void
pipe_finish(struct pipe *p, struct procs pr)
{
	int64_t empty = ts_wait_value(p->out, "SELECT outbox.backlog_empty()::int", 1,
	    DRAIN_TIMEOUT_MS);
	ts_stop(pr.relay, SIGTERM);
	ts_stop(pr.consumer, SIGTERM);
	ck_assert_msg(empty == 1, "the relay did not drain the outbox (log %s)", p->relay_log);
}

static void
pipe_drain(struct pipe *p, const char *topic, const char *const *relay_extra,
    const char *const *consumer_extra)
{
	pipe_finish(p, pipe_start(p, topic, relay_extra, consumer_extra));
}

/* outboxctl prove --db --inbox-db --since and args (NULL-ended); output
 * (stdout and stderr) into out (outlen bytes). Returns the exit code. */
static int
prove_args(const struct pipe *p, char *out, size_t outlen, const char *const *args)
{
	char *argv[40];
	int n = 0;
	argv[n++] = "outboxctl";
	argv[n++] = "prove";
	argv[n++] = "--db";
	argv[n++] = (char *)p->out_db;
	argv[n++] = "--inbox-db";
	argv[n++] = (char *)p->in_db;
	argv[n++] = "--since";
	argv[n++] = (char *)p->since;
	for (int i = 0; args != NULL && args[i] != NULL && n < 38; i++)
		argv[n++] = (char *)args[i];
	argv[n] = NULL;
	return ts_run(argv, NULL, out, outlen, RUN_TIMEOUT_MS);
}

/* prove with the args after out (NULL-ended); out has TEXT_MAX bytes. */
static int
prove(const struct pipe *p, char *out, ...)
{
	const char *args[32];
	int n = 0;
	va_list ap;
	va_start(ap, out);
	for (const char *a = va_arg(ap, const char *); a != NULL && n < 31;
	     a = va_arg(ap, const char *))
		args[n++] = a;
	va_end(ap);
	args[n] = NULL;
	return prove_args(p, out, TEXT_MAX, args);
}

/* prove --json with args; the parsed object (json_decref it). */
static json_t *
prove_json(const struct pipe *p, int *code, ...)
{
	const char *args[32];
	int n = 0;
	va_list ap;
	va_start(ap, code);
	for (const char *a = va_arg(ap, const char *); a != NULL && n < 30;
	     a = va_arg(ap, const char *))
		args[n++] = a;
	va_end(ap);
	args[n++] = "--json";
	args[n] = NULL;
	char *out = malloc(OUT_MAX);
	ck_assert_ptr_nonnull(out);
	*code = prove_args(p, out, OUT_MAX, args);
	json_error_t jerr;
	json_t *j = json_loads(out, 0, &jerr);
	ck_assert_msg(j != NULL, "prove --json (exit %d): not JSON (%s): %.2000s", *code, jerr.text,
	    out);
	free(out);
	return j;
}

static json_t *
class_of(json_t *root, const char *name)
{
	json_t *c = json_object_get(json_object_get(root, "classes"), name);
	ck_assert_msg(c != NULL, "no class %s in the JSON", name);
	return c;
}

static int64_t
count_of(json_t *root, const char *name)
{
	return json_integer_value(json_object_get(class_of(root, name), "count"));
}

/* A class's listed ids, comma-separated, into out. */
static const char *
ids_of(json_t *root, const char *name, char *out, size_t outlen)
{
	json_t *ids = json_object_get(class_of(root, name), "ids");
	size_t i, at = 0;
	json_t *v;
	out[0] = '\0';
	json_array_foreach(ids, i, v)
		at += (size_t)snprintf(out + at, at < outlen ? outlen - at : 0, "%s%" JSON_INTEGER_FORMAT,
		    i > 0 ? "," : "", json_integer_value(v));
	return out;
}

/* The violations array, comma-separated. */
static const char *
violations_of(json_t *root, char *out, size_t outlen)
{
	json_t *a = json_object_get(root, "violations");
	size_t i, at = 0;
	json_t *v;
	out[0] = '\0';
	json_array_foreach(a, i, v)
		at += (size_t)snprintf(out + at, at < outlen ? outlen - at : 0, "%s%s", i > 0 ? "," : "",
		    json_string_value(v));
	return out;
}

/* The first column of the first row of sql as text ("" when NULL). */
static void
query_text(PGconn *conn, const char *sql, char *out, size_t outlen)
{
	PGresult *r = PQexec(conn, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", sql, PQresultErrorMessage(r));
	snprintf(out, outlen, "%s", PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "");
	PQclear(r);
}

static void
assert_class_ids(json_t *root, const char *name, const char *want)
{
	char got[4096];
	ids_of(root, name, got, sizeof got);
	ck_assert_msg(strcmp(got, want) == 0, "%s: ids [%s], want [%s]", name, got, want);
}

/* A class's summary line as prove prints it, with its newlines around. */
static const char *
class_line(char *out, size_t outlen, const char *name, int64_t count, const char *rest)
{
	snprintf(out, outlen, "\n%-22s %8" PRId64 "%s\n", name, count, rest);
	return out;
}

static void
assert_has(const char *out, const char *want)
{
	ck_assert_msg(strstr(out, want) != NULL, "want <%s> in:\n%s", want, out);
}

/* --- a clean run: 50,000 messages ------------------------------------- */

START_TEST(test_clean_run)
{
	struct pipe p;
	char out[TEXT_MAX], source[128], got[256], line[128];
	pipe_new(&p, "prove_clean");
	/* a quarter of them ordered, over 50 keys; two topics */
	char sql[512];
	snprintf(sql, sizeof sql,
	    "SELECT count(outbox.enqueue(CASE WHEN g %% 50 = 0 THEN 'u' ELSE 't' END, 'k-' || g,"
	    " jsonb_build_object('n', g), CASE WHEN g %% 4 = 0 THEN 'o-' || g %% 50 END))"
	    " FROM generate_series(1, %d) g", BIG);
	ck_assert_int_eq(ts_query_int(p.out, sql), BIG);
	/* the relay's own source: derived from its database (no --source) */
	const char *relay[] = { "--workers", "2", "--batch", "500", "--poll-ms", "100", NULL };
	pipe_drain(&p, "*", relay, NULL);
	ts_log_wait_field(p.relay_log, "relay.source", "source", source, sizeof source, 30000);
	ck_assert_int_eq(ts_query_int(p.in, "SELECT count(*) FROM inbox.notifications"), BIG);

	int code;
	int64_t t0 = ts_now_ms();
	json_t *j = prove_json(&p, &code, "--derived-source", "--drained", NULL);
	int64_t took = ts_now_ms() - t0;
	fprintf(stderr, "test_prove: outboxctl prove on %d messages: %" PRId64 " ms\n", BIG, took);
	ck_assert_msg(code == 0, "exit %d: %s", code, json_dumps(j, 0));
	ck_assert_str_eq(json_string_value(json_object_get(j, "verdict")), "ok");
	ck_assert_str_eq(json_string_value(json_object_get(j, "source")), source);
	ck_assert_int_eq(count_of(j, "committed"), BIG);
	ck_assert_int_eq(count_of(j, "delivered"), BIG);
	ck_assert_int_eq(count_of(j, "applied"), BIG);
	const char *zero[] = { "pending", "dead", "lost", "duplicated", "out_of_order", "phantom",
		"delivered_not_applied", "parked_webhook_calls", NULL };
	for (int i = 0; zero[i] != NULL; i++)
		ck_assert_msg(count_of(j, zero[i]) == 0, "%s: %" PRId64, zero[i], count_of(j, zero[i]));
	ck_assert_str_eq(violations_of(j, got, sizeof got), "");
	ck_assert(!json_is_true(json_object_get(j, "partial")));
	/* --max-ids 20 by default: the first ids of a class */
	assert_class_ids(j, "applied", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20");
	json_decref(j);
	ck_assert_msg(took < BIG_PROVE_MAX_MS, "prove took %" PRId64 " ms on %d messages", took, BIG);

	/* the same, named, as text */
	code = prove(&p, out, "--source", source, NULL);
	ck_assert_msg(code == 0, "exit %d: %s", code, out);
	assert_has(out, class_line(line, sizeof line, "committed", BIG, ""));
	assert_has(out, class_line(line, sizeof line, "applied", BIG, ""));
	assert_has(out, "\nverdict: ok\n");

	/* the wrong source (the empty one): nothing of it was applied; said */
	code = prove(&p, out, "--max-ids", "2", NULL);
	ck_assert_msg(code == 1, "exit %d: %s", code, out);
	assert_has(out, class_line(line, sizeof line, "lost", BIG, "  VIOLATION"));
	assert_has(out, "\nlost: ... and 49998 more (--max-ids)\n");
	assert_has(out, "is --source right?");
	assert_has(out, "\nverdict: VIOLATION: lost 50000, delivered_not_applied 50000\n");
	pipe_free(&p);
}
END_TEST

/* --- duplicated: the consumer without dedup, replies lost ------------- */

#define DUP_N 10
#define DUP_DROPS "3"

static json_t *
duplicated_run(bool broken, int *code, char *expect, size_t expectlen)
{
	struct pipe p;
	pipe_new(&p, broken ? "prove_dup_broken" : "prove_dup");
	char sql[256];
	snprintf(sql, sizeof sql, "SELECT count(outbox.enqueue('t', 'k-' || g,"
	    " jsonb_build_object('n', g))) FROM generate_series(1, %d) g", DUP_N);
	ck_assert_int_eq(ts_query_int(p.out, sql), DUP_N);
	/* each reply lost after COMMIT: the frame times out and is sent again */
	const char *consumer_broken[] = { "--fault-drop-reply", DUP_DROPS, "--no-dedup", NULL };
	const char *consumer_real[] = { "--fault-drop-reply", DUP_DROPS, NULL };
	const char *relay[] = { "--source", SOURCE, "--batch", "1", "--poll-ms", "50",
		"--delivery-timeout-ms", "500", "--lease-ms", "2000", NULL };
	pipe_drain(&p, "*", relay, broken ? consumer_broken : consumer_real);
	/* independently: the messages with more than one effect row */
	query_text(p.in, "SELECT coalesce(string_agg(message_id::text, ',' ORDER BY message_id), '')"
	    " FROM (SELECT message_id FROM inbox.notifications GROUP BY message_id"
	    " HAVING count(*) > 1) d", expect, expectlen);
	json_t *j = prove_json(&p, code, "--source", SOURCE, "--drained", NULL);
	static char out[TEXT_MAX];
	int tcode = prove(&p, out, "--source", SOURCE, NULL);
	ck_assert_int_eq(tcode, *code);
	if (broken) {
		/* ids 1..DUP_N are keys k-1..k-DUP_N (one enqueue statement) */
		char line[512];
		int n = (int)strcspn(expect, ",");
		snprintf(line, sizeof line, "\nduplicated: id %.*s, topic 't', key 'k-%.*s': ", n, expect,
		    n, expect);
		assert_has(out, line);
		assert_has(out, "\nverdict: VIOLATION: duplicated ");
		fprintf(stderr, "test_prove: consumer --no-dedup --fault-drop-reply %s:\n%s", DUP_DROPS,
		    out);
	}
	pipe_free(&p);
	return j;
}

START_TEST(test_duplicated_broken_then_real)
{
	char expect[1024], got[1024];
	int code;
	json_t *j = duplicated_run(true, &code, expect, sizeof expect);
	ck_assert_msg(strlen(expect) > 0, "--no-dedup with lost replies applied nothing twice");
	ck_assert_int_eq(code, 1);
	ck_assert_str_eq(violations_of(j, got, sizeof got), "duplicated");
	assert_class_ids(j, "duplicated", expect);
	ck_assert_int_eq(count_of(j, "applied"), DUP_N);
	ck_assert_int_eq(count_of(j, "lost"), 0);
	json_decref(j);

	j = duplicated_run(false, &code, expect, sizeof expect);
	ck_assert_str_eq(expect, "");
	ck_assert_msg(code == 0, "exit %d: %s", code, json_dumps(j, 0));
	ck_assert_int_eq(count_of(j, "duplicated"), 0);
	ck_assert_int_eq(count_of(j, "committed"), DUP_N);
	ck_assert_int_eq(count_of(j, "applied"), DUP_N);
	json_decref(j);
}
END_TEST

/* --- out of order: the relay without ordering, a failing head ---------- */

#define ORD_N 6

/* The messages whose first effect row comes after the first effect row of
 * a higher ordering_seq of their key (the inbox's own copy of the seq). */
static const char out_of_order_sql[] =
    "WITH f AS (SELECT DISTINCT ON (message_id) message_id, id, ordering_key, ordering_seq"
    "  FROM inbox.notifications ORDER BY message_id, id)"
    " SELECT coalesce(string_agg(f.message_id::text, ',' ORDER BY f.message_id), '') FROM f"
    " WHERE EXISTS (SELECT 1 FROM f g WHERE g.ordering_key = f.ordering_key AND g.id < f.id"
    "  AND g.ordering_seq > f.ordering_seq)";

/* Key K's messages k-1..k-6 (seq 1..6), its head k-1 failing: another
 * transaction holds k-1's dedup record uncommitted, so the consumer
 * answers it retry (a key in flight, after --lock-timeout) until that
 * transaction ends. The real relay parks k-2.. behind it; without
 * ordering they go on and are applied first. */
static json_t *
ordering_run(bool broken, int *code, char *expect, size_t expectlen, char *seqs, size_t seqslen)
{
	struct pipe p;
	pipe_new(&p, broken ? "prove_ord_broken" : "prove_ord");
	char sql[256];
	snprintf(sql, sizeof sql, "SELECT count(outbox.enqueue('t', 'k-' || g,"
	    " jsonb_build_object('n', g), 'K')) FROM generate_series(1, %d) g", ORD_N);
	ck_assert_int_eq(ts_query_int(p.out, sql), ORD_N);
	PGconn *holder = ts_connect(p.in_db);
	ts_exec(holder, "BEGIN; INSERT INTO inbox.processed (idempotency_key, topic, message_id,"
	    " fence, source) VALUES ('k-1', 't', 0, 0, '" SOURCE "')");
	const char *consumer[] = { "--lock-timeout", "200ms", NULL };
	const char *relay_broken[] = { "--source", SOURCE, "--batch", "1", "--poll-ms", "50",
		"--backoff-base-ms", "50", "--backoff-cap-ms", "200", "--max-attempts", "10000",
		"--no-ordering", NULL };
	const char *relay_real[] = { "--source", SOURCE, "--batch", "1", "--poll-ms", "50",
		"--backoff-base-ms", "50", "--backoff-cap-ms", "200", "--max-attempts", "10000", NULL };
	struct procs pr = pipe_start(&p, "*", broken ? relay_broken : relay_real, consumer);
	if (broken) /* k-2..k-6 applied while k-1 waits */
		ck_assert_int_eq(ts_wait_value(p.in, "SELECT count(*) FROM inbox.notifications",
		    ORD_N - 1, 60000), ORD_N - 1);
	else /* k-1 answered retry, k-2..k-6 parked behind it */
		ck_assert_int_eq(ts_wait_value(p.out, "SELECT count(*) FROM outbox.retries"
		    " WHERE ordering_key = 'K'", ORD_N, 60000), ORD_N);
	ts_exec(holder, "ROLLBACK");
	PQfinish(holder);
	pipe_finish(&p, pr);
	ck_assert_int_eq(ts_query_int(p.in, "SELECT count(*) FROM inbox.notifications"), ORD_N);
	query_text(p.in, out_of_order_sql, expect, expectlen);
	query_text(p.in, "SELECT string_agg(ordering_seq::text, ' ' ORDER BY id)"
	    " FROM inbox.notifications", seqs, seqslen);
	json_t *j = prove_json(&p, code, "--source", SOURCE, "--drained", NULL);
	if (broken) {
		static char out[TEXT_MAX];
		(void)prove(&p, out, "--source", SOURCE, NULL);
		fprintf(stderr, "test_prove: relay --no-ordering, head k-1 answered retry (applied"
		    " seqs %s):\n%s", seqs, out);
	}
	pipe_free(&p);
	return j;
}

START_TEST(test_out_of_order_broken_then_real)
{
	char expect[256], seqs[256], got[256];
	int code;
	json_t *j = ordering_run(true, &code, expect, sizeof expect, seqs, sizeof seqs);
	/* the head k-1 (id 1, seq 1) was applied after the others; without
	 * ordering, frames of k-2.. are out at once too and may overtake each
	 * other: prove names exactly what the inbox shows, k-1 among them */
	ck_assert_msg(strncmp(expect, "1", 1) == 0 && (expect[1] == '\0' || expect[1] == ','),
	    "out of order [%s], applied seqs %s", expect, seqs);
	ck_assert_msg(code == 1, "exit %d (applied seqs %s)", code, seqs);
	ck_assert_str_eq(violations_of(j, got, sizeof got), "out_of_order");
	assert_class_ids(j, "out_of_order", expect);
	json_decref(j);

	j = ordering_run(false, &code, expect, sizeof expect, seqs, sizeof seqs);
	ck_assert_msg(strcmp(expect, "") == 0, "the real relay applied out of order: %s", seqs);
	ck_assert_msg(code == 0, "exit %d (applied seqs %s)", code, seqs);
	ck_assert_int_eq(count_of(j, "out_of_order"), 0);
	ck_assert_int_eq(count_of(j, "applied"), ORD_N);
	json_decref(j);
}
END_TEST

/* --- every class at once, made by hand after a real run ---------------- */

/* The outbox id of key k (topic t), as text. */
static void
id_of(struct pipe *p, const char *key, char *out, size_t outlen)
{
	char sql[256];
	snprintf(sql, sizeof sql, "SELECT id FROM outbox.messages WHERE idempotency_key = '%s'", key);
	query_text(p->out, sql, out, outlen);
	ck_assert_msg(out[0] != '\0', "no message %s", key);
}

START_TEST(test_crafted_classes)
{
	struct pipe p;
	char k2[32], k3[32], k4[32], k7[32], o1[32], x1[32], want[256], got[256], line[256];
	static char out[TEXT_MAX];
	pipe_new(&p, "prove_craft");
	ts_exec(p.out,
	    "SELECT outbox.enqueue('t', 'k-' || g, jsonb_build_object('n', g))"
	    "  FROM generate_series(1, 6) g;"
	    "SELECT outbox.enqueue('t', 'o-1', '{}', 'K'); SELECT outbox.enqueue('t', 'o-2', '{}', 'K');"
	    "SELECT outbox.enqueue('nowhere', 'x-1', '{}')");
	/* only topic t is routed, and topics with no route are dead-lettered
	 * (not the default: they wait): x-1 dies, "no route for topic 'nowhere'" */
	const char *relay[] = { "--source", SOURCE, "--poll-ms", "50", "--unrouted", "dead-letter",
		NULL };
	pipe_drain(&p, "t", relay, NULL);
	ck_assert_int_eq(ts_query_int(p.in, "SELECT count(*) FROM inbox.notifications"), 8);
	/* enqueued with no relay running: pending */
	ts_exec(p.out, "SELECT outbox.enqueue('t', 'k-7', '{}')");
	id_of(&p, "k-2", k2, sizeof k2);
	id_of(&p, "k-3", k3, sizeof k3);
	id_of(&p, "k-4", k4, sizeof k4);
	id_of(&p, "k-7", k7, sizeof k7);
	id_of(&p, "o-1", o1, sizeof o1);
	id_of(&p, "x-1", x1, sizeof x1);

	ts_exec(p.in,
	    /* phantom: applied under the source, never enqueued */
	    "INSERT INTO inbox.processed (idempotency_key, topic, message_id, fence, source,"
	    "  created_at) VALUES ('ghost', 't', 424242, 1, '" SOURCE "', now());"
	    "INSERT INTO inbox.notifications (idempotency_key, topic, payload, message_id, source)"
	    "  VALUES ('ghost', 't', '{}', 424242, '" SOURCE "');"
	    /* another source's: none of this producer database's business */
	    "INSERT INTO inbox.notifications (idempotency_key, topic, payload, message_id, source)"
	    "  VALUES ('ghost-2', 't', '{}', 515151, 'another-db');"
	    /* k-2: delivered, and the inbox knows nothing of it */
	    "DELETE FROM inbox.notifications WHERE idempotency_key = 'k-2';"
	    "DELETE FROM inbox.processed WHERE idempotency_key = 'k-2';"
	    /* k-3: a dedup record without its effect */
	    "DELETE FROM inbox.notifications WHERE idempotency_key = 'k-3';"
	    /* k-4: a second effect row */
	    "INSERT INTO inbox.notifications (idempotency_key, topic, payload, message_id,"
	    "  ordering_key, ordering_seq, source)"
	    "  SELECT idempotency_key, topic, payload, message_id, ordering_key, ordering_seq, source"
	    "  FROM inbox.notifications WHERE idempotency_key = 'k-4';"
	    /* o-1 applied again after o-2: its effect row moved behind */
	    "WITH d AS (DELETE FROM inbox.notifications WHERE idempotency_key = 'o-1' RETURNING *)"
	    " INSERT INTO inbox.notifications (idempotency_key, topic, payload, message_id,"
	    "  ordering_key, ordering_seq, source, applied_at)"
	    " SELECT idempotency_key, topic, payload, message_id, ordering_key, ordering_seq, source,"
	    "  applied_at FROM d;"
	    /* a parked webhook call of the source, and one of another */
	    "INSERT INTO inbox.webhook_calls (idempotency_key, fingerprint, state, fence, lease_until,"
	    "  topic, parked_at, parked_error) VALUES"
	    " ('" SOURCE "/t/k-5', 'f', 'unknown', 1, now(), 't', now(), 'no answer within 5s'),"
	    " ('another-db/t/k-5', 'f', 'unknown', 1, now(), 't', now(), 'no answer within 5s')");
	/* a batch taken over twice */
	ts_exec(p.out, "UPDATE outbox.batches SET takeovers = 2"
	    " WHERE id = (SELECT min(id) FROM outbox.batches WHERE topic = 't')");

	int code;
	json_t *j = prove_json(&p, &code, "--source", SOURCE, NULL);
	ck_assert_msg(code == 1, "exit %d", code);
	ck_assert_str_eq(violations_of(j, got, sizeof got),
	    "lost,duplicated,out_of_order,phantom,delivered_not_applied");
	ck_assert_int_eq(count_of(j, "committed"), 10);
	ck_assert_int_eq(count_of(j, "delivered"), 8);
	ck_assert_int_eq(count_of(j, "applied"), 6); /* k-1, k-4, k-5, k-6, o-1, o-2 */
	assert_class_ids(j, "pending", k7);
	assert_class_ids(j, "dead", x1);
	json_t *dead = class_of(j, "dead");
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(dead, "by_reason"),
	    "no route")), 1);
	json_t *m = json_array_get(json_object_get(dead, "messages"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(m, "reason")), "no route");
	snprintf(want, sizeof want, "%s,%s", k2, k3);
	assert_class_ids(j, "lost", want);
	assert_class_ids(j, "delivered_not_applied", k2);
	assert_class_ids(j, "duplicated", k4);
	assert_class_ids(j, "out_of_order", o1);
	assert_class_ids(j, "phantom", "424242");
	m = json_array_get(json_object_get(class_of(j, "phantom"), "messages"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(m, "key")), "ghost");
	ck_assert_int_eq(count_of(j, "takeovers"), 2);
	ck_assert_int_eq(json_integer_value(json_object_get(class_of(j, "takeovers"),
	    "batch_count")), 1);
	ck_assert_int_eq(count_of(j, "parked_webhook_calls"), 1);
	json_decref(j);

	/* the same as text: a line per class, then each member */
	code = prove(&p, out, "--source", SOURCE, NULL);
	ck_assert_int_eq(code, 1);
	assert_has(out, class_line(line, sizeof line, "committed", 10, ""));
	assert_has(out, class_line(line, sizeof line, "dead", 1, "  (no route 1)"));
	assert_has(out, class_line(line, sizeof line, "lost", 2, "  VIOLATION"));
	assert_has(out, class_line(line, sizeof line, "phantom", 1, "  VIOLATION"));
	assert_has(out, class_line(line, sizeof line, "takeovers", 2, "  (in 1 batch)"));
	ck_assert_msg(strstr(out, "takeovers: ... and") == NULL, "%s", out);
	assert_has(out, "\ntakeovers: batch ");
	assert_has(out, ", topic 't': 2 takeovers, lane ");
	assert_has(out, class_line(line, sizeof line, "pending", 1, ""));
	const char *lines[] = {
		"\nphantom: id 424242, topic 't', key 'ghost': an effect row, a dedup record\n",
		"\nparked_webhook_calls: topic 't', key '" SOURCE "/t/k-5': parked ",
		"\nverdict: VIOLATION: lost 2, duplicated 1, out_of_order 1, phantom 1,"
		" delivered_not_applied 1\n",
		NULL };
	for (int i = 0; lines[i] != NULL; i++)
		assert_has(out, lines[i]);
	snprintf(line, sizeof line, "\nlost: id %s, topic 't', key 'k-3': a dedup record, no effect"
	    " row\n", k3);
	ck_assert_msg(strstr(out, line) != NULL, "want %s in:\n%s", line, out);
	snprintf(line, sizeof line, "\nout_of_order: id %s, topic 't', key 'o-1': ordering key 'K':"
	    " seq 1 applied after seq 2\n", o1);
	ck_assert_msg(strstr(out, line) != NULL, "want %s in:\n%s", line, out);
	snprintf(line, sizeof line, "\ndead: id %s, topic 'nowhere', key 'x-1': no route: no route"
	    " for topic 'nowhere'\n", x1);
	ck_assert_msg(strstr(out, line) != NULL, "want %s in:\n%s", line, out);
	fprintf(stderr, "test_prove: crafted classes:\n%s", out);

	/* --drained: the pending message breaks the run too */
	code = prove(&p, out, "--source", SOURCE, "--drained", "--max-ids", "0", NULL);
	ck_assert_int_eq(code, 1);
	assert_has(out, class_line(line, sizeof line, "pending", 1, "  VIOLATION"));
	ck_assert_msg(strstr(out, "lost: id") == NULL, "--max-ids 0 listed ids:\n%s", out);
	/* --max-ids 1: the rest is counted */
	code = prove(&p, out, "--source", SOURCE, "--max-ids", "1", NULL);
	ck_assert_msg(strstr(out, "\nlost: ... and 1 more (--max-ids)\n") != NULL, "%s", out);

	/* repaired, it passes: the effects put back, the phantom gone */
	ts_exec(p.in,
	    "DELETE FROM inbox.notifications WHERE idempotency_key IN ('ghost', 'k-4', 'o-1', 'o-2');"
	    "DELETE FROM inbox.processed WHERE idempotency_key = 'ghost';"
	    "INSERT INTO inbox.notifications (idempotency_key, topic, payload, message_id,"
	    "  ordering_key, ordering_seq, source) VALUES"
	    " ('k-2', 't', '{}', 0, NULL, NULL, '" SOURCE "'), ('k-3', 't', '{}', 0, NULL, NULL, '"
	    SOURCE "'), ('k-4', 't', '{}', 0, NULL, NULL, '" SOURCE "'),"
	    " ('o-1', 't', '{}', 0, 'K', 1, '" SOURCE "'), ('o-2', 't', '{}', 0, 'K', 2, '" SOURCE "')");
	code = prove(&p, out, "--source", SOURCE, NULL);
	ck_assert_msg(code == 0, "exit %d:\n%s", code, out);
	pipe_free(&p);
}
END_TEST

/* --- a window reaching past what housekeeping removed ------------------ */

START_TEST(test_partial_window)
{
	struct pipe p;
	char out[TEXT_MAX], first[32], line[128];
	pipe_new(&p, "prove_partial");
	ts_exec(p.out, "SELECT outbox.enqueue('t', 'k-' || g, '{}') FROM generate_series(1, 3) g");
	const char *relay[] = { "--source", SOURCE, "--poll-ms", "50", NULL };
	pipe_drain(&p, "*", relay, NULL);
	/* the lowest message gone, as a truncated slot's are */
	query_text(p.out, "SELECT min(id) FROM outbox.events", first, sizeof first);
	ts_exec(p.out, "DELETE FROM outbox.events WHERE id = (SELECT min(id) FROM outbox.events)");
	int code = prove(&p, out, "--source", SOURCE, NULL);
	ck_assert_msg(code == 0, "exit %d:\n%s", code, out);
	assert_has(out, class_line(line, sizeof line, "committed", 2, ""));
	ck_assert_msg(strstr(out, "the verdict is partial") != NULL, "%s", out);
	snprintf(line, sizeof line, "(1 inbox identity below id %lld left out of phantom)",
	    atoll(first) + 1);
	assert_has(out, line);
	int c2;
	json_t *j = prove_json(&p, &c2, "--source", SOURCE, NULL);
	ck_assert(json_is_true(json_object_get(j, "partial")));
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "oldest_retained"),
	    "id")), atoll(first) + 1);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "unjudged")), 1);
	ck_assert_int_eq(count_of(j, "phantom"), 0);
	json_decref(j);
	/* a window that starts after the oldest message is whole (and empty) */
	struct pipe later = p;
	query_text(p.out, "SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')",
	    later.since, sizeof later.since);
	code = prove(&later, out, "--source", SOURCE, NULL);
	ck_assert_msg(code == 0, "exit %d:\n%s", code, out);
	ck_assert_msg(strstr(out, "partial") == NULL, "%s", out);
	assert_has(out, class_line(line, sizeof line, "committed", 0, ""));
	/* every slot truncated (a short --retention): nothing is left to judge
	 * the inbox by, and nothing is a phantom (every applied message was
	 * one before: 3 of 3 here; test_chaos found prove calling them all
	 * phantoms) */
	ts_exec(p.out, "TRUNCATE outbox.events");
	code = prove(&p, out, "--source", SOURCE, NULL);
	ck_assert_msg(code == 0, "exit %d:\n%s", code, out);
	assert_has(out, class_line(line, sizeof line, "phantom", 0, ""));
	assert_has(out, "the outbox holds no message any more");
	assert_has(out, "(3 inbox identities left out of phantom)");
	pipe_free(&p);
}
END_TEST

/* --- bad input: exit 2, one line --------------------------------------- */

static void
assert_one_line(const char *out, const char *needle)
{
	ck_assert_msg(strstr(out, needle) != NULL, "want '%s' in: %s", needle, out);
	size_t n = strlen(out);
	ck_assert_msg(n > 0 && out[n - 1] == '\n' && strchr(out, '\n') == out + n - 1,
	    "not one line: %s", out);
}

START_TEST(test_bad_input)
{
	struct pipe p;
	static char out[TEXT_MAX];
	char db[TS_CONNINFO_MAX];
	pipe_new(&p, "prove_bad");
	const char *bad_since[] = { "yesterday", "2025-13-01", "2025-02-30", "10", "2025-01-31T25:00",
		"2025-01-31T12:00:00+2", "-5m", "", NULL };
	for (int i = 0; bad_since[i] != NULL; i++) {
		struct pipe q = p;
		snprintf(q.since, sizeof q.since, "%s", bad_since[i]);
		int code = prove(&q, out, NULL);
		ck_assert_msg(code == 2, "--since '%s': exit %d: %s", bad_since[i], code, out);
		assert_one_line(out, "outboxctl prove: --since '");
	}
	/* the forms it takes, resolved to UTC */
	const struct { const char *in, *want; } good[] = {
		{ "2025-01-31", "2025-01-31T00:00:00.000000Z" },
		{ "2025-01-31T12:00:00Z", "2025-01-31T12:00:00.000000Z" },
		{ "2025-01-31 12:00:00.5+02:00", "2025-01-31T10:00:00.500000Z" },
		{ "2025-01-31T12:00-0530", "2025-01-31T17:30:00.000000Z" },
		{ "2024-02-29T23:59:59.1234567", "2024-02-29T23:59:59.123456Z" },
	};
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		struct pipe q = p;
		char want[128];
		snprintf(q.since, sizeof q.since, "%s", good[i].in);
		int code = prove(&q, out, NULL);
		ck_assert_msg(code == 0, "--since '%s': exit %d: %s", good[i].in, code, out);
		snprintf(want, sizeof want, "created at or after %s, source ''", good[i].want);
		ck_assert_msg(strstr(out, want) != NULL, "--since '%s': want %s in %s", good[i].in, want,
		    out);
	}
	/* an age, before the database's clock */
	struct pipe q = p;
	snprintf(q.since, sizeof q.since, "10m");
	ck_assert_int_eq(prove(&q, out, NULL), 0);
	ck_assert_msg(strstr(out, "prove: messages created at or after 20") != NULL, "%s", out);

	ck_assert_int_eq(prove(&p, out, "--source", "a/b", NULL), 2);
	assert_one_line(out, "outboxctl prove: --source 'a/b': must be 1..63 bytes");
	ck_assert_int_eq(prove(&p, out, "--source", "x", "--derived-source", NULL), 2);
	assert_one_line(out, "--source and --derived-source exclude each other");
	ck_assert_int_eq(prove(&p, out, "--max-ids", "-1", NULL), 2);
	assert_one_line(out, "--max-ids");
	ck_assert_int_eq(prove(&p, out, "stray", NULL), 2);
	assert_one_line(out, "outboxctl prove: unexpected argument 'stray'");
	char *no_inbox[] = { "outboxctl", "prove", "--db", p.out_db, "--since", "1h", NULL };
	ck_assert_int_eq(ts_run(no_inbox, NULL, out, sizeof out, RUN_TIMEOUT_MS), 2);
	ck_assert_msg(strstr(out, "--inbox-db") != NULL, "%s", out);

	/* a database that cannot be reached, or that is not what it should be */
	struct pipe r = p;
	snprintf(r.in_db, sizeof r.in_db, "host=/nonexistent/socket port=1 dbname=nothing");
	ck_assert_int_eq(prove(&r, out, NULL), 2);
	assert_one_line(out, "outboxctl prove: inbox: connect to '");
	r = p;
	snprintf(r.out_db, sizeof r.out_db, "host=/nonexistent/socket port=1 dbname=nothing");
	ck_assert_int_eq(prove(&r, out, NULL), 2);
	assert_one_line(out, "outboxctl prove: connect to '");
	r = p;
	snprintf(r.in_db, sizeof r.in_db, "%s", p.out_db); /* the outbox as the inbox */
	ck_assert_int_eq(prove(&r, out, NULL), 2);
	assert_one_line(out, "outboxctl prove: inbox: ");
	ts_db_create("prove_bare", NULL, db, sizeof db);
	r = p;
	snprintf(r.out_db, sizeof r.out_db, "%s", db); /* no schema at all */
	ck_assert_int_eq(prove(&r, out, NULL), 2);
	assert_one_line(out, "outboxctl prove: ");
	pipe_free(&p);
}
END_TEST

static Suite *
prove_suite(void)
{
	Suite *s = suite_create("prove");
	/* CK_RUN_CASE=broken runs one of them */
	TCase *input = tcase_create("input");
	tcase_add_test(input, test_bad_input);
	tcase_set_timeout(input, 120);
	suite_add_tcase(s, input);
	TCase *crafted = tcase_create("crafted");
	tcase_add_test(crafted, test_crafted_classes);
	tcase_add_test(crafted, test_partial_window);
	tcase_set_timeout(crafted, 240);
	suite_add_tcase(s, crafted);
	TCase *broken = tcase_create("broken");
	tcase_add_test(broken, test_duplicated_broken_then_real);
	tcase_add_test(broken, test_out_of_order_broken_then_real);
	tcase_set_timeout(broken, 240);
	suite_add_tcase(s, broken);
	TCase *clean = tcase_create("clean");
	tcase_add_test(clean, test_clean_run);
	tcase_set_timeout(clean, 480);
	suite_add_tcase(s, clean);
	return s;
}

int
main(void)
{
	return ts_run_suite(prove_suite());
}
