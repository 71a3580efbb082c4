/*
 * webhook_cmd.c - `outboxctl webhook list|resolve`: the consumer's parked
 * webhook calls (the at-most-once mode, consumer/webhook_mode.h), in the
 * INBOX database (--inbox-db), and the operator's verdict on each.
 *
 * A parked call's outcome is unknown: the request may or may not have
 * reached the downstream, which ignores the Idempotency-Key, so the
 * consumer never sends it again by itself; its message was dead-lettered
 * in the outbox with the parked detail. The operator checks downstream,
 * then resolves it:
 *   --as sent      it was applied: the claim is completed, so any
 *                  redelivery is answered duplicate and sends nothing;
 *   --as not-sent  it was not: the claim is released, so the next delivery
 *                  (after `outboxctl dead requeue ID` in the outbox) sends
 *                  it once more.
 * Resolve is all or nothing: the claim is locked and checked (exists, is of
 * that topic, is parked) in one transaction before it changes; the change
 * itself is common/keyclaim.c's (the one writer of inbox.webhook_calls).
 */
#include <inttypes.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "ctl_rows.h"
#include "ctl_util.h"
#include "outbox/err.h"
#include "outbox/keyclaim.h"
#include "outbox/pg.h"
#include "outbox/protocol.h"
#include "outbox/wire.h"
#include "outbox/webhook_key.h" /* the claim key's bound */

#define WEBHOOK_TABLE "inbox.webhook_calls"
#define WEBHOOK_LIST_LIMIT_DEFAULT "100"
#define WEBHOOK_LIST_LIMIT_MAX 100000
/* --key is a claim key: SOURCE/TOPIC/KEY for a named source, longer than
 * a message key may be (common/include/outbox/webhook_key.h) */
#define WEBHOOK_CLAIM_KEY_MAX ((int)OB_WEBHOOK_KEY_MAX - 1)
/* The stored body of a call resolved as sent (its "response"). */
#define WEBHOOK_RESOLVED_NOTE "resolved as sent by an operator (outboxctl webhook resolve)"

struct webhook_ctl_config {
	char *db;
	char *topic;
	char *key;
	char *as;
	int64_t limit;
	bool json;
};

#define OB_CFG_STRUCT struct webhook_ctl_config

static const struct ob_cfg_opt ctl_webhook_list_options[] = {
	CTL_OPT_INBOX_DB(db),
	CTL_OPT_TOPIC(topic, "only this topic"),
	CTL_OPT_LIMIT(limit, WEBHOOK_LIST_LIMIT_DEFAULT, WEBHOOK_LIST_LIMIT_MAX),
	CTL_OPT_JSON(json, "a table"),
	OB_CFG_END,
};

static const struct ob_cfg_opt ctl_webhook_resolve_options[] = {
	CTL_OPT_INBOX_DB(db),
	OB_CFG_OPT("topic", "OUTBOX_CTL_TOPIC", OB_CFG_STRING, NULL, 0, 0, NULL, true, topic,
	    "the parked call's topic"),
	OB_CFG_OPT("key", "OUTBOX_CTL_KEY", OB_CFG_STRING, NULL, 0, 0, NULL, true, key,
	    "the parked call's idempotency key"),
	OB_CFG_OPT("as", "OUTBOX_CTL_RESOLVE_AS", OB_CFG_ENUM, NULL, 0, 0, "sent|not-sent", true,
	    as, "sent = the downstream applied it (redeliveries: duplicate); not-sent = it did"
	    " not (the next delivery sends it once more)"),
	CTL_OPT_JSON(json, "a table"),
	OB_CFG_END,
};

static const struct ctl_cmd list_cmd = {
	"webhook list", "outboxctl webhook list --inbox-db CONNINFO [--topic T] [--limit N] [--json]",
	"List the consumer's parked webhook calls (at-most-once topics whose outcome is"
	" unknown), oldest first: topic, key, when, the error, the fence.",
	ctl_webhook_list_options,
};
static const struct ctl_cmd resolve_cmd = {
	"webhook resolve",
	"outboxctl webhook resolve --inbox-db CONNINFO --topic T --key K --as sent|not-sent [--json]",
	"Resolve a parked webhook call after checking the downstream: --as sent (it was"
	" applied: any redelivery is answered duplicate, nothing is sent) or --as not-sent"
	" (it was not: the claim is released, and the next delivery, after outboxctl dead"
	" requeue ID in the outbox, sends it once more). A key that is unknown, of another"
	" topic, or not parked changes nothing.",
	ctl_webhook_resolve_options,
};

