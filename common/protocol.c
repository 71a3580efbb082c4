/*
 * protocol.c - the schema check every program makes at start and after
 * every reconnect (protocol.h): first, does this session's role hold the
 * privileges the program needs (the grants of its group role,
 * sql/<set>/functions/grants.sql)? Then, does the schema serve the
 * protocol version of this build?
 *
 * The privileges are asked of the catalog (has_*_privilege), which any
 * role may read, so a role granted nothing at all is told which object it
 * lacks and which group role to join, instead of failing later on its
 * first write. An object the schema does not have is skipped here: the
 * protocol check then says the schema is older or newer than this program.
 * The list names what each program uses itself (the functions it calls,
 * the tables it or they write); tests/integration/test_roles.c runs every
 * program with nothing but its group's grants.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/buf.h"
#include "outbox/err.h"
#include "outbox/pg.h"
#include "outbox/protocol.h"
#include "outbox/sqlstate.h"

/* One object a program needs, and the privileges on it (comma-separated,
 * each checked on its own). kind: schema (name unused), function (any
 * overload of the name), sequence, table or view. */
struct need {
	const char *kind, *schema, *name, *privileges;
};

/* What the check itself reads, in the component's schema (schema NULL),
 * needed by every program before its own list. */
static const struct need check_needs[] = {
	{ "schema", NULL, "", "USAGE" },
	{ "function", NULL, "check_protocol", "EXECUTE" },
	{ "table", NULL, "protocols", "SELECT" },
	{ NULL, NULL, NULL, NULL },
};

/* The demo's schema app and its tables are checked where they are
 * installed (outboxctl migrate --demo), skipped where not. */
static const struct need producer_needs[] = {
	{ "schema", "app", "", "USAGE" },
	{ "function", "outbox", "enqueue", "EXECUTE" },
	{ "table", "app", "bug_reports", "SELECT,INSERT" },
	{ "table", "app", "idempotency_keys", "SELECT,INSERT,UPDATE,DELETE" },
	{ "table", "outbox", "message_keys", "SELECT,INSERT,UPDATE,DELETE" },
	{ NULL, NULL, NULL, NULL },
};

static const struct need relay_needs[] = {
	{ "function", "outbox", "claim", "EXECUTE" },
	{ "function", "outbox", "record", "EXECUTE" },
	{ "function", "outbox", "discover_streams", "EXECUTE" },
	{ "function", "outbox", "relay_waiting", "EXECUTE" },
	{ "function", "outbox", "housekeep", "EXECUTE" },
	{ "function", "outbox", "topic_stats", "EXECUTE" },
	{ "table", "outbox", "events", "SELECT,TRUNCATE" },
	{ "table", "outbox", "slots", "SELECT,UPDATE" },
	{ "table", "outbox", "streams", "SELECT,INSERT,UPDATE" },
	{ "table", "outbox", "batches", "SELECT,INSERT,UPDATE,DELETE" },
	{ "table", "outbox", "retries", "SELECT,INSERT,UPDATE,DELETE" },
	{ "table", "outbox", "dead", "SELECT,INSERT,DELETE" },
	{ "table", "outbox", "ordering_blocks", "SELECT,INSERT,UPDATE,DELETE" },
	{ "table", "outbox", "ordering_next", "SELECT,INSERT,UPDATE" },
	{ "table", "outbox", "relay_waiters", "SELECT,INSERT,UPDATE,DELETE" },
	{ "sequence", "outbox", "fences", "USAGE" },
	{ "sequence", "outbox", "batch_ids", "USAGE" },
	{ NULL, NULL, NULL, NULL },
};

