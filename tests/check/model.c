/*
 * model.c - what each step of the checker does, what it expects, and the
 * invariants checked after every step.
 *
 * The checker plays every part but PostgreSQL: producers (their
 * transactions are known to it, so it knows exactly what was committed and
 * in which order each ordering key's numbers were taken), relays (they
 * claim, send a frame to the consumer, and write the outcome the way
 * relay/worker.c decides it: applied or duplicate = delivered; reject =
 * dead; retry = a retry, or dead once --max-attempts attempts reached the
 * consumer; a lost frame = a release), the consumer (it applies a message
 * once, answers duplicate after that, and answers each delivery as a
 * function of the seed, the key and the delivery's number), and an
 * operator. After each step, on a connection of its own, it checks what
 * must hold (../shared/DESIGN.md):
 *   S1  a claimed message was committed;
 *   S2  per ordering key, messages are applied in their numbers' order, a
 *       key's numbers are 1, 2, 3 in commit order, and at most one message
 *       of a key is out in a batch;
 *   S3  fences only grow; an outcome write is refused exactly when its
 *       fence is stale, and a refused one changes nothing; a message
 *       recorded delivered is never claimed again;
 *   S4  a dead letter is a consumer's reject, attempts or age (past
 *       --max-age) on an attempt that reached the consumer, or a message
 *       whose batch lost its holder batch_split_after() times, alone (a
 *       poison message: dead within CHK_POISON_BOUND takeovers); an
 *       attempt that reached no consumer (a lost frame, a relay that never
 *       sent) makes nothing dead, however old: the relay's own retry
 *       policy (relay/retry_policy.h) decides every failed attempt here,
 *       and the days ACT_AGE makes pass take messages past --max-age
 *       (CHK_MAX_AGE_MS) during outages;
 *   S5  every blocked key has a dead letter or a retry to act on;
 *   S6  nothing removed that is not done;
 *   H1  a claim that says nothing more is claimable left no stream cut
 *       behind (check_more);
 *   not_before  a message enqueued not before a day from now is not
 *       claimed, nor its key's later messages, until days pass (ACT_AGE);
 * and at the end of a fair schedule without faults: every committed
 * message applied once, or dead as S4 allows, or (--on-dead-head block)
 * waiting behind a dead head of its key.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "outbox/clock.h"
#include "outbox/protocol.h"
#include "outbox/sqlstate.h"
#include "retry_policy.h"

#define TOPICS 3 /* ta, tb routed; tc waits for a route */
#define OKEYS_MAX 4 /* K1..K3, index 0 unused */

enum answer { ANS_NONE, ANS_APPLIED, ANS_DUPLICATE, ANS_RETRY, ANS_REJECT };
enum dead_reason { DR_NONE, DR_REJECT, DR_ATTEMPTS, DR_AGE, DR_TAKEOVERS };

/* A committed message. */
struct msg {
	char topic[8], key[24], okey[16];
	int64_t id;
	int64_t created_us;    /* its enqueue time, as a claim returned it (0: not yet) */
	int64_t seq;           /* its number as the model expects it (0: unordered) */
	bool applied;          /* a delivery of it was answered applied (or duplicate) */
	bool key_known;        /* the consumer knows its key from an earlier message
	                        * (a key enqueued anew after its slot went) */
	bool recorded;         /* an outcome write recorded it delivered */
	bool dead;             /* a dead letter now */
	bool was_dead;         /* it died once (requeued later or not) */
	bool dead_gone;        /* its dead letter was deleted (--dead-retention) */
	bool requeued;
	enum dead_reason reason;
	int deliveries;        /* frames carrying it that reached the consumer */
	int takeovers;         /* claims that took over a batch holding it */
	int attempt;           /* the attempt its next claim must carry, less one (-1:
	                        * unknown, after a restore was adopted) */
	bool poison, reject;   /* fixed by the seed */
	bool delayed;          /* enqueued not before a day from now: not claimable
	                        * until an ACT_AGE after its commit */
};

/* An enqueue of the open transaction. */
struct enq {
	char topic[8], key[24], okey[16];
	int64_t id;
	bool after_savepoint;
	bool is_new;           /* it created the message (not found) */
	bool delayed;          /* with not_before a day from now */
};

struct producer {
	bool in_txn, aborted, savepoint;
	struct enq enq[CHK_TXN_ENQUEUES_MAX];
	int nenq;
	int next_key;
};

struct hold {
	int64_t batch, fence;
	char kind;
	int n;
	int msg[CHK_BATCH_MAX];
	int attempt[CHK_BATCH_MAX];
	bool sent;
	int fault;                     /* of the send: 0, 1 lost, 2 reply lost */
	int answer[CHK_BATCH_MAX];
	bool dead_policy[CHK_BATCH_MAX]; /* a retry answer the policy made dead */
	bool dead_age[CHK_BATCH_MAX];    /* ... by its age */
	char error[CHK_BATCH_MAX][RELAY_ERROR_MAX];
};

struct relay {
	struct hold h[CHK_HOLDS_MAX];
	int n;
};

struct chk_run {
	struct chk_db *db;
	const struct chk_config *cfg;
	struct chk_result *res;
	struct msg *msgs;
	int nmsgs;
	struct producer prod[CHK_PRODUCERS_MAX];
	struct relay rel[CHK_RELAYS_MAX];
	int64_t last_seq[TOPICS][OKEYS_MAX];
	int64_t max_fence;
	bool restored;           /* a restore not adopted yet */
	bool draining;           /* the fair schedule at the end: every topic routed */
	bool ever_restored;
	int64_t passed_us;       /* time the ACT_AGE steps made pass (the policy's clock) */
	uint64_t policy_rng;     /* the retry policy's random state (its backoffs) */
	size_t step_no;
	char fail[CHK_WHY_MAX];  /* a checker failure (not a violation) */
	bool failed;
};

/* ---------------------------------------------------------------------- */

