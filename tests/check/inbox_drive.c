/*
 * inbox_drive.c - the checker's inbox driver: the inbox's SQL contract
 * (sql/inbox/functions/, docs/inbox-sql.md) called as a consumer in any
 * language calls it, by four consumer sessions at once, under a seeded
 * schedule, with the invariants checked after every step.
 *
 * The sessions: c0 and c1 of the named source "shop-a" (two consumers of
 * one relay's messages: a takeover), c2 of "shop-b", c3 of the source ''
 * (a relay from before wire version 3, which sends the messages of either
 * producer database). A message belongs to a producer database (A or B),
 * has a (topic, key) and a payload; a reused key is another message with
 * the same (topic, key) and another payload. A delivery is three steps,
 * each one statement that may wait for a lock another session holds
 * (session.c): BEGIN and inbox.take_source_gate; the apply (the retention
 * check by the database's clock as inbox_plan makes it, then
 * inbox.dedup_lookup, the effect inbox.add_notification and
 * inbox.dedup_insert when it said new; or the frame of one message through
 * inbox.apply_notifications, the set path); COMMIT or ROLLBACK. The
 * operator purges (inbox.purge, the consumer's margin) and makes time pass
 * (every committed record's times and every message's created_at moved
 * back: a record still uncommitted keeps its times, which only makes it
 * look younger to the purge and to I2). Messages
 * are stamped by a producer clock that may be ahead or behind.
 *
 * Invariants, after every step:
 *   I1  no message is applied twice (two effect rows of one message id),
 *       whatever its deliveries' sources, ever: a redelivery within the
 *       horizon finds its record, one after it is refused by the retention
 *       check;
 *   I2  the purge keeps every record of an applied message whose
 *       created_at is within the retention plus the margin (the horizon)
 *       by the database's clock.
 * A violation prints the seed's history; no shrinking (histories are
 * short). run.sh shows each invariant failing on a broken variant.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inbox.h" /* INBOX_RETENTION_MARGIN_MS: the consumer's margin */
#include "inbox_drive.h"

#define IN_SESSIONS 4
#define IN_MSGS_MAX 512
#define IN_STEPS_MAX 4096
#define IN_TOPICS 2
#define IN_KEYS 4
#define IN_HOUR_US INT64_C(3600000000)
#define IN_RETENTION_MS (INT64_C(24) * 3600000) /* the driver's --dedup-retention */

static const char *const source_of[IN_SESSIONS] = { "shop-a", "shop-a", "shop-b", "" };
/* which producer database a session's messages come from (-1: either) */
static const int origin_of[IN_SESSIONS] = { 0, 0, 1, -1 };
/* producer clock skews a message may be stamped with, in hours */
static const int skew_hours[] = { 0, 0, 2, -1 };

enum in_act { IN_BEGIN, IN_APPLY, IN_END, IN_AGE, IN_PURGE };
static const char *const act_names[] = { "begin", "apply", "end", "age", "purge" };

struct in_msg {
	int origin, topic, key, payload;
	int64_t created_us; /* by the database's clock as it is now */
	int applied;        /* committed effects, as the model counts them */
};

struct in_step {
	enum in_act act;
	int sess, msg, a; /* APPLY a: 1 = the set path; END a: 1 = rollback; AGE a: hours */
	char verdict[16]; /* what the apply answered ("" none, "error: ...") */
};

enum in_state { S_IDLE, S_GATED, S_APPLIED };

struct in_sess {
	enum in_state state;
	int msg;
	bool awaiting; /* a statement sent whose result is not processed */
	bool wrote;    /* the apply wrote an effect (uncommitted) */
	bool failed;   /* the transaction is aborted: END rolls back */
	int step;      /* the step that sent the statement awaited (its act says which) */
};

struct in_run {
	struct chk_db *db;
	struct chk_rng rng;
	struct in_msg msgs[IN_MSGS_MAX];
	int nmsgs;
	struct in_sess s[IN_SESSIONS];
	struct in_step steps[IN_STEPS_MAX];
	int nsteps;
	char why[CHK_WHY_MAX];
	bool violated;
	char user[64]; /* the sessions' login role (consumer_role) */
};

