/*
 * ctl.h - outboxctl subcommands. Each takes the argv after its name and
 * returns the process exit code (CTL_EXIT_*). Each answers
 * "<name> --help-markdown" with its config tables, which is how
 * `outboxctl --help-markdown` prints them all (main.c).
 */
#ifndef OUTBOX_CTL_H
#define OUTBOX_CTL_H

#include "outbox/config.h"

#define CTL_EXIT_OK 0
#define CTL_EXIT_FAIL 1  /* ran, but failed or refused (not found, not dead, DB error) */
#define CTL_EXIT_USAGE 2 /* bad flags or arguments: nothing was done */

int ctl_migrate(int argc, char **argv);
int ctl_status(int argc, char **argv);
int ctl_dead(int argc, char **argv);
int ctl_inspect(int argc, char **argv);
int ctl_purge(int argc, char **argv);
int ctl_webhook(int argc, char **argv);
int ctl_web(int argc, char **argv);
/* prove: exit 0 clean, 1 a violation, 2 a bad argument or a database error
 * (its own codes: prove_cmd.c). */
int ctl_prove(int argc, char **argv);

#endif