static void
hfeed(struct chk_run *run, const char *fmt, ...)
{
	char buf[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	for (const char *p = buf; *p; p++)
		run->res->hash = (run->res->hash ^ (uint8_t)*p) * 1099511628211ULL;
	run->res->hash = (run->res->hash ^ '\n') * 1099511628211ULL;
	if (run->db->script != NULL)
		fprintf(run->db->script, "-- = %s\n", buf);
	if (run->db->trace != NULL)
		fprintf(run->db->trace, "%s\n", buf);
}

/* Record a violation (the first one wins). */
static void
violate(struct chk_run *run, const char *inv, const char *fmt, ...)
{
	if (run->res->violated)
		return;
	run->res->violated = true;
	run->res->at_step = run->step_no;
	snprintf(run->res->invariant, sizeof(run->res->invariant), "%s", inv);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(run->res->why, sizeof(run->res->why), fmt, ap);
	va_end(ap);
}

static void
failure(struct chk_run *run, const char *why)
{
	if (!run->failed) {
		run->failed = true;
		snprintf(run->fail, sizeof(run->fail), "%s", why);
	}
}

static int
topic_index(const char *t)
{
	return t[0] == 't' && t[1] >= 'a' && t[1] < 'a' + TOPICS ? t[1] - 'a' : 0;
}

static int
okey_index(const char *k)
{
	for (int i = 1; i < OKEYS_MAX; i++)
		if (strcmp(k, chk_okey_names[i]) == 0)
			return i;
	return 0;
}

/* The key's newest message (a key can be enqueued anew once its message
 * was delivered and its slot truncated). */
static struct msg *
find_msg(struct chk_run *run, const char *topic, const char *key)
{
	for (int i = run->nmsgs - 1; i >= 0; i--)
		if (strcmp(run->msgs[i].key, key) == 0 && strcmp(run->msgs[i].topic, topic) == 0)
			return &run->msgs[i];
	return NULL;
}

static struct msg *
find_id(struct chk_run *run, int64_t id)
{
	for (int i = 0; i < run->nmsgs; i++)
		if (run->msgs[i].id == id)
			return &run->msgs[i];
	return NULL;
}

static int
producer_sess(struct chk_run *run, int p)
{
	(void)run;
	return p;
}

static int
relay_sess(struct chk_run *run, int r)
{
	return run->cfg->producers + r;
}

static int
op_sess(struct chk_run *run)
{
	return run->cfg->producers + run->cfg->relays;
}

/* The replay script: session i's statement sent (a SELECT's rows as one
 * text column, as dblink_get_result needs), and its result taken. */
static void
script_send(struct chk_run *run, int i, const char *sql)
{
	FILE *f = run->db->script;
	if (f == NULL)
		return;
	/* (the one statement with a WITH returns one column already, and a
	 * data-modifying WITH cannot be a subquery) */
	bool select = strncmp(sql, "SELECT", 6) == 0;
	fprintf(f, "SELECT dblink_send_query('%s', $chk$%s%s%s$chk$);\n", run->db->s[i].name,
	    select ? "SELECT q::text FROM (" : "", sql, select ? ") q" : "");
}

static void
script_get(struct chk_run *run, int i)
{
	if (run->db->script != NULL)
		fprintf(run->db->script, "SELECT * FROM dblink_get_result('%s', false) AS t(r text);\n"
		    "SELECT * FROM dblink_get_result('%s', false) AS t(r text);\n",
		    run->db->s[i].name, run->db->s[i].name);
}

static void
script_connect(struct chk_run *run, int i)
{
	FILE *f = run->db->script;
	const char *n = run->db->s[i].name;
	if (f == NULL)
		return;
	const char *user = run->db->s[i].user;
	fprintf(f, "SELECT dblink_connect('%s', :'dsn' || '%s%s');\n"
	    "SELECT pid AS %s_pid FROM dblink('%s', 'SELECT pg_backend_pid()') AS t(pid int) \\gset\n",
	    n, user[0] ? " user=" : "", user, n, n);
}

/* Kill session i (the script does it too) and open it again. */
static void
kill_sess(struct chk_run *run, int i)
{
	char why[CHK_WHY_MAX];
	bool was_pending = run->db->s[i].pending;
	if (run->db->script != NULL)
		fprintf(run->db->script, "SELECT pg_terminate_backend(:%s_pid, 10000);\n",
		    run->db->s[i].name);
	if (was_pending)
		script_get(run, i);
	if (run->db->script != NULL)
		fprintf(run->db->script, "SELECT dblink_disconnect('%s');\n", run->db->s[i].name);
	script_connect(run, i);
	if (!chk_sess_kill(run->db, i, why, sizeof(why)))
		failure(run, why);
}

/* Run sql on session i (the script gets it); its result, or NULL with
 * the session's error state when it failed or still waits. */
static PGresult *
run_sql(struct chk_run *run, int i, const char *sql)
{
	char why[CHK_WHY_MAX];
	script_send(run, i, sql);
	if (!chk_sess_run(run->db, i, sql, why, sizeof(why)) ||
	    (i == op_sess(run) && !chk_sess_finish(run->db, i, why, sizeof(why)))) {
		failure(run, why);
		return NULL;
	}
	/* the script waits as the checker did: until the statement waits for
	 * its lock (it may be given up then) */
	if ((run->db->s[i].pending || run->db->s[i].gave_up) && run->db->script != NULL)
		fprintf(run->db->script, "SELECT pg_temp.wait_blocked(:%s_pid);\n", run->db->s[i].name);
	if (run->db->s[i].pending)
		return NULL;
	if (run->db->s[i].gave_up && run->db->script != NULL)
		fprintf(run->db->script, "SELECT dblink_cancel_query('%s');\n", run->db->s[i].name);
	script_get(run, i);
	return chk_sess_take(run->db, i);
}

static int64_t
mon_int(struct chk_run *run, const char *sql)
{
	char why[CHK_WHY_MAX];
	int64_t v = chk_mon_int(run->db, sql, why, sizeof(why));
	if (v < 0 && strstr(why, "monitor") != NULL)
		failure(run, why);
	return v;
}

/* The step each producer's waiting statement belongs to (act ACT_COUNT:
 * none); it is finished, in session order, once the wait is over. */
static struct chk_step waiting[CHK_PRODUCERS_MAX];

/* ---------------------------------------------------------------------- */
/* Producers                                                               */
/* ---------------------------------------------------------------------- */

static void
txn_forget(struct producer *p)
{
	p->in_txn = p->aborted = p->savepoint = false;
	p->nenq = 0;
}

/* The key's message, in this transaction's surviving enqueues. */
static struct enq *
txn_find(struct producer *p, const char *topic, const char *key)
{
	for (int i = 0; i < p->nenq; i++)
		if (strcmp(p->enq[i].key, key) == 0 && strcmp(p->enq[i].topic, topic) == 0)
			return &p->enq[i];
	return NULL;
}

/* The enqueue of producer p finished (maybe after a wait). */
static void
enqueue_done(struct chk_run *run, int p, const struct chk_step *s, PGresult *r,
    const struct chk_sess *ss)
{
	struct producer *pr = &run->prod[p];
	struct msg *m = find_msg(run, s->topic, s->key);
	if (s->a >= 2) {
		hfeed(run, "bad enqueue -> %s", ss->failed ? ss->sqlstate : "accepted");
		if (!ss->failed || strcmp(ss->sqlstate, s->a == 6 ? "54000" : "22023") != 0)
			violate(run, "enqueue", "a bad enqueue (variant %d) was not refused:"
			    " %s %s", s->a, ss->sqlstate, ss->errmsg);
		pr->aborted = true;
		return;
	}
	if (ss->failed) {
		hfeed(run, "enqueue %s/%s -> error %s", s->topic, s->key, ss->sqlstate);
		pr->aborted = true;
		/* OB002: another payload for a key that exists; 40P01: a deadlock
		 * between producers, broken by the server; 57P01/08006: killed */
		if (ob_sqlstate_is(ss->sqlstate, OB_SQLSTATE_KEY_REUSED)) {
			if (m == NULL && txn_find(pr, s->topic, s->key) == NULL && s->a == 0)
				violate(run, "enqueue", "enqueue of %s/%s refused as another payload: %s",
				    s->topic, s->key, ss->errmsg);
		} else if (strcmp(ss->sqlstate, "40P01") != 0 && strcmp(ss->sqlstate, "57P01") != 0 &&
		    strcmp(ss->sqlstate, "08006") != 0 && !(ss->gave_up &&
		    strcmp(ss->sqlstate, "57014") == 0)) {
			violate(run, "enqueue", "enqueue of %s/%s failed: %s %s", s->topic, s->key,
			    ss->sqlstate, ss->errmsg);
		}
		return;
	}
	int64_t id = r != NULL && PQntuples(r) == 1 ? atoll(PQgetvalue(r, 0, 0)) : -1;
	struct enq *mine = txn_find(pr, s->topic, s->key);
	hfeed(run, "enqueue %s/%s -> %" PRId64, s->topic, s->key, id);
	if (m != NULL && mine == NULL && id != m->id && (m->recorded || m->dead_gone)) {
		/* its message was done and its slot truncated: the key is new
		 * again (the consumer's dedup record still knows it) */
		char sql[256];
		snprintf(sql, sizeof(sql), "SELECT (SELECT count(*) FROM outbox.events WHERE id = %" PRId64
		    ") + (SELECT count(*) FROM outbox.dead WHERE id = %" PRId64 ") + (SELECT count(*)"
		    " FROM outbox.retries WHERE id = %" PRId64 ")", m->id, m->id, m->id);
		if (mon_int(run, sql) == 0)
			m = NULL;
	}
	if (m != NULL || mine != NULL) {
		int64_t want = m != NULL ? m->id : mine->id;
		if (id != want)
			violate(run, "enqueue", "enqueue of %s/%s, stored as %" PRId64 ", returned %"
			    PRId64 " (a second message)", s->topic, s->key, want, id);
		if (s->a != 0 && m != NULL)
			violate(run, "enqueue", "enqueue of %s/%s with another payload accepted",
			    s->topic, s->key);
		return;
	}
	if (pr->nenq >= CHK_TXN_ENQUEUES_MAX) {
		failure(run, "too many enqueues in one transaction");
		return;
	}
	struct enq *e = &pr->enq[pr->nenq++];
	memset(e, 0, sizeof(*e));
	snprintf(e->topic, sizeof(e->topic), "%s", s->topic);
	snprintf(e->key, sizeof(e->key), "%s", s->key);
	snprintf(e->okey, sizeof(e->okey), "%s", s->okey);
	e->id = id;
	e->after_savepoint = pr->savepoint;
	e->is_new = true;
	e->delayed = s->b != 0;
}

/* The transaction of producer p committed: its messages exist now, with
 * the numbers the model expects (a key's holder commits before the next
 * one may take the key: numbers follow commit order). */
static void
commit_done(struct chk_run *run, int p)
{
	struct producer *pr = &run->prod[p];
	for (int i = 0; i < pr->nenq; i++) {
		struct enq *e = &pr->enq[i];
		if (!e->is_new)
			continue;
		if (run->nmsgs >= CHK_MSGS_MAX) {
			failure(run, "too many messages");
			return;
		}
		/* enqueue is idempotent while a key's message is kept */
		struct msg *same = find_msg(run, e->topic, e->key);
		if (same != NULL && !same->recorded && !same->dead_gone)
			violate(run, "enqueue", "%s/%s stored twice: ids %" PRId64 " and %" PRId64,
			    e->topic, e->key, same->id, e->id);
		struct msg *m = &run->msgs[run->nmsgs++];
		memset(m, 0, sizeof(*m));
		snprintf(m->topic, sizeof(m->topic), "%s", e->topic);
		snprintf(m->key, sizeof(m->key), "%s", e->key);
		snprintf(m->okey, sizeof(m->okey), "%s", e->okey);
		m->id = e->id;
		m->delayed = e->delayed;
		/* a key enqueued anew after its first message was truncated: the
		 * consumer answers its deliveries duplicate */
		for (int k = 0; k < run->nmsgs - 1; k++)
			if (strcmp(run->msgs[k].key, m->key) == 0 && strcmp(run->msgs[k].topic, m->topic) == 0)
				m->key_known |= run->msgs[k].applied || run->msgs[k].key_known;
		const struct chk_config *c = run->cfg;
		m->poison = (int)chk_hash_pct(c->seed, m->topic, m->key, -1) < c->poison_pct;
		m->reject = !m->poison &&
		    (int)chk_hash_pct(c->seed, m->topic, m->key, -2) < c->reject_pct;
		if (m->okey[0] != '\0') {
			m->seq = ++run->last_seq[topic_index(m->topic)][okey_index(m->okey)];
			char sql[256];
			snprintf(sql, sizeof(sql), "SELECT COALESCE((SELECT ordering_seq FROM outbox.events"
			    " WHERE id = %" PRId64 " LIMIT 1), (SELECT ordering_seq FROM outbox.retries"
			    " WHERE id = %" PRId64 "), (SELECT ordering_seq FROM outbox.dead WHERE id = %"
			    PRId64 "))", m->id, m->id, m->id);
			int64_t got = mon_int(run, sql);
			if (got != m->seq)
				violate(run, "S2-seq", "%s/%s of key %s committed with number %" PRId64
				    ", expected %" PRId64 " (numbers follow the key holders' commit order,"
				    " without gaps)", m->topic, m->key, m->okey, got, m->seq);
		}
	}
	txn_forget(pr);
}

static void
producer_step(struct chk_run *run, int p, const struct chk_step *s)
{
	struct producer *pr = &run->prod[p];
	int si = producer_sess(run, p);
	char sql[512];
	switch (s->act) {
	case ACT_BEGIN:
		snprintf(sql, sizeof(sql), "BEGIN");
		break;
	case ACT_WRITE:
		snprintf(sql, sizeof(sql), "INSERT INTO public.check_business (note) VALUES ('p%d')", p);
		break;
	case ACT_XID:
		snprintf(sql, sizeof(sql), "SELECT pg_current_xact_id() IS NOT NULL");
		break;
	case ACT_ENQUEUE:
		if (s->a >= 2) {
			/* bad input: an empty topic, an empty key, an ordering key of
			 * 256 bytes, a NULL payload, a payload over the maximum,
			 * headers not an object, a not_before not finite */
			snprintf(sql, sizeof(sql), "SELECT outbox.enqueue('%s', '%s', %s, %s%s)",
			    s->a == 2 ? "" : s->topic, s->a == 3 ? "" : s->key,
			    s->a == 5 ? "NULL" : s->a == 6 ? "jsonb_build_object('x', repeat('x',"
			    " outbox.max_payload_bytes()))" : "'{}'",
			    s->a == 4 ? "repeat('k', 256)" : "NULL",
			    s->a == 7 ? ", headers => '[\"h\"]'"
			              : s->a == 8 ? ", not_before => 'infinity'" : "");
			break;
		}
		snprintf(sql, sizeof(sql), "SELECT outbox.enqueue('%s', '%s', '{\"v\": %d}', %s%s%s%s)",
		    s->topic, s->key, s->a, s->okey[0] != '\0' ? "'" : "",
		    s->okey[0] != '\0' ? s->okey : "NULL", s->okey[0] != '\0' ? "'" : "",
		    s->b ? ", not_before => now() + interval '1 day'" : "");
		if (strncmp(s->key, "p", 1) == 0 && s->a < 2)
			pr->next_key++;
		break;
	case ACT_SAVEPOINT:
		snprintf(sql, sizeof(sql), "SAVEPOINT s");
		break;
	case ACT_ROLLBACK_TO:
		snprintf(sql, sizeof(sql), "ROLLBACK TO SAVEPOINT s");
		break;
	case ACT_RELEASE:
		snprintf(sql, sizeof(sql), "RELEASE SAVEPOINT s");
		break;
	case ACT_COMMIT:
		snprintf(sql, sizeof(sql), "COMMIT");
		break;
	case ACT_ROLLBACK:
		snprintf(sql, sizeof(sql), "ROLLBACK");
		break;
	default:
		return;
	}
	PGresult *r = run_sql(run, si, sql);
	struct chk_sess *ss = &run->db->s[si];
	if (ss->pending) {
		hfeed(run, "%s waits", ss->name);
		return; /* finished later: finish_waiting */
	}
	switch (s->act) {
	case ACT_BEGIN:
		pr->in_txn = true;
		hfeed(run, "begin");
		break;
	case ACT_ENQUEUE:
		enqueue_done(run, p, s, r, ss);
		break;
	case ACT_SAVEPOINT:
		pr->savepoint = !ss->failed;
		break;
	case ACT_ROLLBACK_TO:
		if (!ss->failed) {
			int k = 0;
			for (int i = 0; i < pr->nenq; i++)
				if (!pr->enq[i].after_savepoint)
					pr->enq[k++] = pr->enq[i];
			pr->nenq = k;
			pr->aborted = false;
		}
		break;
	case ACT_RELEASE:
		if (!ss->failed) {
			pr->savepoint = false;
			for (int i = 0; i < pr->nenq; i++)
				pr->enq[i].after_savepoint = false;
		}
		break;
	case ACT_COMMIT: {
		bool committed = !ss->failed && r != NULL &&
		    strcmp(PQcmdStatus(r), "COMMIT") == 0 && !pr->aborted;
		hfeed(run, "commit %s", committed ? "ok" : "rolled back");
		if (committed)
			commit_done(run, p);
		else
			txn_forget(pr);
		break;
	}
	case ACT_ROLLBACK:
		txn_forget(pr);
		break;
	default:
		if (ss->failed)
			pr->aborted = true;
		break;
	}
	if (ss->failed && s->act != ACT_ENQUEUE && s->act != ACT_COMMIT && s->act != ACT_ROLLBACK)
		pr->aborted = true;
	if (r != NULL)
		PQclear(r);
}

/* ---------------------------------------------------------------------- */
/* Relays and the consumer                                                 */
/* ---------------------------------------------------------------------- */

static void
hold_drop(struct relay *rl, int i)
{
	rl->h[i] = rl->h[--rl->n];
}

/* The consumer's answer to a delivery of m. */
static enum answer
consume(struct chk_run *run, struct msg *m)
{
	m->deliveries++;
	if (m->applied || m->key_known) {
		m->applied = true;
		return ANS_DUPLICATE;
	}
	if (m->reject)
		return ANS_REJECT;
	if ((int)chk_hash_pct(run->cfg->seed, m->topic, m->key, m->deliveries) < run->cfg->retry_pct)
		return ANS_RETRY;
	/* S2: a key's messages are applied in their numbers' order; a dead one
	 * counts as done only where dead heads are skipped; a requeued one in
	 * that mode comes late by design */
	if (m->seq > 0 && !(m->requeued && run->cfg->skip_dead)) {
		for (int i = 0; i < run->nmsgs; i++) {
			struct msg *o = &run->msgs[i];
			if (o->seq == 0 || o->seq >= m->seq || strcmp(o->okey, m->okey) != 0 ||
			    strcmp(o->topic, m->topic) != 0)
				continue;
			if (!o->applied && !(o->was_dead && run->cfg->skip_dead))
				violate(run, "S2-order", "key %s of %s: %s (number %" PRId64 ") applied"
				    " while %s (number %" PRId64 ") was not done", m->okey, m->topic,
				    m->key, m->seq, o->key, o->seq);
		}
	}
	m->applied = true;
	return ANS_APPLIED;
}

/* A snapshot of every table an outcome write may touch (md5). */
static void
tables_digest(struct chk_run *run, char *out, size_t len)
{
	PGresult *r = PQexec(run->db->mon, "SELECT md5(concat("
	    " (SELECT string_agg(x::text, ',' ORDER BY x.id) FROM outbox.batches x),"
	    " (SELECT string_agg(x::text, ',' ORDER BY x.id) FROM outbox.retries x),"
	    " (SELECT string_agg(x::text, ',' ORDER BY x.id) FROM outbox.dead x),"
	    " (SELECT string_agg(x::text, ',' ORDER BY x.topic, x.ordering_key)"
	    "    FROM outbox.ordering_blocks x),"
	    " (SELECT string_agg(x::text, ',' ORDER BY x.topic, x.lane) FROM outbox.streams x)))");
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		failure(run, PQresultErrorMessage(r));
		out[0] = '\0';
	} else {
		snprintf(out, len, "%s", PQgetvalue(r, 0, 0));
	}
	PQclear(r);
}

