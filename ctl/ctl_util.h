/*
 * ctl_util.h - what every outboxctl subcommand shares: flag parsing that
 * allows flags after positional arguments, connecting, id parsing, and
 * printing query results as a human table, a vertical record, or JSON.
 */
#ifndef OUTBOX_CTL_UTIL_H
#define OUTBOX_CTL_UTIL_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "outbox/config.h"

struct ctl_cmd {
	const char *name;        /* "dead requeue": used in messages */
	const char *synopsis;
	const char *description;
	const struct ob_cfg_opt *table;
};

/* Parse argv (argv[0] = the subcommand name) into cfg by cmd->table. Flags
 * may come before or after positional arguments ("--" ends flags); the
 * positional ones are returned in pos[0..*npos) (borrowed from argv,
 * caller frees the array with free()). Returns -1 to go on, or an exit
 * code after printing --help (0), --help-markdown (0) or a one-line error
 * (2). cfg must always be released with ob_cfg_free. */
int ctl_parse(const struct ctl_cmd *cmd, void *cfg, int argc, char **argv,
    char ***pos, int *npos);

/* A subcommand that takes no positional argument: true when npos is 0,
 * else false after "outboxctl NAME: unexpected argument 'X'" (then hint
 * when not NULL), X the first of pos shown as ctl_shown shows it. */
bool ctl_no_arguments(const struct ctl_cmd *cmd, char *const *pos, int npos, const char *hint);

/* Connect, set UTC/ISO timestamps and check that the schema serves this
 * build's admin protocol (outbox.check_protocol 'admin', OB_PROTOCOL_ADMIN);
 * or print "outboxctl NAME: reason" (one line) and return NULL. Returns
 * owned, release with PQfinish. */
PGconn *ctl_connect(const struct ctl_cmd *cmd, const char *conninfo);

/* The start of a subcommand that takes no positional argument: ctl_parse,
 * then any positional argument refused ("unexpected argument 'X'", then
 * hint when not NULL), then ctl_connect to the string *db points at (a
 * field of cfg, read after parsing). Returns -1 with *conn set to go on,
 * else the exit code (help 0, usage 2, failure 1) with *conn NULL. cfg
 * must always be released with ob_cfg_free. */
int ctl_start(const struct ctl_cmd *cmd, void *cfg, char *const *db, int argc, char **argv,
    const char *hint, PGconn **conn);

/* A command group ("outboxctl dead list|show|requeue"): argv[0] is the
 * group's name, argv[1] names one of cmds[0..n) (each named "GROUP SUB"),
 * which is run as run(cmd, argc - 1, argv + 1). --help prints the group's
 * usage line (exit 0), --help-markdown each subcommand's table (exit 0);
 * anything else one line, "outboxctl GROUP: want A, B or C (got 'X')",
 * and exit 2. */
int ctl_dispatch(const char *group, const struct ctl_cmd *const *cmds, size_t n,
    int (*run)(const struct ctl_cmd *cmd, int argc, char **argv), int argc, char **argv);

/* A text shown in a message line is cut to this (escapes included). */
#define CTL_SHOWN_MAX 512

/* jansson's dump flags for every --json output: ASCII only (control
 * characters and every character past ASCII as \uXXXX), so no stored
 * byte reaches the terminal raw and the JSON stays valid. */
#define CTL_JSON_FLAGS (JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII)

/* s (an argument, or a value from the database) as a message line may show
 * it: redacted like a conninfo (ob_pg_redact_conninfo: a URI given where
 * another value was meant) and escaped for the terminal (ob_term_escape),
 * cut to fit out. Returns out. */
const char *ctl_shown(const char *s, char *out, size_t outlen);

/* A message id: decimal digits only, 1..INT64_MAX. */
bool ctl_parse_id(const char *s, int64_t *out);

/* Format seconds as "3d4h", "2h5m", "5m3s", "12.3s". */
void ctl_fmt_age(double seconds, char *out, size_t outlen);

/* Print res (every row) as an aligned table with upper-cased column names,
 * each cell escaped for the terminal on one line (ob_term_escape), or
 * (json) as a JSON array of objects. Column conventions: a name ending
 * in "_seconds" is shown as an age in the table; int/float/numeric columns
 * are JSON numbers, bool JSON booleans, json/jsonb embedded, NULL is "-"
 * in the table and null in JSON. Columns named in hide[] (NULL-terminated,
 * may be NULL) are left out of the table only. */
void ctl_print_table(const PGresult *res, bool json, const char *const *hide);

/* Print one row as "name: value" lines, each value escaped for the
 * terminal (ob_term_escape; a column named payload is JSON text: it keeps
 * its lines, indented under the first, and its backslashes), or (json) as
 * one JSON object. */
void ctl_print_record(const PGresult *res, int row, bool json);

/* JSON value of one cell (new reference), by the conventions above. */
struct json_t *ctl_json_cell(const PGresult *res, int row, int col);

#endif
