/*
 * ts_crash.h - the crash harness: a PostgreSQL of the test's own that
 * keeps, when it is stopped immediately, only what was on disk, and the
 * immediate stop itself, at a point the test chooses.
 *
 * The server (ts_pgserver, scripts/pg-tmp.sh) runs with synchronous_commit
 * = off as the SERVER's default, so a commit is durable only where its
 * session asked for it; with wal_writer_delay at its longest (10 s); and
 * with nothing else writing the WAL on its own within a test (autovacuum
 * off, no background writer rounds, no timed checkpoint). After
 * ts_crash_arm, a commit that did not wait for its WAL flush stays in the
 * server's memory (the WAL buffers) until a later synchronous commit
 * flushes past it or the WAL writer's next round; ts_crash_now stops the
 * server with pg_ctl -m immediate (pg-tmp.sh crash: what a power cut does
 * to the server's memory; the operating system's page cache survives, so
 * the harness may keep fsync off) and starts it again: crash recovery
 * replays only what was written.
 *
 * Whether a crash really lost what was not on disk is checked, not
 * assumed: ts_crash_now commits a marker asynchronously just before the
 * stop and says whether it was lost. When it was not (the WAL writer's
 * round fell into the few milliseconds between the test's last commit and
 * the stop: about one run in several hundred), the run shows nothing and
 * the test repeats it (TS_CRASH_TRIES).
 *
 * Use: main() calls ts_crash_init before the suite runs (the parent
 * process: the directories it names must be known to the teardown), every
 * test case registers a teardown calling ts_crash_teardown as an unchecked
 * fixture (it runs in the parent, also after a failed test: it kills the
 * programs the test tracked and stops the server), and main calls
 * ts_crash_fini at the end. A test starts the server with ts_crash_start.
 */
#ifndef TS_CRASH_H
#define TS_CRASH_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "testsupport.h"

#define TS_CRASH_TRIES 4 /* runs of a scenario before "the crash lost nothing" fails it */

struct ts_crash {
	char base[64];                  /* the run's directory (mkdtemp) */
	char dir[128];                  /* the server's (base/pg) */
	char pids[128];                 /* programs to stop (base/pids, a pid a line) */
	char conninfo[TS_CONNINFO_MAX]; /* its postgres database (ts_crash_start) */
	PGconn *marker;                 /* ts_crash_arm's session (NULL: none) */
	int markers;                    /* markers written so far */
};

/* Name the run's directories (creates base). In main, before the suite
 * runs (outside a test: exits the process if it cannot). */
void ts_crash_init(struct ts_crash *h);

/* Start the server in h->dir (which must not exist) with the settings
 * above; h->conninfo gets its postgres database. ck_asserts. */
void ts_crash_start(struct ts_crash *h);

/* Create database name on the server, migrations of set ("outbox",
 * "inbox", "all" or NULL); its conninfo into out. ck_asserts. */
void ts_crash_db(struct ts_crash *h, const char *name, const char *set, char *out,
    size_t outlen);

/* Remember pid (a program the test started) for the teardown; returns it. */
pid_t ts_crash_track(struct ts_crash *h, pid_t pid);

/* Make the WAL written so far durable and start a fresh segment
 * (pg_switch_wal): from here, what commits asynchronously stays in the
 * server's memory, and no completed WAL page (8 kB) wakes the WAL writer
 * while the test's few commits fit in the first one. Call it right before
 * the commits the crash is meant to catch. ck_asserts. */
void ts_crash_arm(struct ts_crash *h);

/* Commit a marker asynchronously, stop the server immediately and start
 * it again (blocks until it accepts connections). Returns true when the
 * marker was lost (the crash lost every commit that was not on disk),
 * false when the WAL writer had written it (nothing shown: repeat the
 * run). Sessions to the server are broken by it. ck_asserts. */
bool ts_crash_now(struct ts_crash *h);

/* Kill (SIGKILL) every tracked program still running whose command line
 * names h->base (its --db names the server's socket directory), stop the
 * server and remove its directory. No assertion: for a teardown. */
void ts_crash_teardown(struct ts_crash *h);

/* Remove h->base. In main, after the suite. */
void ts_crash_fini(struct ts_crash *h);

#endif
