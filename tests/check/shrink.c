/*
 * shrink.c - a violating history made short, and written out as a psql
 * script that replays it.
 *
 * Shrinking removes runs of steps (halves, then quarters, down to single
 * steps: delta debugging) and keeps a removal whenever the shorter history,
 * replayed on the reset database, still violates the same invariant. A
 * step that no longer applies (a commit with no transaction open, a record
 * with nothing held) is skipped by the replay, so any subsequence is a
 * history. The script drives one dblink connection per session from one
 * psql, so a statement that waits for a lock waits there too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static bool
same_violation(const struct chk_result *a, const struct chk_result *b)
{
	return a->violated && b->violated && strcmp(a->invariant, b->invariant) == 0;
}

void
chk_shrink(struct chk_db *db, const struct chk_config *cfg, const struct chk_history *h,
    const struct chk_result *first, int64_t budget_ms, struct chk_history *out,
    struct chk_result *last)
{
	struct chk_history cur = { 0 }, cand = { 0 };
	int64_t deadline = chk_now_ms() + budget_ms;
	/* what came after the violating step plays no part */
	size_t keep = first->at_step < h->n ? first->at_step + 1 : h->n;
	for (size_t i = 0; i < keep; i++)
		chk_history_push(&cur, &h->steps[i]);
	*last = *first;
	for (size_t chunk = cur.n / 2; chunk >= 1 && chk_now_ms() < deadline;) {
		bool removed = false;
		for (size_t start = 0; start < cur.n && chk_now_ms() < deadline;) {
			cand.n = 0;
			for (size_t i = 0; i < cur.n; i++)
				if (i < start || i >= start + chunk)
					chk_history_push(&cand, &cur.steps[i]);
			struct chk_result r;
			if (chk_run_seed(db, cfg, &cand, NULL, &r) && same_violation(first, &r)) {
				struct chk_history t = cur;
				cur = cand;
				cand = t;
				*last = r;
				removed = true;
			} else {
				start += chunk;
			}
		}
		if (!removed)
			chunk /= 2;
	}
	chk_history_free(&cand);
	*out = cur;
}

bool
chk_write_script(struct chk_db *db, const struct chk_config *cfg, const struct chk_history *h,
    const char *path, struct chk_result *res)
{
	FILE *f = fopen(path, "w");
	if (f == NULL)
		return false;
	fprintf(f, "-- outbox-check: seed %llu, %zu steps (shrunk), replayed against a reset outbox.\n"
	           "-- Run with psql on the checker's database (it needs the dblink extension):\n"
	           "--   psql -v ON_ERROR_STOP=1 -d '%s' -f %s\n"
	           "-- Each session is a dblink connection; a statement that waits for a lock\n"
	           "-- waits in its connection until the step that lets it go.\n"
	           "-- Lines \"-- = ...\" are what the checker saw at that point.\n\n",
	    (unsigned long long)cfg->seed, h->n, db->conninfo, path);
	fprintf(f, "\\set dsn '%s'\nCREATE EXTENSION IF NOT EXISTS dblink;\n"
	    "CREATE FUNCTION pg_temp.wait_blocked(p int) RETURNS void LANGUAGE plpgsql AS $w$\n"
	    "BEGIN\n"
	    "    WHILE cardinality(pg_blocking_pids(p)) = 0 LOOP\n"
	    "        PERFORM pg_sleep(0.01);\n"
	    "    END LOOP;\n"
	    "END $w$;\n", db->conninfo);
	db->script = f;
	bool ok = chk_run_seed(db, cfg, h, NULL, res);
	db->script = NULL;
	if (res->violated)
		fprintf(f, "\n-- VIOLATION %s at step %zu: %s\n", res->invariant, res->at_step, res->why);
	fclose(f);
	return ok;
}
