/*
 * pg.c - the libpq boundary: connect, check results, translate errors.
 * A failed connect names the conninfo redacted and libpq's message
 * scrubbed of its secrets (pg_redact.c): the one way any program reports
 * a connection error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-events.h>

#include "outbox/err.h"
#include "outbox/pg.h"
#include "outbox/sqlstate.h"

/* How much of a (redacted) conninfo and of libpq's message an error shows. */
#define CONNINFO_SHOWN_MAX 512
#define PG_MSG_MAX 1024

/* Copy a libpq message into err on one line (libpq ends them with '\n'). */
static void
one_line(char *err, size_t errlen, const char *prefix, const char *msg)
{
	snprintf(err, errlen, "%s: %s", prefix, msg != NULL && *msg ? msg : "unknown error");
	for (char *p = err; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = (p[1] == '\0') ? '\0' : ' ';
}

void
ob_pg_connect_error(const char *conninfo, const char *libpq_msg, char *err, size_t errlen)
{
	char redacted[CONNINFO_SHOWN_MAX], prefix[CONNINFO_SHOWN_MAX + 16];
	char clean[PG_MSG_MAX];

	ob_pg_redact_conninfo(conninfo, redacted, sizeof(redacted));
	snprintf(prefix, sizeof(prefix), "connect to '%s'", redacted);
	(void)ob_pg_scrub(conninfo, libpq_msg, clean, sizeof(clean));
	one_line(err, errlen, prefix, clean);
}

/* The SQLSTATE of the last failure reported in this thread
 * (ob_pg_failed_sqlstate): set by ob_pg_check, and emptied by the
 * failures that carry none (a connect, a COMMIT that rolled back), so a
 * caller never reads an older failure's. */
static _Thread_local char failed_sqlstate[6];

static void
ignore_notice(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

/*
 * TCP defaults for a connection over the network (libpq ignores them on a
 * unix socket). Without them a link that goes dead (a cut, a host that
 * vanished) is noticed only by the kernel's retransmission limit, ~15 min
 * for a query in flight, and never for an idle connection: a worker would
 * sit on a dead connection long after its lease ran out. With them:
 *   - an idle connection is probed after KEEPALIVES_IDLE_S, every
 *     KEEPALIVES_INTERVAL_S, and dropped after KEEPALIVES_COUNT misses;
 *   - a write not acknowledged for TCP_USER_TIMEOUT_MS drops it (Linux).
 * They come BEFORE dbname in the array: a keyword in the caller's conninfo
 * (e.g. "tcp_user_timeout=0") overrides them (docs/operations.md).
 */
/*
 * A connection pooler (PgBouncer, and the like) answers the startup with a
 * backend key of its own, so PQbackendPID is not the pid of the server
 * process that runs our statements. Behind one in transaction mode each
 * transaction may run on another server session: a named prepared
 * statement may exist on one and not the next (ob_pg_exec_prepared runs
 * unnamed instead), and a session setting may not hold for the next
 * transaction (ob_pg_durable_commits, ob_pg_need_session). The mark lives
 * in the connection's libpq instance data, so it goes with it.
 */
static char pooled_marker;

static int
pooler_event(PGEventId id, void *info, void *arg)
{
	(void)id;
	(void)info;
	(void)arg;
	return 1; /* nothing to allocate or free: the mark is static */
}

static int
detect_pooler(PGconn *conn, char *err, size_t errlen)
{
	PGresult *r = PQexec(conn, "SELECT pg_catalog.pg_backend_pid()");
	int rc = ob_pg_check(r, PGRES_TUPLES_OK, "backend pid", err, errlen);
	if (rc == OB_OK && PQntuples(r) == 1 &&
	    strtol(PQgetvalue(r, 0, 0), NULL, 10) != (long)PQbackendPID(conn)) {
		if (!PQregisterEventProc(conn, pooler_event, "outbox pooler mark", NULL) ||
		    !PQsetInstanceData(conn, pooler_event, &pooled_marker)) {
			snprintf(err, errlen, "connect: out of memory");
			rc = OB_ENOMEM;
		}
	}
	PQclear(r);
	return rc;
}

#define CONNECT_TIMEOUT_S "10"
#define KEEPALIVES_IDLE_S "10"
#define KEEPALIVES_INTERVAL_S "3"
#define KEEPALIVES_COUNT "3"
#define TCP_USER_TIMEOUT_MS "10000"

int
ob_pg_connect(const char *conninfo, const char *appname, PGconn **out,
    char *err, size_t errlen)
{
	const char *keys[] = { "keepalives", "keepalives_idle", "keepalives_interval",
		"keepalives_count", "tcp_user_timeout", "dbname", "application_name",
		"connect_timeout", NULL };
	const char *vals[] = { "1", KEEPALIVES_IDLE_S, KEEPALIVES_INTERVAL_S, KEEPALIVES_COUNT,
		TCP_USER_TIMEOUT_MS, conninfo, appname != NULL ? appname : "outbox",
		CONNECT_TIMEOUT_S, NULL };
	/* expand_dbname=1: conninfo may be a keyword string or a URI. */
	PGconn *conn = PQconnectdbParams(keys, vals, 1);
	if (conn == NULL) {
		snprintf(err, errlen, "connect: out of memory");
		return OB_ENOMEM;
	}
	if (PQstatus(conn) != CONNECTION_OK) {
		failed_sqlstate[0] = '\0';
		ob_pg_connect_error(conninfo, PQerrorMessage(conn), err, errlen);
		PQfinish(conn);
		return OB_EDB;
	}
	/* Server NOTICEs ("... already exists, skipping") are not our events. */
	PQsetNoticeProcessor(conn, ignore_notice, NULL);
	int rc = detect_pooler(conn, err, errlen);
	if (rc != OB_OK) {
		PQfinish(conn);
		return rc;
	}
	*out = conn;
	return OB_OK;
}

bool
ob_pg_pooled(const PGconn *conn)
{
	return PQinstanceData(conn, pooler_event) == &pooled_marker;
}

int
ob_pg_need_session(PGconn *conn, bool session_pooler, const char *program,
    const char *declare, char *err, size_t errlen)
{
	if (!ob_pg_pooled(conn))
		return OB_OK;
	if (session_pooler) {
		/* one server session for this connection's life: as direct */
		PQsetInstanceData(conn, pooler_event, NULL);
		return OB_OK;
	}
	snprintf(err, errlen, "the database is reached through a connection pooler (its backend"
	    " pid is not the server's): %s needs one server session for its whole connection"
	    " (session settings, LISTEN, prepared statements), which a pooler in transaction"
	    " mode does not give; connect"
	    " %s to PostgreSQL directly, or, behind a pooler in session mode (PgBouncer"
	    " pool_mode = session), say so with %s", program, program, declare);
	return OB_EINVAL;
}

int
ob_pg_check(const PGresult *res, ExecStatusType want, const char *what,
    char *err, size_t errlen)
{
	if (res != NULL && PQresultStatus(res) == want)
		return OB_OK;
	snprintf(failed_sqlstate, sizeof(failed_sqlstate), "%s", ob_pg_sqlstate(res));
	if (res == NULL) {
		snprintf(err, errlen, "%s: no result (connection lost or out of memory)", what);
		return OB_EDB;
	}
	const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	if (msg == NULL)
		msg = PQresultErrorMessage(res);
	if (msg == NULL || *msg == '\0')
		msg = PQresStatus(PQresultStatus(res));
	one_line(err, errlen, what, msg);
	return OB_EDB;
}

int
ob_pg_exec(PGconn *conn, const char *sql, const char *what, char *err,
    size_t errlen)
{
	PGresult *res = PQexec(conn, sql);
	int rc = OB_OK;
	if (res == NULL || (PQresultStatus(res) != PGRES_COMMAND_OK &&
	        PQresultStatus(res) != PGRES_TUPLES_OK))
		rc = ob_pg_check(res, PGRES_COMMAND_OK, what, err, errlen);
	PQclear(res);
	return rc;
}

int
ob_pg_command(PGconn *conn, const char *sql, int n, const char *const *params,
    const char *what, int64_t *rows, char *err, size_t errlen)
{
	PGresult *res = PQexecParams(conn, sql, n, NULL, params, NULL, NULL, 0);
	int rc = ob_pg_check(res, PGRES_COMMAND_OK, what, err, errlen);
	if (rc == OB_OK && rows != NULL)
		*rows = strtoll(PQcmdTuples(res), NULL, 10);
	PQclear(res);
	return rc;
}

PGresult *
ob_pg_rows(PGconn *conn, const char *sql, int n, const char *const *params, const char *what,
    char *err, size_t errlen)
{
	PGresult *res = PQexecParams(conn, sql, n, NULL, params, NULL, NULL, 0);
	if (ob_pg_check(res, PGRES_TUPLES_OK, what, err, errlen) != OB_OK) {
		PQclear(res);
		return NULL;
	}
	return res;
}

int
ob_pg_commit(PGconn *conn, char *err, size_t errlen)
{
	PGresult *res = PQexec(conn, "COMMIT");
	int rc = ob_pg_check(res, PGRES_COMMAND_OK, "commit", err, errlen);
	if (rc == OB_OK && strcmp(PQcmdStatus(res), "COMMIT") != 0) {
		failed_sqlstate[0] = '\0';
		snprintf(err, errlen, "commit: the transaction had failed and was rolled back");
		rc = OB_EDB;
	}
	PQclear(res);
	return rc;
}

int
ob_pg_durable_commits(PGconn *conn, char *err, size_t errlen)
{
	if (ob_pg_pooled(conn)) {
		/* A session setting of ours would hold for one server session of
		 * the pool and leak into other clients' transactions: the role's
		 * or database's default must already be durable. */
		PGresult *r = PQexec(conn, "SELECT pg_catalog.current_setting('synchronous_commit')");
		int rc = ob_pg_check(r, PGRES_TUPLES_OK, "synchronous_commit", err, errlen);
		if (rc == OB_OK && PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "off") == 0) {
			snprintf(err, errlen, "synchronous_commit is off, and --db goes through a"
			    " connection pooler, where a session setting cannot make our commits durable:"
			    " set it on for the role or database (ALTER ROLE ... SET synchronous_commit ="
			    " on) or in the pooler's connect_query");
			rc = OB_EINVAL;
		}
		PQclear(r);
		return rc;
	}
	return ob_pg_exec(conn, "SELECT pg_catalog.set_config('synchronous_commit', 'on', false)"
	    " WHERE pg_catalog.current_setting('synchronous_commit') = 'off'",
	    "set synchronous_commit", err, errlen);
}

void
ob_pg_rollback(PGconn *conn)
{
	if (PQstatus(conn) != CONNECTION_OK)
		return;
	PQclear(PQexec(conn, "ROLLBACK"));
}

const char *
ob_pg_sqlstate(const PGresult *res)
{
	const char *s = res != NULL ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	return s != NULL ? s : "";
}

const char *
ob_pg_failed_sqlstate(void)
{
	return failed_sqlstate;
}

bool
ob_pg_broken(PGconn *conn)
{
	return conn == NULL || PQstatus(conn) != CONNECTION_OK;
}

int64_t
ob_pg_int64(const PGresult *res, int row, int col)
{
	return strtoll(PQgetvalue(res, row, col), NULL, 10);
}

PGresult *
ob_pg_exec_prepared(PGconn *conn, const char *name, const char *sql, int nparams,
    const char *const *values, const int *lengths, const int *formats)
{
	if (PQtransactionStatus(conn) != PQTRANS_IDLE || ob_pg_pooled(conn))
		return PQexecParams(conn, sql, nparams, NULL, values, lengths, formats, 0);
	PGresult *r = PQexecPrepared(conn, name, nparams, values, lengths, formats, 0);
	if (r == NULL || PQresultStatus(r) != PGRES_FATAL_ERROR ||
	    !ob_sqlstate_is(ob_pg_sqlstate(r), OB_SQLSTATE_INVALID_SQL_STATEMENT_NAME))
		return r;
	PQclear(r);
	r = PQprepare(conn, name, sql, nparams, NULL);
	if (r == NULL || PQresultStatus(r) != PGRES_COMMAND_OK)
		return r;
	PQclear(r);
	return PQexecPrepared(conn, name, nparams, values, lengths, formats, 0);
}
