/*
 * dead_cmd.c - `outboxctl dead list|show|requeue`: see dead letters and
 * re-drive them. Dead letters live in outbox.dead, each with its own copy
 * of the message (the table: sql/outbox/012_streams.sql); the status of a message that
 * is not dead comes from the outbox.messages view.
 *
 * Requeue moves dead letters back to pending with outbox.requeue_dead: a
 * retry due now, attempts 0, no lease; its fence moves on at its next claim
 * (every claim takes a new one from outbox.fences); an ordering key it
 * belongs to waits behind it again. It is all or nothing: every id is
 * checked inside one transaction (exists, is dead, young enough), with the
 * dead rows locked, before any row changes.
 *
 * The dedup-retention rule: the consumer forgets an idempotency key after
 * its dedup retention. A message created longer ago than that may have been
 * applied once (a reply lost, then dead-lettered) and its key since
 * forgotten, so delivering it again could apply it twice. Such messages are
 * refused unless --force (the operator asserts it was never applied).
 */
#include <inttypes.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "ctl_util.h"
#include "outbox/pg.h"

#define DEAD_LIST_LIMIT_DEFAULT "100"
#define DEAD_LIST_LIMIT_MAX 100000
#define DEDUP_RETENTION_DEFAULT "7d"
#define DEDUP_RETENTION_MAX (3650LL * 86400 * 1000)

struct dead_config {
	char *db;
	char *topic;
	int64_t limit;
	int64_t retention_ms;
	bool all;
	bool force;
	bool json;
};

#define OPT_DB { "db", "OUTBOX_DB", OB_CFG_STRING, NULL, 0, 0, NULL, true, false, \
	offsetof(struct dead_config, db), \
	"PostgreSQL connection string of the producer database (keywords or URI)" }
#define OPT_JSON { "json", "OUTBOX_CTL_JSON", OB_CFG_BOOL, "false", 0, 0, NULL, false, \
	false, offsetof(struct dead_config, json), "print JSON instead of a table" }

const struct ob_cfg_opt ctl_dead_list_options[] = {
	OPT_DB,
	{ "topic", "OUTBOX_CTL_TOPIC", OB_CFG_STRING, NULL, 0, 0, NULL, false, false,
	    offsetof(struct dead_config, topic), "only this topic" },
	{ "limit", "OUTBOX_CTL_LIMIT", OB_CFG_INT, DEAD_LIST_LIMIT_DEFAULT, 1,
	    DEAD_LIST_LIMIT_MAX, NULL, false, false, offsetof(struct dead_config, limit),
	    "show at most this many (oldest first)" },
	OPT_JSON,
	OB_CFG_END,
};

const struct ob_cfg_opt ctl_dead_show_options[] = {
	OPT_DB,
	OPT_JSON,
	OB_CFG_END,
};

const struct ob_cfg_opt ctl_dead_requeue_options[] = {
	OPT_DB,
	{ "all", "OUTBOX_CTL_REQUEUE_ALL", OB_CFG_BOOL, "false", 0, 0, NULL, false, false,
	    offsetof(struct dead_config, all), "requeue every dead message (of --topic)" },
	{ "topic", "OUTBOX_CTL_TOPIC", OB_CFG_STRING, NULL, 0, 0, NULL, false, false,
	    offsetof(struct dead_config, topic), "with --all: only this topic" },
	{ "dedup-retention", "OUTBOX_DEDUP_RETENTION", OB_CFG_DURATION,
	    DEDUP_RETENTION_DEFAULT, 1000, DEDUP_RETENTION_MAX, NULL, false, false,
	    offsetof(struct dead_config, retention_ms),
	    "the consumer's --dedup-retention: older messages are refused" },
	{ "force", "OUTBOX_CTL_FORCE", OB_CFG_BOOL, "false", 0, 0, NULL, false, false,
	    offsetof(struct dead_config, force),
	    "requeue even messages older than the dedup retention" },
	OPT_JSON,
	OB_CFG_END,
};

