/*
 * ctl_util.h - what every outboxctl subcommand shares: flag parsing that
 * allows flags after positional arguments, connecting, the run of a
 * subcommand (parse, check, connect, its work, release), id parsing, and
 * printing query results as a human table, a vertical record, or JSON.
 */
#ifndef OUTBOX_CTL_UTIL_H
#define OUTBOX_CTL_UTIL_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "outbox/config.h"

/* The database a subcommand works on, and so the protocol this build
 * needs its schema to serve. */
enum ctl_db {
	CTL_DB_OUTBOX, /* the producer's: outbox schema, admin protocol */
	CTL_DB_INBOX,  /* the consumer's: inbox schema, consumer protocol (its
	                * tables are the consumer's) */
};

struct ctl_cmd {
	const char *name;        /* "dead requeue": used in messages */
	const char *synopsis;
	const char *description;
	const struct ob_cfg_opt *table;
	enum ctl_db db;          /* what ctl_run connects to: its row of table */
	const char *arg_hint;    /* said after "unexpected argument 'X'", or NULL */
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
 * else false after "outboxctl NAME: unexpected argument 'X'" (then
 * cmd->arg_hint when not NULL), X the first of pos shown as ctl_shown
 * shows it. */
bool ctl_no_arguments(const struct ctl_cmd *cmd, char *const *pos, int npos);

/* OB_OK when conn reaches PostgreSQL directly, or through a pooler the
 * environment says pools sessions (OUTBOX_POOLER=session, the variable
 * of the relay's and consumer's --pooler): outboxctl keeps session
 * settings and migrations run as one session's transaction. Else
 * OB_EINVAL and one line in err (ob_pg_need_session). */
int ctl_need_session(PGconn *conn, char *err, size_t errlen);

/* Connect (application name outboxctl; ctl_need_session), set UTC/ISO
 * timestamps and durable commits, and check that db's schema serves this build's
 * protocol (ob_protocol_check). OB_OK with *out owned (release with
 * PQfinish), else the error code with one line in err and *out untouched. */
int ctl_open(enum ctl_db db, const char *conninfo, PGconn **out, char *err, size_t errlen);

/* ctl_open to cmd->db, or "outboxctl NAME: reason" (one line) and NULL.
 * Returns owned, release with PQfinish. */
PGconn *ctl_connect(const struct ctl_cmd *cmd, const char *conninfo);

/* What a subcommand checks before it connects: false after one line on
 * stderr when its flags and positional arguments cannot go together. */
typedef bool ctl_check(const struct ctl_cmd *cmd, const void *cfg, char *const *pos, int npos);

/* A subcommand's work once connected: the exit code (CTL_EXIT_*). conn
 * and cfg are borrowed (ctl_run releases them). */
typedef int ctl_body(const struct ctl_cmd *cmd, PGconn *conn, void *cfg, char **pos, int npos);

/* A subcommand from start to end: its config (cfg_size bytes, the struct
 * cmd->table describes) allocated and filled by ctl_parse, check (NULL: no
 * positional argument, ctl_no_arguments), ctl_connect to cmd->db with the
 * value of that database's row of the table (--db, --inbox-db: the table
 * must have it, required, as ctl_rows.h makes them), body; then
 * the connection closed and the config released. Returns the exit code:
 * help 0, usage 2, a failed connection 1, else body's. */
int ctl_run(const struct ctl_cmd *cmd, size_t cfg_size, int argc, char **argv, ctl_check *check,
    ctl_body *body);

/* The end of a read in a read-only transaction (prove's and the web
 * view's snapshots): rc OB_OK, committed (OB_EDB with the reason in err if
 * COMMIT fails); else res (NULL is ok) freed, the transaction rolled back,
 * and rc returned, "SIDE: out of memory" in err for OB_ENOMEM (other
 * codes: err is already said). */
int ctl_read_end(PGconn *conn, PGresult *res, int rc, const char *side, char *err,
    size_t errlen);

/* Run sql with params[0..n) on conn for rows: the result (owned, release
 * with PQclear), or NULL after "outboxctl NAME: reason" (one line). */
PGresult *ctl_query(const struct ctl_cmd *cmd, PGconn *conn, const char *sql, int n,
    const char *const *params);

/* A command group ("outboxctl dead list|show|requeue"): argv[0] is the
 * group's name, argv[1] names one of cmds[0..n) (each named "GROUP SUB"),
 * which is run as run(cmd, argc - 1, argv + 1). --help prints the group's
 * usage line (exit 0), --help-markdown each subcommand's table (exit 0);
 * anything else one line, "outboxctl GROUP: want A, B or C (got 'X')",
 * and exit 2. */
int ctl_dispatch(const char *group, const struct ctl_cmd *const *cmds, size_t n,
    int (*run)(const struct ctl_cmd *cmd, int argc, char **argv), int argc, char **argv);

/* SQL: the timestamp column col as every output shows one, ISO 8601 in
 * UTC with milliseconds (the session is UTC: ctl_open), named col. */
#define CTL_SQL_TS(col) "to_char(" col ", 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') AS " col

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

/* s as a JSON string (new reference); NULL is null. Text that is not
 * UTF-8 (a SQL_ASCII database can hold it) goes escaped (ob_term_escape),
 * so the field is still there and the JSON still valid. */
struct json_t *ctl_json_text(const char *s);

/* Print j on stdout (json_dumpf with flags), then a newline; takes
 * ownership of j. */
void ctl_print_json(struct json_t *j, size_t flags);

#endif
