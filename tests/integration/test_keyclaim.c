/*
 * test_keyclaim.c - the idempotency-key state machine shared by the
 * producer's HTTP API and the consumer's webhook handler, against a real
 * PostgreSQL: claim, busy, replay, mismatch, takeover after the lease, the
 * stale holder fenced out, release, garbage collection, and the parked
 * state (park, resolve as sent / not sent; a takeover says whether its
 * holder expired or released); the webhook's claims (a created_at floor,
 * a durable commit).
 */
#include <string.h>
#include <unistd.h>

#include "outbox/err.h"
#include "outbox/keyclaim.h"
#include "testsupport.h"

#define TABLE "keys_under_test"

static const char create_sql[] =
    "CREATE TABLE " TABLE " ("
    " idempotency_key text PRIMARY KEY, fingerprint text NOT NULL,"
    " state text NOT NULL CHECK (state IN ('started', 'done', 'unknown')),"
    " fence bigint NOT NULL, lease_until timestamptz NOT NULL,"
    " response_status integer, response_body text,"
    " created_at timestamptz NOT NULL DEFAULT now(), completed_at timestamptz,"
    " topic text, parked_at timestamptz, parked_error text)";

static PGconn *
fresh(void)
{
	char db[TS_CONNINFO_MAX];
	ts_db_create("keyclaim", NULL, db, sizeof(db));
	PGconn *c = ts_connect(db);
	ts_exec(c, create_sql);
	return c;
}

static struct ob_key_claim
claim(PGconn *c, const char *key, const char *fp, int64_t lease_ms)
{
	struct ob_key_claim r;
	char err[512];
	ck_assert_msg(ob_keyclaim_claim(c, TABLE, key, fp, strlen(fp), lease_ms, &r, err,
	                  sizeof(err)) == OB_OK, "%s", err);
	return r;
}

START_TEST(test_decide_table)
{
	/* ob_key_decide's whole rule (keyclaim.h), every combination */
	static const struct {
		enum ob_key_state state;
		bool fp, live, released;
		enum ob_key_verdict want;
	} cases[] = {
		{ OB_KEY_ABSENT, true, false, false, OB_KEY_PROCEED },
		{ OB_KEY_ABSENT, false, true, false, OB_KEY_PROCEED },
		{ OB_KEY_STARTED, true, true, false, OB_KEY_BUSY },
		{ OB_KEY_STARTED, true, false, false, OB_KEY_PROCEED },
		{ OB_KEY_STARTED, false, true, false, OB_KEY_MISMATCH },
		{ OB_KEY_STARTED, false, false, false, OB_KEY_MISMATCH },
		/* released: free for any body */
		{ OB_KEY_STARTED, true, false, true, OB_KEY_PROCEED },
		{ OB_KEY_STARTED, false, false, true, OB_KEY_PROCEED },
		{ OB_KEY_DONE, true, false, false, OB_KEY_REPLAY },
		{ OB_KEY_DONE, true, true, false, OB_KEY_REPLAY },
		{ OB_KEY_DONE, false, false, false, OB_KEY_MISMATCH },
		/* parked: nobody takes it, whatever else holds */
		{ OB_KEY_UNKNOWN, true, true, false, OB_KEY_PARKED },
		{ OB_KEY_UNKNOWN, false, false, true, OB_KEY_PARKED },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ob_key_row row = { cases[i].state, cases[i].fp, cases[i].live,
			cases[i].released };
		ck_assert_msg(ob_key_decide(&row) == cases[i].want, "case %zu: got %s", i,
		    ob_key_verdict_name(ob_key_decide(&row)));
	}
	ck_assert_str_eq(ob_key_verdict_name(OB_KEY_BUSY), "busy");
	ck_assert_str_eq(ob_key_state_name(OB_KEY_DONE), "done");
	ck_assert_str_eq(ob_key_state_name(OB_KEY_UNKNOWN), "unknown");
	ck_assert_str_eq(ob_key_verdict_name(OB_KEY_PARKED), "parked");
}
END_TEST

