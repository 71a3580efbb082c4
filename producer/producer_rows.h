/*
 * producer_rows.h - what the config tables of outbox-producer's
 * subcommands share. The option rows several of them have, each defined
 * once, as outbox/config_rows.h does for the programs: the same flag,
 * variable, type and bounds everywhere, and the help each subcommand
 * gives, since the row does something of its own there. Each such macro
 * is one OB_CFG_OPT row, so the including file's OB_CFG_STRUCT must be
 * defined and have the field the row names. And the program a
 * subcommand's table belongs to (PRODUCER_PROGRAM).
 */
#ifndef OUTBOX_PRODUCER_ROWS_H
#define OUTBOX_PRODUCER_ROWS_H

#include "outbox/config_rows.h"

/* --key: an idempotency key (enqueue, submit and send, lookup); required
 * where the command is about one key. */
#define PRODUCER_OPT_KEY(field, required, help)                                       \
	OB_CFG_OPT("key", "OUTBOX_KEY", OB_CFG_STRING, NULL, 0, 0, NULL, required, field, \
	    help)

/* --db: the producer's database, written by the command (enqueue, serve). */
#define PRODUCER_OPT_DB(field) \
	OB_CFG_OPT_DB(field, "the producer's database (outbox migrations applied)")

/* --run-id: the run a command's keys or rows are tagged with (mcp, matrix). */
#define PRODUCER_OPT_RUN_ID(field, help)                                              \
	OB_CFG_OPT("run-id", "OUTBOX_RUN_ID", OB_CFG_STRING, NULL, 0, 0, NULL, false,  \
	    field, help)

/* --quiet: help says what is still printed (enqueue, matrix). */
#define PRODUCER_OPT_QUIET(field, help)                                               \
	OB_CFG_OPT("quiet", "OUTBOX_QUIET", OB_CFG_BOOL, "false", 0, 0, NULL, false,   \
	    field, help)

/* The struct ob_cfg_program of subcommand sub ("enqueue"): its name, the
 * prefix of its error lines and its --help-markdown title, and the
 * synopsis --help shows, which starts with that name, both made from sub
 * so that they cannot disagree (nor with main.c's dispatch); args: the
 * synopsis after the name; description and options as in the struct. */
#define PRODUCER_PROGRAM(sub, args, description_, options_)                           \
	{                                                                              \
		.name = "outbox-producer " sub,                                        \
		.synopsis = "outbox-producer " sub " " args,                           \
		.description = description_,                                           \
		.options = options_,                                                   \
	}

#endif
