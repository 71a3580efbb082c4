/*
 * check.h - the deterministic protocol checker (outbox-check): the shared
 * types of its parts.
 *
 * One thread drives several libpq sessions of one database, non-blocking:
 * producers (business writes, enqueues, savepoints, commits, rollbacks, a
 * session killed), relays (claims, a frame to the consumer, outcome
 * writes, a relay that dies holding its batches), and an operator
 * (housekeeping, time passing, a dead letter requeued, a dump restored into
 * a younger cluster). A seeded generator picks the next step of an enabled
 * session; a session whose statement waits for a lock is disabled until it
 * is granted. Time comes only from the steps (a lease of 0 ms has run out
 * by the next step, one of an hour only after "a day passes"), so a seed
 * gives the same history every run. The checker is the consumer and the
 * relays' policy itself: it knows what was committed, sent, applied and
 * answered (a failed attempt decided by the relay's own retry policy,
 * relay/retry_policy.h, at the checker's clock), and after every step it
 * checks the invariants S1-S6 of
 * ../shared/DESIGN.md against the database. A violation is shrunk to a
 * short history and printed as a psql script that replays it.
 *
 * Parts: session.c (the sessions and lock waits), model.c (what each step
 * does and what must hold), gen.c (the seeded generator), shrink.c
 * (shrinking and the replay script), main.c (command line, database,
 * coverage), slot_drive.c (--drive slots: the relay's own pipeline slots
 * through a simulated transport, slot_drive.h).
 */
#ifndef OUTBOX_CHECK_H
#define OUTBOX_CHECK_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* --- limits (each a named constant; the generator stays inside them) --- */
#define CHK_PRODUCERS_MAX 4
#define CHK_RELAYS_MAX 3
#define CHK_SESSIONS_MAX (CHK_PRODUCERS_MAX + CHK_RELAYS_MAX + 1)
#define CHK_MSGS_MAX 4096        /* messages a run may create */
#define CHK_TXN_ENQUEUES_MAX 64  /* enqueues of one open transaction */
#define CHK_HOLDS_MAX 8          /* batches a relay holds at once */
#define CHK_BATCH_MAX 5          /* the largest claim */
#define CHK_MAX_ATTEMPTS 3       /* the relay policy's --max-attempts */
#define CHK_MAX_AGE_MS (INT64_C(3) * 86400000) /* its --max-age: past after two "days pass" */
#define CHK_DAY_US (INT64_C(2) * 86400000000) /* the time one ACT_AGE makes pass */
#define CHK_SPLIT_AFTER 3        /* outbox.batch_split_after() */
#define CHK_POISON_BOUND (CHK_SPLIT_AFTER + 3) /* + ceil(log2 CHK_BATCH_MAX) */
#define CHK_LEASE_LONG_MS 3600000 /* "never" runs out, until a day passes */
#define CHK_DRAIN_ROUNDS 400     /* rounds of the fair schedule at the end */
#define CHK_SQL_MAX 8192
#define CHK_WHY_MAX 1024

/* --- the seeded generator ------------------------------------------- */
struct chk_rng {
	uint64_t s;
};
uint64_t chk_rand(struct chk_rng *r);
/* 0 .. n-1 (n > 0) */
uint32_t chk_below(struct chk_rng *r, uint32_t n);
/* A value in 0..99 that depends only on the seed and the strings: a
 * message's fixed properties (poison, rejected) and the consumer's answer
 * to its n-th delivery, stable when a history is shrunk. */
uint32_t chk_hash_pct(uint64_t seed, const char *a, const char *b, int n);

/* --- steps ------------------------------------------------------------ */
enum chk_act {
	/* producers */
	ACT_BEGIN, ACT_WRITE, ACT_XID, ACT_ENQUEUE, ACT_SAVEPOINT, ACT_ROLLBACK_TO,
	ACT_RELEASE, ACT_COMMIT, ACT_ROLLBACK, ACT_TERMINATE,
	/* relays */
	ACT_CLAIM, ACT_SEND, ACT_RECORD, ACT_DIE,
	/* the operator */
	ACT_HOUSEKEEP, ACT_AGE, ACT_REQUEUE, ACT_RESTORE,
	ACT_COUNT
};