#define TS(col) "to_char(" col ", 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') AS " col

static int
webhook_list(PGconn *conn, struct webhook_ctl_config *cfg)
{
	char limit[32], err[1024], shown[CTL_SHOWN_MAX];
	const char *params[2] = { cfg->topic, limit };

	snprintf(limit, sizeof limit, "%" PRId64, cfg->limit);
	PGresult *res = PQexecParams(conn,
	    "SELECT topic, idempotency_key AS key, " TS("parked_at") ","
	    " round(extract(epoch FROM now() - parked_at)::numeric, 3) AS age_seconds,"
	    " fence, left(parked_error, 160) AS error"
	    " FROM " WEBHOOK_TABLE " WHERE state = 'unknown' AND ($1::text IS NULL OR topic = $1)"
	    " ORDER BY parked_at, idempotency_key LIMIT $2::bigint",
	    2, NULL, params, NULL, NULL, 0);
	if (ob_pg_check(res, PGRES_TUPLES_OK, "webhook list", err, sizeof err) != 0) {
		fprintf(stderr, "outboxctl webhook list: %s\n", err);
		PQclear(res);
		return CTL_EXIT_FAIL;
	}
	if (!cfg->json && PQntuples(res) == 0)
		printf("no parked webhook calls%s%s\n", cfg->topic ? " in topic " : "",
		    cfg->topic ? ctl_shown(cfg->topic, shown, sizeof shown) : "");
	else
		ctl_print_table(res, cfg->json, NULL);
	PQclear(res);
	return CTL_EXIT_OK;
}

/* Lock the key's claim, check it is a parked call of the topic, then
 * resolve it, in one transaction. */
static int
webhook_resolve(PGconn *conn, struct webhook_ctl_config *cfg)
{
	char err[1024], sk[CTL_SHOWN_MAX], st[CTL_SHOWN_MAX], sv[CTL_SHOWN_MAX];
	bool sent = strcmp(cfg->as, "sent") == 0;
	const char *params[1] = { cfg->key };
	PGresult *res = NULL;

	ctl_shown(cfg->key, sk, sizeof sk);
	ctl_shown(cfg->topic, st, sizeof st);
	if (ob_pg_exec(conn, "BEGIN", "begin", err, sizeof err) != 0) {
		fprintf(stderr, "outboxctl webhook resolve: %s\n", err);
		return CTL_EXIT_FAIL;
	}
	res = PQexecParams(conn, "SELECT state, topic FROM " WEBHOOK_TABLE
	    " WHERE idempotency_key = $1 FOR UPDATE", 1, NULL, params, NULL, NULL, 0);
	if (ob_pg_check(res, PGRES_TUPLES_OK, "webhook resolve", err, sizeof err) != 0) {
		fprintf(stderr, "outboxctl webhook resolve: %s\n", err);
		goto fail;
	}
	if (PQntuples(res) == 0) {
		fprintf(stderr, "outboxctl webhook resolve: no webhook call with key '%s'\n", sk);
		goto fail;
	}
	if (PQgetisnull(res, 0, 1) || strcmp(PQgetvalue(res, 0, 1), cfg->topic) != 0) {
		fprintf(stderr, "outboxctl webhook resolve: the call with key '%s' is not parked"
		    " in topic '%s'%s%s%s: nothing changed\n", sk, st,
		    PQgetisnull(res, 0, 1) ? " (it was never parked)" : " (its topic: '",
		    PQgetisnull(res, 0, 1) ? "" : ctl_shown(PQgetvalue(res, 0, 1), sv, sizeof sv),
		    PQgetisnull(res, 0, 1) ? "" : "')");
		goto fail;
	}
	if (strcmp(PQgetvalue(res, 0, 0), "unknown") != 0) {
		fprintf(stderr, "outboxctl webhook resolve: the call with key '%s' in topic '%s'"
		    " is not parked (it is %s): nothing changed\n", sk, st,
		    strcmp(PQgetvalue(res, 0, 0), "done") == 0 ? "done"
		        : "started again, released or in flight");
		goto fail;
	}
	PQclear(res);
	res = NULL;
	if (ob_keyclaim_resolve(conn, WEBHOOK_TABLE, cfg->key, cfg->topic, sent,
	        WEBHOOK_RESOLVED_NOTE, err, sizeof err) != OB_OK ||
	    ob_pg_commit(conn, err, sizeof err) != 0) {
		fprintf(stderr, "outboxctl webhook resolve: %s\n", err);
		goto fail;
	}
	if (cfg->json) {
		json_t *j = json_pack("{ssssss}", "topic", cfg->topic, "key", cfg->key, "resolved",
		    cfg->as);
		json_dumpf(j, stdout, JSON_ENSURE_ASCII);
		fputc('\n', stdout);
		json_decref(j);
	} else if (sent)
		printf("webhook resolve: topic '%s' key '%s' resolved as sent: a redelivery is"
		    " answered duplicate, nothing is sent\n", st, sk);
	else
		printf("webhook resolve: topic '%s' key '%s' resolved as not sent: the next"
		    " delivery sends it once more (outboxctl dead requeue ID in the outbox)\n", st,
		    sk);
	return CTL_EXIT_OK;
fail:
	PQclear(res);
	ob_pg_rollback(conn);
	return CTL_EXIT_FAIL;
}