START_TEST(test_claim_busy_complete_replay_mismatch)
{
	PGconn *c = fresh();
	char err[512];
	struct ob_key_claim a = claim(c, "k1", "body-1", 60000);
	ck_assert_int_eq(a.verdict, OB_KEY_PROCEED);
	ck_assert_int_eq(a.fence, 1);
	ck_assert(!a.takeover);

	struct ob_key_claim b = claim(c, "k1", "body-1", 60000);
	ck_assert_int_eq(b.verdict, OB_KEY_BUSY);
	ck_assert_int_gt(b.retry_after_ms, 50000);

	struct ob_key_claim m = claim(c, "k1", "body-2", 60000);
	ck_assert_int_eq(m.verdict, OB_KEY_MISMATCH);

	ck_assert_int_eq(ob_keyclaim_complete(c, TABLE, "k1", a.fence, 201, "{\"report_id\":7}",
	                     err, sizeof(err)), OB_OK);
	struct ob_key_claim r = claim(c, "k1", "body-1", 60000);
	ck_assert_int_eq(r.verdict, OB_KEY_REPLAY);
	ck_assert_int_eq(r.response_status, 201);
	ck_assert_str_eq(r.response_body, "{\"report_id\":7}");
	ob_keyclaim_result_fini(&r);

	struct ob_key_claim m2 = claim(c, "k1", "body-2", 60000);
	ck_assert_int_eq(m2.verdict, OB_KEY_MISMATCH);
	/* A second completion is refused: the key is no longer STARTED. */
	ck_assert_int_eq(ob_keyclaim_complete(c, TABLE, "k1", a.fence, 500, NULL, err,
	                     sizeof(err)), OB_EFENCED);
	ck_assert_int_eq(ts_query_int(c, "SELECT response_status FROM " TABLE), 201);
	PQfinish(c);
}
END_TEST

START_TEST(test_takeover_fences_out_stale_holder)
{
	PGconn *c = fresh();
	char err[512];
	struct ob_key_claim first = claim(c, "k", "fp", 200);
	ck_assert_int_eq(first.verdict, OB_KEY_PROCEED);
	/* Within the lease: busy. */
	ck_assert_int_eq(claim(c, "k", "fp", 200).verdict, OB_KEY_BUSY);
	/* Past the lease the key is taken over with the token bumped. */
	usleep(400 * 1000);
	struct ob_key_claim second = claim(c, "k", "fp", 60000);
	ck_assert_int_eq(second.verdict, OB_KEY_PROCEED);
	ck_assert_int_eq(second.fence, 2);
	ck_assert(second.takeover);
	/* The stale holder wakes up: its completion is fenced out. */
	ck_assert_int_eq(ob_keyclaim_complete(c, TABLE, "k", first.fence, 201, "stale", err,
	                     sizeof(err)), OB_EFENCED);
	ck_assert_msg(strstr(err, "fenced out") != NULL, "%s", err);
	ck_assert_int_eq(ob_keyclaim_complete(c, TABLE, "k", second.fence, 201, "winner", err,
	                     sizeof(err)), OB_OK);
	struct ob_key_claim r = claim(c, "k", "fp", 60000);
	ck_assert_int_eq(r.verdict, OB_KEY_REPLAY);
	ck_assert_str_eq(r.response_body, "winner");
	ob_keyclaim_result_fini(&r);
	/* A different body cannot take over an expired key either. */
	/* A takeover, then a release, then a new claim: the stale first holder
	 * must not get its token back (tokens never repeat). */
	struct ob_key_claim s1 = claim(c, "cycle", "fp", 100);
	usleep(250 * 1000);
	struct ob_key_claim s2 = claim(c, "cycle", "fp", 60000);
	ck_assert_int_eq(s2.verdict, OB_KEY_PROCEED);
	ck_assert_int_eq(ob_keyclaim_release(c, TABLE, "cycle", s2.fence, err, sizeof(err)), OB_OK);
	struct ob_key_claim s3 = claim(c, "cycle", "fp", 60000);
	ck_assert_int_eq(s3.verdict, OB_KEY_PROCEED);
	ck_assert_int_ne(s3.fence, s1.fence);
	ck_assert_int_eq(ob_keyclaim_complete(c, TABLE, "cycle", s1.fence, 201, "stale", err,
	                     sizeof(err)), OB_EFENCED);
	struct ob_key_claim x = claim(c, "other", "fp", 1);
	ck_assert_int_eq(x.verdict, OB_KEY_PROCEED);
	usleep(50 * 1000);
	ck_assert_int_eq(claim(c, "other", "different", 1000).verdict, OB_KEY_MISMATCH);
	PQfinish(c);
}
END_TEST

