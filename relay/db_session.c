/*
 * db_session.c - a worker's database connection and its backoff
 * (db_session.h). Nothing here claims or records.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "db_session.h"
#include "outbox/err.h"
#include "outbox/log.h"
#include "outbox/pg.h"
#include "outbox/protocol.h"

static void
set_connected(struct relay_db_session *s, bool up)
{
	if (s->connected != NULL)
		atomic_store(s->connected, up ? 1 : 0);
}

void
relay_db_session_init(struct relay_db_session *s, const struct relay_config *cfg,
    const char *owner, _Atomic int *connected)
{
	memset(s, 0, sizeof(*s));
	s->cfg = cfg;
	s->owner = owner;
	s->connected = connected;
	ob_backoff_init(&s->retry, RELAY_DB_RETRY_MIN_MS, RELAY_DB_RETRY_MAX_MS);
}

int
relay_db_session_open(struct relay_db_session *s, int64_t *wait_ms)
{
	char err[1024], q[1100], sync[64];
	if (s->conn != NULL) {
		PQfinish(s->conn);
		s->conn = NULL;
	}
	set_connected(s, false);
	/* --synchronous-commit off (the default): the next round does not wait
	 * for the WAL flush of the last one. A claim or outcome lost in a crash
	 * was written on a connection that died with it, so no stale fence can
	 * be used afterwards; the batch is delivered again and the consumer's
	 * durable dedup record answers duplicate (docs/relay.md). */
	snprintf(sync, sizeof(sync), "SET synchronous_commit = %s", s->cfg->synchronous_commit);
	int rc = ob_pg_connect(s->cfg->db, "outbox-relay", &s->conn, err, sizeof(err));
	if (rc == OB_OK)
		rc = ob_pg_need_session(s->conn, strcmp(s->cfg->pooler, "session") == 0,
		    "outbox-relay", "--pooler session", err, sizeof(err));
	if (rc == OB_OK)
		rc = ob_protocol_check(s->conn, "outbox", "relay", RELAY_PROTOCOL, err, sizeof(err));
	if (rc == OB_EPROTO) {
		ob_error("relay.protocol.refused", "owner=%s protocol=%d err=%s", s->owner,
		    RELAY_PROTOCOL, ob_log_q(err, q, sizeof(q)));
		return OB_EPROTO;
	}
	if (rc != OB_OK ||
	    ob_pg_exec(s->conn, "LISTEN outbox_enqueued", "listen", err, sizeof(err)) != OB_OK ||
	    /* The stream reads and the batch lookups are index walks;
	     * a bitmap scan over a backlog never helps here. */
	    ob_pg_exec(s->conn, "SET enable_bitmapscan = off", "session settings", err,
	        sizeof(err)) != OB_OK ||
	    /* outbox.claim relies on each statement's fresh snapshot */
	    ob_pg_exec(s->conn, "SET default_transaction_isolation = 'read committed'",
	        "session settings", err, sizeof(err)) != OB_OK ||
	    ob_pg_exec(s->conn, sync, "session settings", err, sizeof(err)) != OB_OK) {
		*wait_ms = ob_backoff_next(&s->retry);
		ob_warn("relay.db.connect_failed", "owner=%s retry_in_ms=%" PRId64 " err=%s", s->owner,
		    *wait_ms, ob_log_q(err, q, sizeof(q)));
		if (s->conn != NULL) {
			PQfinish(s->conn);
			s->conn = NULL;
		}
		return rc != OB_OK ? rc : OB_EDB;
	}
	ob_backoff_reset(&s->retry);
	set_connected(s, true);
	ob_info("relay.db.connected", "owner=%s listen=outbox_enqueued protocol=%d%s", s->owner,
	    RELAY_PROTOCOL, s->had_conn ? " reconnect=1" : "");
	s->had_conn = true;
	return OB_OK;
}

void
relay_db_session_lost(struct relay_db_session *s)
{
	char q[600];
	ob_warn("relay.db.lost", "owner=%s err=%s", s->owner,
	    ob_log_q(PQerrorMessage(s->conn), q, sizeof(q)));
	PQfinish(s->conn);
	s->conn = NULL;
}

void
relay_db_session_close(struct relay_db_session *s)
{
	if (s->conn != NULL)
		PQfinish(s->conn);
	s->conn = NULL;
	set_connected(s, false);
}
