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
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "ctl_rows.h"
#include "ctl_util.h"
#include "list_cmd.h"
#include "outbox/err.h"
#include "outbox/keyclaim.h"
#include "outbox/pg.h"
#include "outbox/wire.h"
#include "outbox/webhook_key.h" /* the claim key's bound */

#define WEBHOOK_TABLE "inbox.webhook_calls"
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
	bool json;
};

#define OB_CFG_STRUCT struct webhook_ctl_config

static const struct ob_cfg_opt ctl_webhook_resolve_options[] = {
	CTL_OPT_INBOX_DB(db),
	OB_CFG_OPT("topic", "OUTBOX_CTL_TOPIC", OB_CFG_STRING, NULL, 0, 0, NULL, true, topic,
	    "the parked call's topic"),
	CTL_OPT_KEY(key, "the parked call's idempotency key"),
	OB_CFG_OPT("as", "OUTBOX_CTL_RESOLVE_AS", OB_CFG_ENUM, NULL, 0, 0, "sent|not-sent", true,
	    as, "sent = the downstream applied it (redeliveries: duplicate); not-sent = it did"
	    " not (the next delivery sends it once more)"),
	CTL_OPT_JSON(json, "a table"),
	OB_CFG_END,
};

static const struct ctl_list list = {
	{ "webhook list",
	    "outboxctl webhook list --inbox-db CONNINFO [--topic T] [--limit N] [--json]",
	    "List the consumer's parked webhook calls (at-most-once topics whose outcome is"
	    " unknown), oldest first: topic, key, when, the error, the fence.",
	    ctl_list_inbox_options, CTL_DB_INBOX, NULL },
	"SELECT topic, idempotency_key AS key, " CTL_SQL_TS("parked_at") ","
	" round(extract(epoch FROM now() - parked_at)::numeric, 3) AS age_seconds,"
	" fence, left(parked_error, 160) AS error"
	" FROM " WEBHOOK_TABLE " WHERE state = 'unknown' AND ($1::text IS NULL OR topic = $1)"
	" ORDER BY parked_at, idempotency_key LIMIT $2::bigint",
	"no parked webhook calls",
};
static const struct ctl_cmd resolve_cmd = {
	"webhook resolve",
	"outboxctl webhook resolve --inbox-db CONNINFO --topic T --key K --as sent|not-sent [--json]",
	"Resolve a parked webhook call after checking the downstream: --as sent (it was"
	" applied: any redelivery is answered duplicate, nothing is sent) or --as not-sent"
	" (it was not: the claim is released, and the next delivery, after outboxctl dead"
	" requeue ID in the outbox, sends it once more). A key that is unknown, of another"
	" topic, or not parked changes nothing.",
	ctl_webhook_resolve_options, CTL_DB_INBOX, NULL,
};

/* Lock the key's claim, check it is a parked call of the topic, then
 * resolve it, in one transaction. */
static int
webhook_resolve(const struct ctl_cmd *cmd, PGconn *conn, void *arg, char **pos, int npos)
{
	const struct webhook_ctl_config *cfg = arg;
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
	res = ctl_query(cmd, conn, "SELECT state, topic FROM " WEBHOOK_TABLE
	    " WHERE idempotency_key = $1 FOR UPDATE", 1, params);
	if (res == NULL)
		goto fail;
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
	if (cfg->json)
		ctl_print_json(json_pack("{ssssss}", "topic", cfg->topic, "key", cfg->key, "resolved",
		    cfg->as), JSON_ENSURE_ASCII);
	else if (sent)
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

/* The key and the topic fit a claim (before connecting: a usage error). */
static bool
resolve_check(const struct ctl_cmd *cmd, const void *arg, char *const *pos, int npos)
{
	const struct webhook_ctl_config *cfg = arg;
	size_t kl = strlen(cfg->key), tl = strlen(cfg->topic);
	bool bad_key = kl == 0 || kl > (size_t)WEBHOOK_CLAIM_KEY_MAX;

	if (!ctl_no_arguments(cmd, pos, npos))
		return false;
	if (bad_key || tl == 0 || tl > OB_WIRE_MAX_TOPIC) {
		fprintf(stderr, "outboxctl webhook resolve: --%s: want 1..%d bytes\n",
		    bad_key ? "key" : "topic", bad_key ? WEBHOOK_CLAIM_KEY_MAX : OB_WIRE_MAX_TOPIC);
		return false;
	}
	return true;
}

static int
webhook_run(const struct ctl_cmd *cmd, int argc, char **argv)
{
	if (cmd == &list.cmd)
		return ctl_list_run(&list, argc, argv);
	return ctl_run(cmd, sizeof(struct webhook_ctl_config), argc, argv, resolve_check,
	    webhook_resolve);
}

int
ctl_webhook(int argc, char **argv)
{
	static const struct ctl_cmd *const cmds[] = { &list.cmd, &resolve_cmd };

	return ctl_dispatch("webhook", cmds, sizeof cmds / sizeof cmds[0], webhook_run, argc, argv);
}