static const struct need admin_needs[] = {
	{ "function", "outbox", "topic_stats", "EXECUTE" },
	{ "function", "outbox", "message_state", "EXECUTE" },
	{ "function", "outbox", "requeue_dead", "EXECUTE" },
	{ "function", "outbox", "housekeep", "EXECUTE" },
	{ "function", "outbox", "slot_done", "EXECUTE" },
	{ "view", "outbox", "messages", "SELECT" },
	{ "table", "outbox", "events", "SELECT,TRUNCATE" },
	{ "table", "outbox", "slots", "SELECT,UPDATE" },
	{ "table", "outbox", "streams", "SELECT,INSERT" },
	{ "table", "outbox", "retries", "SELECT,INSERT" },
	{ "table", "outbox", "batches", "SELECT,DELETE" },
	{ "table", "outbox", "dead", "SELECT,UPDATE,DELETE" },
	{ "table", "outbox", "ordering_blocks", "SELECT,INSERT,UPDATE,DELETE" },
	{ "table", "outbox", "ordering_next", "SELECT" },
	{ NULL, NULL, NULL, NULL },
};

static const struct need consumer_needs[] = {
	/* the inbox's SQL contract (docs/inbox-sql.md), which it calls */
	{ "function", "inbox", "clock_us", "EXECUTE" },
	{ "function", "inbox", "take_source_gate", "EXECUTE" },
	{ "function", "inbox", "dedup_lookup", "EXECUTE" },
	{ "function", "inbox", "dedup_insert", "EXECUTE" },
	{ "function", "inbox", "apply_notifications", "EXECUTE" },
	{ "function", "inbox", "add_notification", "EXECUTE" },
	{ "function", "inbox", "purge", "EXECUTE" },
	{ "table", "inbox", "processed", "SELECT,INSERT,UPDATE,DELETE" },
	{ "table", "inbox", "notifications", "SELECT,INSERT" },
	{ "table", "inbox", "webhook_calls", "SELECT,INSERT,UPDATE,DELETE" },
	{ "table", "inbox", "source_gate", "UPDATE" },
	{ NULL, NULL, NULL, NULL },
};

/* The web view (outboxctl web): reads, writes nothing. */
static const struct need viewer_needs[] = {
	{ "function", "outbox", "topic_stats", "EXECUTE" },
	{ "function", "outbox", "message_state", "EXECUTE" },
	{ "view", "outbox", "messages", "SELECT" },
	{ "table", "outbox", "dead", "SELECT" },
	{ "table", "outbox", "ordering_blocks", "SELECT" },
	{ NULL, NULL, NULL, NULL },
};

static const struct need inbox_viewer_needs[] = {
	{ "table", "inbox", "processed", "SELECT" },
	{ NULL, NULL, NULL, NULL },
};

/* Each component's needs in a schema, the program's name and the group
 * role that is granted them (sql/outbox/014_roles.sql, 016_viewer.sql,
 * sql/inbox/004_roles.sql, 007_viewer.sql). */
static const struct {
	const char *schema, *component, *program, *group;
	const struct need *needs;
} components[] = {
	{ "outbox", "producer", "the producer", "outbox_producer", producer_needs },
	{ "outbox", "relay", "the relay", "outbox_relay", relay_needs },
	{ "outbox", "admin", "outboxctl", "outbox_admin", admin_needs },
	{ "inbox", "consumer", "the consumer", "outbox_consumer", consumer_needs },
	{ "outbox", "viewer", "outboxctl web", "outbox_viewer", viewer_needs },
	{ "inbox", "viewer", "outboxctl web", "outbox_viewer", inbox_viewer_needs },
};

/* The first privilege missing (in list order), the role, how many are
 * missing in all. The VALUES list is built from the constants above only. */
static const char missing_sql_head[] =
    "SELECT r.kind, CASE r.kind WHEN 'schema' THEN r.nsp ELSE r.nsp || '.' || r.name END,"
    " p.priv, current_user, quote_ident(current_user), count(*) OVER ()"
    " FROM (VALUES ";
