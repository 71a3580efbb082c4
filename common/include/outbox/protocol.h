/*
 * protocol.h - the check every program makes at start and after every
 * reconnect: does its role hold the privileges it needs, and does the
 * database schema serve the protocol version this build speaks?
 * (outbox.protocols / inbox.protocols, and their check_protocol function;
 * docs/relay.md, "Upgrading"; the grants: sql/<set>/functions/grants.sql.)
 */
#ifndef OUTBOX_PROTOCOL_H
#define OUTBOX_PROTOCOL_H

#include <libpq-fe.h>
#include <stddef.h>

/* The versions of this build. relay 5: outbox.claim says whether another
 * claim would find anything now (`more`, sql/outbox/021_claim_more.sql);
 * relay 4: it takes max_bytes, the byte budget of a batch (019); relay 3:
 * it takes skip_dead_heads (018); relay 2: streams and batches (012). */
#define OB_PROTOCOL_RELAY 5
/* producer 3: /v1/messages' keys are outbox.message_keys (026); producer
 * 2: POST /v1/messages (015); producer 1: outbox.enqueue. */
#define OB_PROTOCOL_PRODUCER 3
#define OB_PROTOCOL_ADMIN 2
/* viewer 1: the web view's reads (sql/outbox/016_viewer.sql, inbox 007). */
#define OB_PROTOCOL_VIEWER 1
/* consumer 5: every statement calls the inbox's SQL contract
 * (sql/inbox/functions/, docs/inbox-sql.md; a schema of 010 has it);
 * consumer 4: every dedup transaction locks inbox.source_gate, so that the
 * empty source and a named one of one key never apply at once
 * (sql/inbox/009_source_gate.sql); consumer 3: the dedup record's identity
 * is (source, topic, idempotency_key) (008); consumer 2 keyed it by
 * (topic, key) (005), consumer 1 by the key. */
#define OB_PROTOCOL_CONSUMER 5

/* Ask schema ("outbox" or "inbox") whether it serves component at
 * version, after checking that the session's role holds the privileges
 * component ("producer", "relay", "admin", "consumer", "viewer") needs there, the
 * grants of its group role (docs/security.md, "Database roles"). OB_OK;
 * OB_EDB with one line in err, "permission denied for KIND OBJECT: role
 * "R" has no PRIVILEGE on it; ... GRANT GROUP TO R", when a privilege is
 * missing; OB_EPROTO with one line in err that says what to upgrade (a
 * schema too old to know versions counts as too old); OB_EDB when the
 * database could not be asked. */
int ob_protocol_check(PGconn *conn, const char *schema, const char *component, int version,
    char *err, size_t errlen);

#endif