/* A key stored DONE without a claim (the producer's split mode): replayed
 * like any done key; a second record writes nothing. */
START_TEST(test_record_done_without_claim)
{
	PGconn *c = fresh();
	char err[512];
	ck_assert_int_eq(ob_keyclaim_record_done(c, TABLE, "r1", "body", 4, 201, "{\"id\":7}", err,
	    sizeof(err)), OB_OK);
	struct ob_key_claim r = claim(c, "r1", "body", 5000);
	ck_assert_int_eq(r.verdict, OB_KEY_REPLAY);
	ck_assert_int_eq(r.response_status, 201);
	ck_assert_str_eq(r.response_body, "{\"id\":7}");
	ob_keyclaim_result_fini(&r);
	ck_assert_int_eq(ob_keyclaim_record_done(c, TABLE, "r1", "other", 5, 500, "{}", err,
	    sizeof(err)), OB_EEXIST);
	ck_assert_int_eq(ts_query_int(c, "SELECT response_status FROM " TABLE
	    " WHERE idempotency_key = 'r1'"), 201);
	PQfinish(c);
}
END_TEST

START_TEST(test_release_and_gc)
{
	PGconn *c = fresh();
	char err[512];
	struct ob_key_claim a = claim(c, "r", "fp", 60000);
	/* A release with a stale token changes nothing: still busy. */
	ck_assert_int_eq(ob_keyclaim_release(c, TABLE, "r", a.fence + 1, err, sizeof(err)), OB_OK);
	ck_assert_int_eq(claim(c, "r", "fp", 60000).verdict, OB_KEY_BUSY);
	ck_assert_int_eq(ob_keyclaim_release(c, TABLE, "r", a.fence, err, sizeof(err)), OB_OK);
	/* Released: the next request proceeds, even with another body, and
	 * with a NEW token. */
	struct ob_key_claim again = claim(c, "r", "other", 60000);
	ck_assert_int_eq(again.verdict, OB_KEY_PROCEED);
	ck_assert_int_gt(again.fence, a.fence);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM " TABLE), 1);

	struct ob_key_claim d = claim(c, "old-done", "fp", 60000);
	ck_assert_int_eq(ob_keyclaim_complete(c, TABLE, "old-done", d.fence, 201, "x", err,
	                     sizeof(err)), OB_OK);
	claim(c, "old-live", "fp", 3600000);
	ts_exec(c, "UPDATE " TABLE " SET created_at = now() - interval '2 days'"
	           " WHERE idempotency_key IN ('old-done', 'old-live')");
	int64_t deleted = -1;
	ck_assert_int_eq(ob_keyclaim_gc(c, TABLE, 86400000, 100, &deleted, err, sizeof(err)), OB_OK);
	/* The old DONE row goes; the old row still under a live lease stays. */
	ck_assert_int_eq(deleted, 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM " TABLE
	                                 " WHERE idempotency_key = 'old-live'"), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM " TABLE), 2);
	PQfinish(c);
}
END_TEST

/* ob_keyclaim_lookup reads a row without claiming it; ob_keyclaim_expire
 * ends a holder's lease so the same body takes it over at once (another
 * body may not: that is release). */
