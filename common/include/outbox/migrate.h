/*
 * migrate.h - the schema, embedded from sql/: numbered, forward-only
 * migrations for tables and other DDL, then one file per function, view and
 * trigger, re-applied after them.
 *
 * Sets: "outbox" (producer side: outbox.events and the relays'
 * bookkeeping, outbox.enqueue, outbox.message_keys), "inbox" (consumer
 * side: inbox.processed, inbox.notifications) and "demo" (the demo
 * business, schema app: app.bug_reports, app.idempotency_keys; only when
 * asked for). Applied versions are recorded in <schema>.schema_migrations,
 * the files' digest in <schema>.schema_files (outbox's for outbox and the
 * demo, inbox's for inbox); one run holds a transaction-level advisory
 * lock, so concurrent runs apply each migration once. Nothing outside
 * schemas outbox, inbox (and app with the demo) is written, but the
 * group roles (a server's, not a schema's) and, when asked, the REVOKE of
 * CREATE on schema public.
 */
#ifndef OUTBOX_MIGRATE_H
#define OUTBOX_MIGRATE_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>

struct ob_migration {
	const char *set;  /* "outbox", "inbox" or "demo" */
	int version;      /* the NNN of NNN_name.sql */
	const char *name; /* "001_outbox" */
	const char *sql;
};

/* Terminated by an entry with set == NULL; sorted by set, then version. */
extern const struct ob_migration ob_migrations[];

/* One function, view or trigger of schema <set>, written with CREATE OR
 * REPLACE (sql/<set>/functions/, in the order functions/ORDER gives). */
struct ob_schema_file {
	const char *set;  /* "outbox", "inbox" or "demo" (schema app) */
	const char *name; /* "functions/enqueue.sql" */
	const char *sql;
};

/* Terminated by an entry with set == NULL; grouped by set, in apply order. */
extern const struct ob_schema_file ob_schema_files[];

#define OB_MIGRATE_DROPPED_MAX 512 /* bytes of dropped names kept for the report */

/* What one ob_migrate run changed. */
struct ob_migrate_report {
	int migrations; /* numbered migrations applied (0 when up to date) */
	int files;      /* schema files re-applied (0 when none had changed) */
	int dropped;    /* functions, views and triggers that no file defines, dropped */
	char dropped_names[OB_MIGRATE_DROPPED_MAX]; /* "outbox.f(integer), ..." (may be cut) */
};

/* What one run applies. */
struct ob_migrate_opts {
	const char *set;    /* "outbox", "inbox" or "all" (both) */
	bool demo;          /* also the demo business (sql/demo/); needs the outbox set */
	bool harden_public; /* also REVOKE CREATE ON SCHEMA public FROM PUBLIC */
};

/* Bring opts' sets up to date in one transaction (outbox, inbox, demo): the
 * pending migrations, then, when a migration was applied or a file changed
 * since the last run, every schema file of the set, then DROP of each
 * function, view and trigger in the set's schema that no file defined in
 * this run (RESTRICT: one still used fails the run; not in the demo's
 * schema app, which may be the user's too), then the set's
 * functions/grants.sql (the roles' privileges). Blocks while another run
 * holds the lock (of this database; a run that deadlocks with another
 * database's on the shared roles is run again, up to 5 times in all).
 * OB_OK, OB_EINVAL (unknown set, or the demo without the outbox set) or
 * OB_EDB with the server's message and the file in err; on error nothing
 * changed. Borrows conn. */
int ob_migrate(PGconn *conn, const struct ob_migrate_opts *opts,
    struct ob_migrate_report *report, char *err, size_t errlen);

#endif