/* Run sql (any statements) on the monitor; false with r->why. */
static bool
mon_exec(struct in_run *r, const char *sql)
{
	PGresult *res = PQexec(r->db->mon, sql);
	bool ok = PQresultStatus(res) == PGRES_COMMAND_OK || PQresultStatus(res) == PGRES_TUPLES_OK;
	if (!ok)
		snprintf(r->why, sizeof(r->why), "monitor: %s", PQresultErrorMessage(res));
	PQclear(res);
	return ok;
}

static int64_t
db_clock_us(struct in_run *r)
{
	return chk_mon_int(r->db, "SELECT inbox.clock_us()", r->why, sizeof(r->why));
}

static void
msg_text(const struct in_msg *m, char *topic, char *key, char *payload)
{
	sprintf(topic, "t%d", m->topic);
	sprintf(key, "k%d", m->key);
	sprintf(payload, "{\"v\": %d}", m->payload);
}

/* A message for session s: a new one, a redelivery, or a key reused. */
static int
pick_msg(struct in_run *r, int s)
{
	int origin = origin_of[s] >= 0 ? origin_of[s] : (int)chk_below(&r->rng, 2);
	uint32_t how = chk_below(&r->rng, 100);
	if (how < 55 && r->nmsgs > 0) { /* a redelivery of one of its database's */
		for (int tries = 0; tries < 8; tries++) {
			int i = (int)chk_below(&r->rng, (uint32_t)r->nmsgs);
			if (origin_of[s] < 0 || r->msgs[i].origin == origin)
				return i;
		}
	}
	if (r->nmsgs >= IN_MSGS_MAX)
		return (int)chk_below(&r->rng, (uint32_t)r->nmsgs);
	struct in_msg *m = &r->msgs[r->nmsgs];
	m->origin = origin;
	m->topic = (int)chk_below(&r->rng, IN_TOPICS);
	m->key = (int)chk_below(&r->rng, IN_KEYS);
	/* payload 0, or another (a key reused when its (topic, key) was sent) */
	m->payload = how < 85 ? 0 : 1 + (int)chk_below(&r->rng, 2);
	int64_t now = db_clock_us(r);
	if (now < 0)
		return -1;
	m->created_us = now + skew_hours[chk_below(&r->rng, 4)] * IN_HOUR_US;
	m->applied = 0;
	return r->nmsgs++;
}

/* The apply statement of message m from session s (see the file's top). */
static void
apply_sql(const struct in_run *r, int s, int mi, bool set_path, char *sql, size_t len)
{
	const struct in_msg *m = &r->msgs[mi];
	char t[8], k[8], p[32], src[16];
	msg_text(m, t, k, p);
	snprintf(src, sizeof(src), "'%s'", source_of[s]);
	double created = (double)m->created_us / 1e6;
	if (set_path) {
		snprintf(sql, len, "SELECT verdict FROM inbox.apply_notifications(%s, ARRAY['%s'],"
		    " ARRAY['%s'], ARRAY[convert_to('%s', 'UTF8')], ARRAY[%d::bigint], ARRAY[1::bigint],"
		    " ARRAY[to_timestamp(%.6f)], ARRAY[NULL::text], ARRAY[NULL::bigint], true)",
		    src, k, t, p, mi, created);
		return;
	}
	/* the effect and the record only when the lookup said new (an
	 * initplan: evaluated only where the CASE reaches it), in this order */
	snprintf(sql, len, "SELECT v.verdict, CASE WHEN v.verdict = 'new' THEN (SELECT count(*) FROM"
	    " (SELECT inbox.add_notification(%s, '%s', '%s', convert_to('%s', 'UTF8'), %d, NULL, NULL)"
	    " UNION ALL SELECT inbox.dedup_insert(%s, '%s', '%s', convert_to('%s', 'UTF8'), %d, 1,"
	    " to_timestamp(%.6f), 'applied by c%d')) w) END"
	    " FROM inbox.dedup_lookup(%s, '%s', '%s', convert_to('%s', 'UTF8')) v",
	    src, t, k, p, mi, src, t, k, p, mi, created, s, src, t, k, p);
}

