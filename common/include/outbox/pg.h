/*
 * pg.h - the libpq boundary: connect, run, check, translate errors.
 *
 * Every PGresult is checked with ob_pg_check and cleared by its caller on
 * every path. Server messages go into the caller's buffer, prefixed with
 * what was being done; a conninfo is never logged unredacted, and libpq's
 * message after a failed connect is scrubbed of its secrets.
 */
#ifndef OUTBOX_PG_H
#define OUTBOX_PG_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Open a connection (blocking). On success *out is owned by the caller
 * (PQfinish). On failure OB_EDB and a one-line reason in err (password
 * redacted). application_name is set to appname when not NULL. */
int ob_pg_connect(const char *conninfo, const char *appname, PGconn **out,
    char *err, size_t errlen);

/* OB_OK when PQresultStatus(res) == want, else OB_EDB with "what: message"
 * in err. Does not clear res. res may be NULL (out of memory / lost conn). */
int ob_pg_check(const PGresult *res, ExecStatusType want, const char *what,
    char *err, size_t errlen);

/* Run sql (no parameters, any number of statements) expecting COMMAND_OK or
 * TUPLES_OK; clears the result. */
int ob_pg_exec(PGconn *conn, const char *sql, const char *what, char *err,
    size_t errlen);

/* Run one statement with n text parameters (NULL = SQL NULL) expecting
 * COMMAND_OK; *rows (may be NULL) gets the rows it changed. Clears the
 * result. OB_OK or OB_EDB with "what: message" in err. */
int ob_pg_command(PGconn *conn, const char *sql, int n, const char *const *params,
    const char *what, int64_t *rows, char *err, size_t errlen);

/* Run one statement with n text parameters (NULL = SQL NULL) expecting
 * rows: the result (the caller clears it), or NULL with "what: message"
 * in err. */
PGresult *ob_pg_rows(PGconn *conn, const char *sql, int n, const char *const *params,
    const char *what, char *err, size_t errlen);

/* COMMIT, and check that it really committed: on a transaction that had
 * failed, the server answers COMMIT with "ROLLBACK" and no error. */
int ob_pg_commit(PGconn *conn, char *err, size_t errlen);

/* Make every COMMIT of this session wait for its WAL flush, whatever the
 * server's, database's or role's default: synchronous_commit is raised
 * from off to on, once per connection (nothing per transaction); a
 * stronger setting (remote_write, remote_apply) is kept. For a program
 * whose reply or effect follows a commit (the consumer's "applied", the
 * producer API's 201): a crash must not undo what it already answered.
 * Behind a connection pooler (ob_pg_pooled) no session setting holds:
 * there it checks that the server's setting is durable already and
 * answers OB_EINVAL, with what to change, when it is off. OB_OK or OB_EDB. */
int ob_pg_durable_commits(PGconn *conn, char *err, size_t errlen);

/* Whether conn reaches PostgreSQL through a connection pooler such as
 * PgBouncer: told at connect (ob_pg_connect) by the backend pid the
 * startup reported not being the pid of the server process that answers.
 * Behind one, ob_pg_exec_prepared runs its statements unnamed (a pooler
 * in transaction mode may run each transaction on another server
 * session). */
bool ob_pg_pooled(const PGconn *conn);

/* For a program that needs one server session for its whole connection
 * (LISTEN, session settings, prepared statements: the relay, the
 * consumer, outboxctl), after each ob_pg_connect: OB_OK when conn is
 * direct, or when the user said the pooler pools sessions (session_pooler,
 * told as declare says, e.g. "--pooler session"): conn is then used as a
 * direct one (ob_pg_pooled false: one server session for its life). Else
 * OB_EINVAL and one line in err naming program and what to do. */
int ob_pg_need_session(PGconn *conn, bool session_pooler, const char *program,
    const char *declare, char *err, size_t errlen);

/* ROLLBACK, ignoring errors (used on failure paths; the connection may be
 * gone, which the next use reports). */
void ob_pg_rollback(PGconn *conn);

/* PQexecParams through a statement prepared once per connection under
 * name (the server keeps it; a hot statement is parsed and planned once).
 * The first call on a connection prepares it. Inside a transaction block
 * it runs unprepared: a failed first execute would abort the transaction;
 * behind a connection pooler (ob_pg_pooled) always unprepared.
 * Returns the result (may be NULL); release with PQclear. */
PGresult *ob_pg_exec_prepared(PGconn *conn, const char *name, const char *sql,
    int nparams, const char *const *values, const int *lengths, const int *formats);

/* The SQLSTATE of a failed result ("40001"...), or "" when none. */
const char *ob_pg_sqlstate(const PGresult *res);

/* The SQLSTATE of the last failure ob_pg_check (and so every ob_pg_ call
 * here) reported in this thread, "" when it had none (a failed connect, a
 * COMMIT that rolled back: never an older failure's): for a caller that
 * decides after a rollback whether the whole transaction is worth a retry
 * (common/migrate.c: a deadlock between two databases' migrations). */
const char *ob_pg_failed_sqlstate(void);

/* True when conn is unusable and must be reconnected. */
bool ob_pg_broken(PGconn *conn);

/* Parse a bigint column value. */
int64_t ob_pg_int64(const PGresult *res, int row, int col);

/* The one line of a failed connect into err: "connect to '<conninfo
 * redacted>': <libpq_msg scrubbed>" (ob_pg_redact_conninfo, ob_pg_scrub).
 * ob_pg_connect reports with it; so must anything else that prints a
 * libpq message after a connection attempt. */
void ob_pg_connect_error(const char *conninfo, const char *libpq_msg, char *err,
    size_t errlen);

/* Copy conninfo into out (truncated, always NUL-terminated) with the value
 * of every secret key replaced by "***": password, sslpassword, passfile,
 * in keyword form (quoted or not, blanks around '=', backslash escapes),
 * in a URI's user info ("postgresql://u:***@h", malformed ones too:
 * "%zz", bad brackets or ports), in a URI query under any letter case or
 * percent-encoding of the key ("?%70assword=***"), and in a URI given as a
 * keyword value (dbname=postgresql://...). Text that is no conninfo comes
 * back as it is. Pure string work (pg_redact.c). */
void ob_pg_redact_conninfo(const char *conninfo, char *out, size_t outlen);

/* Copy text (e.g. libpq's PQerrorMessage after connecting with conninfo,
 * which may echo the conninfo or a piece of it) into out with every form
 * of each secret value of conninfo replaced by "***": as written, unquoted
 * and unescaped, percent-decoded and percent-encoded, and as libpq itself
 * parses it (PQconninfoParse). When conninfo is a URI that libpq reads
 * differently from its writer ("u:pa@ss@h", "u:pa/ss@h": libpq puts part
 * of the password into the host or database name), or scrubbing runs out
 * of memory, out gets a note instead of text and true is returned (text
 * withheld); false when out is text, scrubbed. Blocks on nothing. */
bool ob_pg_scrub(const char *conninfo, const char *text, char *out, size_t outlen);

#endif