START_TEST(test_lookup_and_expire)
{
	PGconn *c = fresh();
	char err[512];
	struct ob_key_row row;
	struct ob_key_claim out;
	bool found = true;
	ck_assert_int_eq(ob_keyclaim_lookup(c, TABLE, "k9", &row, &out, &found, err,
	    sizeof(err)), OB_OK);
	ck_assert(!found);
	ck_assert_int_eq(row.state, OB_KEY_ABSENT);

	struct ob_key_claim a = claim(c, "k9", "body-1", 60000);
	ck_assert_int_eq(a.verdict, OB_KEY_PROCEED);
	ck_assert_int_eq(ob_keyclaim_lookup(c, TABLE, "k9", &row, &out, &found, err,
	    sizeof(err)), OB_OK);
	ck_assert(found);
	ck_assert_int_eq(row.state, OB_KEY_STARTED);
	ck_assert(row.lease_live && !row.released);
	ck_assert_int_gt(out.retry_after_ms, 50000);
	ob_keyclaim_result_fini(&out);

	/* a stale token expires nothing */
	ck_assert_int_eq(ob_keyclaim_expire(c, TABLE, "k9", a.fence + 1, err, sizeof(err)), OB_OK);
	ck_assert_int_eq(claim(c, "k9", "body-1", 60000).verdict, OB_KEY_BUSY);
	ck_assert_int_eq(ob_keyclaim_expire(c, TABLE, "k9", a.fence, err, sizeof(err)), OB_OK);
	ck_assert_int_eq(claim(c, "k9", "body-2", 60000).verdict, OB_KEY_MISMATCH);
	struct ob_key_claim b = claim(c, "k9", "body-1", 60000);
	ck_assert_int_eq(b.verdict, OB_KEY_PROCEED);
	ck_assert_int_eq(b.fence, a.fence + 1);
	ck_assert(b.takeover);

	ck_assert_int_eq(ob_keyclaim_complete(c, TABLE, "k9", b.fence, 201, "{\"id\":1}", err,
	    sizeof(err)), OB_OK);
	ck_assert_int_eq(ob_keyclaim_lookup(c, TABLE, "k9", &row, &out, &found, err,
	    sizeof(err)), OB_OK);
	ck_assert_int_eq(row.state, OB_KEY_DONE);
	ck_assert_int_eq(out.verdict, OB_KEY_REPLAY);
	ck_assert_int_eq(out.response_status, 201);
	ck_assert_str_eq(out.response_body, "{\"id\":1}");
	ob_keyclaim_result_fini(&out);
	PQfinish(c);
}
END_TEST