/* Take the result of session s's finished statement into the model. */
static void
settle_one(struct in_run *r, int s)
{
	struct in_sess *x = &r->s[s];
	struct chk_sess *cs = &r->db->s[s];
	if (!x->awaiting || cs->pending)
		return;
	x->awaiting = false;
	PGresult *res = chk_sess_take(r->db, s);
	struct in_step *st = &r->steps[x->step];
	if (cs->failed) {
		x->failed = true;
		snprintf(st->verdict, sizeof(st->verdict), "error %s", cs->sqlstate);
	}
	switch (st->act) {
	case IN_BEGIN:
		x->state = S_GATED;
		break;
	case IN_APPLY:
		if (!cs->failed && res != NULL && PQntuples(res) == 1) {
			const char *v = PQgetvalue(res, 0, 0);
			snprintf(st->verdict, sizeof(st->verdict), "%s", v);
			x->wrote = strcmp(v, "new") == 0 || strcmp(v, "applied") == 0;
			/* undecided: the consumer rolls back, then message by message */
			x->failed = strcmp(v, "undecided") == 0;
		}
		x->state = S_APPLIED;
		break;
	default: /* the END's COMMIT or ROLLBACK */
		if (!cs->failed && x->wrote && !st->a)
			r->msgs[x->msg].applied++;
		x->state = S_IDLE;
		x->wrote = x->failed = false;
		break;
	}
	PQclear(res);
}

static bool
send(struct in_run *r, int s, const char *sql, int step)
{
	r->s[s].awaiting = true;
	r->s[s].step = step;
	return chk_sess_run(r->db, s, sql, r->why, sizeof(r->why));
}

/* I1 and I2 against the database; false with r->why on a violation or a
 * failure (r->violated says which). */
static bool
check_invariants(struct in_run *r)
{
	char sql[256];
	/* -1 is the monitor's error; -5 no message twice */
	int64_t twice = chk_mon_int(r->db, "SELECT coalesce(min(message_id), -5) FROM (SELECT"
	    " message_id FROM inbox.notifications GROUP BY 1 HAVING count(*) > 1) x", r->why,
	    sizeof(r->why));
	if (twice >= 0 && twice < r->nmsgs) {
		const struct in_msg *m = &r->msgs[twice];
		snprintf(r->why, sizeof(r->why), "I1: message %" PRId64 " (database %c, t%d/k%d,"
		    " payload %d) applied twice", twice, 'A' + m->origin, m->topic, m->key, m->payload);
		r->violated = true;
		return false;
	}
	int64_t now = db_clock_us(r);
	if (twice == -1 || now < 0)
		return false;
	int64_t horizon = now - (IN_RETENTION_MS + INBOX_RETENTION_MARGIN_MS) * 1000;
	for (int i = 0; i < r->nmsgs; i++) {
		if (r->msgs[i].applied == 0 || r->msgs[i].created_us < horizon)
			continue;
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM inbox.processed WHERE message_id = %d",
		    i);
		int64_t n = chk_mon_int(r->db, sql, r->why, sizeof(r->why));
		if (n < 0)
			return false;
		if (n == 0) {
			snprintf(r->why, sizeof(r->why), "I2: message %d's record purged %.1f h before"
			    " the horizon (its created_at is within the retention + margin)", i,
			    (double)(r->msgs[i].created_us - horizon) / (double)IN_HOUR_US);
			r->violated = true;
			return false;
		}
	}
	return true;
}