/* Dead letters the model did not write: S4 says which may exist. */
static void
check_new_dead(struct chk_run *run)
{
	PGresult *r = PQexec(run->db->mon, "SELECT id, last_error FROM outbox.dead ORDER BY id");
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		failure(run, PQresultErrorMessage(r));
		PQclear(r);
		return;
	}
	for (int i = 0; i < PQntuples(r); i++) {
		struct msg *m = find_id(run, atoll(PQgetvalue(r, i, 0)));
		const char *err = PQgetvalue(r, i, 1);
		if (m == NULL) {
			violate(run, "S4", "dead letter %s of no committed message", PQgetvalue(r, i, 0));
			continue;
		}
		if (m->dead)
			continue;
		int n = 0;
		if (sscanf(err, "taken over %d times without an outcome", &n) == 1 &&
		    n >= CHK_SPLIT_AFTER && m->takeovers > 0) {
			if (m->poison && !run->ever_restored && n > CHK_POISON_BOUND)
				violate(run, "S4-poison", "poison %s/%s dead after %d takeovers, bound %d",
				    m->topic, m->key, n, CHK_POISON_BOUND);
			m->dead = m->was_dead = true;
			m->reason = DR_TAKEOVERS;
			hfeed(run, "dead %s/%s after %d takeovers", m->topic, m->key, n);
			continue;
		}
		violate(run, "S4", "%s/%s is dead without a consumer's reject, its attempts or"
		    " lost holders (%d takeovers seen): %s", m->topic, m->key, m->takeovers, err);
	}
	PQclear(r);
}

/* S2: at most one message of an ordering key out in batches. */
static void
check_inflight(struct chk_run *run)
{
	PGresult *r = PQexec(run->db->mon,
	    "SELECT topic, ordering_key, string_agg(DISTINCT id::text, ',') FROM ("
	    " SELECT e.topic, e.ordering_key, e.id FROM outbox.batches b,"
	    "   LATERAL outbox.batch_events(b) e"
	    "  WHERE b.state = 'leased' AND b.kind = 's' AND e.ordering_key IS NOT NULL"
	    " UNION ALL"
	    " SELECT r.topic, r.ordering_key, r.id FROM outbox.retries r"
	    "   JOIN outbox.batches b ON b.id = r.batch_id AND b.state = 'leased'"
	    "  WHERE r.ordering_key IS NOT NULL) x"
	    " GROUP BY 1, 2 HAVING count(DISTINCT id) > 1 LIMIT 1");
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		failure(run, PQresultErrorMessage(r));
	else if (PQntuples(r) > 0)
		violate(run, "S2-inflight", "key %s of %s has messages %s out in batches at once",
		    PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 2));
	PQclear(r);
}