START_TEST(test_park_and_resolve)
{
	PGconn *c = fresh();
	char err[512];
	struct ob_key_claim a = claim(c, "p1", "fp", 60000);
	ck_assert_int_eq(a.verdict, OB_KEY_PROCEED);
	/* Only the holder parks it. */
	ck_assert_int_eq(ob_keyclaim_park(c, TABLE, "p1", 7, "t", "x", err, sizeof(err)),
	    OB_EFENCED);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM " TABLE " WHERE state = 'started'"),
	    1);
	ck_assert_int_eq(ob_keyclaim_park(c, TABLE, "p1", a.fence, "t", "timed out", err,
	    sizeof(err)), OB_OK);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM " TABLE " WHERE state = 'unknown'"
	    " AND topic = 't' AND parked_error = 'timed out' AND parked_at IS NOT NULL"
	    " AND lease_until = 'infinity'"), 1);
	/* Parked: no claim takes it, no completion, expiry or release moves
	 * it, and the GC keeps it however old. */
	ck_assert_int_eq(claim(c, "p1", "fp", 60000).verdict, OB_KEY_PARKED);
	ck_assert_int_eq(claim(c, "p1", "other", 60000).verdict, OB_KEY_PARKED);
	ck_assert_int_eq(ob_keyclaim_complete(c, TABLE, "p1", a.fence, 201, NULL, err,
	    sizeof(err)), OB_EFENCED);
	ck_assert_int_eq(ob_keyclaim_expire(c, TABLE, "p1", a.fence, err, sizeof(err)), OB_OK);
	ck_assert_int_eq(ob_keyclaim_release(c, TABLE, "p1", a.fence, err, sizeof(err)), OB_OK);
	int64_t gone = -1;
	ck_assert_int_eq(ob_keyclaim_gc(c, TABLE, 0, 100, &gone, err, sizeof(err)), OB_OK);
	ck_assert_int_eq(gone, 0);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM " TABLE " WHERE state = 'unknown'"),
	    1);
	/* Resolved as sent: done; a claim replays it (no status, the note). */
	ck_assert_int_eq(ob_keyclaim_resolve(c, TABLE, "p1", "other.topic", true, "note", err,
	    sizeof(err)), OB_EFENCED);
	ck_assert_int_eq(ob_keyclaim_resolve(c, TABLE, "nope", "t", true, "note", err,
	    sizeof(err)), OB_EFENCED);
	ck_assert_int_eq(ob_keyclaim_resolve(c, TABLE, "p1", "t", true, "note", err, sizeof(err)),
	    OB_OK);
	struct ob_key_claim r = claim(c, "p1", "fp", 60000);
	ck_assert_int_eq(r.verdict, OB_KEY_REPLAY);
	ck_assert_int_eq(r.response_status, 0);
	ck_assert_str_eq(r.response_body, "note");
	ob_keyclaim_result_fini(&r);
	ck_assert_int_eq(ob_keyclaim_resolve(c, TABLE, "p1", "t", false, NULL, err, sizeof(err)),
	    OB_EFENCED); /* not parked any more */

	/* Resolved as not sent: released; the next claim does it again. */
	struct ob_key_claim b = claim(c, "p2", "fp", 60000);
	ck_assert_int_eq(ob_keyclaim_park(c, TABLE, "p2", b.fence, "t", NULL, err, sizeof(err)),
	    OB_OK);
	ck_assert_int_eq(ob_keyclaim_resolve(c, TABLE, "p2", "t", false, NULL, err, sizeof(err)),
	    OB_OK);
	struct ob_key_claim b2 = claim(c, "p2", "fp", 60000);
	ck_assert_int_eq(b2.verdict, OB_KEY_PROCEED);
	ck_assert_int_eq(b2.fence, b.fence + 1);
	ck_assert(b2.takeover);
	ck_assert(!b2.expired_holder); /* released, not expired */
	PQfinish(c);
}
END_TEST

START_TEST(test_takeover_says_expired_or_released)
{
	PGconn *c = fresh();
	char err[512];
	/* fresh: no holder before */
	struct ob_key_claim a = claim(c, "e1", "fp", 100);
	ck_assert(!a.takeover);
	ck_assert(!a.expired_holder);
	ck_assert_int_eq(ts_wait_value(c, "SELECT count(*) FROM " TABLE " WHERE idempotency_key ="
	    " 'e1' AND lease_until < clock_timestamp()", 1, 30000), 1);
	struct ob_key_claim b = claim(c, "e1", "fp", 60000);
	ck_assert_int_eq(b.verdict, OB_KEY_PROCEED);
	ck_assert(b.takeover);
	ck_assert(b.expired_holder); /* its lease ran out: it may have worked */
	/* expired at once by its holder (ob_keyclaim_expire): also expired */
	ck_assert_int_eq(ob_keyclaim_expire(c, TABLE, "e1", b.fence, err, sizeof(err)), OB_OK);
	struct ob_key_claim d = claim(c, "e1", "fp", 60000);
	ck_assert(d.takeover && d.expired_holder);
	/* released by its holder: not */
	ck_assert_int_eq(ob_keyclaim_release(c, TABLE, "e1", d.fence, err, sizeof(err)), OB_OK);
	struct ob_key_claim e = claim(c, "e1", "fp", 60000);
	ck_assert(e.takeover);
	ck_assert(!e.expired_holder);
	PQfinish(c);
}
END_TEST