/* One generated step; false when the run must stop (r->why). */
static bool
step(struct in_run *r)
{
	int enabled[IN_SESSIONS], ne = 0;
	for (int s = 0; s < IN_SESSIONS; s++)
		if (!r->db->s[s].pending)
			enabled[ne++] = s;
	uint32_t roll = chk_below(&r->rng, 100);
	struct in_step *st = &r->steps[r->nsteps];
	memset(st, 0, sizeof(*st));
	char sql[CHK_SQL_MAX];
	if (roll < 6 || ne == 0) {
		if (ne == 0) { /* nothing can move: a lock wait we did not cancel */
			snprintf(r->why, sizeof(r->why), "every session waits");
			return false;
		}
		st->act = IN_AGE;
		st->a = (int)(1 + chk_below(&r->rng, 30));
		snprintf(sql, sizeof(sql), "UPDATE inbox.processed SET processed_at = processed_at -"
		    " interval '%d hours', created_at = created_at - interval '%d hours'", st->a, st->a);
		if (!mon_exec(r, sql))
			return false;
		for (int i = 0; i < r->nmsgs; i++)
			r->msgs[i].created_us -= st->a * IN_HOUR_US;
		r->nsteps++;
		return true;
	}
	if (roll < 12) {
		st->act = IN_PURGE;
		snprintf(sql, sizeof(sql), "SELECT inbox.purge(%" PRId64 ", %" PRId64 ", 1000)",
		    IN_RETENTION_MS, (int64_t)INBOX_RETENTION_MARGIN_MS);
		r->nsteps++;
		return chk_mon_int(r->db, sql, r->why, sizeof(r->why)) >= 0;
	}
	int s = enabled[chk_below(&r->rng, (uint32_t)ne)];
	struct in_sess *x = &r->s[s];
	st->sess = s;
	int at = r->nsteps++;
	switch (x->state) {
	case S_IDLE:
		st->act = IN_BEGIN;
		if ((st->msg = x->msg = pick_msg(r, s)) < 0)
			return false;
		snprintf(sql, sizeof(sql), "BEGIN; SELECT inbox.take_source_gate('%s')", source_of[s]);
		return send(r, s, sql, at);
	case S_GATED:
		st->act = IN_APPLY;
		st->msg = x->msg;
		if (x->failed) { /* the gate was given up: nothing to apply */
			x->state = S_APPLIED;
			return true;
		}
		int64_t now = db_clock_us(r);
		if (now < 0)
			return false;
		if (r->msgs[x->msg].created_us < now - IN_RETENTION_MS * 1000) {
			/* inbox_plan's retention check: refused, never applied */
			snprintf(st->verdict, sizeof(st->verdict), "too_old");
			x->state = S_APPLIED;
			return true;
		}
		st->a = chk_below(&r->rng, 100) < 30;
		apply_sql(r, s, x->msg, st->a != 0, sql, sizeof(sql));
		return send(r, s, sql, at);
	case S_APPLIED:
		st->act = IN_END;
		st->msg = x->msg;
		st->a = x->failed || chk_below(&r->rng, 100) < 10;
		return send(r, s, st->a ? "ROLLBACK" : "COMMIT", at);
	}
	return false;
}

static void
print_history(const struct in_run *r)
{
	for (int i = 0; i < r->nsteps; i++) {
		const struct in_step *st = &r->steps[i];
		const struct in_msg *m = &r->msgs[st->msg];
		if (st->act == IN_AGE)
			printf("  %4d age %d h\n", i, st->a);
		else if (st->act == IN_PURGE)
			printf("  %4d purge\n", i);
		else
			printf("  %4d c%d %-5s msg %d (database %c, t%d/k%d, payload %d)%s%s%s%s\n", i,
			    st->sess, act_names[st->act], st->msg, 'A' + m->origin, m->topic, m->key,
			    m->payload, st->act == IN_APPLY && st->a ? " set path" : "",
			    st->act == IN_END ? (st->a ? " rollback" : " commit") : "",
			    st->verdict[0] ? ": " : "", st->verdict);
	}
}

