/*
 * test_producer_matrix.c - the first article's fault matrix, cell for cell.
 *
 * Runs `outbox-producer matrix` (real servers, the real client, real
 * PostgreSQL) on a fresh database, then counts each cell's business rows in
 * app.bug_reports itself and compares them with the article's table, typed
 * in here independently of the program's own copy.
 */
#include <stdio.h>
#include <string.h>

#include "testsupport.h"

static const int article[5][5] = {
	/* lost-response, crash-mid-request, concurrent-dup, new-tool-call-id, reworded-title */
	{ 2, 2, 2, 2, 2 }, /* naive / none */
	{ 2, 1, 2, 2, 2 }, /* key_atomic / per_attempt */
	{ 1, 2, 2, 2, 2 }, /* key_split / tool_call */
	{ 1, 1, 1, 2, 2 }, /* key_atomic / tool_call */
	{ 1, 1, 1, 1, 2 }, /* key_atomic / business (content) */
};

START_TEST(test_matrix_equals_article)
{
	char db[TS_CONNINFO_MAX], out[16384], sql[256];
	ts_db_create("prodmatrix", "outbox", db, sizeof(db));
	char *argv[] = { "outbox-producer", "matrix", "--db", db, "--run-id", "t", NULL };
	int code = ts_run(argv, NULL, out, sizeof(out), 400000);
	fprintf(stderr, "%s\n", out);
	PGconn *c = ts_connect(db);
	int diff = 0;
	for (int r = 0; r < 5; r++) {
		for (int col = 0; col < 5; col++) {
			snprintf(sql, sizeof(sql),
			    "SELECT count(*) FROM app.bug_reports WHERE module = 'matrix-t-r%dc%d'", r + 1,
			    col + 1);
			int64_t got = ts_query_int(c, sql);
			if (got != article[r][col]) {
				fprintf(stderr, "cell r%d c%d: %lld rows, the article says %d\n", r + 1,
				    col + 1, (long long)got, article[r][col]);
				diff++;
			}
		}
	}
	/* Nothing outside the 25 cells. */
	ck_assert_int_eq(ts_query_int(c, "SELECT count(*) FROM app.bug_reports"
	    " WHERE module NOT LIKE 'matrix-t-r_c_'"), 0);
	ck_assert_int_eq(diff, 0);
	ck_assert_int_eq(code, 0);
	ck_assert(strstr(out, "all 25 cells equal the article's table") != NULL);
	PQfinish(c);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("producer_matrix");
	TCase *tc = tcase_create("matrix");
	tcase_set_timeout(tc, 500);
	tcase_add_test(tc, test_matrix_equals_article);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
