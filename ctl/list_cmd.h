/*
 * list_cmd.h - the list subcommands (outboxctl dead list, webhook list):
 * the rows of one query, oldest first, as a table or as JSON. Every list
 * takes the same flags (its database, --topic, --limit, --json) and prints
 * the same way; each names only its query, its database and what it
 * lists.
 */
#ifndef OUTBOX_CTL_LIST_CMD_H
#define OUTBOX_CTL_LIST_CMD_H

#include "ctl_util.h"

/* The flags of a list on the outbox database (--db) and of one on the
 * inbox database (--inbox-db): the table of the list's cmd, as its db. */
extern const struct ob_cfg_opt ctl_list_outbox_options[];
extern const struct ob_cfg_opt ctl_list_inbox_options[];

struct ctl_list {
	struct ctl_cmd cmd; /* first: the list's run is handed &cmd */
	const char *sql;    /* its rows, oldest first: $1 the --topic (NULL: every
	                     * topic), $2 the --limit */
	const char *none;   /* the text line when there are no rows ("no dead
	                     * messages"), then " in topic T" with --topic */
};

/* Run the list (argv[0] its name, as ctl_run runs a subcommand): its rows
 * as ctl_print_table prints them. Returns the exit code. */
int ctl_list_run(const struct ctl_list *list, int argc, char **argv);

#endif