/* The byte budget of a claim (--batch-bytes): none in 2 of 5 claims, else
 * 1..30 bytes against payloads of 8 ('{"v": 0}'), so batches of 1 to 3.
 * Drawn from the seed and the step, not from the generator, so that the
 * seeds' schedules stay what they were before the budget existed. */
static int
claim_budget(struct chk_run *run, int ri)
{
	uint32_t pct = chk_hash_pct(run->cfg->seed, "claim-bytes",
	    run->db->s[relay_sess(run, ri)].name, (int)run->step_no);
	return pct < 40 ? 0 : 1 + (int)(pct % 30);
}

/* H1: a claim that said nothing more is claimable (`more` false, relay
 * protocol 5, outbox.more_claimable) left no stream with a cut to take:
 * the same claim made now, on the monitor and rolled back, cuts nothing.
 * Nothing commits between the two (steps are serial); a stream another
 * session has locked is skipped by both. Retries and takeovers are left
 * out: whether one is due depends on the clock, which moved between them. */
static void
check_more(struct chk_run *run, const char *claim_sql)
{
	char sql[900];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM (%s) c WHERE c.kind = 's'"
	    " AND NOT c.takeover", claim_sql);
	PGconn *mon = run->db->mon;
	PQclear(PQexec(mon, "BEGIN"));
	PQclear(PQexec(mon, "SET LOCAL lock_timeout = '200ms'"));
	PGresult *r = PQexec(mon, sql);
	/* a lock held by a waiting session: no answer, not a violation */
	if (PQresultStatus(r) == PGRES_TUPLES_OK && atoll(PQgetvalue(r, 0, 0)) > 0)
		violate(run, "H1-more", "a claim said nothing more was claimable, and the same"
		    " claim made after it cut %s messages of a stream", PQgetvalue(r, 0, 0));
	PQclear(r);
	PQclear(PQexec(mon, "ROLLBACK"));
}

static void
relay_claim(struct chk_run *run, int ri, const struct chk_step *s)
{
	struct relay *rl = &run->rel[ri];
	if (rl->n >= CHK_HOLDS_MAX)
		return;
	int budget = claim_budget(run, ri);
	char sql[700], bytes[16] = "NULL";
	if (budget > 0)
		snprintf(bytes, sizeof(bytes), "%d", budget);
	snprintf(sql, sizeof(sql), "SELECT batch_id, kind, fence, attempt, takeover, id, topic,"
	    " idempotency_key, created_us, octet_length(payload), more"
	    " FROM outbox.claim(protocol => %d,"
	    " owner => '%s', lease_ms => %d, max_n => %d, %s, retries_first => %s,"
	    " ordering => true, skip_dead_heads => %s, max_bytes => %s)", OB_PROTOCOL_RELAY,
	    run->db->s[relay_sess(run, ri)].name, s->c ? CHK_LEASE_LONG_MS : 0, s->a,
	    /* the relays route ta and tb only (--unrouted wait: tc is not
	     * claimed) until the drain, where a route for everything is added */
	    run->draining ? "include => NULL, exclude => NULL, others => true"
	                  : "include => '{ta,tb}', exclude => NULL, others => false",
	    s->b ? "true" : "false", run->cfg->skip_dead ? "true" : "false", bytes);
	PGresult *r = run_sql(run, relay_sess(run, ri), sql);
	struct chk_sess *ss = &run->db->s[relay_sess(run, ri)];
	if (r == NULL || ss->failed) {
		if (!run->failed)
			violate(run, "claim", "claim failed: %s %s", ss->sqlstate, ss->errmsg);
		if (r != NULL)
			PQclear(r);
		return;
	}
	int rows = PQntuples(r);
	check_new_dead(run);
	if (rows == 0) {
		hfeed(run, "claim -> nothing");
		PQclear(r);
		return;
	}
	struct hold h;
	memset(&h, 0, sizeof(h));
	h.batch = atoll(PQgetvalue(r, 0, 0));
	h.kind = PQgetvalue(r, 0, 1)[0];
	h.fence = atoll(PQgetvalue(r, 0, 2));
	bool takeover = PQgetvalue(r, 0, 4)[0] == 't';
	bool more = PQgetvalue(r, 0, 10)[0] == 't';
	char keys[512] = "";
	size_t used = 0;
	int64_t payload_bytes = 0;
	for (int i = 0; i < rows && i < CHK_BATCH_MAX; i++) {
		const char *topic = PQgetvalue(r, i, 6), *key = PQgetvalue(r, i, 7);
		payload_bytes += atoll(PQgetvalue(r, i, 9));
		struct msg *m = find_msg(run, topic, key);
		used += (size_t)snprintf(keys + used, sizeof(keys) - used, " %s/%s", topic, key);
		if (m == NULL) {
			violate(run, "S1", "claimed %s/%s, which no transaction committed", topic, key);
			continue;
		}
		if (m->id != atoll(PQgetvalue(r, i, 5)))
			violate(run, "S1", "claimed %s/%s as id %s, committed as %" PRId64, topic, key,
			    PQgetvalue(r, i, 5), m->id);
		if (m->recorded)
			violate(run, "S3-redelivery", "claimed %s/%s again after its delivery was"
			    " recorded", topic, key);
		if (m->dead)
			violate(run, "S4", "claimed the dead letter %s/%s", topic, key);
		if (m->delayed)
			violate(run, "not_before", "claimed %s/%s before its not_before (a day from"
			    " its enqueue)", topic, key);
		for (int k = 0; m->seq > 0 && k < run->nmsgs; k++) {
			const struct msg *o = &run->msgs[k];
			if (o->delayed && o->seq < m->seq && strcmp(o->okey, m->okey) == 0 &&
			    strcmp(o->topic, m->topic) == 0)
				violate(run, "not_before", "claimed %s/%s (key %s #%" PRId64 ") before"
				    " %s (#%" PRId64 "), which is not due", topic, key, m->okey, m->seq,
				    o->key, o->seq);
		}
		if (!run->draining && strcmp(topic, "tc") == 0)
			violate(run, "route", "claimed %s/%s of a topic the relay does not route", topic,
			    key);
		if (takeover)
			m->takeovers++;
		/* S4: attempts count claims, less the releases that refunded one
		 * (what --max-attempts is measured in) */
		int attempt = atoi(PQgetvalue(r, i, 3));
		if (m->attempt >= 0 && attempt != m->attempt + 1)
			violate(run, "S4-attempts", "%s/%s claimed as attempt %d, after %d counted",
			    topic, key, attempt, m->attempt);
		m->attempt = attempt;
		m->created_us = atoll(PQgetvalue(r, i, 8));
		h.msg[h.n] = (int)(m - run->msgs);
		h.attempt[h.n] = attempt;
		h.n++;
	}
	hfeed(run, "claim -> batch %" PRId64 " %c fence %" PRId64 "%s%s", h.batch, h.kind, h.fence,
	    takeover ? " takeover" : "", keys);
	/* a batch this claim cut keeps to its byte budget, a message larger
	 * than it alone; one claimed again (released, taken over, a half of a
	 * split) is what an earlier claim cut */
	if (budget > 0 && rows > 1 && payload_bytes > budget) {
		char q[160];
		snprintf(q, sizeof(q), "SELECT count(*) FROM outbox.batches WHERE id = %" PRId64
		    " AND claims = 1 AND takeovers = 0", h.batch);
		if (mon_int(run, q) == 1)
			violate(run, "batch-bytes", "batch %" PRId64 " of %d messages holds %" PRId64
			    " payload bytes, over the claim's max_bytes %d", h.batch, rows,
			    payload_bytes, budget);
	}
	/* S3: one sequence of fences, never backwards */
	if (h.fence <= run->max_fence)
		violate(run, "S3-fence", "batch %" PRId64 " claimed with fence %" PRId64 ", not above"
		    " %" PRId64, h.batch, h.fence, run->max_fence);
	run->max_fence = h.fence;
	/* an older hold of this batch (any relay's) is stale now */
	for (int x = 0; x < run->cfg->relays; x++)
		for (int i = 0; i < run->rel[x].n; i++)
			if (run->rel[x].h[i].batch == h.batch && x == ri)
				hold_drop(&run->rel[x], i--);
	rl->h[rl->n++] = h;
	PQclear(r);
	check_inflight(run);
	if (!more)
		check_more(run, sql);
}

static void
relay_die(struct chk_run *run, int ri)
{
	run->rel[ri].n = 0;
	hfeed(run, "%s dies", run->db->s[relay_sess(run, ri)].name);
}

static void
relay_send(struct chk_run *run, int ri, const struct chk_step *s)
{
	struct relay *rl = &run->rel[ri];
	if (rl->n == 0)
		return;
	struct hold *h = &rl->h[s->a % rl->n];
	if (h->sent)
		return;
	if (run->db->script != NULL)
		fprintf(run->db->script, "-- %s sends batch %" PRId64 " to the consumer\n",
		    run->db->s[relay_sess(run, ri)].name, h->batch);
	for (int i = 0; i < h->n; i++)
		if (run->msgs[h->msg[i]].poison) {
			/* a message that kills its relay: never sent, never recorded */
			hfeed(run, "batch %" PRId64 ": %s/%s kills its relay", h->batch,
			    run->msgs[h->msg[i]].topic, run->msgs[h->msg[i]].key);
			relay_die(run, ri);
			return;
		}
	h->sent = true;
	h->fault = s->b;
	char got[512] = "";
	size_t used = 0;
	for (int i = 0; i < h->n; i++) {
		struct msg *m = &run->msgs[h->msg[i]];
		h->answer[i] = s->b == 1 ? ANS_NONE : (int)consume(run, m);
		used += (size_t)snprintf(got + used, sizeof(got) - used, " %s=%d", m->key, h->answer[i]);
	}
	hfeed(run, "send batch %" PRId64 " fault %d:%s", h->batch, s->b, got);
}

