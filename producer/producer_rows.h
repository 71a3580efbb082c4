/*
 * producer_rows.h - the option rows several outbox-producer subcommands
 * share, each defined once, as outbox/config_rows.h does for the programs:
 * the same flag, variable, type and bounds everywhere, and the help each
 * subcommand gives, since the row does something of its own there. Each
 * macro is one OB_CFG_OPT row, so the including file's OB_CFG_STRUCT must
 * be defined and have the field the row names.
 */
#ifndef OUTBOX_PRODUCER_ROWS_H
#define OUTBOX_PRODUCER_ROWS_H

#include "outbox/config_rows.h"

/* --key: an idempotency key (enqueue, submit and send, lookup); required
 * where the command is about one key. */
#define PRODUCER_OPT_KEY(field, required, help)                                       \
	OB_CFG_OPT("key", "OUTBOX_KEY", OB_CFG_STRING, NULL, 0, 0, NULL, required, field, \
	    help)

/* --run-id: the run a command's keys or rows are tagged with (mcp, matrix). */
#define PRODUCER_OPT_RUN_ID(field, help)                                              \
	OB_CFG_OPT("run-id", "OUTBOX_RUN_ID", OB_CFG_STRING, NULL, 0, 0, NULL, false,  \
	    field, help)

/* --quiet: help says what is still printed (enqueue, matrix). */
#define PRODUCER_OPT_QUIET(field, help)                                               \
	OB_CFG_OPT("quiet", "OUTBOX_QUIET", OB_CFG_BOOL, "false", 0, 0, NULL, false,   \
	    field, help)

#endif