static const char missing_sql_tail[] =
    ") AS r(ord, kind, nsp, name, privs)"
    " CROSS JOIN LATERAL unnest(string_to_array(r.privs, ',')) WITH ORDINALITY AS p(priv, pord)"
    " JOIN pg_catalog.pg_namespace n ON n.nspname = r.nsp"
    " WHERE CASE r.kind"
    "  WHEN 'schema' THEN NOT has_schema_privilege(n.oid, p.priv)"
    "  WHEN 'function' THEN"
    "   EXISTS (SELECT 1 FROM pg_catalog.pg_proc f"
    "            WHERE f.pronamespace = n.oid AND f.proname = r.name)"
    "   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_proc f"
    "            WHERE f.pronamespace = n.oid AND f.proname = r.name"
    "              AND has_function_privilege(f.oid, p.priv))"
    "  WHEN 'sequence' THEN COALESCE(NOT has_sequence_privilege((SELECT c.oid"
    "   FROM pg_catalog.pg_class c WHERE c.relnamespace = n.oid AND c.relname = r.name),"
    "   p.priv), false)"
    "  ELSE COALESCE(NOT has_table_privilege((SELECT c.oid"
    "   FROM pg_catalog.pg_class c WHERE c.relnamespace = n.oid AND c.relname = r.name),"
    "   p.priv), false) END"
    " ORDER BY r.ord, p.pord LIMIT 1";

/* OB_OK when the session's role holds every privilege component needs
 * (a component without a list needs none); OB_EDB with one line naming the
 * object, the privilege, the role and the group role to join otherwise, or
 * when the catalog could not be read. */
static int
privileges_check(PGconn *conn, const char *schema, const char *component, char *err,
    size_t errlen)
{
	const char *program = NULL, *group = NULL;
	const struct need *needs = NULL;
	for (size_t i = 0; i < sizeof(components) / sizeof(components[0]); i++)
		if (strcmp(components[i].component, component) == 0 &&
		    strcmp(components[i].schema, schema) == 0) {
			program = components[i].program;
			group = components[i].group;
			needs = components[i].needs;
		}
	if (needs == NULL)
		return OB_OK;

	struct ob_buf sql;
	ob_buf_init(&sql);
	int rc = ob_buf_puts(&sql, missing_sql_head), ord = 0;
	const struct need *lists[] = { check_needs, needs };
	for (size_t l = 0; l < sizeof(lists) / sizeof(lists[0]); l++)
		for (const struct need *n = lists[l]; rc == OB_OK && n->kind != NULL; n++, ord++)
			rc = ob_buf_printf(&sql, "%s(%d, '%s', '%s', '%s', '%s')", ord ? ", " : "",
			    ord, n->kind, n->schema != NULL ? n->schema : schema, n->name,
			    n->privileges);
	if (rc == OB_OK)
		rc = ob_buf_puts(&sql, missing_sql_tail);
	if (rc != OB_OK) {
		ob_buf_fini(&sql);
		snprintf(err, errlen, "privilege check: out of memory");
		return OB_ENOMEM;
	}
	PGresult *res = PQexec(conn, sql.data);
	ob_buf_fini(&sql);
	rc = ob_pg_check(res, PGRES_TUPLES_OK, "privilege check", err, errlen);
	if (rc == OB_OK && PQntuples(res) == 1) {
		long more = strtol(PQgetvalue(res, 0, 5), NULL, 10) - 1;
		char others[96] = "";
		if (more > 0)
			snprintf(others, sizeof(others), " (and %ld more privilege%s %s needs)",
			    more, more == 1 ? "" : "s", program);
		snprintf(err, errlen, "permission denied for %s %s: role \"%s\" has no %s on it%s;"
		    " %s's login role belongs in the group role %s: GRANT %s TO %s"
		    " (docs/security.md, \"Database roles\")",
		    PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1), PQgetvalue(res, 0, 3),
		    PQgetvalue(res, 0, 2), others, program, group, group, PQgetvalue(res, 0, 4));
		rc = OB_EDB;
	}
	PQclear(res);
	return rc;
}

int
ob_protocol_check(PGconn *conn, const char *schema, const char *component, int version,
    char *err, size_t errlen)
{
	int rc = privileges_check(conn, schema, component, err, errlen);
	if (rc != OB_OK)
		return rc;
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
	rc = OB_EDB;
	if (ob_sqlstate_is(state, OB_SQLSTATE_PROTOCOL)) {
		snprintf(err, errlen, "%s", PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY));
		rc = OB_EPROTO;
	} else if (ob_sqlstate_is(state, OB_SQLSTATE_UNDEFINED_FUNCTION) ||
	    ob_sqlstate_is(state, OB_SQLSTATE_INVALID_SCHEMA_NAME)) {
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
