/*
 * ctl.h - outboxctl subcommands. Each takes the argv after its name and
 * returns the process exit code (CTL_EXIT_*).
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

/* The config tables, for `outboxctl --help-markdown` (docs/configuration.md). */
extern const struct ob_cfg_opt ctl_migrate_options[];
extern const struct ob_cfg_opt ctl_status_options[];
extern const struct ob_cfg_opt ctl_dead_list_options[];
extern const struct ob_cfg_opt ctl_dead_show_options[];
extern const struct ob_cfg_opt ctl_dead_requeue_options[];
extern const struct ob_cfg_opt ctl_inspect_options[];
extern const struct ob_cfg_opt ctl_purge_options[];
extern const struct ob_cfg_opt ctl_webhook_list_options[];
extern const struct ob_cfg_opt ctl_webhook_resolve_options[];
extern const struct ob_cfg_opt ctl_web_options[];
extern const struct ob_cfg_opt ctl_prove_options[];

#endif
