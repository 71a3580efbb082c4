/*
 * source.c - a source name: checking one (the relay's --source), and
 * deriving the default from the database (source.h says the rule). The
 * relay uses it once, at start, before its workers are forked (they all
 * send the same name); outboxctl prove --derived-source as a relay would.
 */
#include <stdio.h>
#include <string.h>

#include "outbox/err.h"
#include "outbox/pg.h"
#include "outbox/source.h"

/* The plain form's longest database name: 16 hex digits, '.', the name
 * (a literal: it is pasted into the SQL text). */
#define SOURCE_PLAIN_NAME_MAX 46
_Static_assert(16 + 1 + SOURCE_PLAIN_NAME_MAX == OB_WIRE_MAX_SOURCE, "the plain form fits");

int
ob_source_check(const char *s, char *err, size_t errlen)
{
	size_t n = s != NULL ? strlen(s) : 0;
	if (n < 1 || n > OB_WIRE_MAX_SOURCE || !ob_wire_source_ok(s, n)) {
		snprintf(err, errlen, "--source '%s': must be 1..%d bytes of [A-Za-z0-9._-]",
		    s != NULL ? s : "", OB_WIRE_MAX_SOURCE);
		return OB_EINVAL;
	}
	return OB_OK;
}

#define STR_(x) #x
#define STR(x) STR_(x)

/* The database name's own bytes decide the form; a name that is not plain
 * (too long, or a byte outside the set, '.' included) is hashed, so the
 * two forms never meet: a plain one has no '.' after the identifier. */
static const char sql_derive[] =
    "SELECT CASE WHEN d ~ '^[A-Za-z0-9_-]{1," STR(SOURCE_PLAIN_NAME_MAX) "}$'"
    "   AND octet_length(d) <= " STR(SOURCE_PLAIN_NAME_MAX) " THEN s || '.' || d"
    "  ELSE s || '.sha256.' || left(encode(sha256(convert_to(d, 'UTF8')), 'hex'), 16) END"
    " FROM (SELECT lpad(to_hex(system_identifier), 16, '0') AS s,"
    "   current_database()::text COLLATE \"C\" AS d FROM pg_control_system()) x";

int
ob_source_derive(PGconn *conn, char *out, char *err, size_t errlen)
{
	PGresult *res = PQexec(conn, sql_derive);
	if (ob_pg_check(res, PGRES_TUPLES_OK, "derive --source", err, errlen) != OB_OK) {
		PQclear(res);
		return OB_EDB;
	}
	const char *v = PQntuples(res) == 1 ? PQgetvalue(res, 0, 0) : "";
	char why[256];
	if (ob_source_check(v, why, sizeof(why)) != OB_OK) {
		snprintf(err, errlen, "derive --source: the database gave '%s', not a source name;"
		    " set --source", v);
		PQclear(res);
		return OB_EDB;
	}
	snprintf(out, OB_WIRE_MAX_SOURCE + 1, "%s", v);
	PQclear(res);
	return OB_OK;
}
