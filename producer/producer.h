/*
 * producer.h - outbox-producer subcommands. Each takes the argv after its
 * name and returns the exit code (0 ok, 1 failed, 2 bad usage or config;
 * submit and lookup also 3 = outcome uncertain).
 */
#ifndef OUTBOX_PRODUCER_H
#define OUTBOX_PRODUCER_H

struct ob_cfg_opt; /* outbox/config.h */

int producer_cmd_enqueue(int argc, char **argv);
int producer_cmd_serve(int argc, char **argv);
int producer_cmd_submit(int argc, char **argv);
int producer_cmd_send(int argc, char **argv);
int producer_cmd_lookup(int argc, char **argv);
int producer_cmd_matrix(int argc, char **argv);
int producer_cmd_mcp(int argc, char **argv);

/* Each subcommand's config table (the one its --help prints), for
 * `outbox-producer --help-markdown`. */
extern const struct ob_cfg_opt producer_enqueue_options[];
extern const struct ob_cfg_opt producer_serve_options[];
extern const struct ob_cfg_opt producer_submit_options[];
extern const struct ob_cfg_opt producer_send_options[];
extern const struct ob_cfg_opt producer_lookup_options[];
extern const struct ob_cfg_opt producer_matrix_options[];
extern const struct ob_cfg_opt producer_mcp_options[];

/* The first article's fault matrix, [row][column] (see matrix.c). */
extern const int producer_matrix_expected[5][5];

#endif