static const struct ctl_cmd list_cmd = {
	"dead list", "outboxctl dead list --db CONNINFO [--topic T] [--limit N] [--json]",
	"List dead-lettered messages, oldest first.", ctl_dead_list_options,
};
static const struct ctl_cmd show_cmd = {
	"dead show", "outboxctl dead show --db CONNINFO [--json] ID",
	"Show one dead message: payload, attempts, last error, timestamps.",
	ctl_dead_show_options,
};
static const struct ctl_cmd requeue_cmd = {
	"dead requeue",
	"outboxctl dead requeue --db CONNINFO [--force] [--dedup-retention D] (ID... | --all [--topic T])",
	"Put dead messages back to pending, as retries: attempts 0, due now, no"
	" lease, a new fence at their next claim; an ordering key waits behind its"
	" message again. All or nothing: an unknown id, a message that is not dead,"
	" or one created longer ago than the consumer's dedup retention (unless"
	" --force) changes nothing.",
	ctl_dead_requeue_options,
};

#define MSG_TS(col) "to_char(" col ", 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') AS " col

static int
dead_list(PGconn *conn, struct dead_config *cfg)
{
	char limit[32], err[1024];
	const char *params[2] = { cfg->topic, limit };
	PGresult *res;

	snprintf(limit, sizeof limit, "%" PRId64, cfg->limit);
	res = PQexecParams(conn,
	    "SELECT id, topic, idempotency_key AS key, attempts, " MSG_TS("created_at") ","
	    " round(extract(epoch FROM now() - created_at)::numeric, 3) AS age_seconds,"
	    " left(last_error, 80) AS last_error"
	    " FROM outbox.dead WHERE $1::text IS NULL OR topic = $1"
	    " ORDER BY id LIMIT $2::bigint",
	    2, NULL, params, NULL, NULL, 0);
	if (ob_pg_check(res, PGRES_TUPLES_OK, "dead list", err, sizeof err) != 0) {
		fprintf(stderr, "outboxctl dead list: %s\n", err);
		PQclear(res);
		return CTL_EXIT_FAIL;
	}
	char shown[CTL_SHOWN_MAX];
	if (!cfg->json && PQntuples(res) == 0)
		printf("no dead messages%s%s\n", cfg->topic ? " in topic " : "",
		    cfg->topic ? ctl_shown(cfg->topic, shown, sizeof shown) : "");
	else
		ctl_print_table(res, cfg->json, NULL);
	PQclear(res);
	return CTL_EXIT_OK;
}

/* One dead letter; available_at, lease_until and lease_owner are what the
 * outbox.messages view shows for one (when it died; no lease). */
#define SHOW_SQL(payload) \
	"SELECT id, topic, idempotency_key AS key, 'dead' AS status, attempts, fence," \
	" ordering_key, last_error, " MSG_TS("created_at") ", " MSG_TS("died_at") "," \
	" to_char(died_at, 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') AS available_at," \
	" NULL::text AS lease_until, NULL::text AS lease_owner," \
	" round(extract(epoch FROM now() - created_at)::numeric, 3) AS age_seconds," \
	" octet_length(payload::text) AS payload_bytes, " payload " AS payload" \
	" FROM outbox.dead WHERE id = $1::bigint"

