/*
 * purge_cmd.c - `outboxctl purge --older-than D`: drop delivered messages
 * by hand, the way the relays' housekeeping does on its own (ob_housekeep,
 * outbox.housekeep in sql/outbox/functions/housekeep.sql).
 *
 * Delivered messages are never deleted one by one: outbox.events is
 * partitioned into slots and a slot is TRUNCATEd whole, once it has been
 * closed (stopped taking inserts) for longer than D and every message in it
 * is done. So purge is housekeeping passes: the first closes the current
 * slot (a forced switch, when it holds anything), so that what it holds can
 * go once D has passed; each truncates at most the oldest closed slot, and
 * passes go on while one did. A slot that cannot go yet (a message in it
 * not delivered yet, a transaction holding it) stops the run, and the
 * reason is printed. Pending messages keep their slot; dead letters and
 * retries have their own copies (outbox.dead, outbox.retries) and are never
 * touched (dead letters are kept: dead retention 0).
 *
 * How many delivered messages a truncation dropped is counted just before
 * its pass: the slot's rows less those with a dead-letter or retry copy.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"
#include "ctl_rows.h"
#include "ctl_util.h"
#include "outbox/backoff.h"
#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/housekeep.h"
#include "outbox/pg.h"

#define PURGE_BATCH_DEFAULT "1000"
#define PURGE_BATCH_MAX 100000
#define PURGE_OLDER_MIN_MS 1000
#define PURGE_OLDER_MAX_MS (3650LL * 86400 * 1000)
#define PURGE_PASSES_MAX 16    /* more than there are slots: a run always ends */
#define PURGE_BUSY_TRIES 40    /* a relay's pass holds the lock: try again ... */
#define PURGE_BUSY_SLEEP_MS 50 /* ... after a wait drawn from [0, 2x this]: 2 s in all, on average */
#define SLOTS_MAX 64

struct purge_config {
	char *db;
	int64_t older_ms;
	int64_t batch;
	bool dry_run;
	bool json;
};

#define OB_CFG_STRUCT struct purge_config

static const struct ob_cfg_opt ctl_purge_options[] = {
	CTL_OPT_DB(db),
	OB_CFG_OPT("older-than", "OUTBOX_CTL_PURGE_OLDER_THAN", OB_CFG_DURATION, NULL,
	    PURGE_OLDER_MIN_MS, PURGE_OLDER_MAX_MS, NULL, true, older_ms,
	    "delete delivered messages of slots closed longer ago than this (\"7d\", \"36h\")"),
	OB_CFG_OPT("batch", "OUTBOX_CTL_PURGE_BATCH", OB_CFG_INT, PURGE_BATCH_DEFAULT, 1,
	    PURGE_BATCH_MAX, NULL, false, batch,
	    "ignored (kept for existing scripts): messages go a whole slot at a time"),
	OB_CFG_OPT("dry-run", "OUTBOX_CTL_DRY_RUN", OB_CFG_BOOL, "false", 0, 0, NULL, false,
	    dry_run, "only count what would be deleted"),
	CTL_OPT_JSON(json, "text"),
	OB_CFG_END,
};

static const struct ctl_cmd purge_cmd = {
	"purge", "outboxctl purge --db CONNINFO --older-than DURATION [--dry-run] [--json]",
	"Delete delivered messages a whole slot at a time: close the current slot,"
	" then truncate each closed slot once it has been closed longer than"
	" DURATION (so every message in it is older) and every message in it is"
	" done; say why a slot cannot go yet. Pending messages, retries and dead"
	" letters are never deleted.",
	ctl_purge_options, CTL_DB_OUTBOX, NULL,
};

/* The closed slots old enough to go, oldest first, with whether every
 * message in each is done and how many of its messages are delivered
 * (rows without a dead-letter or retry copy). */
static const char candidates_sql[] =
    "SELECT s.slot, outbox.slot_done(s.slot) AS done,"
    " (SELECT count(*) FROM outbox.events e WHERE e.slot = s.slot"
    "   AND NOT EXISTS (SELECT 1 FROM outbox.dead d WHERE d.id = e.id)"
    "   AND NOT EXISTS (SELECT 1 FROM outbox.retries r WHERE r.id = e.id)) AS delivered"
    " FROM outbox.slots s"
    " WHERE s.state = 'closed' AND s.since < now() - $1::bigint * interval '1 millisecond'"
    " ORDER BY s.since";

