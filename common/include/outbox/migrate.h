/*
 * migrate.h - numbered, forward-only schema migrations, embedded from sql/.
 *
 * Sets: "outbox" (producer side: outbox.events and the relays'
 * bookkeeping, outbox.enqueue, app.*) and "inbox" (consumer side:
 * inbox.processed, inbox.notifications). Applied
 * versions are recorded in public.outbox_schema_migrations; one run holds a
 * transaction-level advisory lock, so concurrent runs apply each migration
 * once.
 */
#ifndef OUTBOX_MIGRATE_H
#define OUTBOX_MIGRATE_H

#include <libpq-fe.h>
#include <stddef.h>

struct ob_migration {
	const char *set;  /* "outbox" or "inbox" */
	int version;      /* the NNN of NNN_name.sql */
	const char *name; /* "001_outbox" */
	const char *sql;
};

/* Terminated by an entry with set == NULL; sorted by set, then version. */
extern const struct ob_migration ob_migrations[];

/* Apply the pending migrations of set ("outbox", "inbox" or "all") in one
 * transaction. *applied gets how many were applied now (0 when up to date).
 * Blocks while another run holds the lock. OB_OK, OB_EINVAL (unknown set) or
 * OB_EDB with the server's message in err. Borrows conn. */
int ob_migrate(PGconn *conn, const char *set, int *applied, char *err,
    size_t errlen);

#endif