/* Connect to the inbox database: UTC/ISO timestamps, and a schema that
 * serves this build's consumer (the table is the consumer's). */
static PGconn *
connect_inbox(const struct ctl_cmd *cmd, const char *conninfo)
{
	PGconn *conn = NULL;
	char err[1024];

	if (ob_pg_connect(conninfo, "outboxctl", &conn, err, sizeof err) != OB_OK ||
	    ob_pg_exec(conn, "SET TimeZone = 'UTC'; SET DateStyle = 'ISO'", "set session", err,
	        sizeof err) != OB_OK ||
	    ob_pg_durable_commits(conn, err, sizeof err) != OB_OK ||
	    ob_protocol_check(conn, "inbox", "consumer", OB_PROTOCOL_CONSUMER, err, sizeof err) !=
	        OB_OK) {
		fprintf(stderr, "outboxctl %s: %s\n", cmd->name, err);
		if (conn != NULL)
			PQfinish(conn);
		return NULL;
	}
	return conn;
}

static int
webhook_run(const struct ctl_cmd *cmd, int argc, char **argv)
{
	struct webhook_ctl_config cfg;
	char **pos = NULL;
	int npos, code;
	PGconn *conn = NULL;

	memset(&cfg, 0, sizeof cfg);
	if ((code = ctl_parse(cmd, &cfg, argc, argv, &pos, &npos)) >= 0)
		goto out;
	code = CTL_EXIT_USAGE;
	if (!ctl_no_arguments(cmd, pos, npos, NULL))
		goto out;
	if (cmd == &resolve_cmd) {
		size_t kl = strlen(cfg.key), tl = strlen(cfg.topic);
		bool bad_key = kl == 0 || kl > (size_t)WEBHOOK_CLAIM_KEY_MAX;
		if (bad_key || tl == 0 || tl > OB_WIRE_MAX_TOPIC) {
			fprintf(stderr, "outboxctl webhook resolve: --%s: want 1..%d bytes\n",
			    bad_key ? "key" : "topic",
			    bad_key ? WEBHOOK_CLAIM_KEY_MAX : OB_WIRE_MAX_TOPIC);
			goto out;
		}
	}
	code = CTL_EXIT_FAIL;
	if ((conn = connect_inbox(cmd, cfg.db)) == NULL)
		goto out;
	code = cmd == &list_cmd ? webhook_list(conn, &cfg) : webhook_resolve(conn, &cfg);
out:
	if (conn != NULL)
		PQfinish(conn);
	free(pos);
	ob_cfg_free(cmd->table, &cfg);
	return code;
}

int
ctl_webhook(int argc, char **argv)
{
	static const struct ctl_cmd *const cmds[] = { &list_cmd, &resolve_cmd };

	return ctl_dispatch("webhook", cmds, sizeof cmds / sizeof cmds[0], webhook_run, argc, argv);
}
