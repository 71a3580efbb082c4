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
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "ctl_rows.h"
#include "ctl_util.h"
#include "outbox/pg.h"

struct inspect_config {
	char *db;
	char *key;
	char *topic;
	bool json;
};

#define OB_CFG_STRUCT struct inspect_config

static const struct ob_cfg_opt ctl_inspect_options[] = {
	CTL_OPT_DB(db),
	OB_CFG_OPT("key", "OUTBOX_CTL_KEY", OB_CFG_STRING, NULL, 0, 0, NULL, true, key,
	    "the message's idempotency key"),
	CTL_OPT_TOPIC(topic,
	    "its topic (a key is unique per topic; without it every topic is searched)"),
	CTL_OPT_JSON(json, "text"),
	OB_CFG_END,
};

static const struct ctl_cmd cmd = {
	"inspect", "outboxctl inspect --db CONNINFO --key K [--topic T] [--json]",
	"Show where the message with idempotency key K is: state, attempts, fence,"
	" lease owner and expiry, due time, batch, last error.",
	ctl_inspect_options,
};

#define TS(col) "to_char(" col ", 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') AS " col

/* The state is outbox.message_state's (sql/outbox/functions/message_state.sql). */
static const char inspect_sql[] =
    "SELECT id, topic, idempotency_key AS key, outbox.message_state(m) AS state,"
    " attempts, fence, lease_owner, " TS("lease_until") ", " TS("available_at") ","
    " " TS("created_at") ", batch_id, ordering_key, last_error"
    " FROM outbox.messages m WHERE idempotency_key = $1 AND ($2::text IS NULL OR topic = $2)"
    " ORDER BY topic";

int
ctl_inspect(int argc, char **argv)
{
	struct inspect_config cfg;
	char err[1024];
	int code;
	PGconn *conn = NULL;
	PGresult *res = NULL;

	memset(&cfg, 0, sizeof cfg);
	if ((code = ctl_start(&cmd, &cfg, &cfg.db, argc, argv, "(use --key)", &conn)) >= 0)
		goto out;
	code = CTL_EXIT_FAIL;
	const char *params[2] = { cfg.key, cfg.topic };
	res = PQexecParams(conn, inspect_sql, 2, NULL, params, NULL, NULL, 0);
	if (ob_pg_check(res, PGRES_TUPLES_OK, "inspect", err, sizeof err) != 0) {
		fprintf(stderr, "outboxctl inspect: %s\n", err);
		goto out;
	}
	if (PQntuples(res) == 0) {
		char key[CTL_SHOWN_MAX], topic[CTL_SHOWN_MAX];
		fprintf(stderr, "outboxctl inspect: no message with key '%s'%s%s\n",
		    ctl_shown(cfg.key, key, sizeof key), cfg.topic ? " in topic " : "",
		    cfg.topic ? ctl_shown(cfg.topic, topic, sizeof topic) : "");
		goto out;
	}
	if (cfg.json) {
		ctl_print_table(res, true, NULL);
	} else {
		for (int r = 0; r < PQntuples(res); r++) {
			if (r > 0)
				printf("\n");
			ctl_print_record(res, r, false);
		}
	}
	code = CTL_EXIT_OK;
out:
	PQclear(res);
	if (conn != NULL)
		PQfinish(conn);
	ob_cfg_free(ctl_inspect_options, &cfg);
	return code;
}
