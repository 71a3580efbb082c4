/*
 * ts_pgserver.h - PostgreSQL servers of a test's own, beside the shared
 * fixture's (scripts/pg-tmp.sh: initdb in a directory, unix socket only),
 * for what one server cannot show: one database name on two servers, a
 * streaming standby, a cluster whose transaction counter is far ahead;
 * and a PgBouncer in front of the fixture's server.
 * Each lives in a directory the test names; the test stops it
 * (ts_pgserver_stop_quiet from a teardown that runs after a failure too:
 * an unchecked fixture).
 */
#ifndef TS_PGSERVER_H
#define TS_PGSERVER_H

#include <stddef.h>
#include <stdint.h>

/* Start a server in dir (created; must not exist); the conninfo of its
 * postgres database into out. ck_asserts. */
void ts_pgserver_start(const char *dir, char *out, size_t outlen);

/* The same, on a cluster whose transaction counter starts at next_xid
 * (1000000..2000000000; pg-tmp.sh's OUTBOX_PG_NEXT_XID: pg_resetwal -x after
 * initdb): its pg_current_xact_id() is next_xid or more. A cluster "ahead"
 * of a fresh one, for a dump restored into one whose counter is behind
 * (test_restore). ck_asserts. */
void ts_pgserver_start_at_xid(const char *dir, uint64_t next_xid, char *out, size_t outlen);

/* A streaming standby (asynchronous, application_name name) of the server
 * in primary_dir, in dir; its conninfo into out. ck_asserts. */
void ts_pgserver_standby(const char *primary_dir, const char *dir, const char *name,
    char *out, size_t outlen);

/* Stop the server in dir the hard way and start it again (pg-tmp.sh crash:
 * pg_ctl -m immediate, so WAL not yet written is lost, then crash recovery
 * at start); the data and the conninfo stay. ck_asserts. */
void ts_pgserver_crash(const char *dir);

/* Stop the server in dir the hard way and leave it stopped (pg-tmp.sh
 * kill: every connection to it breaks at once), then start it again with
 * its data (pg-tmp.sh resume). ck_asserts. */
void ts_pgserver_kill(const char *dir);
void ts_pgserver_resume(const char *dir);

/* Stop the server in dir and remove dir, if it is there; no assertion
 * (for teardowns): a line on stderr if it cannot. */
void ts_pgserver_stop_quiet(const char *dir);

/* Create database name on the server of conninfo (any database of it) and
 * apply the migrations of set ("outbox", "inbox", "all" or NULL); its
 * conninfo into out. ck_asserts. */
void ts_pgserver_db_create(const char *conninfo, const char *name, const char *set, char *out,
    size_t outlen);

/* A PgBouncer (scripts/pgbouncer-tmp.sh) in dir (created; must not exist)
 * in front of every database of the fixture's server, pool_mode mode
 * ("transaction" or "session"), unix socket only. The test stops it
 * (ts_pgbouncer_stop_quiet, from a teardown). ck_asserts. */
void ts_pgbouncer_start(const char *dir, const char *mode);

/* conninfo's database (its dbname, "postgres" when none) through the
 * PgBouncer in dir, into out. ck_asserts. */
void ts_pgbouncer_conninfo(const char *dir, const char *conninfo, char *out, size_t outlen);

/* Stop the PgBouncer in dir and remove dir, if it is there; no assertion. */
void ts_pgbouncer_stop_quiet(const char *dir);

#endif