/* One step: everything it needs is here, so that a history replays the
 * same without the generator (and still means something when steps before
 * it were removed by the shrinker). */
struct chk_step {
	enum chk_act act;
	int sess;        /* the session it runs on */
	int a, b, c;     /* per act: ENQUEUE a = payload variant (0, 1 another payload, 2..8
	                  * bad input), b = not before a day from now; CLAIM a = batch size (0: none),
	                  * b = retries first, c = long lease; SEND a = hold, b = fault
	                  * (0 none, 1 lost before the consumer, 2 reply lost);
	                  * RECORD a = hold, b = 0 outcome / 1 release refunded /
	                  * 2 release / 3 a bad outcome; HOUSEKEEP a = retention, b = dead retention,
	                  * c = force switch (2: a second pass at once); REQUEUE a = which dead
	                  * letter */
	char topic[8];
	char key[24];
	char okey[16];   /* "" = no ordering key */
};

const char *chk_act_name(enum chk_act a);
extern const char *const chk_okey_names[4];

struct chk_history {
	struct chk_step *steps;
	size_t n, cap;
};
void chk_history_push(struct chk_history *h, const struct chk_step *s);
void chk_history_free(struct chk_history *h);

/* --- one run's configuration (drawn from the seed) ------------------- */
struct chk_config {
	uint64_t seed;
	int producers, relays;
	int okeys;          /* ordering keys K1..Kn */
	bool skip_dead;     /* --on-dead-head skip (else block) */
	int poison_pct, reject_pct, retry_pct;
	int steps;
};
void chk_config_draw(struct chk_config *cfg, uint64_t seed, int steps);

/* --- sessions (session.c) --------------------------------------------- */
struct chk_sess {
	PGconn *conn;
	int pid;
	char name[16];         /* p0, r1, op */
	char user[64];         /* the role it connects as ("": the checker's) */
	bool pending;          /* a statement sent, its result not taken */
	bool blocked;          /* pending, waiting for a lock one of ours holds */
	bool waits_for[CHK_SESSIONS_MAX]; /* while blocked: whose locks it waits for */
	bool gave_up;          /* its wait was cancelled (see chk_sess_run) */
	bool bounded;          /* its statements give up waiting on their own
	                        * (lock_timeout): never cancelled */
	PGresult *res;         /* the finished statement's last result */
	bool failed;           /* it ended in an error */
	char sqlstate[6];
	char errmsg[256];
	char sql[CHK_SQL_MAX]; /* the statement (for the script) */
};

struct chk_db {
	char conninfo[1024];   /* the checker's database (a superuser: monitor, operator) */
	char user[2][64];      /* the login roles of producers and relays (members of
	                        * outbox_producer, outbox_relay): they run with the
	                        * programs' grants, so a missing one shows */
	PGconn *mon;           /* the monitor: invariants, kills */
	struct chk_sess s[CHK_SESSIONS_MAX];
	int n;
	char simulate_sql_path[1024]; /* tests/data/sql/simulate_restore.sql */
	bool profile;          /* plpgsql_check's profiler on in every session */
	FILE *script;          /* the replay script being written, or NULL */
	FILE *trace;           /* every observation, or NULL ($OUTBOX_CHECK_TRACE) */
};

/* Open (or reopen) session i, named name, as role user (NULL: the
 * checker's own). false with a reason in why. */
bool chk_sess_open(struct chk_db *db, int i, const char *name, const char *user, char *why,
    size_t len);
void chk_sess_close(struct chk_sess *s);
/* Send sql on session i and run until it finished or waits for a lock held
 * by one of our sessions; other sessions that finish meanwhile (granted a
 * lock) are finished too. Their results stay in each session until taken
 * (chk_sess_take). A wait that would make the history depend on timing
 * is given up at once (the statement cancelled: SQLSTATE 57014, gave_up):
 * a second waiter for a holder that has one (which of them PostgreSQL
 * grants first is a race), or a wait that closes a cycle (which one the
 * deadlock detector picks is a race). false on a checker failure (lost
 * monitor), with why. */
