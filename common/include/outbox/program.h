/*
 * program.h - the start-up and the end every program and serving
 * subcommand share, so that each main() says only what is its own.
 *
 * A serving program runs, in this order:
 *
 *   ob_program_start        flags, environment and --config file into its
 *                           settings (--help, --help-markdown, a bad value:
 *                           the exit code), the shared rows checked
 *                           (ob_program_check), the log set up from
 *                           --log-level and --log-format
 *   ...its own checks, then what it serves...
 *   ob_program_signals      the one signal layer (outbox/sig.h), before
 *                           any thread starts
 *   ob_program_serve_metrics  --metrics (and --demo-admin's route) served
 *   ob_program_ready        --ready-file written
 *   ob_program_wait         until SIGTERM/SIGINT, a reload per SIGHUP
 *
 * and stops in the reverse order. A program whose protocol and grants are
 * checked at start does so on its own connection with ob_protocol_check
 * (outbox/protocol.h): who connects where differs too much to share.
 *
 * The shared rows (outbox/config_rows.h) are found in the program's table
 * by name ("metrics", "log-level", ...), so a table without one simply
 * skips its step. Every error is one line on stderr, "<name>: <reason>",
 * name being the config program's; the caller picks the exit code.
 *
 * A program made of subcommands (outbox-producer, outboxctl) starts with
 * ob_program_dispatch instead, and each subcommand with the above.
 */
#ifndef OUTBOX_PROGRAM_H
#define OUTBOX_PROGRAM_H

#include <stddef.h>

#include "outbox/config.h"
#include "outbox/http_endpoint.h"
#include "outbox/reload.h"

struct ob_demo_admin; /* outbox/demo_admin.h */

/* A program (or serving subcommand), declared with its config:
 *
 *     static const struct ob_program program = { .events = "producer", .config = {
 *             .name = "outbox-producer serve",
 *             ...
 *     } };
 */
struct ob_program {
	const char *events; /* prefix of the events logged here: "producer" */
	/* table, --help and the prefix of every error line ("outbox-producer
	 * serve"), which is also the signal layer's; its first word is the log
	 * lines' program field ("outbox-producer") */
	struct ob_cfg_program config;
};

/* Parse argv, the environment and the --config file into cfg
 * (ob_cfg_load), check the shared rows (ob_program_check: a bad one is
 * "<name>: <reason>", exit 2) and set up the log from the rows
 * --log-level and --log-format (info and text where the table has none).
 * Returns -1 to go on (cfg owned by the caller, released with ob_cfg_free;
 * *first_arg as ob_cfg_load, may be NULL) or the exit code, cfg then
 * holding nothing. */
int ob_program_start(const struct ob_program *p, void *cfg, int argc, char **argv,
    int *first_arg);

/* The checks of the shared rows that the config engine cannot make alone:
 * --metrics is an address ob_http_endpoint_url takes, --demo-admin has a
 * loopback --metrics (ob_demo_admin_check). Rows the table lacks are not
 * checked. OB_OK, or OB_EINVAL with one line in err. Also a reload's
 * check (outbox/reload.h). */
int ob_program_check(const struct ob_cfg_opt *table, const void *cfg, char *err,
    size_t errlen);

/* Install the signal layer (ob_sig_init) with a second stop signal
 * exiting at once. OB_OK, or OB_EINVAL after "<name>: <reason>". */
int ob_program_signals(const struct ob_program *p);

/* With --metrics set: serve reg on it (ob_http_endpoint_start_with; ready
 * and arg as there), with admin's route when --demo-admin is on (admin
 * must then be given and outlive the endpoint), then log
 * "<events>.metrics.listening" with the address and the bound port, and
 * announce the admin endpoint (ob_demo_admin_announce). *ep is owned by
 * the caller (ob_http_endpoint_stop), NULL when --metrics is off. OB_OK,
 * or the error after "<name>: --metrics: <reason>". */
int ob_program_serve_metrics(const struct ob_program *p, const void *cfg,
    struct ob_metrics *reg, ob_ready_fn ready, void *arg, const struct ob_demo_admin *admin,
    struct ob_http_endpoint **ep);

/* With --ready-file set: write url to it (ob_ready_file_write). OB_OK, or
 * OB_EINVAL after "<name>: cannot write --ready-file <reason>". */
int ob_program_ready(const struct ob_program *p, const void *cfg, const char *url);

/* Wait for a stop signal; with reload, run it for each burst of SIGHUPs
 * and then after(arg) when after is set (ob_reload_until_stop_then);
 * without, SIGHUP is ignored. Then log "<events>.stopping" with the
 * signal. */
void ob_program_wait(const struct ob_program *p, const struct ob_reload *reload,
    void (*after)(void *arg), void *arg);

/* A program made of subcommands. */
struct ob_command {
	const char *name;                 /* "serve" */
	int (*run)(int argc, char **argv); /* argv[0] is the name; returns the exit code */
	const char *help;                 /* one line of the program's --help */
	unsigned flags;                   /* the program's own marks, not read here */
};

/* The main of program ("outboxctl": its usage, errors and log name), with
 * commands (ended by a NULL name) and summary, the paragraph under the
 * usage line: set up the log (program, info, text), then
 *   no argument: the usage on stderr -> 2
 *   --help, -h, help: the usage on stdout -> 0
 *   --help-markdown: each command's run(2, {name, "--help-markdown"}),
 *   a blank line between, so each must print its own tables then -> 0
 *   a command's name: its run(argc - 1, argv + 1) -> its code, *ran = it
 *   else "<program>: unknown command 'X' (see <program> --help)" -> 2,
 *   X redacted like a conninfo and escaped for the terminal.
 * *ran is NULL unless a command ran. */
int ob_program_dispatch(const char *program, const char *summary,
    const struct ob_command *commands, int argc, char **argv, const struct ob_command **ran);

#endif
