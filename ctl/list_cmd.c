/*
 * list_cmd.c - the one implementation of the list subcommands
 * (list_cmd.h): their flags, their query and how they print. Read-only.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "ctl_rows.h"
#include "list_cmd.h"

#define LIST_LIMIT_DEFAULT "100"
#define LIST_LIMIT_MAX 100000

struct list_config {
	char *db;
	char *topic;
	int64_t limit;
	bool json;
};

#define OB_CFG_STRUCT struct list_config

/* After the database row, the same in every list. */
#define LIST_OPTIONS                                                    \
	CTL_OPT_TOPIC(topic, "only this topic"),                        \
	CTL_OPT_LIMIT(limit, LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX),       \
	CTL_OPT_JSON(json, "a table"),                                  \
	OB_CFG_END

const struct ob_cfg_opt ctl_list_outbox_options[] = { CTL_OPT_DB(db), LIST_OPTIONS };
const struct ob_cfg_opt ctl_list_inbox_options[] = { CTL_OPT_INBOX_DB(db), LIST_OPTIONS };

static int
list(const struct ctl_cmd *cmd, PGconn *conn, void *arg, char **pos, int npos)
{
	const struct ctl_list *l = (const struct ctl_list *)cmd; /* ctl_list_run's */
	const struct list_config *cfg = arg;
	char limit[32], shown[CTL_SHOWN_MAX];
	const char *params[2] = { cfg->topic, limit };
	PGresult *res;

	snprintf(limit, sizeof limit, "%" PRId64, cfg->limit);
	if ((res = ctl_query(cmd, conn, l->sql, 2, params)) == NULL)
		return CTL_EXIT_FAIL;
	if (!cfg->json && PQntuples(res) == 0)
		printf("%s%s%s\n", l->none, cfg->topic ? " in topic " : "",
		    cfg->topic ? ctl_shown(cfg->topic, shown, sizeof shown) : "");
	else
		ctl_print_table(res, cfg->json, NULL);
	PQclear(res);
	return CTL_EXIT_OK;
}

int
ctl_list_run(const struct ctl_list *l, int argc, char **argv)
{
	return ctl_run(&l->cmd, sizeof(struct list_config), argc, argv, NULL, list);
}
