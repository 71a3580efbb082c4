/*
 * source.h - a source name (the relay's --source): which producer
 * database messages come from, sent in every request frame (wire version
 * 3) so that a consumer fed by several databases keeps their keys apart
 * (its dedup identity is (source, topic, key): docs/consumer.md). Shared:
 * the relay sends it, outboxctl prove derives it as a relay would.
 */
#ifndef OUTBOX_SOURCE_H
#define OUTBOX_SOURCE_H

#include <stddef.h>

#include <libpq-fe.h>

#include "outbox/wire.h"

/* Check a --source value: 1..OB_WIRE_MAX_SOURCE bytes of [A-Za-z0-9._-].
 * OB_OK, or OB_EINVAL with the reason in err. Pure. */
int ob_source_check(const char *s, char *err, size_t errlen);

/* The default source of the database conn is connected to (blocks on one
 * query): "<system identifier, 16 hex digits>.<database name>" when the
 * name is 1..46 bytes of [A-Za-z0-9_-], else "<system identifier>.sha256.
 * <the first 16 hex digits of sha256(name)>". Stable across restarts and
 * a promotion (a standby has its primary's system identifier), distinct
 * for two databases of one server and for one name on two servers made by
 * initdb (not for two clones of one base backup: name those with
 * --source). Writes out (OB_WIRE_MAX_SOURCE + 1 bytes) on success; else
 * OB_EDB with the reason in err. */
int ob_source_derive(PGconn *conn, char *out, char *err, size_t errlen);

#endif
