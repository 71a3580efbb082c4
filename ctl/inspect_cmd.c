/*
 * inspect_cmd.c - `outboxctl inspect --key K [--topic T]`: where one
 * message is, from the outbox.messages view (sql/outbox/functions/messages.sql:
 * derived from the log, its batches, the retries and the dead letters).
 * The state (outbox.message_state): claimable (pending, due, no live
 * lease), leased (in a batch a relay holds under a live lease),
 * waiting_retry (pending, due later: a retry, or a batch released until
 * later), delivered, dead. Read-only.
 */
#include <stddef.h>
#include <stdio.h>

#include "ctl.h"
#include "ctl_rows.h"
#include "ctl_util.h"

struct inspect_config {
	char *db;
	char *key;
	char *topic;
	bool json;
};

#define OB_CFG_STRUCT struct inspect_config

static const struct ob_cfg_opt ctl_inspect_options[] = {
	CTL_OPT_DB(db),
	CTL_OPT_KEY(key, "the message's idempotency key"),
	CTL_OPT_TOPIC(topic,
	    "its topic (a key is unique per topic; without it every topic is searched)"),
	CTL_OPT_JSON(json, "text"),
	OB_CFG_END,
};

static const struct ctl_cmd inspect_cmd = {
	"inspect", "outboxctl inspect --db CONNINFO --key K [--topic T] [--json]",
	"Show where the message with idempotency key K is: state, attempts, fence,"
	" lease owner and expiry, due time, batch, last error.",
	ctl_inspect_options, CTL_DB_OUTBOX, "(use --key)",
};

/* The state is outbox.message_state's (sql/outbox/functions/message_state.sql). */
static const char inspect_sql[] =
    "SELECT id, topic, idempotency_key AS key, outbox.message_state(m) AS state,"
    " attempts, fence, lease_owner, " CTL_SQL_TS("lease_until") ","
    " " CTL_SQL_TS("available_at") ", " CTL_SQL_TS("created_at") ","
    " batch_id, ordering_key, last_error"
    " FROM outbox.messages m WHERE idempotency_key = $1 AND ($2::text IS NULL OR topic = $2)"
    " ORDER BY topic";

static int
inspect(const struct ctl_cmd *cmd, PGconn *conn, void *arg, char **pos, int npos)
{
	const struct inspect_config *cfg = arg;
	const char *params[2] = { cfg->key, cfg->topic };
	PGresult *res;

	if ((res = ctl_query(cmd, conn, inspect_sql, 2, params)) == NULL)
		return CTL_EXIT_FAIL;
	if (PQntuples(res) == 0) {
		char key[CTL_SHOWN_MAX], topic[CTL_SHOWN_MAX];
		fprintf(stderr, "outboxctl inspect: no message with key '%s'%s%s\n",
		    ctl_shown(cfg->key, key, sizeof key), cfg->topic ? " in topic " : "",
		    cfg->topic ? ctl_shown(cfg->topic, topic, sizeof topic) : "");
		PQclear(res);
		return CTL_EXIT_FAIL;
	}
	if (cfg->json) {
		ctl_print_table(res, true, NULL);
	} else {
		for (int r = 0; r < PQntuples(res); r++) {
			if (r > 0)
				printf("\n");
			ctl_print_record(res, r, false);
		}
	}
	PQclear(res);
	return CTL_EXIT_OK;
}

int
ctl_inspect(int argc, char **argv)
{
	return ctl_run(&inspect_cmd, sizeof(struct inspect_config), argc, argv, NULL, inspect);
}
