/*
 * status_cmd.c - `outboxctl status`: per topic, how many messages are
 * pending, leased, delivered, dead and retrying, and how far behind the
 * relays are. The counts are outbox.topic_stats (sql/outbox/functions/topic_stats.sql).
 *
 * Lag is shown two ways. oldest_pending_age: now minus the creation time of
 * the oldest pending message (not yet delivered: never claimed, in a batch
 * still out, or waiting for a retry). oldest_claimable_age: now minus the
 * time since which the oldest message a relay could claim right now has
 * been claimable (a message never claimed: its creation; a retry: its due
 * time; a batch whose lease ran out: the end of the lease); it ignores
 * messages waiting for a retry or behind an earlier message of their
 * ordering key, so it grows only when relays are not keeping up or not
 * running. Both are NULL ("-") when there is no such message.
 *
 * unclaimed: the pending messages of a topic that no running relay is
 * claiming from: one of its messages has been claimable for over a minute
 * and no relay cut its streams or made, finished or held a batch of it
 * within that minute. A relay leaves a topic that none of its routes
 * matches alone (--unrouted wait, the default), so this is where a topic
 * no relay routes shows (or one whose relays are all stopped); a topic
 * whose consumer is down is still probed, and is not counted. Read-only;
 * one statement (queries.c, shared with the web view).
 */
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#include "ctl.h"
#include "ctl_rows.h"
#include "ctl_util.h"
#include "queries.h"

struct status_config {
	char *db;
	char *topic;
	bool json;
};

#define OB_CFG_STRUCT struct status_config

static const struct ob_cfg_opt ctl_status_options[] = {
	CTL_OPT_DB(db),
	CTL_OPT_TOPIC(topic, "only this topic"),
	CTL_OPT_JSON(json, "a table"),
	OB_CFG_END,
};

static const struct ctl_cmd status_cmd = {
	"status", "outboxctl status --db CONNINFO [--topic T] [--json]",
	"Per topic: pending (not yet delivered: including leased and retrying),"
	" leased (in a batch under a live lease), delivered (still retained), dead,"
	" blocked ordering keys (held by a dead letter), retrying (waiting for or"
	" in a retry); the age of the oldest pending message and of the oldest"
	" claimable one (ignores messages waiting for a retry or behind their"
	" key); unclaimed (the pending messages of a topic no running relay has"
	" claimed from for a minute while one of them was claimable: no relay"
	" routes it, or none runs). The last row is the total over all topics.",
	ctl_status_options, CTL_DB_OUTBOX, NULL,
};

/* retrying and unclaimed come last: scripts that read the table by
 * position keep working */
#define STATUS_COLS "pending, leased, delivered, dead, blocked_keys, oldest_pending_age_seconds," \
	" oldest_claimable_age_seconds, retrying, unclaimed"
/* --json: {"topics": [...], "total": {...}} is built from these rows */
static const char json_sql[] = "SELECT topic, is_total, " STATUS_COLS
    " FROM (%s) s ORDER BY is_total, topic";
/* table: the total row is named */
static const char table_sql[] = "SELECT CASE WHEN is_total THEN '(total)' ELSE topic END"
    " AS topic, " STATUS_COLS " FROM (%s) s ORDER BY is_total, s.topic";

/* {"topics": [...], "total": {...}} from the rows of json_sql */
static void
print_json(const PGresult *res)
{
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
	ctl_print_json(root, CTL_JSON_FLAGS);
}

static int
status(const struct ctl_cmd *cmd, PGconn *conn, void *arg, char **pos, int npos)
{
	const struct status_config *cfg = arg;
	const char *params[1] = { cfg->topic };
	char sql[4096];
	PGresult *res;

	snprintf(sql, sizeof sql, cfg->json ? json_sql : table_sql, ctl_status_sql);
	if ((res = ctl_query(cmd, conn, sql, 1, params)) == NULL)
		return CTL_EXIT_FAIL;
	if (cfg->json)
		print_json(res);
	else
		ctl_print_table(res, false, NULL);
	PQclear(res);
	return CTL_EXIT_OK;
}

int
ctl_status(int argc, char **argv)
{
	return ctl_run(&status_cmd, sizeof(struct status_config), argc, argv, NULL, status);
}
