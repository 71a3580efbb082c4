/*
 * protocol.h - the check every program makes at start and after every
 * reconnect: does the database schema serve the protocol version this
 * build speaks? (outbox.protocols / inbox.protocols, and their
 * check_protocol function; docs/relay.md, "Upgrading".)
 */
#ifndef OUTBOX_PROTOCOL_H
#define OUTBOX_PROTOCOL_H

#include <libpq-fe.h>
#include <stddef.h>

/* The versions of this build. */
#define OB_PROTOCOL_RELAY 2
#define OB_PROTOCOL_PRODUCER 1
#define OB_PROTOCOL_ADMIN 2
#define OB_PROTOCOL_CONSUMER 1

/* Ask schema ("outbox" or "inbox") whether it serves component at
 * version. OB_OK; OB_EPROTO with one line in err that says what to
 * upgrade (a schema too old to know versions counts as too old); OB_EDB
 * when the database could not be asked. */
int ob_protocol_check(PGconn *conn, const char *schema, const char *component, int version,
    char *err, size_t errlen);

#endif