static int
dead_show(PGconn *conn, struct dead_config *cfg, const char *idtext)
{
	char err[1024], shown[CTL_SHOWN_MAX];
	const char *params[1] = { idtext };
	PGresult *res;
	int code = CTL_EXIT_FAIL;

	/* a readable payload for people; --json embeds it as JSON */
	res = PQexecParams(conn, cfg->json ? SHOW_SQL("payload") : SHOW_SQL("jsonb_pretty(payload)"),
	    1, NULL, params, NULL, NULL, 0);
	if (ob_pg_check(res, PGRES_TUPLES_OK, "dead show", err, sizeof err) != 0) {
		fprintf(stderr, "outboxctl dead show: %s\n", err);
		goto out;
	}
	if (PQntuples(res) == 1) {
		ctl_print_record(res, 0, cfg->json);
		code = CTL_EXIT_OK;
		goto out;
	}
	/* not dead: say what it is */
	PQclear(res);
	res = PQexecParams(conn, "SELECT status FROM outbox.messages WHERE id = $1::bigint LIMIT 1",
	    1, NULL, params, NULL, NULL, 0);
	if (ob_pg_check(res, PGRES_TUPLES_OK, "dead show", err, sizeof err) != 0)
		fprintf(stderr, "outboxctl dead show: %s\n", err);
	else if (PQntuples(res) == 0)
		fprintf(stderr, "outboxctl dead show: no message with id %s\n", idtext);
	else
		fprintf(stderr, "outboxctl dead show: message %s is %s, not dead"
		    " (see outboxctl inspect)\n", idtext,
		    ctl_shown(PQgetvalue(res, 0, 0), shown, sizeof shown));
out:
	PQclear(res);
	return code;
}

/* The ids as a PostgreSQL bigint[] literal: "{1,2,3}". */
static char *
id_array(char **ids, int n)
{
	size_t cap = (size_t)n * 21 + 3, len = 0;
	char *s = malloc(cap);

	if (s == NULL)
		return NULL;
	s[len++] = '{';
	for (int i = 0; i < n; i++)
		len += (size_t)snprintf(s + len, cap - len, "%s%s", i ? "," : "", ids[i]);
	snprintf(s + len, cap - len, "}");
	return s;
}

/*
 * Lock the candidate dead rows, check them all, then requeue them all, in
 * one transaction. The check query returns one row per requested id (or
 * per dead message with --all) with what is wrong with it, if anything:
 * status is 'dead' for a row locked here, else what the outbox.messages
 * view says (NULL: no such message). The view cannot be locked; the dead
 * rows can, and they are what changes.
 */