/* An outcome write with an outcome that does not exist: refused (22023)
 * while the hold is current, fenced out (false) once stale; either way
 * nothing changes and the relay still holds the batch. */
static void
relay_record_bad(struct chk_run *run, int ri, const struct hold *h)
{
	char sql[512], before[40] = "", after[40] = "";
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM outbox.batches WHERE id = %" PRId64
	    " AND state = 'leased' AND fence = %" PRId64, h->batch, h->fence);
	bool current = mon_int(run, sql) == 1;
	tables_digest(run, before, sizeof(before));
	snprintf(sql, sizeof(sql), "SELECT outbox.record(protocol => 3, batch => %" PRId64
	    ", fence => %" PRId64 ", fencing => true, outcome => 'bogus', delay_ms => 0,"
	    " refund => false, ids => '{}', kinds => '{}', delays => '{}', errors => '{}',"
	    " skip_dead_heads => false)", h->batch, h->fence);
	PGresult *r = run_sql(run, relay_sess(run, ri), sql);
	struct chk_sess *ss = &run->db->s[relay_sess(run, ri)];
	hfeed(run, "bad record of batch %" PRId64 " -> %s", h->batch,
	    ss->failed ? ss->sqlstate : r != NULL ? PQgetvalue(r, 0, 0) : "?");
	if (current && (!ss->failed || strcmp(ss->sqlstate, "22023") != 0))
		violate(run, "record", "an outcome 'bogus' was not refused with 22023: %s %s",
		    ss->sqlstate, ss->errmsg);
	if (!current && (ss->failed || r == NULL || PQgetvalue(r, 0, 0)[0] != 'f'))
		violate(run, "S3-fence", "a stale outcome write was not fenced out: %s", ss->errmsg);
	tables_digest(run, after, sizeof(after));
	if (strcmp(before, after) != 0)
		violate(run, "record", "a refused outcome write changed the outbox");
	if (r != NULL)
		PQclear(r);
}

/* The checker's clock: the real one plus the days ACT_AGE made pass. */
static int64_t
checker_now_us(const struct chk_run *run)
{
	return ob_wall_us() + run->passed_us;
}

/* The relay's own retry policy (relay/retry_policy.h) on a failed attempt
 * of m, the one claimed as attempt, at the checker's clock (the real one
 * plus the days ACT_AGE made pass): the outcome it decides. reached: the
 * attempt reached the consumer (else it is refunded). */
static struct relay_outcome
policy_decide(struct chk_run *run, const struct msg *m, int attempt, bool reached,
    const char *error)
{
	static const struct relay_retry_limits limits = { CHK_MAX_ATTEMPTS, CHK_MAX_AGE_MS, 0, 0 };
	struct ob_wire_msg w;
	memset(&w, 0, sizeof(w));
	w.id = (uint64_t)m->id;
	w.attempt = (uint32_t)attempt;
	w.created_at_us = m->created_us;
	struct relay_outcome o;
	memset(&o, 0, sizeof(o));
	o.id = w.id;
	o.kind = RELAY_OUT_RETRY;
	o.refund_attempt = !reached;
	snprintf(o.error, sizeof(o.error), "%s", error);
	relay_retry_decide(&limits, &w, checker_now_us(run), &run->policy_rng, &o);
	return o;
}

/* Whether m is older than the policy's --max-age at the checker's clock. */
static bool
policy_age_past(const struct chk_run *run, const struct msg *m)
{
	struct ob_wire_msg w = { .created_at_us = m->created_us };
	return relay_msg_age_ms(&w, checker_now_us(run)) > CHK_MAX_AGE_MS;
}

static void
relay_record(struct chk_run *run, int ri, const struct chk_step *s)
{
	struct relay *rl = &run->rel[ri];
	if (rl->n == 0)
		return;
	int hi = s->a % rl->n;
	struct hold *h = &rl->h[hi];
	char ids[256] = "", kinds[256] = "", delays[128] = "", errors[1024] = "";
	size_t ui = 0, uk = 0, ud = 0, ue = 0;
	const char *outcome = "done";
	bool refund = false;
	bool release = s->b != 0 || !h->sent || h->fault != 0;
	if (s->b == 3) {
		relay_record_bad(run, ri, h);
		return;
	}
	if (release) {
		outcome = "release";
		refund = s->b == 1 || (!h->sent && s->b == 0) || h->fault == 1;
		/* S4: an attempt that reached no consumer never makes a message
		 * dead, however old (the days passed may be past --max-age) or
		 * however many attempts it had: the relay's policy says so */
		for (int i = 0; refund && i < h->n; i++) {
			struct msg *m = &run->msgs[h->msg[i]];
			struct relay_outcome o = policy_decide(run, m, h->attempt[i], false,
			    "send: Timed out");
			if (m->created_us != 0 && o.kind != RELAY_OUT_DEAD && run->passed_us > 0 &&
			    policy_age_past(run, m))
				run->res->outages_past_age++;
			if (o.kind == RELAY_OUT_DEAD)
				violate(run, "S4-outage", "the relay's policy makes %s/%s dead on an"
				    " attempt that reached no consumer (attempt %d, %" PRId64 " days"
				    " passed): %s", m->topic, m->key, h->attempt[i],
				    run->passed_us / 86400000000, o.error);
		}
	} else {
		for (int i = 0; i < h->n; i++) {
			struct msg *m = &run->msgs[h->msg[i]];
			const char *kind = NULL, *err = "";
			switch (h->answer[i]) {
			case ANS_REJECT:
				kind = "dead";
				err = "rejected by consumer: checker";
				break;
			case ANS_RETRY: {
				/* the relay's policy: a retry, or dead by its attempts or
				 * its age (this attempt reached the consumer) */
				struct relay_outcome o = policy_decide(run, m, h->attempt[i], true,
				    "consumer asked to retry");
				h->dead_age[i] = o.kind == RELAY_OUT_DEAD && strncmp(o.error, "max age", 7) == 0;
				h->dead_policy[i] = o.kind == RELAY_OUT_DEAD;
				kind = h->dead_policy[i] ? "dead" : "retry";
				snprintf(h->error[i], sizeof(h->error[i]), "%s", o.error);
				err = h->error[i];
				break;
			}
			default:
				kind = h->kind == 'r' ? "delivered" : NULL;
				break;
			}
			if (kind == NULL)
				continue;
			ui += (size_t)snprintf(ids + ui, sizeof(ids) - ui, "%s%" PRId64, ui ? "," : "",
			    m->id);
			uk += (size_t)snprintf(kinds + uk, sizeof(kinds) - uk, "%s%s", uk ? "," : "", kind);
			ud += (size_t)snprintf(delays + ud, sizeof(delays) - ud, "%s0", ud ? "," : "");
			ue += (size_t)snprintf(errors + ue, sizeof(errors) - ue, "%s\"%s\"", ue ? "," : "",
			    err);
		}
	}
	/* S3: refused exactly when the fence is stale; a refused write changes
	 * nothing */
	char sql[CHK_SQL_MAX], before[40] = "", after[40] = "";
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM outbox.batches WHERE id = %" PRId64
	    " AND state = 'leased' AND fence = %" PRId64, h->batch, h->fence);
	bool current = mon_int(run, sql) == 1;
	if (!current)
		tables_digest(run, before, sizeof(before));
	snprintf(sql, sizeof(sql), "SELECT outbox.record(protocol => 3, batch => %" PRId64
	    ", fence => %" PRId64 ", fencing => true, outcome => '%s', delay_ms => 0,"
	    " refund => %s, ids => '{%s}', kinds => '{%s}', delays => '{%s}', errors => '{%s}',"
	    " skip_dead_heads => %s)", h->batch, h->fence, outcome,
	    refund ? "true" : "false", ids, kinds, delays, errors,
	    run->cfg->skip_dead ? "true" : "false");
	PGresult *r = run_sql(run, relay_sess(run, ri), sql);
	struct chk_sess *ss = &run->db->s[relay_sess(run, ri)];
	if (r == NULL || ss->failed) {
		if (!run->failed)
			violate(run, "record", "record failed: %s %s", ss->sqlstate, ss->errmsg);
		if (r != NULL)
			PQclear(r);
		return;
	}
	bool written = PQgetvalue(r, 0, 0)[0] == 't';
	PQclear(r);
	hfeed(run, "record batch %" PRId64 " %s -> %s", h->batch, outcome, written ? "written" :
	    "fenced out");
	if (written != current)
		violate(run, "S3-fence", "record of batch %" PRId64 " with fence %" PRId64 " %s,"
		    " though its fence was %s", h->batch, h->fence, written ? "written" : "refused",
		    current ? "current" : "stale");
	if (written && release && refund)
		for (int i = 0; i < h->n; i++)
			if (run->msgs[h->msg[i]].attempt > 0)
				run->msgs[h->msg[i]].attempt--;
	if (!written) {
		tables_digest(run, after, sizeof(after));
		if (strcmp(before, after) != 0)
			violate(run, "S3-fence", "a refused record of batch %" PRId64 " changed the"
			    " outbox", h->batch);
	} else if (!release) {
		for (int i = 0; i < h->n; i++) {
			struct msg *m = &run->msgs[h->msg[i]];
			if (h->answer[i] == ANS_APPLIED || h->answer[i] == ANS_DUPLICATE) {
				m->recorded = true;
			} else if (h->answer[i] == ANS_REJECT ||
			    (h->answer[i] == ANS_RETRY && h->dead_policy[i])) {
				m->dead = m->was_dead = true;
				m->reason = h->answer[i] == ANS_REJECT ? DR_REJECT
				          : h->dead_age[i] ? DR_AGE : DR_ATTEMPTS;
			}
		}
	}
	hold_drop(rl, hi);
}

