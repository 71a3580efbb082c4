/*
 * test_producer_matrix.c - the first article's fault matrix, cell for cell.
 *
 * Runs `outbox-producer matrix` (real servers, the real client, real
 * PostgreSQL) on a fresh database, then counts each cell's business rows in
 * app.bug_reports itself and compares them with the article's table, typed
 * in here independently of the program's own copy.
 *
 * Then single cells with --cell --events, inside and outside the article's
 * rows: the JSON lines parsed, each attempt's outcome, key and the rows it
 * reports, the server's crash and restart, and every count the program
 * reports against the one this test reads from the database itself. A bad
 * --cell exits 2 with one line and writes nothing.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

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

/* Run `outbox-producer matrix --db db --run-id e` and args (NULL-ended):
 * its stdout into *out and its stderr into *err (malloc'ed, free()). The
 * exit code. */
static int
run_matrix(const char *db, char *const args[], char **out, char **err)
{
	static int n;
	char self[512], outp[300], errp[300];
	char *argv[16] = { self, "matrix", "--db", (char *)db, "--run-id", "e" };
	int argc = 6;
	snprintf(self, sizeof(self), "%s/outbox-producer", getenv("OUTBOX_BIN_DIR"));
	for (int i = 0; args[i] != NULL && argc < 15; i++)
		argv[argc++] = args[i];
	argv[argc] = NULL;
	snprintf(outp, sizeof(outp), "%s/matrix-cell-%d.out", ts_tmpdir(), ++n);
	snprintf(errp, sizeof(errp), "%s/matrix-cell-%d.err", ts_tmpdir(), n);
	fflush(NULL);
	pid_t pid = fork();
	ck_assert(pid >= 0);
	if (pid == 0) {
		int fo = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fo < 0 || fe < 0)
			_exit(126);
		dup2(fo, 1);
		dup2(fe, 2);
		execv(self, argv);
		_exit(127);
	}
	int code = ts_wait_exit(pid, 120000);
	if (code < 0)
		ts_stop(pid, SIGKILL);
	*out = ts_read_file(outp);
	*err = ts_read_file(errp);
	ck_assert(*out != NULL && *err != NULL);
	return code;
}

/* stdout of --events as an array of the objects, each line checked: one
 * JSON object with an "event", "seq" 1, 2, 3 ...; the first a "cell", the
 * last a "result". */
static json_t *
events_of(const char *out)
{
	json_t *all = json_array();
	int64_t seq = 0;
	for (const char *p = out; *p != '\0';) {
		size_t len = strcspn(p, "\n");
		ck_assert_msg(p[len] == '\n', "an unfinished line: %s", p);
		json_error_t je;
		json_t *o = json_loadb(p, len, 0, &je);
		ck_assert_msg(json_is_object(o), "not a JSON object: %.*s (%s)", (int)len, p, je.text);
		ck_assert(json_string_value(json_object_get(o, "event")) != NULL);
		ck_assert_int_eq(json_integer_value(json_object_get(o, "seq")), ++seq);
		json_array_append_new(all, o);
		p += len + 1;
	}
	ck_assert_int_ge(json_array_size(all), 2);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(all, 0), "event")), "cell");
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(all,
	    json_array_size(all) - 1), "event")), "result");
	return all;
}

/* The events named name, in order (a new array). */
static json_t *
only(json_t *all, const char *name)
{
	json_t *out = json_array(), *o;
	size_t i;
	json_array_foreach(all, i, o)
		if (strcmp(json_string_value(json_object_get(o, "event")), name) == 0)
			json_array_append(out, o);
	return out;
}

static const char *
str(json_t *o, const char *member)
{
	return json_string_value(json_object_get(o, member));
}

static int64_t
num(json_t *o, const char *member)
{
	ck_assert_msg(json_is_integer(json_object_get(o, member)), "%s is not a number", member);
	return json_integer_value(json_object_get(o, member));
}

/* The sum of the "id" members of an array of rows. */
static int64_t
id_sum(json_t *rows)
{
	int64_t sum = 0;
	size_t i;
	json_t *r;
	json_array_foreach(rows, i, r)
		sum += num(r, "id");
	return sum;
}

/* Play one cell with --events; check what every run must show and return
 * the events (decref). The result and the last attempt's reports against
 * the cell's rows as this test counts them; the cell line as asked;
 * want_article: the article's count, -1 for null. */