/* ob_keyclaim_claim_with: a floor under a new row's created_at keeps it
 * from the GC until the floor is older than the retention; a durable claim
 * raises synchronous_commit for its own transaction only (the session's
 * setting is unchanged after it; that its commit survives a crash is
 * test_crash's); no options is ob_keyclaim_claim. */
START_TEST(test_claim_with_floor_and_durable)
{
	PGconn *c = fresh();
	char err[512];
	struct ob_key_claim r;
	int64_t now_us = ts_query_int(c, "SELECT (extract(epoch FROM now()) * 1000000)::int8");
	const struct ob_keyclaim_opts ahead = { true, now_us + INT64_C(3600) * 1000000 };
	const struct ob_keyclaim_opts behind = { false, now_us - INT64_C(3600) * 1000000 };
	ts_exec(c, "SET synchronous_commit = off");
	ck_assert_int_eq(ob_keyclaim_claim_with(c, TABLE, "ahead", "fp", 2, 60000, &ahead, &r,
	                     err, sizeof(err)), OB_OK);
	ck_assert_int_eq(r.verdict, OB_KEY_PROCEED);
	ck_assert_int_eq(ob_keyclaim_complete(c, TABLE, "ahead", r.fence, 200, NULL, err,
	                     sizeof(err)), OB_OK);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM pg_settings WHERE"
	                                 " name = 'synchronous_commit' AND setting = 'off'"), 1);
	ck_assert_int_eq(ob_keyclaim_claim_with(c, TABLE, "behind", "fp", 2, 60000, &behind, &r,
	                     err, sizeof(err)), OB_OK);
	ck_assert_int_eq(ob_keyclaim_complete(c, TABLE, "behind", r.fence, 200, NULL, err,
	                     sizeof(err)), OB_OK);
	ck_assert_int_eq(ob_keyclaim_claim_with(c, TABLE, "plain", "fp", 2, 60000, NULL, &r, err,
	                     sizeof(err)), OB_OK);
	ck_assert_int_eq(r.verdict, OB_KEY_PROCEED);
	/* the floor above now() is the row's created_at; below it, now() is */
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM " TABLE " WHERE idempotency_key ="
	                                 " 'ahead' AND created_at > now() + interval '59 minutes'"), 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM " TABLE " WHERE idempotency_key ="
	                                 " 'behind' AND created_at > now() - interval '1 minute'"), 1);
	/* two hours on: the done row of a floor one hour ahead is an hour old,
	 * kept by a retention of 90 minutes; the other done one goes */
	ts_exec(c, "UPDATE " TABLE " SET created_at = created_at - interval '2 hours'");
	int64_t deleted = -1;
	ck_assert_int_eq(ob_keyclaim_gc(c, TABLE, 90 * 60000, 100, &deleted, err, sizeof(err)),
	    OB_OK);
	ck_assert_int_eq(deleted, 1);
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM " TABLE " WHERE idempotency_key ="
	                                 " 'ahead'"), 1);
	/* a replay of a durable claim writes nothing, as any replay */
	ck_assert_int_eq(ob_keyclaim_claim_with(c, TABLE, "ahead", "fp", 2, 60000, &ahead, &r,
	                     err, sizeof(err)), OB_OK);
	ck_assert_int_eq(r.verdict, OB_KEY_REPLAY);
	ob_keyclaim_result_fini(&r);
	PQfinish(c);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("keyclaim");
	TCase *tc = tcase_create("keyclaim");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_decide_table);
	tcase_add_test(tc, test_lookup_and_expire);
	tcase_add_test(tc, test_claim_busy_complete_replay_mismatch);
	tcase_add_test(tc, test_takeover_fences_out_stale_holder);
	tcase_add_test(tc, test_record_done_without_claim);
	tcase_add_test(tc, test_release_and_gc);
	tcase_add_test(tc, test_park_and_resolve);
	tcase_add_test(tc, test_takeover_says_expired_or_released);
	tcase_add_test(tc, test_claim_with_floor_and_durable);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
