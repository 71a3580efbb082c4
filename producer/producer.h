/*
 * producer.h - outbox-producer subcommands. Each takes the argv after its
 * name and returns the exit code (0 ok, 1 failed, 2 bad usage or config;
 * submit and lookup also 3 = outcome uncertain). Each answers
 * "<name> --help-markdown" with its config table, which is how
 * `outbox-producer --help-markdown` prints them all (main.c).
 */
#ifndef OUTBOX_PRODUCER_H
#define OUTBOX_PRODUCER_H

int producer_cmd_enqueue(int argc, char **argv);
int producer_cmd_serve(int argc, char **argv);
int producer_cmd_submit(int argc, char **argv);
int producer_cmd_send(int argc, char **argv);
int producer_cmd_lookup(int argc, char **argv);
int producer_cmd_matrix(int argc, char **argv);
int producer_cmd_mcp(int argc, char **argv);

/* The first article's fault matrix, [row][column] (see matrix.c). */
extern const int producer_matrix_expected[5][5];

#endif
