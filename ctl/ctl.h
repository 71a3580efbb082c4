/*
 * ctl.h - outboxctl subcommands. Each takes the argv after its name and
 * returns the process exit code (0 ok, 1 failed, 2 bad usage/config).
 */
#ifndef OUTBOX_CTL_H
#define OUTBOX_CTL_H

int ctl_migrate(int argc, char **argv);

#endif
