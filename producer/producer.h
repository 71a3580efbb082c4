/*
 * producer.h - outbox-producer subcommands. Each takes the argv after its
 * name and returns the exit code (0 ok, 1 failed, 2 bad usage or config).
 */
#ifndef OUTBOX_PRODUCER_H
#define OUTBOX_PRODUCER_H

int producer_cmd_enqueue(int argc, char **argv);

#endif