/* ---------------------------------------------------------------------- */
/* The operator                                                            */
/* ---------------------------------------------------------------------- */

/* S6: every committed message that is not done is still in the outbox. */
static void
check_kept(struct chk_run *run)
{
	char *sql = malloc(512 + (size_t)run->nmsgs * 22);
	if (sql == NULL) {
		failure(run, "out of memory");
		return;
	}
	size_t used = (size_t)sprintf(sql, "SELECT string_agg(i::text, ',') FROM unnest('{0");
	int want = 0;
	for (int i = 0; i < run->nmsgs; i++) {
		struct msg *m = &run->msgs[i];
		if (m->recorded || m->dead || m->dead_gone)
			continue;
		used += (size_t)sprintf(sql + used, ",%" PRId64, m->id);
		want++;
	}
	sprintf(sql + used, "}'::bigint[]) i WHERE i > 0 AND NOT EXISTS (SELECT 1 FROM outbox.events e"
	    " WHERE e.id = i) AND NOT EXISTS (SELECT 1 FROM outbox.retries r WHERE r.id = i)"
	    " AND NOT EXISTS (SELECT 1 FROM outbox.dead d WHERE d.id = i)");
	PGresult *r = want > 0 ? PQexec(run->db->mon, sql) : NULL;
	if (r != NULL && PQresultStatus(r) != PGRES_TUPLES_OK)
		failure(run, PQresultErrorMessage(r));
	else if (r != NULL && !PQgetisnull(r, 0, 0))
		violate(run, "S6", "messages %s, not yet done, are gone from the outbox",
		    PQgetvalue(r, 0, 0));
	if (r != NULL)
		PQclear(r);
	free(sql);
}

/* S5: every blocked key has a dead letter or a retry an operator can act
 * on; and (S2) a waiting message of an ordering key keeps its key blocked,
 * or the key's later messages would overtake it. */
static void
check_blocks(struct chk_run *run)
{
	PGresult *w = PQexec(run->db->mon, "SELECT r.topic, r.ordering_key, r.idempotency_key"
	    " FROM outbox.retries r WHERE r.ordering_key IS NOT NULL AND NOT EXISTS (SELECT 1"
	    " FROM outbox.ordering_blocks k WHERE k.topic = r.topic"
	    "   AND k.ordering_key = r.ordering_key) LIMIT 1");
	if (PQresultStatus(w) != PGRES_TUPLES_OK)
		failure(run, PQresultErrorMessage(w));
	else if (PQntuples(w) > 0)
		violate(run, "S2-block", "%s/%s waits as a retry of key %s, which is not blocked",
		    PQgetvalue(w, 0, 0), PQgetvalue(w, 0, 2), PQgetvalue(w, 0, 1));
	PQclear(w);
	PGresult *r = PQexec(run->db->mon, "SELECT k.topic, k.ordering_key, k.state"
	    " FROM outbox.ordering_blocks k"
	    " WHERE (k.state = 'dead' AND NOT EXISTS (SELECT 1 FROM outbox.dead d"
	    "          WHERE d.topic = k.topic AND d.ordering_key = k.ordering_key))"
	    "    OR (k.state = 'retry' AND NOT EXISTS (SELECT 1 FROM outbox.retries r"
	    "          WHERE r.topic = k.topic AND r.ordering_key = k.ordering_key)) LIMIT 1");
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		failure(run, PQresultErrorMessage(r));
	else if (PQntuples(r) > 0)
		violate(run, "S5", "key %s of %s is blocked (%s) with no %s to act on",
		    PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 2),
		    strcmp(PQgetvalue(r, 0, 2), "dead") == 0 ? "dead letter" : "retry");
	PQclear(r);
}

/* The model's dead letters that housekeeping deleted (--dead-retention). */
static void
dead_gone(struct chk_run *run)
{
	PGresult *r = PQexec(run->db->mon, "SELECT id FROM outbox.dead");
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		failure(run, PQresultErrorMessage(r));
		PQclear(r);
		return;
	}
	for (int i = 0; i < run->nmsgs; i++) {
		struct msg *m = &run->msgs[i];
		bool there = false;
		for (int k = 0; k < PQntuples(r) && m->dead && !there; k++)
			there = atoll(PQgetvalue(r, k, 0)) == m->id;
		if (m->dead && !there) {
			m->dead = false;
			m->dead_gone = true;
		}
	}
	PQclear(r);
}

/* What a housekeeping pass reported. */
static void
housekeep_seen(struct chk_run *run, PGresult *r)
{
	hfeed(run, "housekeep -> slot %s rows %s switched %s dead %s read_again %s",
	    PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2),
	    PQgetvalue(r, 0, 3), PQgetvalue(r, 0, 4));
	if (!PQgetisnull(r, 0, 4)) {
		run->restored = false;
		for (int i = 0; i < run->nmsgs; i++)
			run->msgs[i].attempt = -1; /* what it reads again starts over */
	}
}

static void
op_step(struct chk_run *run, const struct chk_step *s)
{
	int si = op_sess(run);
	char sql[1024];
	PGresult *r;
	switch (s->act) {
	case ACT_HOUSEKEEP:
		snprintf(sql, sizeof(sql), "SELECT truncated_slot, truncated_rows, switched_to,"
		    " dead_deleted, read_again, ran FROM outbox.housekeep(%d, %d, 86400000, 1, %s)",
		    s->a ? 86400000 : 0, s->b ? 86400000 : 0, s->c ? "true" : "false");
		if (s->c == 2) {
			/* two passes at once (two relays' worker 0): the second one,
			 * while the first one's transaction is open, does nothing */
			PGresult *b = run_sql(run, si, "BEGIN");
			if (b != NULL)
				PQclear(b);
			r = run_sql(run, si, sql);
			if (r != NULL && !run->db->s[si].failed)
				housekeep_seen(run, r);
			if (r != NULL)
				PQclear(r);
			r = run_sql(run, relay_sess(run, 0), sql);
			bool ran = r != NULL && !run->db->s[relay_sess(run, 0)].failed &&
			    PQgetvalue(r, 0, 5)[0] == 't';
			hfeed(run, "a second housekeeping pass at once -> %s", ran ? "ran" : "skipped");
			if (ran)
				violate(run, "housekeep", "two housekeeping passes ran at once");
			if (r != NULL)
				PQclear(r);
			snprintf(sql, sizeof(sql), "COMMIT");
			b = run_sql(run, si, sql);
			if (b != NULL)
				PQclear(b);
			dead_gone(run);
			check_kept(run);
			break;
		}
		r = run_sql(run, si, sql);
		if (r == NULL || run->db->s[si].failed) {
			if (!run->failed)
				violate(run, "housekeep", "housekeeping failed: %s",
				    run->db->s[si].errmsg);
			break;
		}
		housekeep_seen(run, r);
		/* dead letters past the retention are gone */
		if (strcmp(PQgetvalue(r, 0, 3), "0") != 0)
			dead_gone(run);
		PQclear(r);
		check_kept(run);
		break;
	case ACT_AGE:
		/* a day passes (two): every lease has run out, every retry is due,
		 * every slot, dead letter and done batch is a day older, and every
		 * committed message's not_before (a day ahead) is past */
		r = run_sql(run, si, "WITH a AS (UPDATE outbox.slots SET since = since - interval '2 days'"
		    " RETURNING 1), b AS (UPDATE outbox.dead SET died_at = died_at - interval '2 days',"
		    " not_before = not_before - interval '2 days' RETURNING 1), c AS (UPDATE"
		    " outbox.batches SET done_at = done_at - interval '2 days',"
		    " lease_until = lease_until - interval '2 days' RETURNING 1), d AS (UPDATE"
		    " outbox.retries SET due_at = due_at - interval '2 days',"
		    " not_before = not_before - interval '2 days' RETURNING 1), e AS (UPDATE"
		    " outbox.events SET not_before = not_before - interval '2 days'"
		    " WHERE not_before IS NOT NULL RETURNING 1)"
		    " SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM b) + (SELECT count(*) FROM c)"
		    " + (SELECT count(*) FROM d) + (SELECT count(*) FROM e)");
		run->passed_us += CHK_DAY_US;
		for (int i = 0; i < run->nmsgs; i++)
			run->msgs[i].delayed = false;
		hfeed(run, "age");
		if (r != NULL)
			PQclear(r);
		break;
	case ACT_REQUEUE:
		snprintf(sql, sizeof(sql), "SELECT string_agg(x::text, ',') FROM outbox.requeue_dead("
		    "ARRAY(SELECT id FROM outbox.dead ORDER BY id OFFSET (SELECT %d %% GREATEST(count(*), 1)"
		    " FROM outbox.dead) LIMIT 1)) x", s->a);
		r = run_sql(run, si, sql);
		if (r == NULL || run->db->s[si].failed) {
			if (!run->failed)
				violate(run, "requeue", "requeue failed: %s", run->db->s[si].errmsg);
			break;
		}
		hfeed(run, "requeue -> %s", PQgetvalue(r, 0, 0));
		if (!PQgetisnull(r, 0, 0)) {
			struct msg *m = find_id(run, atoll(PQgetvalue(r, 0, 0)));
			if (m != NULL) {
				m->dead = false;
				m->requeued = true;
				m->attempt = 0;
			}
		}
		PQclear(r);
		break;
	case ACT_RESTORE: {
		/* a dump holds what was committed: open transactions are lost, and
		 * the relays of the old cluster are gone with their batches */
		for (int p = 0; p < run->cfg->producers; p++) {
			if (run->prod[p].in_txn || run->db->s[producer_sess(run, p)].pending) {
				kill_sess(run, producer_sess(run, p));
				txn_forget(&run->prod[p]);
				waiting[p].act = ACT_COUNT;
			}
		}
		for (int x = 0; x < run->cfg->relays; x++)
			run->rel[x].n = 0;
		r = run_sql(run, si, "SELECT pg_temp.simulate_restore(4294967296)");
		if (r == NULL || run->db->s[si].failed) {
			if (!run->failed)
				failure(run, run->db->s[si].errmsg);
			break;
		}
		PQclear(r);
		run->restored = run->ever_restored = true;
		hfeed(run, "restore");
		break;
	}
	default:
		break;
	}
}