static int
dead_requeue(PGconn *conn, struct dead_config *cfg, char **ids, int nids)
{
	char err[1024], retention[32], *arr = NULL;
	PGresult *res = NULL;
	int code = CTL_EXIT_FAIL, bad = 0;

	snprintf(retention, sizeof retention, "%" PRId64, cfg->retention_ms);
	if (!cfg->all && (arr = id_array(ids, nids)) == NULL) {
		fprintf(stderr, "outboxctl dead requeue: out of memory\n");
		return CTL_EXIT_FAIL;
	}
	if (ob_pg_exec(conn, "BEGIN", "begin", err, sizeof err) != 0) {
		fprintf(stderr, "outboxctl dead requeue: %s\n", err);
		free(arr);
		return CTL_EXIT_FAIL;
	}
	const char *params[3] = { arr, cfg->topic, retention };
	/* $1 NULL means --all; an id given twice is one */
	res = PQexecParams(conn,
	    "WITH want AS ("
	    "  SELECT w.id, min(w.ord) AS ord"
	    "   FROM unnest($1::bigint[]) WITH ORDINALITY AS w(id, ord) GROUP BY w.id"
	    "  UNION ALL"
	    "  SELECT d.id, d.id FROM outbox.dead d"
	    "   WHERE $1 IS NULL AND ($2::text IS NULL OR d.topic = $2)),"
	    " locked AS ("
	    "  SELECT d.id, d.created_at FROM outbox.dead d"
	    "   WHERE d.id IN (SELECT id FROM want) FOR UPDATE)"
	    " SELECT w.id,"
	    "  CASE WHEN l.id IS NOT NULL THEN 'dead'"
	    "   ELSE (SELECT m.status FROM outbox.messages m WHERE m.id = w.id LIMIT 1) END,"
	    "  l.created_at < now() - $3::bigint * interval '1 millisecond' AS too_old,"
	    "  round(extract(epoch FROM now() - l.created_at)::numeric, 3) AS age_s,"
	    "  l.id IS NOT NULL AS is_locked"
	    " FROM want w LEFT JOIN locked l ON l.id = w.id ORDER BY w.ord",
	    3, NULL, params, NULL, NULL, 0);
	if (ob_pg_check(res, PGRES_TUPLES_OK, "dead requeue check", err, sizeof err) != 0) {
		fprintf(stderr, "outboxctl dead requeue: %s\n", err);
		goto fail;
	}
	for (int r = 0; r < PQntuples(res); r++) {
		const char *id = PQgetvalue(res, r, 0);
		char age[64];

		if (PQgetisnull(res, r, 1)) {
			fprintf(stderr, "outboxctl dead requeue: no message with id %s\n", id);
			bad++;
		} else if (strcmp(PQgetvalue(res, r, 1), "dead") != 0) {
			char shown[CTL_SHOWN_MAX];
			fprintf(stderr, "outboxctl dead requeue: message %s is %s, not dead:"
			    " not requeued\n", id, ctl_shown(PQgetvalue(res, r, 1), shown, sizeof shown));
			bad++;
		} else if (PQgetvalue(res, r, 4)[0] != 't') {
			/* dead in this snapshot, gone before the lock (expired by a
			 * relay's dead retention, or requeued by someone else) */
			fprintf(stderr, "outboxctl dead requeue: message %s changed while it was"
			    " checked: not requeued (run it again)\n", id);
			bad++;
		} else if (PQgetvalue(res, r, 2)[0] == 't' && !cfg->force) {
			char ret[64];
			ctl_fmt_age(strtod(PQgetvalue(res, r, 3), NULL), age, sizeof age);
			ctl_fmt_age((double)cfg->retention_ms / 1000.0, ret, sizeof ret);
			fprintf(stderr, "outboxctl dead requeue: message %s was created %s ago,"
			    " longer than the consumer's dedup retention (%s): the consumer may"
			    " have forgotten its key and would apply it again if it was applied"
			    " before; use --force if you know it never was\n", id, age, ret);
			bad++;
		}
	}
	if (bad > 0 && PQntuples(res) == 1)
		goto fail; /* the one line above said it */
	if (bad > 0) {
		fprintf(stderr, "outboxctl dead requeue: nothing requeued (%d of %d refused)\n",
		    bad, PQntuples(res));
		goto fail;
	}
	int n = PQntuples(res);
	if (n == 0) {
		PQclear(res);
		ob_pg_rollback(conn);
		char shown[CTL_SHOWN_MAX];
		printf("dead requeue: no dead messages%s%s: nothing to do\n",
		    cfg->topic ? " in topic " : "",
		    cfg->topic ? ctl_shown(cfg->topic, shown, sizeof shown) : "");
		free(arr);
		return CTL_EXIT_OK;
	}
	/* requeue exactly the rows checked and locked above (with --all, a
	 * message dead-lettered meanwhile was not checked: left alone) */
	char **checked = malloc((size_t)n * sizeof *checked);
	if (checked == NULL) {
		fprintf(stderr, "outboxctl dead requeue: out of memory\n");
		goto fail;
	}
	for (int r = 0; r < n; r++)
		checked[r] = PQgetvalue(res, r, 0);
	free(arr);
	arr = id_array(checked, n);
	free(checked);
	PQclear(res);
	res = NULL;
	if (arr == NULL) {
		fprintf(stderr, "outboxctl dead requeue: out of memory\n");
		goto fail;
	}
	params[0] = arr;
	res = PQexecParams(conn, "SELECT outbox.requeue_dead($1::bigint[])", 1, NULL, params, NULL,
	    NULL, 0);
	if (ob_pg_check(res, PGRES_TUPLES_OK, "dead requeue", err, sizeof err) != 0) {
		fprintf(stderr, "outboxctl dead requeue: %s\n", err);
		goto fail;
	}
	int done = PQntuples(res);
	PQclear(res);
	res = NULL;
	if (done != n) {
		/* cannot happen: the rows are locked and were dead */
		fprintf(stderr, "outboxctl dead requeue: %d of %d locked dead messages requeued:"
		    " nothing requeued\n", done, n);
		goto fail;
	}
	/* wake the relays now rather than at their next poll */
	if (ob_pg_exec(conn, "SELECT pg_notify('outbox_enqueued', '')", "notify", err,
	    sizeof err) != 0 || ob_pg_commit(conn, err, sizeof err) != 0) {
		fprintf(stderr, "outboxctl dead requeue: %s\n", err);
		goto fail;
	}
	if (cfg->json) {
		json_t *j = json_pack("{si}", "requeued", done);
		json_dumpf(j, stdout, 0);
		fputc('\n', stdout);
		json_decref(j);
	} else
		printf("dead requeue: %d message%s requeued\n", done, done == 1 ? "" : "s");
	free(arr);
	return CTL_EXIT_OK;
fail:
	PQclear(res);
	ob_pg_rollback(conn);
	free(arr);
	return code;
}