bool chk_sess_run(struct chk_db *db, int i, const char *sql, char *why, size_t len);
/* Let sessions waiting for locks go on after a commit, a rollback or a
 * kill, until each has finished or waits again. */
bool chk_sess_settle(struct chk_db *db, char *why, size_t len);
/* Wait until session i's statement has finished, even while it waits for
 * a lock: for statements that give up on their own (housekeeping's
 * lock_timeout), so nothing else moves meanwhile. */
bool chk_sess_finish(struct chk_db *db, int i, char *why, size_t len);
/* The finished result of session i (NULL while pending); the caller owns
 * it (PQclear). */
PGresult *chk_sess_take(struct chk_db *db, int i);
/* Kill session i's backend (pg_terminate_backend, waiting for it to exit)
 * and open a new one. */
bool chk_sess_kill(struct chk_db *db, int i, char *why, size_t len);
/* Run sql on the monitor: one integer (first column, first row; 0 when no
 * row); -1 and why on error. */
int64_t chk_mon_int(struct chk_db *db, const char *sql, char *why, size_t len);

/* --- the model (model.c) ---------------------------------------------- */
struct chk_run;  /* opaque */

/* What a run found. */
struct chk_result {
	bool violated;
	char invariant[16];   /* "S1", "S2-order", "S4", "stuck", ... */
	char why[CHK_WHY_MAX];
	size_t at_step;       /* index into the history of the failing step */
	uint64_t hash;        /* FNV-1a of the history as run */
	int steps_run;
	int msgs, applied, dead, poison_dead, takeovers;
	int age_dead;         /* dead by --max-age (an attempt that reached the consumer) */
	int outages_past_age; /* refunded attempts of messages older than --max-age */
};

/* Reset the database to its first state and run: the generator's steps
 * (replay NULL), or exactly the steps of replay; then the fair drain.
 * The steps run go into ran (may be NULL). Returns false on a checker
 * failure (not a violation), with why in res. */
bool chk_run_seed(struct chk_db *db, const struct chk_config *cfg,
    const struct chk_history *replay, struct chk_history *ran, struct chk_result *res);

/* --- the generator (gen.c) ---------------------------------------------- */
/* The next step for the state; false when no session may step. */
struct chk_view {
	const struct chk_config *cfg;
	bool enabled[CHK_SESSIONS_MAX];
	bool waiting[CHK_SESSIONS_MAX];  /* its statement waits for a lock */
	bool in_txn[CHK_PRODUCERS_MAX];
	bool aborted[CHK_PRODUCERS_MAX];
	bool savepoint[CHK_PRODUCERS_MAX];
	int holds[CHK_RELAYS_MAX];
	int next_key[CHK_PRODUCERS_MAX];
	int dead_letters;
	bool restore_pending;           /* a restore not adopted yet */
	int known_keys;                 /* committed (topic, key)s so far */
	int pool_committed;             /* of them, keys of the producers' shared pool */
	const char *(*known)(void *ctx, int i, const char **topic, const char **okey);
	void *ctx;
};
bool chk_gen_next(struct chk_rng *rng, const struct chk_view *v, struct chk_step *out);

/* --- shrinking and the replay script (shrink.c) -------------------------- */
/* Shrink the history of a violating run to one that still violates the
 * same invariant, within budget_ms. The shorter history into out. */
void chk_shrink(struct chk_db *db, const struct chk_config *cfg, const struct chk_history *h,
    const struct chk_result *first, int64_t budget_ms, struct chk_history *out,
    struct chk_result *last);
/* Replay h once more with the script written to path (psql + dblink). */
bool chk_write_script(struct chk_db *db, const struct chk_config *cfg,
    const struct chk_history *h, const char *path, struct chk_result *res);
/* The history, one step a line, to f. */
void chk_history_print(FILE *f, const struct chk_history *h);

int64_t chk_now_ms(void);

#endif
