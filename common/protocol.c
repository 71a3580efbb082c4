/*
 * protocol.c - the schema's protocol check (protocol.h).
 */
#include <stdio.h>
#include <string.h>

#include "outbox/err.h"
#include "outbox/pg.h"
#include "outbox/protocol.h"

int
ob_protocol_check(PGconn *conn, const char *schema, const char *component, int version,
    char *err, size_t errlen)
{
	char sql[96], v[16];
	snprintf(sql, sizeof(sql), "SELECT %s.check_protocol($1, $2::int)",
	    strcmp(schema, "inbox") == 0 ? "inbox" : "outbox");
	snprintf(v, sizeof(v), "%d", version);
	const char *params[2] = { component, v };
	PGresult *res = PQexecParams(conn, sql, 2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) == PGRES_TUPLES_OK) {
		PQclear(res);
		return OB_OK;
	}
	const char *state = ob_pg_sqlstate(res);
	int rc = OB_EDB;
	if (strcmp(state, "OB001") == 0) {
		snprintf(err, errlen, "%s", PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY));
		rc = OB_EPROTO;
	} else if (strcmp(state, "42883") == 0 || strcmp(state, "3F000") == 0) {
		/* undefined function / schema: migrated before versions existed */
		snprintf(err, errlen, "the %s schema is older than this %s (protocol %d) needs:"
		    " run outboxctl migrate", schema, component, version);
		rc = OB_EPROTO;
	} else {
		ob_pg_check(res, PGRES_TUPLES_OK, "protocol check", err, errlen);
	}
	PQclear(res);
	return rc;
}