static int
dead_run(const struct ctl_cmd *cmd, int argc, char **argv)
{
	struct dead_config cfg;
	char **pos = NULL;
	int npos, code;
	PGconn *conn = NULL;
	int64_t id;

	memset(&cfg, 0, sizeof cfg);
	if ((code = ctl_parse(cmd, &cfg, argc, argv, &pos, &npos)) >= 0)
		goto out;
	code = CTL_EXIT_USAGE;
	char shown[CTL_SHOWN_MAX];
	if (cmd == &list_cmd && npos > 0) {
		fprintf(stderr, "outboxctl dead list: unexpected argument '%s'\n",
		    ctl_shown(pos[0], shown, sizeof shown));
		goto out;
	}
	if (cmd == &show_cmd && npos != 1) {
		fprintf(stderr, "outboxctl dead show: want exactly one ID\n");
		goto out;
	}
	if (cmd == &requeue_cmd) {
		if (cfg.all == (npos > 0)) {
			fprintf(stderr, "outboxctl dead requeue: give message IDs or --all\n");
			goto out;
		}
		if (!cfg.all && cfg.topic != NULL) {
			fprintf(stderr, "outboxctl dead requeue: --topic goes with --all\n");
			goto out;
		}
	}
	for (int i = 0; i < npos; i++) {
		if (!ctl_parse_id(pos[i], &id)) {
			fprintf(stderr, "outboxctl %s: bad id '%s': want a positive integer\n",
			    cmd->name, ctl_shown(pos[i], shown, sizeof shown));
			goto out;
		}
	}
	code = CTL_EXIT_FAIL;
	if ((conn = ctl_connect(cmd, cfg.db)) == NULL)
		goto out;
	if (cmd == &list_cmd)
		code = dead_list(conn, &cfg);
	else if (cmd == &show_cmd)
		code = dead_show(conn, &cfg, pos[0]);
	else
		code = dead_requeue(conn, &cfg, pos, npos);
out:
	if (conn != NULL)
		PQfinish(conn);
	free(pos);
	ob_cfg_free(cmd->table, &cfg);
	return code;
}

int
ctl_dead(int argc, char **argv)
{
	static const struct ctl_cmd *const cmds[] = { &list_cmd, &show_cmd, &requeue_cmd };

	if (argc >= 2) {
		for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
			if (strcmp(argv[1], cmds[i]->name + strlen("dead ")) == 0)
				return dead_run(cmds[i], argc - 1, argv + 1);
	}
	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		printf("usage: outboxctl dead list|show|requeue [options]"
		    "   (outboxctl dead SUBCOMMAND --help)\n");
		return CTL_EXIT_OK;
	}
	char shown[CTL_SHOWN_MAX];
	fprintf(stderr, "outboxctl dead: want list, show or requeue%s%s%s\n",
	    argc >= 2 ? " (got '" : "", argc >= 2 ? ctl_shown(argv[1], shown, sizeof shown) : "",
	    argc >= 2 ? "')" : "");
	return CTL_EXIT_USAGE;
}
