/*
 * dead_cmd.c - `outboxctl dead list|show|requeue`: see dead letters and
 * re-drive them.
 *
 * Requeue puts a dead message back to pending with attempts 0, due now, no
 * lease, and its fence bumped (fences only grow; a dead row has no holder,
 * so the bump fences out nobody, but it keeps "every change of hands bumps
 * the fence" true). It is all or nothing: every id is checked inside one
 * transaction (exists, is dead, young enough) before any row changes.
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
	"Put dead messages back to pending: attempts 0, due now, fence bumped."
	" All or nothing: an unknown id, a message that is not dead, or one"
	" created longer ago than the consumer's dedup retention (unless --force)"
	" changes nothing.",
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
	    " FROM outbox.messages WHERE status = 'dead' AND ($1::text IS NULL OR topic = $1)"
	    " ORDER BY id LIMIT $2::bigint",
	    2, NULL, params, NULL, NULL, 0);
	if (ob_pg_check(res, PGRES_TUPLES_OK, "dead list", err, sizeof err) != 0) {
		fprintf(stderr, "outboxctl dead list: %s\n", err);
		PQclear(res);
		return CTL_EXIT_FAIL;
	}
	if (!cfg->json && PQntuples(res) == 0)
		printf("no dead messages%s%s\n", cfg->topic ? " in topic " : "",
		    cfg->topic ? cfg->topic : "");
	else
		ctl_print_table(res, cfg->json, NULL);
	PQclear(res);
	return CTL_EXIT_OK;
}

static int
dead_show(PGconn *conn, struct dead_config *cfg, const char *idtext)
{
	char err[1024];
	const char *params[1] = { idtext };
	PGresult *res;
	int code = CTL_EXIT_FAIL;

	res = PQexecParams(conn,
	    "SELECT id, topic, idempotency_key AS key, status, attempts, fence,"
	    " ordering_key, last_error, " MSG_TS("created_at") ", " MSG_TS("available_at") ","
	    " " MSG_TS("lease_until") ", lease_owner,"
	    " round(extract(epoch FROM now() - created_at)::numeric, 3) AS age_seconds,"
	    " octet_length(payload::text) AS payload_bytes, payload"
	    " FROM outbox.messages WHERE id = $1::bigint",
	    1, NULL, params, NULL, NULL, 0);
	if (ob_pg_check(res, PGRES_TUPLES_OK, "dead show", err, sizeof err) != 0) {
		fprintf(stderr, "outboxctl dead show: %s\n", err);
	} else if (PQntuples(res) == 0) {
		fprintf(stderr, "outboxctl dead show: no message with id %s\n", idtext);
	} else if (strcmp(PQgetvalue(res, 0, 3), "dead") != 0) {
		fprintf(stderr, "outboxctl dead show: message %s is %s, not dead"
		    " (see outboxctl inspect)\n", idtext, PQgetvalue(res, 0, 3));
	} else {
		if (!cfg->json) {
			/* a readable payload for people; --json embeds it as JSON */
			PQclear(res);
			res = PQexecParams(conn,
			    "SELECT id, topic, idempotency_key AS key, status, attempts, fence,"
			    " ordering_key, last_error, " MSG_TS("created_at") ","
			    " " MSG_TS("available_at") ", " MSG_TS("lease_until") ", lease_owner,"
			    " round(extract(epoch FROM now() - created_at)::numeric, 3) AS age_seconds,"
			    " octet_length(payload::text) AS payload_bytes,"
			    " jsonb_pretty(payload) AS payload"
			    " FROM outbox.messages WHERE id = $1::bigint",
			    1, NULL, params, NULL, NULL, 0);
			if (ob_pg_check(res, PGRES_TUPLES_OK, "dead show", err, sizeof err) != 0 ||
			    PQntuples(res) != 1) {
				fprintf(stderr, "outboxctl dead show: %s\n", err);
				goto out;
			}
		}
		ctl_print_record(res, 0, cfg->json);
		code = CTL_EXIT_OK;
	}
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
 * Lock the candidate rows, check them all, then update them all, in one
 * transaction. The check query returns one row per requested id (or per
 * dead message with --all) with what is wrong with it, if anything.
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
	/* $1 NULL means --all */
	res = PQexecParams(conn,
	    "WITH want AS ("
	    "  SELECT w.id, w.ord FROM unnest($1::bigint[]) WITH ORDINALITY AS w(id, ord)"
	    "  UNION ALL"
	    "  SELECT m.id, m.id FROM outbox.messages m"
	    "   WHERE $1 IS NULL AND m.status = 'dead' AND ($2::text IS NULL OR m.topic = $2)),"
	    " locked AS ("
	    "  SELECT m.id, m.status, m.created_at FROM outbox.messages m"
	    "   WHERE m.id IN (SELECT id FROM want) FOR UPDATE)"
	    " SELECT w.id, l.status,"
	    "  l.created_at < now() - $3::bigint * interval '1 millisecond' AS too_old,"
	    "  round(extract(epoch FROM now() - l.created_at)::numeric, 3) AS age_s"
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
			fprintf(stderr, "outboxctl dead requeue: message %s is %s, not dead:"
			    " not requeued\n", id, PQgetvalue(res, r, 1));
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
		printf("dead requeue: no dead messages%s%s: nothing to do\n",
		    cfg->topic ? " in topic " : "", cfg->topic ? cfg->topic : "");
		free(arr);
		return CTL_EXIT_OK;
	}
	/* update exactly the rows checked and locked above (with --all, a
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
	res = PQexecParams(conn,
	    "UPDATE outbox.messages m SET status = 'pending', attempts = 0,"
	    " available_at = now(), lease_owner = NULL, lease_until = NULL,"
	    " fence = fence + 1,"
	    /* A head kept dead (--on-dead-head block) is still its key's head.
	     * One skipped earlier becomes the head again if its key is idle;
	     * otherwise it is next in line behind the current head. */
	    /* Pending and dead heads are looked up apart, each by its index
	     * (messages_key_order, messages_dead_heads). */
	    " is_head = m.is_head OR (m.ordering_key IS NOT NULL AND NOT EXISTS ("
	    "   SELECT 1 FROM outbox.messages h WHERE h.ordering_key = m.ordering_key"
	    "      AND h.status = 'pending' AND h.is_head) AND NOT EXISTS ("
	    "   SELECT 1 FROM outbox.messages h WHERE h.ordering_key = m.ordering_key"
	    "      AND h.status = 'dead' AND h.is_head))"
	    " WHERE status = 'dead' AND id = ANY($1::bigint[])"
	    " RETURNING id",
	    1, NULL, params, NULL, NULL, 0);
	if (ob_pg_check(res, PGRES_TUPLES_OK, "dead requeue", err, sizeof err) != 0) {
		fprintf(stderr, "outboxctl dead requeue: %s\n", err);
		goto fail;
	}
	int done = PQntuples(res);
	PQclear(res);
	res = NULL;
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
	if (cmd == &list_cmd && npos > 0) {
		fprintf(stderr, "outboxctl dead list: unexpected argument '%s'\n", pos[0]);
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
			    cmd->name, pos[i]);
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
	fprintf(stderr, "outboxctl dead: want list, show or requeue%s%s%s\n",
	    argc >= 2 ? " (got '" : "", argc >= 2 ? argv[1] : "", argc >= 2 ? "')" : "");
	return CTL_EXIT_USAGE;
}
