/*
 * dead_cmd.c - `outboxctl dead list|show|requeue`: see dead letters and
 * re-drive them. Dead letters live in outbox.dead, each with its own copy
 * of the message (the table: sql/outbox/012_streams.sql); the status of a message that
 * is not dead comes from the outbox.messages view.
 *
 * The list is list_cmd.c's, as every list's. Requeue (all or nothing; the
 * dedup-retention rule, refused unless --force) is requeue.c's, shared
 * with the web view: this file checks the arguments and prints the
 * outcome.
 */
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#include "ctl.h"
#include "ctl_rows.h"
#include "ctl_util.h"
#include "list_cmd.h"
#include "outbox/err.h"
#include "queries.h"
#include "requeue.h"

#define DEDUP_RETENTION_DEFAULT "7d"
#define DEDUP_RETENTION_MAX (3650LL * 86400 * 1000)

struct dead_config {
	char *db;
	char *topic;
	int64_t retention_ms;
	bool all;
	bool force;
	bool json;
};

#define OB_CFG_STRUCT struct dead_config

static const struct ob_cfg_opt ctl_dead_show_options[] = {
	CTL_OPT_DB(db),
	CTL_OPT_JSON(json, "a table"),
	OB_CFG_END,
};

static const struct ob_cfg_opt ctl_dead_requeue_options[] = {
	CTL_OPT_DB(db),
	OB_CFG_OPT("all", "OUTBOX_CTL_REQUEUE_ALL", OB_CFG_BOOL, "false", 0, 0, NULL, false, all,
	    "requeue every dead message (of --topic)"),
	CTL_OPT_TOPIC(topic, "with --all: only this topic"),
	OB_CFG_OPT("dedup-retention", "OUTBOX_DEDUP_RETENTION", OB_CFG_DURATION,
	    DEDUP_RETENTION_DEFAULT, 1000, DEDUP_RETENTION_MAX, NULL, false, retention_ms,
	    "the consumer's --dedup-retention: older messages are refused"),
	OB_CFG_OPT("force", "OUTBOX_CTL_FORCE", OB_CFG_BOOL, "false", 0, 0, NULL, false, force,
	    "requeue even messages older than the dedup retention"),
	CTL_OPT_JSON(json, "a table"),
	OB_CFG_END,
};

static const struct ctl_list list = {
	{ "dead list", "outboxctl dead list --db CONNINFO [--topic T] [--limit N] [--json]",
	    "List dead-lettered messages, oldest first.", ctl_list_outbox_options, CTL_DB_OUTBOX,
	    NULL },
	ctl_dead_list_sql, "no dead messages",
};
static const struct ctl_cmd show_cmd = {
	"dead show", "outboxctl dead show --db CONNINFO [--json] ID",
	"Show one dead message: payload, attempts, last error, timestamps.",
	ctl_dead_show_options, CTL_DB_OUTBOX, NULL,
};
static const struct ctl_cmd requeue_cmd = {
	"dead requeue",
	"outboxctl dead requeue --db CONNINFO [--force] [--dedup-retention D] (ID... | --all [--topic T])",
	"Put dead messages back to pending, as retries: attempts 0, due now, no"
	" lease, a new fence at their next claim; an ordering key waits behind its"
	" message again. All or nothing: an unknown id, a message that is not dead,"
	" or one created longer ago than the consumer's dedup retention (unless"
	" --force) changes nothing.",
	ctl_dead_requeue_options, CTL_DB_OUTBOX, NULL,
};

/* One dead letter; available_at, lease_until and lease_owner are what the
 * outbox.messages view shows for one (when it died; no lease). */
#define SHOW_SQL(payload) \
	"SELECT id, topic, idempotency_key AS key, 'dead' AS status, attempts, fence," \
	" ordering_key, last_error, " CTL_SQL_TS("created_at") ", " CTL_SQL_TS("died_at") "," \
	" to_char(died_at, 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') AS available_at," \
	" NULL::text AS lease_until, NULL::text AS lease_owner," \
	" round(extract(epoch FROM now() - created_at)::numeric, 3) AS age_seconds," \
	" octet_length(payload::text) AS payload_bytes, " payload " AS payload" \
	" FROM outbox.dead WHERE id = $1::bigint"

