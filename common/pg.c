/*
 * pg.c - the libpq boundary: connect, check results, translate errors,
 * and redact a conninfo's password for every message that names one.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "outbox/err.h"
#include "outbox/pg.h"

/* Copy a libpq message into err on one line (libpq ends them with '\n'). */
static void
one_line(char *err, size_t errlen, const char *prefix, const char *msg)
{
	snprintf(err, errlen, "%s: %s", prefix, msg != NULL && *msg ? msg : "unknown error");
	for (char *p = err; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = (p[1] == '\0') ? '\0' : ' ';
}

static void
ignore_notice(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

int
ob_pg_connect(const char *conninfo, const char *appname, PGconn **out,
    char *err, size_t errlen)
{
	const char *keys[] = { "dbname", "application_name", "connect_timeout", NULL };
	const char *vals[] = { conninfo, appname != NULL ? appname : "outbox", "10", NULL };
	/* expand_dbname=1: conninfo may be a keyword string or a URI. */
	PGconn *conn = PQconnectdbParams(keys, vals, 1);
	if (conn == NULL) {
		snprintf(err, errlen, "connect: out of memory");
		return OB_ENOMEM;
	}
	if (PQstatus(conn) != CONNECTION_OK) {
		char redacted[512];
		ob_pg_redact_conninfo(conninfo, redacted, sizeof(redacted));
		char prefix[600];
		snprintf(prefix, sizeof(prefix), "connect to '%s'", redacted);
		one_line(err, errlen, prefix, PQerrorMessage(conn));
		PQfinish(conn);
		return OB_EDB;
	}
	/* Server NOTICEs ("... already exists, skipping") are not our events. */
	PQsetNoticeProcessor(conn, ignore_notice, NULL);
	*out = conn;
	return OB_OK;
}

int
ob_pg_check(const PGresult *res, ExecStatusType want, const char *what,
    char *err, size_t errlen)
{
	if (res != NULL && PQresultStatus(res) == want)
		return OB_OK;
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

int
ob_pg_commit(PGconn *conn, char *err, size_t errlen)
{
	PGresult *res = PQexec(conn, "COMMIT");
	int rc = ob_pg_check(res, PGRES_COMMAND_OK, "commit", err, errlen);
	if (rc == OB_OK && strcmp(PQcmdStatus(res), "COMMIT") != 0) {
		snprintf(err, errlen, "commit: the transaction had failed and was rolled back");
		rc = OB_EDB;
	}
	PQclear(res);
	return rc;
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
	if (PQtransactionStatus(conn) != PQTRANS_IDLE)
		return PQexecParams(conn, sql, nparams, NULL, values, lengths, formats, 0);
	PGresult *r = PQexecPrepared(conn, name, nparams, values, lengths, formats, 0);
	if (r == NULL || PQresultStatus(r) != PGRES_FATAL_ERROR ||
	    strcmp(ob_pg_sqlstate(r), "26000") != 0) /* invalid_sql_statement_name */
		return r;
	PQclear(r);
	r = PQprepare(conn, name, sql, nparams, NULL);
	if (r == NULL || PQresultStatus(r) != PGRES_COMMAND_OK)
		return r;
	PQclear(r);
	return PQexecPrepared(conn, name, nparams, values, lengths, formats, 0);
}

/* Bounded output for the redactor: truncates, always NUL-terminated. */
struct out {
	char *p;
	size_t len, cap;
};

static void
put(struct out *o, const char *s, size_t n)
{
	size_t room = o->cap - 1 - o->len;

	if (n > room)
		n = room;
	memcpy(o->p + o->len, s, n);
	o->len += n;
	o->p[o->len] = '\0';
}

/* Keyword form: "host=h password = 'it\'s' dbname=d". Values may be
 * single-quoted; a backslash escapes the next character either way. */
static void
redact_keywords(const char *s, struct out *o)
{
	while (*s != '\0') {
		const char *k = s, *v;
		size_t klen;

		if (isspace((unsigned char)*s)) {
			put(o, s++, 1);
			continue;
		}
		while (*s != '\0' && *s != '=' && !isspace((unsigned char)*s))
			s++;
		klen = (size_t)(s - k);
		while (isspace((unsigned char)*s))
			s++;
		if (*s != '=') { /* not key=value: copy as is */
			put(o, k, (size_t)(s - k));
			continue;
		}
		for (s++; isspace((unsigned char)*s); s++)
			;
		put(o, k, (size_t)(s - k));
		v = s;
		if (*s == '\'') {
			for (s++; *s != '\0' && *s != '\''; s++)
				if (*s == '\\' && s[1] != '\0')
					s++;
			if (*s == '\'')
				s++;
		} else {
			for (; *s != '\0' && !isspace((unsigned char)*s); s++)
				if (*s == '\\' && s[1] != '\0')
					s++;
		}
		if (klen == 8 && strncmp(k, "password", 8) == 0)
			put(o, "***", 3);
		else
			put(o, v, (size_t)(s - v));
	}
}

/* URI form: postgresql://user:secret@host/db?password=x&sslmode=y */
static void
redact_uri(const char *s, size_t scheme, struct out *o)
{
	const char *auth = s + scheme, *at = NULL, *rest, *q;
	size_t alen = strcspn(auth, "/?#");

	put(o, s, scheme);
	for (size_t i = 0; i < alen; i++)
		if (auth[i] == '@')
			at = auth + i; /* the last '@' ends the user info */
	if (at != NULL) {
		const char *colon = memchr(auth, ':', (size_t)(at - auth));
		if (colon != NULL) {
			put(o, auth, (size_t)(colon + 1 - auth));
			put(o, "***", 3);
			put(o, at, (size_t)(auth + alen - at));
		} else {
			put(o, auth, alen);
		}
	} else {
		put(o, auth, alen);
	}
	rest = auth + alen;
	if ((q = strchr(rest, '?')) == NULL) {
		put(o, rest, strlen(rest));
		return;
	}
	put(o, rest, (size_t)(q + 1 - rest));
	for (s = q + 1; *s != '\0' && *s != '#';) {
		size_t plen = strcspn(s, "&#");
		if (plen >= 9 && strncmp(s, "password=", 9) == 0) {
			put(o, "password=***", 12);
		} else {
			put(o, s, plen);
		}
		s += plen;
		if (*s == '&')
			put(o, s++, 1);
	}
	put(o, s, strlen(s));
}

void
ob_pg_redact_conninfo(const char *conninfo, char *out, size_t outlen)
{
	static const char *const schemes[] = { "postgresql://", "postgres://" };
	struct out o = { out, 0, outlen };

	if (outlen == 0)
		return;
	out[0] = '\0';
	if (conninfo == NULL)
		return;
	for (size_t i = 0; i < 2; i++) {
		size_t n = strlen(schemes[i]);
		if (strncasecmp(conninfo, schemes[i], n) == 0) {
			redact_uri(conninfo, n, &o);
			return;
		}
	}
	redact_keywords(conninfo, &o);
}
