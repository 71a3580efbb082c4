/*
 * db_session.h - a worker's database session: opened with the protocol
 * check, LISTEN outbox_enqueued and the session settings the claim and
 * record rely on, re-opened after a failure or a loss with a jittered
 * backoff (outbox/backoff.h: a wait drawn from [0, RELAY_DB_RETRY_MIN_MS *
 * 2^failures], at most RELAY_DB_RETRY_MAX_MS), so the workers that lost
 * their connections together, in this relay and in others, do not
 * reconnect together.
 *
 * Owns the connection and the worker's "connected" flag (readiness,
 * metrics.h). Logs relay.db.connected, relay.db.connect_failed,
 * relay.db.lost and relay.protocol.refused; never sleeps: the caller waits
 * the backoff it is told (so it can wake for a stop). What was claimed on
 * a lost connection comes back when its lease expires: the caller drops
 * its frames. Worker loop only.
 */
#ifndef OUTBOX_RELAY_DB_SESSION_H
#define OUTBOX_RELAY_DB_SESSION_H

#include <libpq-fe.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "outbox/backoff.h"
#include "relay.h"

#define RELAY_DB_RETRY_MIN_MS 100
#define RELAY_DB_RETRY_MAX_MS 5000

struct relay_db_session {
	const struct relay_config *cfg; /* borrowed: --db, --synchronous-commit */
	const char *owner;        /* borrowed: this worker's name, for the log lines */
	_Atomic int *connected;   /* the worker's live row (1 while connected), or NULL */
	PGconn *conn;             /* NULL while there is none */
	bool had_conn;            /* a connection was up: the next one is a reconnect */
	struct ob_backoff retry;  /* the wait after the next failed attempt */
};

/* Set s up (zeroed first), not connected. Borrows every argument. */
void relay_db_session_init(struct relay_db_session *s, const struct relay_config *cfg,
    const char *owner, _Atomic int *connected);

/* (Re)open the connection, closing any there was. OB_OK: connected and
 * set up. OB_EPROTO: the schema does not serve this relay (logged; the
 * connection is kept for the caller to close: a restart cannot help).
 * Else the attempt failed (logged); *wait_ms: how long to wait before the
 * next one (jittered; its ceiling doubles). Blocks for the round trips. */
int relay_db_session_open(struct relay_db_session *s, int64_t *wait_ms);

/* The connection broke: log relay.db.lost and close it. */
void relay_db_session_lost(struct relay_db_session *s);

/* Close the connection (if any), not connected. */
void relay_db_session_close(struct relay_db_session *s);

#endif