/* ---------------------------------------------------------------------- */
/* The run                                                                 */
/* ---------------------------------------------------------------------- */


static void
finish_waiting(struct chk_run *run)
{
	for (int p = 0; p < run->cfg->producers; p++) {
		int si = producer_sess(run, p);
		struct chk_sess *ss = &run->db->s[si];
		if (ss->pending || waiting[p].act == ACT_COUNT)
			continue;
		struct chk_step s = waiting[p];
		waiting[p].act = ACT_COUNT;
		PGresult *r = chk_sess_take(run->db, si);
		script_get(run, si);
		if (s.act == ACT_ENQUEUE) {
			enqueue_done(run, p, &s, r, ss);
		} else if (s.act == ACT_COMMIT) {
			bool ok = !ss->failed && r != NULL && strcmp(PQcmdStatus(r), "COMMIT") == 0 &&
			    !run->prod[p].aborted;
			hfeed(run, "commit %s (after a wait)", ok ? "ok" : "rolled back");
			if (ok)
				commit_done(run, p);
			else
				txn_forget(&run->prod[p]);
		} else {
			hfeed(run, "%s finished %s", chk_act_name(s.act), ss->failed ? ss->sqlstate : "ok");
			if (ss->failed)
				run->prod[p].aborted = true;
		}
		if (r != NULL)
			PQclear(r);
	}
}

static bool
applicable(struct chk_run *run, const struct chk_step *s)
{
	const struct chk_config *c = run->cfg;
	if (s->sess >= c->producers + c->relays + 1)
		return false;
	if (run->db->s[s->sess].pending) /* a waiting producer can only be killed */
		return s->sess < c->producers && s->act == ACT_TERMINATE;
	if (s->sess < c->producers) {
		const struct producer *p = &run->prod[s->sess];
		switch (s->act) {
		case ACT_BEGIN:
			return !p->in_txn;
		case ACT_TERMINATE:
			return true;
		case ACT_ROLLBACK:
			return p->in_txn;
		case ACT_ROLLBACK_TO:
		case ACT_RELEASE:
			return p->in_txn && p->savepoint;
		case ACT_WRITE:
		case ACT_XID:
		case ACT_ENQUEUE:
		case ACT_SAVEPOINT:
		case ACT_COMMIT:
			return p->in_txn && !p->aborted;
		default:
			return false;
		}
	}
	if (s->sess < c->producers + c->relays)
		return s->act >= ACT_CLAIM && s->act <= ACT_DIE;
	return s->act >= ACT_HOUSEKEEP && !(s->act == ACT_RESTORE && run->restored);
}

static void
run_step(struct chk_run *run, const struct chk_step *s)
{
	const struct chk_config *c = run->cfg;
	hfeed(run, "%zu %s %s %d %d %d %s %s %s", run->step_no, run->db->s[s->sess].name,
	    chk_act_name(s->act), s->a, s->b, s->c, s->topic, s->key, s->okey);
	if (s->sess < c->producers) {
		if (s->act == ACT_TERMINATE) {
			kill_sess(run, s->sess);
			txn_forget(&run->prod[s->sess]);
			waiting[s->sess].act = ACT_COUNT;
		} else {
			producer_step(run, s->sess, s);
			if (run->db->s[s->sess].pending)
				waiting[s->sess] = *s;
		}
	} else if (s->sess < c->producers + c->relays) {
		int ri = s->sess - c->producers;
		switch (s->act) {
		case ACT_CLAIM:
			relay_claim(run, ri, s);
			break;
		case ACT_SEND:
			relay_send(run, ri, s);
			break;
		case ACT_RECORD:
			relay_record(run, ri, s);
			break;
		case ACT_DIE:
			relay_die(run, ri);
			break;
		default:
			break;
		}
	} else {
		op_step(run, s);
	}
	finish_waiting(run);
	check_blocks(run);
}

/* Bring the database to its first state: no message, no stream, fresh
 * sequences, slot 0 current (every session closed: TRUNCATE needs them
 * gone). */
static bool
reset(struct chk_run *run, char *why, size_t len)
{
	for (int i = 0; i < CHK_SESSIONS_MAX; i++)
		chk_sess_close(&run->db->s[i]);
	static const char sql[] =
	    "TRUNCATE outbox.events, outbox.streams, outbox.batches, outbox.retries, outbox.dead,"
	    " outbox.ordering_blocks, outbox.ordering_seqs, outbox.ordering_next,"
	    " outbox.relay_waiters, public.check_business;"
	    "ALTER SEQUENCE outbox.event_ids RESTART; ALTER SEQUENCE outbox.fences RESTART;"
	    "ALTER SEQUENCE outbox.batch_ids RESTART;"
	    "UPDATE outbox.slots SET state = 'empty', since = now();"
	    "UPDATE outbox.slots SET state = 'current' WHERE slot = 0";
	if (run->db->script != NULL)
		fprintf(run->db->script, "%s;\n", sql);
	PGresult *r = PQexec(run->db->mon, sql);
	bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
	if (!ok)
		snprintf(why, len, "reset: %s", PQresultErrorMessage(r));
	PQclear(r);
	if (!ok)
		return false;
	const struct chk_config *c = run->cfg;
	run->db->n = c->producers + c->relays + 1;
	for (int i = 0; i < run->db->n; i++) {
		char name[16];
		if (i < c->producers)
			snprintf(name, sizeof(name), "p%d", i);
		else if (i < c->producers + c->relays)
			snprintf(name, sizeof(name), "r%d", i - c->producers);
		else
			snprintf(name, sizeof(name), "op");
		const char *user = i < c->producers ? run->db->user[0]
		                 : i < c->producers + c->relays ? run->db->user[1] : NULL;
		if (!chk_sess_open(run->db, i, name, user != NULL && user[0] ? user : NULL, why, len))
			return false;
		run->db->s[i].bounded = i == op_sess(run);
		script_connect(run, i);
	}
	/* the operator's restore (tests/data/sql/simulate_restore.sql) */
	FILE *f = fopen(run->db->simulate_sql_path, "r");
	if (f == NULL) {
		snprintf(why, len, "cannot read %.900s", run->db->simulate_sql_path);
		return false;
	}
	static char text[8192];
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	PGconn *op = run->db->s[op_sess(run)].conn;
	if (run->db->script != NULL)
		fprintf(run->db->script, "SELECT dblink_exec('op', $chk$%s$chk$);\n", text);
	PQsetnonblocking(op, 0);
	r = PQexec(op, text);
	ok = PQresultStatus(r) == PGRES_COMMAND_OK;
	if (!ok)
		snprintf(why, len, "simulate_restore.sql: %s", PQresultErrorMessage(r));
	PQclear(r);
	PQsetnonblocking(op, 1);
	return ok;
}

static const char *
known_key(void *ctx, int i, const char **topic, const char **okey)
{
	struct chk_run *run = ctx;
	struct msg *m = &run->msgs[i % run->nmsgs];
	*topic = m->topic;
	*okey = m->okey;
	return m->key;
}

static void
make_view(struct chk_run *run, struct chk_view *v)
{
	const struct chk_config *c = run->cfg;
	memset(v, 0, sizeof(*v));
	v->cfg = c;
	for (int i = 0; i < run->db->n; i++) {
		v->enabled[i] = !run->db->s[i].pending;
		v->waiting[i] = run->db->s[i].pending;
	}
	for (int p = 0; p < c->producers; p++) {
		v->in_txn[p] = run->prod[p].in_txn;
		v->aborted[p] = run->prod[p].aborted;
		v->savepoint[p] = run->prod[p].savepoint;
		v->next_key[p] = run->prod[p].next_key;
	}
	for (int r = 0; r < c->relays; r++)
		v->holds[r] = run->rel[r].n;
	for (int i = 0; i < run->nmsgs; i++)
		v->dead_letters += run->msgs[i].dead;
	v->known_keys = run->nmsgs;
	for (int i = 0; i < run->nmsgs; i++)
		v->pool_committed += strncmp(run->msgs[i].key, "s-", 2) == 0;
	v->restore_pending = run->restored;
	v->known = known_key;
	v->ctx = run;
}

/* The fair schedule at the end: every producer commits, every relay
 * finishes what it holds; then days pass, housekeeping runs and the
 * relays claim (leases of 0 ms: a poison message's batch comes back at
 * once), send without faults and record, until nothing is left to claim. */