static json_t *
play(PGconn *c, const char *db, const char *cell, int want_article)
{
	char sql[512], want_run[256], *out, *err;
	char *args[] = { "--cell", (char *)cell, "--events", NULL };
	int64_t t0 = ts_now_ms();
	int code = run_matrix(db, args, &out, &err);
	fprintf(stderr, "--cell %s --events: exit %d in %lld ms\n%s%s", cell, code,
	    (long long)(ts_now_ms() - t0), out, err);
	ck_assert_int_eq(code, 0);
	json_t *all = events_of(out);
	json_t *head = json_array_get(all, 0);
	json_t *result = json_array_get(all, json_array_size(all) - 1);
	char f[64], s[64], k[64];
	ck_assert_int_eq(sscanf(cell, "%63[^,],%63[^,],%63s", f, s, k), 3);
	ck_assert_str_eq(str(head, "fault"), f);
	ck_assert_str_eq(str(head, "server"), s);
	ck_assert_str_eq(str(head, "keys"), k);
	snprintf(want_run, sizeof(want_run), "e-%s-%s-%s", f, s, k);
	ck_assert_str_eq(str(head, "run"), want_run);
	const char *module = str(head, "module");
	ck_assert(module != NULL && strncmp(module, "matrix-", 7) == 0);
	if (want_article < 0) {
		ck_assert(json_is_null(json_object_get(head, "article")));
		ck_assert(json_is_null(json_object_get(result, "article")));
	} else {
		ck_assert_int_eq(num(head, "article"), want_article);
		ck_assert_int_eq(num(result, "article"), want_article);
	}
	/* what the database holds for the cell, read here */
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM app.bug_reports WHERE module = '%s'",
	    module);
	int64_t count = ts_query_int(c, sql);
	snprintf(sql, sizeof(sql),
	    "SELECT coalesce(sum(id), 0) FROM app.bug_reports WHERE module = '%s'", module);
	int64_t ids = ts_query_int(c, sql);
	ck_assert_int_eq(num(result, "reports"), count);
	json_t *attempts = only(all, "attempt");
	ck_assert_int_ge(json_array_size(attempts), 1);
	json_t *last = json_array_get(attempts, json_array_size(attempts) - 1);
	json_t *reports = json_object_get(last, "reports");
	ck_assert(json_is_array(reports));
	ck_assert_int_eq(json_array_size(reports), count);
	ck_assert_int_eq(id_sum(reports), ids);
	/* the server started first and stopped last */
	json_t *servers = only(all, "server");
	ck_assert_int_ge(json_array_size(servers), 2);
	ck_assert_str_eq(str(json_array_get(servers, 0), "what"), "started");
	ck_assert_str_eq(str(json_array_get(servers, json_array_size(servers) - 1), "what"),
	    "stopped");
	json_decref(servers);
	json_decref(attempts);
	free(out);
	free(err);
	return all;
}