static int
dead_show(const struct ctl_cmd *cmd, PGconn *conn, void *arg, char **pos, int npos)
{
	const struct dead_config *cfg = arg;
	char shown[CTL_SHOWN_MAX];
	const char *params[1] = { pos[0] };
	PGresult *res;

	/* a readable payload for people; --json embeds it as JSON */
	res = ctl_query(cmd, conn,
	    cfg->json ? SHOW_SQL("payload") : SHOW_SQL("jsonb_pretty(payload)"), 1, params);
	if (res == NULL)
		return CTL_EXIT_FAIL;
	if (PQntuples(res) == 1) {
		ctl_print_record(res, 0, cfg->json);
		PQclear(res);
		return CTL_EXIT_OK;
	}
	/* not dead: say what it is */
	PQclear(res);
	res = ctl_query(cmd, conn,
	    "SELECT status FROM outbox.messages WHERE id = $1::bigint LIMIT 1", 1, params);
	if (res != NULL && PQntuples(res) == 0)
		fprintf(stderr, "outboxctl dead show: no message with id %s\n", pos[0]);
	else if (res != NULL)
		fprintf(stderr, "outboxctl dead show: message %s is %s, not dead"
		    " (see outboxctl inspect)\n", pos[0],
		    ctl_shown(PQgetvalue(res, 0, 0), shown, sizeof shown));
	PQclear(res);
	return CTL_EXIT_FAIL;
}

/* outboxctl dead requeue: the checks and the change are requeue.c's; this
 * prints what happened, one line per refusal. */
static int
dead_requeue(const struct ctl_cmd *cmd, PGconn *conn, void *arg, char **ids, int nids)
{
	const struct dead_config *cfg = arg;
	struct ctl_requeue_req req = { ids, nids, cfg->all, cfg->topic, cfg->retention_ms,
		cfg->force };
	struct ctl_requeue_result r;
	char err[1024], shown[CTL_SHOWN_MAX];

	if (ctl_requeue(conn, &req, &r, err, sizeof err) != OB_OK) {
		fprintf(stderr, "outboxctl dead requeue: %s\n", err);
		return CTL_EXIT_FAIL;
	}
	int code = CTL_EXIT_OK;
	for (int i = 0; i < r.nrefused; i++)
		fprintf(stderr, "outboxctl dead requeue: %s\n", r.refused[i].reason);
	if (r.nrefused > 0) {
		if (r.checked > 1) /* one refusal: its line said it */
			fprintf(stderr, "outboxctl dead requeue: nothing requeued (%d of %d refused)\n",
			    r.nrefused, r.checked);
		code = CTL_EXIT_FAIL;
	} else if (r.checked == 0) {
		printf("dead requeue: no dead messages%s%s: nothing to do\n",
		    cfg->topic ? " in topic " : "",
		    cfg->topic ? ctl_shown(cfg->topic, shown, sizeof shown) : "");
	} else if (cfg->json) {
		ctl_print_json(json_pack("{si}", "requeued", r.nrequeued), 0);
	} else {
		printf("dead requeue: %d message%s requeued\n", r.nrequeued,
		    r.nrequeued == 1 ? "" : "s");
	}
	ctl_requeue_result_free(&r);
	return code;
}

/* Every positional argument is a message id. */
static bool
ids_check(const struct ctl_cmd *cmd, char *const *pos, int npos)
{
	char shown[CTL_SHOWN_MAX];
	int64_t id;

	for (int i = 0; i < npos; i++) {
		if (!ctl_parse_id(pos[i], &id)) {
			fprintf(stderr, "outboxctl %s: bad id '%s': want a positive integer\n",
			    cmd->name, ctl_shown(pos[i], shown, sizeof shown));
			return false;
		}
	}
	return true;
}

static bool
show_check(const struct ctl_cmd *cmd, const void *arg, char *const *pos, int npos)
{
	if (npos != 1) {
		fprintf(stderr, "outboxctl dead show: want exactly one ID\n");
		return false;
	}
	return ids_check(cmd, pos, npos);
}

static bool
requeue_check(const struct ctl_cmd *cmd, const void *arg, char *const *pos, int npos)
{
	const struct dead_config *cfg = arg;

	if (cfg->all == (npos > 0)) {
		fprintf(stderr, "outboxctl dead requeue: give message IDs or --all\n");
		return false;
	}
	if (!cfg->all && cfg->topic != NULL) {
		fprintf(stderr, "outboxctl dead requeue: --topic goes with --all\n");
		return false;
	}
	return ids_check(cmd, pos, npos);
}

static int
dead_run(const struct ctl_cmd *cmd, int argc, char **argv)
{
	if (cmd == &list.cmd)
		return ctl_list_run(&list, argc, argv);
	if (cmd == &show_cmd)
		return ctl_run(cmd, sizeof(struct dead_config), argc, argv, show_check, dead_show);
	return ctl_run(cmd, sizeof(struct dead_config), argc, argv, requeue_check, dead_requeue);
}

int
ctl_dead(int argc, char **argv)
{
	static const struct ctl_cmd *const cmds[] = { &list.cmd, &show_cmd, &requeue_cmd };

	return ctl_dispatch("dead", cmds, sizeof cmds / sizeof cmds[0], dead_run, argc, argv);
}
