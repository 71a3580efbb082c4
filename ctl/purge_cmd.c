/*
 * purge_cmd.c - `outboxctl purge --older-than D`: delete delivered
 * messages delivered more than D ago, in batches of --batch rows, one short
 * transaction each, so a large purge never holds many locks or one long
 * transaction (which would stop autovacuum and bloat the table). Pending
 * and dead messages are never touched. SKIP LOCKED: rows a relay or another
 * purge holds are left for the next run.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "ctl.h"
#include "ctl_util.h"
#include "outbox/pg.h"

#define PURGE_BATCH_DEFAULT "1000"
#define PURGE_BATCH_MAX 100000
#define PURGE_OLDER_MIN_MS 1000
#define PURGE_OLDER_MAX_MS (3650LL * 86400 * 1000)

struct purge_config {
	char *db;
	int64_t older_ms;
	int64_t batch;
	bool dry_run;
	bool json;
};

const struct ob_cfg_opt ctl_purge_options[] = {
	{ "db", "OUTBOX_DB", OB_CFG_STRING, NULL, 0, 0, NULL, true, false,
	    offsetof(struct purge_config, db),
	    "PostgreSQL connection string of the producer database (keywords or URI)" },
	{ "older-than", "OUTBOX_CTL_PURGE_OLDER_THAN", OB_CFG_DURATION, NULL,
	    PURGE_OLDER_MIN_MS, PURGE_OLDER_MAX_MS, NULL, true, false,
	    offsetof(struct purge_config, older_ms),
	    "delete messages delivered longer ago than this (\"7d\", \"36h\")" },
	{ "batch", "OUTBOX_CTL_PURGE_BATCH", OB_CFG_INT, PURGE_BATCH_DEFAULT, 1, PURGE_BATCH_MAX,
	    NULL, false, false, offsetof(struct purge_config, batch),
	    "rows deleted per transaction" },
	{ "dry-run", "OUTBOX_CTL_DRY_RUN", OB_CFG_BOOL, "false", 0, 0, NULL, false, false,
	    offsetof(struct purge_config, dry_run), "only count what would be deleted" },
	{ "json", "OUTBOX_CTL_JSON", OB_CFG_BOOL, "false", 0, 0, NULL, false, false,
	    offsetof(struct purge_config, json), "print JSON instead of text" },
	OB_CFG_END,
};

static const struct ctl_cmd cmd = {
	"purge", "outboxctl purge --db CONNINFO --older-than DURATION [--batch N] [--dry-run] [--json]",
	"Delete delivered messages delivered longer ago than DURATION, in batches."
	" Pending and dead messages are never deleted.",
	ctl_purge_options,
};

static const char purge_sql[] =
    "WITH doomed AS ("
    "  SELECT id FROM outbox.messages"
    "   WHERE status = 'delivered' AND delivered_at < now() - $1::bigint * interval '1 millisecond'"
    "   ORDER BY delivered_at LIMIT $2::bigint FOR UPDATE SKIP LOCKED)"
    " DELETE FROM outbox.messages m USING doomed WHERE m.id = doomed.id";

static const char count_sql[] =
    "SELECT count(*) FROM outbox.messages"
    " WHERE status = 'delivered' AND delivered_at < now() - $1::bigint * interval '1 millisecond'";

int
ctl_purge(int argc, char **argv)
{
	struct purge_config cfg;
	char **pos = NULL, err[1024], older[32], batch[32], age[64];
	int npos, code;
	PGconn *conn = NULL;
	PGresult *res = NULL;
	int64_t total = 0, batches = 0;

	if ((code = ctl_parse(&cmd, &cfg, argc, argv, &pos, &npos)) >= 0)
		goto out;
	code = CTL_EXIT_USAGE;
	if (npos > 0) {
		fprintf(stderr, "outboxctl purge: unexpected argument '%s'\n", pos[0]);
		goto out;
	}
	code = CTL_EXIT_FAIL;
	if ((conn = ctl_connect(&cmd, cfg.db)) == NULL)
		goto out;
	snprintf(older, sizeof older, "%" PRId64, cfg.older_ms);
	snprintf(batch, sizeof batch, "%" PRId64, cfg.batch);
	ctl_fmt_age((double)cfg.older_ms / 1000.0, age, sizeof age);
	const char *params[2] = { older, batch };
	if (cfg.dry_run) {
		res = PQexecParams(conn, count_sql, 1, NULL, params, NULL, NULL, 0);
		if (ob_pg_check(res, PGRES_TUPLES_OK, "purge count", err, sizeof err) != 0) {
			fprintf(stderr, "outboxctl purge: %s\n", err);
			goto out;
		}
		total = ob_pg_int64(res, 0, 0);
	} else {
		for (;;) {
			res = PQexecParams(conn, purge_sql, 2, NULL, params, NULL, NULL, 0);
			if (ob_pg_check(res, PGRES_COMMAND_OK, "purge", err, sizeof err) != 0) {
				fprintf(stderr, "outboxctl purge: %s (%" PRId64 " deleted before)\n",
				    err, total);
				goto out;
			}
			int64_t n = strtoll(PQcmdTuples(res), NULL, 10);
			PQclear(res);
			res = NULL;
			if (n == 0)
				break;
			total += n;
			batches++;
		}
	}
	if (cfg.json) {
		json_t *j = json_pack("{sIsIsf}", cfg.dry_run ? "would_delete" : "deleted",
		    (json_int_t)total, "batches", (json_int_t)batches, "older_than_seconds",
		    (double)cfg.older_ms / 1000.0);
		json_dumpf(j, stdout, JSON_PRESERVE_ORDER);
		fputc('\n', stdout);
		json_decref(j);
	} else if (cfg.dry_run)
		printf("purge: %" PRId64 " delivered message%s older than %s would be deleted\n",
		    total, total == 1 ? "" : "s", age);
	else
		printf("purge: %" PRId64 " delivered message%s older than %s deleted in %" PRId64
		    " batch%s\n", total, total == 1 ? "" : "s", age, batches,
		    batches == 1 ? "" : "es");
	code = CTL_EXIT_OK;
out:
	PQclear(res);
	if (conn != NULL)
		PQfinish(conn);
	free(pos);
	ob_cfg_free(ctl_purge_options, &cfg);
	return code;
}