/* One seed: fresh tables, sessions, steps; 0, 1 (violation) or 2. */
static int
run_seed(struct in_run *r, uint64_t seed, int steps)
{
	r->rng.s = seed * 0x9e3779b97f4a7c15ULL + 29;
	r->nmsgs = r->nsteps = 0;
	r->violated = false;
	memset(r->s, 0, sizeof(r->s));
	if (!mon_exec(r, "TRUNCATE inbox.processed, inbox.notifications"))
		return 2;
	char name[16];
	r->db->n = IN_SESSIONS;
	for (int s = 0; s < IN_SESSIONS; s++) {
		snprintf(name, sizeof(name), "c%d", s);
		if (!chk_sess_open(r->db, s, name, r->user, r->why, sizeof(r->why)))
			return 2;
		r->db->s[s].bounded = false;
	}
	int code = 0;
	for (int i = 0; i < steps && i < IN_STEPS_MAX - 1 && code == 0; i++) {
		if (!step(r))
			code = r->violated ? 1 : 2;
		for (int s = 0; s < IN_SESSIONS; s++)
			settle_one(r, s);
		if (code == 0 && !check_invariants(r))
			code = r->violated ? 1 : 2;
	}
	for (int s = 0; s < IN_SESSIONS; s++)
		chk_sess_close(&r->db->s[s]);
	r->db->n = 0;
	return code;
}

/* A login role of group outbox_consumer: the sessions run with the
 * consumer's grants (a function it is not granted fails the run). */
static bool
consumer_role(struct in_run *r)
{
	char dbname[64] = "outbox_check", sql[512];
	/* the last dbname= of the conninfo: the checker's database */
	for (const char *p = strstr(r->db->conninfo, "dbname="); p != NULL;
	    p = strstr(p + 1, "dbname="))
		sscanf(p + 7, "%63s", dbname);
	snprintf(r->user, sizeof(r->user), "%.50s_consumer", dbname);
	snprintf(sql, sizeof(sql), "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname"
	    " = '%s') THEN CREATE ROLE %s LOGIN; END IF; END $$; GRANT outbox_consumer TO %s;"
	    " GRANT SET ON PARAMETER deadlock_timeout TO %s", r->user, r->user, r->user, r->user);
	return mon_exec(r, sql);
}

int
chk_inbox_run(struct chk_db *db, uint64_t seed, int seeds, int steps, bool quiet)
{
	static struct in_run r;
	memset(&r, 0, sizeof(r));
	r.db = db;
	if (!consumer_role(&r)) {
		fprintf(stderr, "outbox-check: inbox: %s\n", r.why);
		return 2;
	}
	int64_t t0 = chk_now_ms();
	int total_msgs = 0, total_applied = 0;
	for (int i = 0; i < seeds; i++) {
		uint64_t sd = seed + (uint64_t)i;
		int code = run_seed(&r, sd, steps);
		if (code == 2) {
			fprintf(stderr, "outbox-check: inbox seed %llu: the driver failed: %s\n",
			    (unsigned long long)sd, r.why);
			return 2;
		}
		int applied = 0, dup = 0, mismatch = 0, too_old = 0, errors = 0;
		for (int m = 0; m < r.nmsgs; m++)
			applied += r.msgs[m].applied;
		for (int k = 0; k < r.nsteps; k++) {
			const char *v = r.steps[k].verdict;
			dup += strcmp(v, "duplicate") == 0;
			mismatch += strcmp(v, "mismatch") == 0;
			too_old += strcmp(v, "too_old") == 0;
			errors += strncmp(v, "error", 5) == 0;
		}
		total_msgs += r.nmsgs;
		total_applied += applied;
		if (!quiet || code == 1)
			printf("outbox-check: inbox seed %llu: %d steps, %d messages, %d applied, %d"
			    " duplicate, %d mismatch, %d too old, %d waits given up or failed%s\n",
			    (unsigned long long)sd, r.nsteps, r.nmsgs, applied, dup, mismatch, too_old,
			    errors, code ? " VIOLATION" : "");
		if (code == 1) {
			printf("outbox-check: inbox seed %llu: violated at step %d: %s\n",
			    (unsigned long long)sd, r.nsteps - 1, r.why);
			print_history(&r);
			return 1;
		}
	}
	printf("outbox-check: inbox seeds %llu..%llu, %d steps each: no violation (%d messages,"
	    " %d applied) in %.1f s\n", (unsigned long long)seed,
	    (unsigned long long)(seed + (uint64_t)seeds - 1), steps, total_msgs, total_applied,
	    (double)(chk_now_ms() - t0) / 1000.0);
	return 0;
}
