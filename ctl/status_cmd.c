/*
 * status_cmd.c - `outboxctl status`: per topic, how many messages are
 * pending, leased, delivered and dead, and how far behind the relays are.
 *
 * Lag is shown two ways. oldest_pending_age: now minus the creation time of
 * the oldest pending message (includes messages waiting for a retry).
 * oldest_claimable_age: now minus the due time of the oldest message a
 * relay could claim right now (pending, due, no live lease); it ignores
 * messages waiting for a retry, so it grows only when relays are not
 * keeping up or not running. Read-only; one statement.
 */
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "ctl.h"
#include "ctl_util.h"
#include "outbox/pg.h"

struct status_config {
	char *db;
	char *topic;
	bool json;
};

const struct ob_cfg_opt ctl_status_options[] = {
	{ "db", "OUTBOX_DB", OB_CFG_STRING, NULL, 0, 0, NULL, true, false,
	    offsetof(struct status_config, db),
	    "PostgreSQL connection string of the producer database (keywords or URI)" },
	{ "topic", "OUTBOX_CTL_TOPIC", OB_CFG_STRING, NULL, 0, 0, NULL, false, false,
	    offsetof(struct status_config, topic), "only this topic" },
	{ "json", "OUTBOX_CTL_JSON", OB_CFG_BOOL, "false", 0, 0, NULL, false, false,
	    offsetof(struct status_config, json), "print JSON instead of a table" },
	OB_CFG_END,
};

static const struct ctl_cmd cmd = {
	"status", "outboxctl status --db CONNINFO [--topic T] [--json]",
	"Per topic: pending (including leased), leased (pending under a live lease),"
	" delivered and dead counts; the age of the oldest pending message and of"
	" the oldest claimable one (pending, due, not leased: ignores messages"
	" waiting for a retry). The last row is the total over all topics.",
	ctl_status_options,
};

/* One row per topic, then the total (is_total). */
static const char status_sql[] =
    "SELECT topic, GROUPING(topic) = 1 AS is_total,"
    " count(*) FILTER (WHERE status = 'pending') AS pending,"
    " count(*) FILTER (WHERE status = 'pending' AND lease_until > now()) AS leased,"
    " count(*) FILTER (WHERE status = 'delivered') AS delivered,"
    " count(*) FILTER (WHERE status = 'dead') AS dead,"
    /* An ordering key whose head is dead and kept (--on-dead-head block). */
    " count(DISTINCT ordering_key) FILTER (WHERE status = 'dead' AND is_head)"
    "   AS blocked_keys,"
    " round(extract(epoch FROM now() - min(created_at)"
    "   FILTER (WHERE status = 'pending'))::numeric, 3) AS oldest_pending_age_seconds,"
    " round(extract(epoch FROM now() - min(available_at)"
    "   FILTER (WHERE status = 'pending' AND available_at <= now()"
    "           AND (ordering_key IS NULL OR is_head)"
    "           AND (lease_until IS NULL OR lease_until <= now())))::numeric, 3)"
    "   AS oldest_claimable_age_seconds"
    " FROM outbox.messages WHERE $1::text IS NULL OR topic = $1"
    " GROUP BY GROUPING SETS ((topic), ())";

#define STATUS_COLS "pending, leased, delivered, dead, blocked_keys, oldest_pending_age_seconds," \
	" oldest_claimable_age_seconds"
/* --json: {"topics": [...], "total": {...}} is built from these rows */
static const char json_sql[] = "SELECT topic, is_total, " STATUS_COLS
    " FROM (%s) s ORDER BY is_total, topic";
/* table: the total row is named */
static const char table_sql[] = "SELECT CASE WHEN is_total THEN '(total)' ELSE topic END"
    " AS topic, " STATUS_COLS " FROM (%s) s ORDER BY is_total, s.topic";

int
ctl_status(int argc, char **argv)
{
	struct status_config cfg;
	char **pos = NULL, err[1024];
	int npos, code;
	PGconn *conn = NULL;
	PGresult *res = NULL;

	if ((code = ctl_parse(&cmd, &cfg, argc, argv, &pos, &npos)) >= 0)
		goto out;
	code = CTL_EXIT_USAGE;
	if (npos > 0) {
		fprintf(stderr, "outboxctl status: unexpected argument '%s'\n", pos[0]);
		goto out;
	}
	code = CTL_EXIT_FAIL;
	if ((conn = ctl_connect(&cmd, cfg.db)) == NULL)
		goto out;
	const char *params[1] = { cfg.topic };
	char sql[sizeof status_sql + sizeof table_sql + sizeof json_sql];
	snprintf(sql, sizeof sql, cfg.json ? json_sql : table_sql, status_sql);
	res = PQexecParams(conn, sql, 1, NULL, params, NULL, NULL, 0);
	if (ob_pg_check(res, PGRES_TUPLES_OK, "status", err, sizeof err) != 0) {
		fprintf(stderr, "outboxctl status: %s\n", err);
		goto out;
	}
	if (cfg.json) {
		/* {"topics": [...], "total": {...}} */
		json_t *topics = json_array(), *total = NULL, *root = json_object();
		for (int r = 0; r < PQntuples(res); r++) {
			json_t *o = json_object();
			for (int c = 0; c < PQnfields(res); c++)
				if (c != 1)
					json_object_set_new(o, PQfname(res, c), ctl_json_cell(res, r, c));
			if (PQgetvalue(res, r, 1)[0] == 't') {
				json_object_del(o, "topic");
				total = o;
			} else {
				json_array_append_new(topics, o);
			}
		}
		json_object_set_new(root, "topics", topics);
		json_object_set_new(root, "total", total ? total : json_null());
		json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		fputc('\n', stdout);
		json_decref(root);
	} else {
		ctl_print_table(res, false, NULL);
	}
	code = CTL_EXIT_OK;
out:
	PQclear(res);
	if (conn != NULL)
		PQfinish(conn);
	free(pos);
	ob_cfg_free(ctl_status_options, &cfg);
	return code;
}
