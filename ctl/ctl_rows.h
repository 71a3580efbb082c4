/*
 * ctl_rows.h - the option rows several outboxctl subcommands share, each
 * defined once, as outbox/config_rows.h does for the programs: the same
 * flag, variable, type and bounds everywhere, and the same help but for
 * the words a subcommand gives where the row means something else there.
 * Each macro is one OB_CFG_OPT row, so the including file's OB_CFG_STRUCT
 * must be defined and have the field the row names.
 */
#ifndef OUTBOX_CTL_ROWS_H
#define OUTBOX_CTL_ROWS_H

#include "outbox/config_rows.h"

/* --db: the producer database an operator's command reads or changes. */
#define CTL_OPT_DB(field) OB_CFG_OPT_DB(field, "the producer database (keywords or URI)")

/* --inbox-db, required: the consumer's database, as its own --db says. */
#define CTL_OPT_INBOX_DB(field)                                                       \
	OB_CFG_OPT("inbox-db", "OUTBOX_INBOX_DB", OB_CFG_STRING, NULL, 0, 0, NULL, true, \
	    field, "PostgreSQL connection string of the consumer's database (inbox schema)")

/* --key, required: the one key a command is about; help: whose key. */
#define CTL_OPT_KEY(field, help)                                                      \
	OB_CFG_OPT("key", "OUTBOX_CTL_KEY", OB_CFG_STRING, NULL, 0, 0, NULL, true,     \
	    field, help)

/* --topic, optional; help: what it narrows, "only this topic". */
#define CTL_OPT_TOPIC(field, help)                                                    \
	OB_CFG_OPT("topic", "OUTBOX_CTL_TOPIC", OB_CFG_STRING, NULL, 0, 0, NULL, false,  \
	    field, help)

/* --limit of a list, oldest first: def (text) and max its own. */
#define CTL_OPT_LIMIT(field, def, max)                                                \
	OB_CFG_OPT("limit", "OUTBOX_CTL_LIMIT", OB_CFG_INT, def, 1, max, NULL, false,    \
	    field, "show at most this many (oldest first)")

/* --json; instead: what it replaces, "a table" or "text". */
#define CTL_OPT_JSON(field, instead)                                                  \
	OB_CFG_OPT("json", "OUTBOX_CTL_JSON", OB_CFG_BOOL, "false", 0, 0, NULL, false,   \
	    field, "print JSON instead of " instead)

#endif