START_TEST(test_matrix_one_cell_events)
{
	char db[TS_CONNINFO_MAX];
	ts_db_create("prodmatrixcell", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);

	/* key_atomic / tool_call, the response lost: the retry is answered
	 * from the stored response, one report, one key done */
	json_t *all = play(c, db, "lost-response,atomic,tool_call", 1);
	json_t *at = only(all, "attempt");
	ck_assert_int_eq(json_array_size(at), 2);
	json_t *a1 = json_array_get(at, 0), *a2 = json_array_get(at, 1);
	ck_assert_str_eq(str(a1, "call"), "A");
	ck_assert_int_eq(num(a1, "attempt"), 1);
	ck_assert_str_eq(str(a1, "outcome"), "lost");
	ck_assert(json_is_null(json_object_get(a1, "status")));
	ck_assert_str_eq(str(a1, "key"), "e-lost-response-atomic-tool_call:toolu_01");
	ck_assert_int_eq(num(a2, "attempt"), 2);
	ck_assert_str_eq(str(a2, "outcome"), "answered");
	ck_assert_int_eq(num(a2, "status"), 201);
	ck_assert(json_is_true(json_object_get(a2, "replayed")));
	ck_assert_str_eq(str(a2, "key"), str(a1, "key"));
	ck_assert_int_eq(json_array_size(json_object_get(a2, "reports")), 1);
	ck_assert_str_eq(str(json_array_get(json_object_get(a2, "reports"), 0), "idempotency_key"),
	    str(a1, "key"));
	json_t *keys = json_object_get(a2, "keys");
	ck_assert_int_eq(json_array_size(keys), 1);
	ck_assert_str_eq(str(json_array_get(keys, 0), "key"), str(a1, "key"));
	ck_assert_str_eq(str(json_array_get(keys, 0), "state"), "done");
	ck_assert_int_eq(num(json_array_get(keys, 0), "response_status"), 201);
	ck_assert_int_eq(num(json_array_get(all, json_array_size(all) - 1), "reports"), 1);
	json_decref(at);
	json_decref(all);

	/* naive / none: no key, the retry makes a second report */
	all = play(c, db, "lost-response,none,none", 2);
	at = only(all, "attempt");
	ck_assert_int_eq(json_array_size(at), 2);
	a1 = json_array_get(at, 0);
	a2 = json_array_get(at, 1);
	ck_assert_str_eq(str(a1, "outcome"), "lost");
	ck_assert_int_eq(num(a2, "status"), 201);
	ck_assert(json_is_false(json_object_get(a2, "replayed")));
	ck_assert(json_is_null(json_object_get(a1, "key")));
	ck_assert(json_is_null(json_object_get(a2, "key")));
	ck_assert_int_eq(json_array_size(json_object_get(a1, "reports")), 1);
	ck_assert_int_eq(json_array_size(json_object_get(a2, "reports")), 2);
	ck_assert_int_eq(json_array_size(json_object_get(a2, "keys")), 0);
	ck_assert_int_eq(num(json_array_get(all, json_array_size(all) - 1), "reports"), 2);
	json_decref(at);
	json_decref(all);

	/* key_split / tool_call, the server killed between the report and its
	 * key: it is seen to die and comes back, and the retry makes a
	 * second report */
	all = play(c, db, "crash-mid-request,split,tool_call", 2);
	json_t *sv = only(all, "server");
	ck_assert_int_eq(json_array_size(sv), 4);
	const char *order[] = { "started", "crashed", "restarted", "stopped" };
	for (int i = 0; i < 4; i++) {
		ck_assert_str_eq(str(json_array_get(sv, i), "what"), order[i]);
		ck_assert_int_eq(num(json_array_get(sv, i), "port"),
		    num(json_array_get(sv, 0), "port"));
	}
	at = only(all, "attempt");
	ck_assert_str_eq(str(json_array_get(at, 0), "outcome"), "lost");
	ck_assert_int_eq(num(json_array_get(all, json_array_size(all) - 1), "reports"), 2);
	json_decref(at);
	json_decref(sv);
	json_decref(all);

	/* not one of the article's rows: key_split with business keys, the
	 * same call twice at once. Whatever it makes, the program counts what
	 * the database holds (play) */
	all = play(c, db, "concurrent-dup,split,business", -1);
	json_t *calls = only(all, "call");
	ck_assert_int_eq(json_array_size(calls), 2);
	ck_assert_str_eq(str(json_array_get(calls, 0), "call"), "A");
	ck_assert_str_eq(str(json_array_get(calls, 1), "call"), "B");
	ck_assert_str_eq(str(json_array_get(calls, 1), "tool_use_id"), "toolu_01");
	at = only(all, "attempt");
	size_t i;
	json_t *a;
	json_array_foreach(at, i, a)
		ck_assert(strncmp(str(a, "key"), "content-", 8) == 0);
	json_decref(at);
	json_decref(calls);
	json_decref(all);
	PQfinish(c);
}
END_TEST

/* A bad --cell: exit 2, one line naming the allowed values, nothing run
 * (no output, no row). */
START_TEST(test_matrix_bad_cell)
{
	char db[TS_CONNINFO_MAX], *out, *err;
	ts_db_create("prodmatrixbad", "outbox", db, sizeof(db));
	PGconn *c = ts_connect(db);
	const char *sql = "SELECT (SELECT count(*) FROM app.bug_reports)"
	                  " + (SELECT count(*) FROM app.idempotency_keys)";
	int64_t before = ts_query_int(c, sql);
	const char *bad[] = { "lost-response,atomic", "lost-response,atomix,tool_call",
		"lost,atomic,tool_call", "lost-response,atomic,tool-call", "", "a,b,c,d", NULL };
	for (int i = 0; bad[i] != NULL; i++) {
		char *args[] = { "--cell", (char *)bad[i], "--events", NULL };
		int code = run_matrix(db, args, &out, &err);
		fprintf(stderr, "--cell '%s': exit %d: %s", bad[i], code, err);
		ck_assert_int_eq(code, 2);
		ck_assert_str_eq(out, "");
		ck_assert(strchr(err, '\n') != NULL && strchr(err, '\n')[1] == '\0');
		ck_assert(strstr(err, "lost-response|crash-mid-request|concurrent-dup|"
		    "new-tool-call-id|reworded-title") != NULL);
		ck_assert(strstr(err, "none|split|atomic") != NULL);
		ck_assert(strstr(err, "none|per_attempt|tool_call|business") != NULL);
		free(out);
		free(err);
	}
	ck_assert_int_eq(ts_query_int(c, sql), before);
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
	TCase *one = tcase_create("cell");
	tcase_set_timeout(one, 120);
	tcase_add_test(one, test_matrix_one_cell_events);
	tcase_add_test(one, test_matrix_bad_cell);
	suite_add_tcase(s, one);
	return ts_run_suite(s);
}