struct candidates {
	int n;
	int slot[SLOTS_MAX];
	bool done[SLOTS_MAX];
	int64_t delivered[SLOTS_MAX];
};

static int
load_candidates(PGconn *conn, const char *older, struct candidates *c, char *err, size_t errlen)
{
	const char *params[1] = { older };
	PGresult *res = PQexecParams(conn, candidates_sql, 1, NULL, params, NULL, NULL, 0);
	int rc = ob_pg_check(res, PGRES_TUPLES_OK, "purge candidates", err, errlen);

	if (rc == OB_OK) {
		c->n = 0;
		for (int r = 0; r < PQntuples(res) && c->n < SLOTS_MAX; r++, c->n++) {
			c->slot[c->n] = (int)ob_pg_int64(res, r, 0);
			c->done[c->n] = PQgetvalue(res, r, 1)[0] == 't';
			c->delivered[c->n] = ob_pg_int64(res, r, 2);
		}
	}
	PQclear(res);
	return rc;
}

/* The current slot, and whether it holds any message: only then is a
 * switch worth it (each closed slot is held for the retention, and an empty
 * one to switch into must stay). The slot number is a parameter, so the
 * planner prunes the other partitions. */
static int
current_slot(PGconn *conn, int *slot, bool *has_rows, char *err, size_t errlen)
{
	PGresult *res = PQexec(conn, "SELECT slot FROM outbox.slots WHERE state = 'current'");
	int rc = ob_pg_check(res, PGRES_TUPLES_OK, "purge current slot", err, errlen);
	char num[16];

	if (rc == OB_OK && PQntuples(res) != 1) {
		snprintf(err, errlen, "purge: %d current slots", PQntuples(res));
		rc = OB_EDB;
	}
	if (rc != OB_OK) {
		PQclear(res);
		return rc;
	}
	snprintf(num, sizeof num, "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	const char *params[1] = { num };
	res = PQexecParams(conn,
	    "SELECT EXISTS (SELECT 1 FROM outbox.events WHERE slot = $1::smallint)", 1, NULL,
	    params, NULL, NULL, 0);
	rc = ob_pg_check(res, PGRES_TUPLES_OK, "purge current slot", err, errlen);
	if (rc == OB_OK) {
		*slot = atoi(num);
		*has_rows = PQntuples(res) == 1 && PQgetvalue(res, 0, 0)[0] == 't';
	}
	PQclear(res);
	return rc;
}

/* One pass; another process's pass (a relay's) holds the advisory lock for
 * a moment: wait for it a little. hk->ran false: it never let go. */
static int
pass(PGconn *conn, int64_t older_ms, bool force, struct ob_housekeep *hk, char *err,
    size_t errlen)
{
	struct ob_backoff busy; /* jittered: two purges waiting do not retry together */
	ob_backoff_init(&busy, PURGE_BUSY_SLEEP_MS, 2 * PURGE_BUSY_SLEEP_MS);
	for (int i = 0; i < PURGE_BUSY_TRIES; i++) {
		if (i > 0)
			ob_sleep_ms(ob_backoff_next(&busy));
		/* 0: dead letters are kept (outboxctl purge never drops them) */
		int rc = ob_housekeep(conn, older_ms, 0, force, hk, err, errlen);
		if (rc != OB_OK || hk->ran)
			return rc;
	}
	return OB_OK;
}

struct purge_result {
	int64_t deleted; /* delivered messages dropped */
	int64_t rows;    /* rows truncated (also those with a dead/retry copy) */
	int64_t slots;   /* slots truncated */
	int closed;      /* the slot this run closed, -1: none */
	int64_t read_again; /* a restore adopted: messages read again; -1: none */
	char waiting[512];
};

static int
purge_dry_run(PGconn *conn, const char *older, struct purge_result *pr, char *err,
    size_t errlen)
{
	struct candidates c;

	if (load_candidates(conn, older, &c, err, errlen) != OB_OK)
		return OB_EDB;
	/* the passes take the oldest first and stop at one that cannot go */
	for (int i = 0; i < c.n; i++) {
		if (!c.done[i]) {
			snprintf(pr->waiting, sizeof pr->waiting, "slot %d has messages not yet done",
			    c.slot[i]);
			break;
		}
		pr->deleted += c.delivered[i];
		pr->slots++;
	}
	return OB_OK;
}

static int
purge_run(PGconn *conn, int64_t older_ms, const char *older, struct purge_result *pr,
    char *err, size_t errlen)
{
	struct candidates c;
	struct ob_housekeep hk;
	bool force;
	int current;

	if (current_slot(conn, &current, &force, err, errlen) != OB_OK)
		return OB_EDB;
	for (int i = 0; i < PURGE_PASSES_MAX; i++) {
		if (load_candidates(conn, older, &c, err, errlen) != OB_OK)
			return OB_EDB;
		if (pass(conn, older_ms, i == 0 && force, &hk, err, errlen) != OB_OK)
			return OB_EDB;
		if (!hk.ran) {
			snprintf(pr->waiting, sizeof pr->waiting,
			    "another process kept the housekeeping lock (a relay's pass): run it again");
			return OB_OK;
		}
		if (hk.switched_to >= 0 && i == 0 && force)
			pr->closed = current;
		if (hk.read_again >= 0)
			pr->read_again = hk.read_again;
		if (hk.waiting[0] != '\0')
			snprintf(pr->waiting, sizeof pr->waiting, "%s", hk.waiting);
		if (hk.truncated_slot < 0)
			return OB_OK;
		for (int k = 0; k < c.n; k++)
			if (c.slot[k] == hk.truncated_slot)
				pr->deleted += c.delivered[k];
		pr->rows += hk.truncated_rows;
		pr->slots++;
	}
	return OB_OK;
}

static int
purge(const struct ctl_cmd *cmd, PGconn *conn, void *arg, char **pos, int npos)
{
	const struct purge_config *cfg = arg;
	struct purge_result pr;
	char err[1024], older[32], age[64];

	memset(&pr, 0, sizeof pr);
	pr.closed = -1;
	pr.read_again = -1;
	snprintf(older, sizeof older, "%" PRId64, cfg->older_ms);
	ctl_fmt_age((double)cfg->older_ms / 1000.0, age, sizeof age);
	if (cfg->dry_run ? purge_dry_run(conn, older, &pr, err, sizeof err) != OB_OK
	                 : purge_run(conn, cfg->older_ms, older, &pr, err, sizeof err) != OB_OK) {
		fprintf(stderr, "outboxctl purge: %s (%" PRId64 " deleted before)\n", err,
		    pr.deleted);
		return CTL_EXIT_FAIL;
	}
	if (cfg->json) {
		json_t *j = json_pack("{sIsIsf}", cfg->dry_run ? "would_delete" : "deleted",
		    (json_int_t)pr.deleted, "slots", (json_int_t)pr.slots, "older_than_seconds",
		    (double)cfg->older_ms / 1000.0);
		if (!cfg->dry_run) {
			json_object_set_new(j, "truncated_rows", json_integer((json_int_t)pr.rows));
			json_object_set_new(j, "closed_slot",
			    pr.closed >= 0 ? json_integer(pr.closed) : json_null());
			json_object_set_new(j, "restore_read_again",
			    pr.read_again >= 0 ? json_integer(pr.read_again) : json_null());
		}
		json_object_set_new(j, "waiting",
		    pr.waiting[0] != '\0' ? json_string(pr.waiting) : json_null());
		ctl_print_json(j, JSON_PRESERVE_ORDER);
		return CTL_EXIT_OK;
	}
	if (cfg->dry_run)
		printf("purge: %" PRId64 " delivered message%s older than %s would be deleted",
		    pr.deleted, pr.deleted == 1 ? "" : "s", age);
	else
		printf("purge: %" PRId64 " delivered message%s older than %s deleted",
		    pr.deleted, pr.deleted == 1 ? "" : "s", age);
	printf(" (%" PRId64 " slot%s)\n", pr.slots, pr.slots == 1 ? "" : "s");
	if (pr.closed >= 0)
		printf("purge: slot %d closed: what it holds can go once it has been closed"
		    " for %s\n", pr.closed, age);
	if (pr.read_again >= 0)
		printf("purge: the outbox was restored from another cluster; adopted: %" PRId64
		    " message%s will be delivered again\n", pr.read_again,
		    pr.read_again == 1 ? "" : "s");
	if (pr.waiting[0] != '\0')
		printf("purge: not yet: %s\n", pr.waiting);
	return CTL_EXIT_OK;
}

int
ctl_purge(int argc, char **argv)
{
	return ctl_run(&purge_cmd, sizeof(struct purge_config), argc, argv, NULL, purge);
}