static void
drain(struct chk_run *run, struct chk_history *ran)
{
	const struct chk_config *c = run->cfg;
	struct chk_step s;
	for (int round = 0; round < 50; round++) {
		bool open = false;
		for (int p = 0; p < c->producers; p++) {
			if (run->db->s[p].pending) {
				open = true;
				continue;
			}
			if (!run->prod[p].in_txn)
				continue;
			memset(&s, 0, sizeof(s));
			s.sess = p;
			s.act = run->prod[p].aborted ? ACT_ROLLBACK : ACT_COMMIT;
			run_step(run, &s);
			if (ran != NULL)
				chk_history_push(ran, &s);
			run->step_no++;
			open = true;
		}
		if (!open)
			break;
	}
	int quiet = 0;
	run->draining = true;
	for (int round = 0; round < CHK_DRAIN_ROUNDS && quiet < 3; round++) {
		if (run->res->violated || run->failed)
			return;
		memset(&s, 0, sizeof(s));
		s.sess = op_sess(run);
		s.act = round % 2 ? ACT_AGE : ACT_HOUSEKEEP;
		s.a = 1;
		s.b = 0;
		s.c = 1;
		run_step(run, &s);
		if (ran != NULL)
			chk_history_push(ran, &s);
		run->step_no++;
		bool claimed = false;
		for (int r = 0; r < c->relays; r++) {
			int si = relay_sess(run, r);
			memset(&s, 0, sizeof(s));
			s.sess = si;
			s.act = ACT_CLAIM;
			s.a = CHK_BATCH_MAX;
			s.b = round % 2;
			s.c = 1; /* no stalls now: a lease that outlives the delivery */
			run_step(run, &s);
			if (ran != NULL)
				chk_history_push(ran, &s);
			run->step_no++;
			claimed |= run->rel[r].n > 0;
			/* what it holds goes out and is recorded (a poison message kills
			 * it instead: its batch comes back when a day has passed) */
			while (run->rel[r].n > 0 && !run->res->violated && !run->failed) {
				memset(&s, 0, sizeof(s));
				s.sess = si;
				s.act = run->rel[r].h[0].sent ? ACT_RECORD : ACT_SEND;
				run_step(run, &s);
				if (ran != NULL)
					chk_history_push(ran, &s);
				run->step_no++;
			}
		}
		quiet = claimed ? 0 : quiet + 1;
	}
	if (quiet < 3)
		violate(run, "stuck", "the claims did not run dry in %d rounds of the fair schedule",
		    CHK_DRAIN_ROUNDS);
}

/* At the end, the contract's view says what the model knows: a message
 * recorded delivered is 'delivered' (or gone with its slot), a dead letter
 * 'dead' (or gone after --dead-retention), any other 'pending'; and
 * outbox.backlog_empty() is true exactly when nothing is pending. */
static void
check_view(struct chk_run *run)
{
	PGresult *r = PQexec(run->db->mon, "SELECT id, status FROM outbox.messages ORDER BY id");
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		failure(run, PQresultErrorMessage(r));
		PQclear(r);
		return;
	}
	int pending = 0;
	char which[128] = "";
	for (int i = 0; i < run->nmsgs && !run->res->violated; i++) {
		struct msg *m = &run->msgs[i];
		if (i + 1 < run->nmsgs && find_msg(run, m->topic, m->key) != m)
			continue; /* a key enqueued anew: its newest message speaks */
		if (m->dead_gone && !m->dead)
			continue; /* its dead letter went after --dead-retention */
		const char *want = m->dead ? "dead" : m->recorded ? "delivered" : "pending";
		const char *got = NULL;
		for (int k = 0; k < PQntuples(r) && got == NULL; k++)
			if (atoll(PQgetvalue(r, k, 0)) == m->id)
				got = PQgetvalue(r, k, 1);
		if (strcmp(want, "pending") == 0 && pending++ == 0)
			snprintf(which, sizeof(which), " (%s/%s)", m->topic, m->key);
		bool gone_ok = m->dead_gone || (m->recorded && !m->dead);
		if (got == NULL ? !gone_ok : strcmp(got, want) != 0 && !(m->dead_gone && got == NULL))
			violate(run, "view", "outbox.messages says %s/%s (id %" PRId64 ") is %s, the"
			    " model %s", m->topic, m->key, m->id, got ? got : "gone", want);
	}
	PQclear(r);
	int64_t empty = mon_int(run, "SELECT outbox.backlog_empty()::int");
	if (!run->res->violated && empty != (pending == 0))
		violate(run, "view", "outbox.backlog_empty() is %s with %d message(s) pending%s",
		    empty ? "true" : "false", pending, which);
}

/* At the end: every committed message applied and recorded, or dead as S4
 * allows, or waiting behind a dead head of its key (block). */
static void
check_end(struct chk_run *run)
{
	check_kept(run);
	check_blocks(run);
	for (int i = 0; i < run->nmsgs && !run->res->violated; i++) {
		struct msg *m = &run->msgs[i];
		if (m->dead || m->dead_gone)
			continue; /* S4 was checked when it died (a holder that stalled
			           * past its lease may still have delivered it) */
		bool behind_dead = false, behind_delayed = false;
		for (int k = 0; k < run->nmsgs; k++) {
			struct msg *o = &run->msgs[k];
			bool before = o->seq > 0 && o->seq < m->seq && strcmp(o->okey, m->okey) == 0 &&
			    strcmp(o->topic, m->topic) == 0;
			behind_dead |= !run->cfg->skip_dead && o->dead && before;
			behind_delayed |= o->delayed && !o->dead && before;
		}
		if (behind_dead)
			continue; /* --on-dead-head block: it waits for the operator */
		if (m->delayed || behind_delayed)
			continue; /* not due yet (no day passed since): it, and its key's
			           * later ones, wait */
		if (m->poison) {
			violate(run, "S4-poison", "poison %s/%s is not dead at the end", m->topic, m->key);
		} else if (m->applied && !m->recorded) {
			violate(run, "stuck", "%s/%s was applied but its delivery never recorded",
			    m->topic, m->key);
		} else if (!m->applied) {
			char sql[256];
			snprintf(sql, sizeof(sql), "SELECT count(*) FROM outbox.messages WHERE id = %"
			    PRId64 " AND status = 'pending'", m->id);
			violate(run, "stuck", "%s/%s (id %" PRId64 ", key %s #%" PRId64 ") was"
			    " committed and is neither applied nor dead (pending in the outbox: %s)",
			    m->topic, m->key, m->id, m->okey[0] ? m->okey : "-", m->seq,
			    mon_int(run, sql) > 0 ? "yes" : "no");
		}
	}
	check_view(run);
	for (int i = 0; i < run->nmsgs; i++) {
		run->res->applied += run->msgs[i].applied;
		run->res->dead += run->msgs[i].was_dead;
		run->res->poison_dead += run->msgs[i].poison && run->msgs[i].was_dead;
		run->res->takeovers += run->msgs[i].takeovers;
		run->res->age_dead += run->msgs[i].reason == DR_AGE;
	}
	run->res->msgs = run->nmsgs;
}

bool
chk_run_seed(struct chk_db *db, const struct chk_config *cfg, const struct chk_history *replay,
    struct chk_history *ran, struct chk_result *res)
{
	struct chk_run run;
	memset(&run, 0, sizeof(run));
	memset(res, 0, sizeof(*res));
	res->hash = 1469598103934665603ULL;
	run.db = db;
	run.cfg = cfg;
	run.res = res;
	run.policy_rng = cfg->seed | 1;
	run.msgs = calloc(CHK_MSGS_MAX, sizeof(*run.msgs));
	if (run.msgs == NULL) {
		snprintf(res->why, sizeof(res->why), "out of memory");
		return false;
	}
	for (int p = 0; p < CHK_PRODUCERS_MAX; p++)
		waiting[p].act = ACT_COUNT;
	char why[CHK_WHY_MAX];
	if (!reset(&run, why, sizeof(why))) {
		snprintf(res->why, sizeof(res->why), "%s", why);
		free(run.msgs);
		return false;
	}
	struct chk_rng rng = { cfg->seed };
	size_t total = replay != NULL ? replay->n : (size_t)cfg->steps;
	for (size_t i = 0; i < total && !res->violated && !run.failed; i++) {
		struct chk_step s;
		if (replay != NULL) {
			s = replay->steps[i];
			if (!applicable(&run, &s))
				continue;
		} else {
			struct chk_view v;
			make_view(&run, &v);
			if (!chk_gen_next(&rng, &v, &s))
				break;
		}
		run_step(&run, &s);
		if (ran != NULL)
			chk_history_push(ran, &s);
		run.step_no++;
		res->steps_run++;
	}
	if (!res->violated && !run.failed && replay == NULL)
		drain(&run, ran);
	else if (!res->violated && !run.failed)
		drain(&run, NULL);
	if (!res->violated && !run.failed)
		check_end(&run);
	if (run.failed) {
		memcpy(res->why, run.fail, sizeof(res->why));
		free(run.msgs);
		return false;
	}
	free(run.msgs);
	return true;
}

void
chk_history_push(struct chk_history *h, const struct chk_step *s)
{
	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 256;
		struct chk_step *n = realloc(h->steps, cap * sizeof(*n));
		if (n == NULL)
			return;
		h->steps = n;
		h->cap = cap;
	}
	h->steps[h->n++] = *s;
}

void
chk_history_free(struct chk_history *h)
{
	free(h->steps);
	memset(h, 0, sizeof(*h));
}

void
chk_history_print(FILE *f, const struct chk_history *h)
{
	for (size_t i = 0; i < h->n; i++) {
		const struct chk_step *s = &h->steps[i];
		fprintf(f, "  %3zu s%d %-11s a=%d b=%d c=%d %s %s %s\n", i, s->sess,
		    chk_act_name(s->act), s->a, s->b, s->c, s->topic, s->key, s->okey);
	}
}
