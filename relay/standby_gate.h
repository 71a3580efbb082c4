/*
 * standby_gate.h - `--standby-gate`: deliver a batch only once the named
 * streaming standbys have what it came from, so that a failover cannot
 * leave an effect whose business row is gone (a phantom,
 * docs/guarantees.md "Failover").
 *
 * With asynchronous replication a commit on the primary can be claimed,
 * delivered and applied before any standby has its WAL; if the primary then
 * dies and a standby is promoted, the outbox record and its business row
 * never existed there, yet the effect happened. The gate closes that
 * window at the relay, without making the application's commits wait:
 *
 *   - the claim also returns pg_current_wal_insert_lsn(): every message it
 *     returned was committed (visible to its snapshot) before that point,
 *     so its commit record lies below it - also with synchronous_commit =
 *     off, where a commit can be visible before it is written;
 *   - the frame goes out only once every standby named in --standby-names
 *     has reached that LSN in pg_stat_replication on the primary:
 *     flush_lsn (--standby-gate flush: the WAL is on the standby's disk,
 *     so a promotion replays it) or replay_lsn (replay: also visible to
 *     queries there). Until then the batch waits in its slot while the
 *     worker goes on collecting frames and claiming (relay/worker.c,
 *     open_gated): one query per --standby-poll-ms serves every waiting
 *     batch;
 *   - a standby that is not connected has reached nothing: the gate stays
 *     shut, deliveries wait. After --standby-gate-timeout the batch is
 *     released unsent (no attempt counted) and claimed again later; the
 *     relay logs relay.standby_gate.waiting (at most once per
 *     GATE_LOG_EVERY_MS) naming the standbys and their positions.
 *
 * Reading the LSN columns of pg_stat_replication needs a superuser or a
 * member of pg_monitor (PostgreSQL shows them as NULL to others): a gate
 * that sees the standby but NULL positions says so in one error line
 * (GRANT pg_monitor TO the relay's role).
 *
 * The last position seen is kept, so a batch below it passes with no
 * query at all.
 */
#ifndef OUTBOX_RELAY_STANDBY_GATE_H
#define OUTBOX_RELAY_STANDBY_GATE_H

#include <libpq-fe.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GATE_LOG_EVERY_MS 10000 /* relay.standby_gate.waiting at most this often */
#define GATE_NAMES_MAX 16       /* standbys in --standby-names */

enum relay_gate_mode {
	RELAY_GATE_NONE = 0, /* deliver what is committed on the primary (default) */
	RELAY_GATE_FLUSH,    /* ... and flushed to every named standby's disk */
	RELAY_GATE_REPLAY,   /* ... and replayed there */
};

struct relay_gate {
	enum relay_gate_mode mode;
	char names[256 * GATE_NAMES_MAX]; /* a text[] literal of the names, "{a,b}" */
	int nnames;
	int64_t timeout_ms;
	int64_t poll_ms;
	uint64_t reached;     /* the lowest position of the named standbys, last seen */
	int streaming;        /* how many of them were streaming, last seen */
	int64_t next_log_ms;
	uint64_t waits;       /* batches that had to wait */
	uint64_t timeouts;    /* batches released because the gate stayed shut */
};

/* Set up g from the options (mode "none|flush|replay", the names from
 * --standby-names). OB_OK, or OB_EINVAL with one line in err (a gate
 * without names, a name that is empty, too long or holds a quote, comma,
 * brace or backslash, or too many of them). */
int relay_gate_init(struct relay_gate *g, const char *mode, char *const *names, size_t n,
    int64_t timeout_ms, int64_t poll_ms, char *err, size_t errlen);

/* "16/B374D848" -> 0x16B374D848. OB_OK or OB_EINVAL. */
int relay_gate_parse_lsn(const char *text, uint64_t *out);

/* Ask the primary (conn) once where the named standbys are, raising
 * g->reached (0 is reached while one of them is not streaming). OB_OK;
 * OB_EDB when the query failed (err: the server's message); OB_EPROTO when
 * the positions are hidden from this role (err says to grant pg_monitor). */
int relay_gate_poll(struct relay_gate *g, PGconn *conn, char *err, size_t errlen);

/* A batch whose position lsn the standbys did not reach in waited_ms goes
 * back unsent: counted, and relay.standby_gate.waiting logged at most once
 * per GATE_LOG_EVERY_MS. */
void relay_gate_timed_out(struct relay_gate *g, uint64_t lsn, int64_t waited_ms);

/* The worker's side of the gate: a claimed batch asks relay_gate_must_wait;
 * while any wait, each turn polls once (relay_gate_poll_logged) and asks
 * relay_gate_step for each of them. */

/* Whether a batch claimed at lsn must wait at the gate (g is on and the
 * standbys were not seen past lsn). If so the wait is counted and
 * *until_ms (now_ms + the gate timeout) is when it goes back unsent. */
bool relay_gate_must_wait(struct relay_gate *g, uint64_t lsn, int64_t now_ms,
    int64_t *until_ms);

/* relay_gate_poll, its failure logged (relay.standby_gate.failed, for
 * owner) at most once per GATE_LOG_EVERY_MS. Returns relay_gate_poll's
 * code. */
int relay_gate_poll_logged(struct relay_gate *g, PGconn *conn, const char *owner);

/* What becomes of a waiting batch. */
enum relay_gate_step {
	RELAY_GATE_STEP_WAIT, /* the standbys are not there yet: keep it */
	RELAY_GATE_STEP_SEND, /* they have it: send it */
	RELAY_GATE_STEP_BACK, /* hand it back unsent (the poll failed, its wait
	                       * timed out, or the worker is stopping) */
};

/* The step for a batch at lsn waiting until until_ms, after a poll that
 * returned poll_rc, at now_ms. Pure. */
enum relay_gate_step relay_gate_step(const struct relay_gate *g, int poll_rc, uint64_t lsn,
    int64_t until_ms, int64_t now_ms, bool stopping);

/* A new connection, maybe to another server (after a failover): positions
 * seen before say nothing about this one's standbys. */
void relay_gate_forget(struct relay_gate *g);

#endif
