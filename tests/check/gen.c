/*
 * gen.c - the checker's seeded generator: a run's configuration, and the
 * next step of an enabled session, drawn from a splitmix64 stream. Every
 * choice is a function of the seed and of the model's state, so a seed
 * replays the same history. The weights make the interleavings the
 * protocol has to survive common: producers that take their transaction id
 * early and then wait for another's ordering key, re-enqueues of a key and
 * two producers racing for one new key, savepoints and rollbacks, killed
 * sessions; relays with leases that run out at the next step, lost frames
 * and replies, relays that die holding batches; housekeeping with and
 * without retentions, days passing, requeued dead letters, restores.
 */
#include <stdio.h>
#include <string.h>

#include "check.h"

/* Ordering keys: K1 and K18 hash to one lane (outbox.lane_of: 15), so a
 * lane's batch can hold two keys; K2 has a lane of its own. */
const char *const chk_okey_names[4] = { "", "K1", "K18", "K2" };

uint64_t
chk_rand(struct chk_rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

uint32_t
chk_below(struct chk_rng *r, uint32_t n)
{
	return (uint32_t)(chk_rand(r) % n);
}

uint32_t
chk_hash_pct(uint64_t seed, const char *a, const char *b, int n)
{
	uint64_t h = 1469598103934665603ULL ^ seed;
	for (const char *p = a; *p; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ULL;
	h = (h ^ '/') * 1099511628211ULL;
	for (const char *p = b; *p; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ULL;
	h = (h ^ (uint64_t)n) * 1099511628211ULL;
	struct chk_rng r = { h };
	return (uint32_t)(chk_rand(&r) % 100);
}

static const char *const act_names[ACT_COUNT] = {
	"begin", "write", "xid", "enqueue", "savepoint", "rollback_to", "release", "commit",
	"rollback", "terminate", "claim", "send", "record", "die", "housekeep", "age",
	"requeue", "restore",
};

const char *
chk_act_name(enum chk_act a)
{
	return a < ACT_COUNT ? act_names[a] : "?";
}

void
chk_config_draw(struct chk_config *cfg, uint64_t seed, int steps)
{
	struct chk_rng r = { seed * 0x2545f4914f6cdd1dULL + 7 };
	memset(cfg, 0, sizeof(*cfg));
	cfg->seed = seed;
	cfg->steps = steps;
	cfg->producers = 2 + (int)chk_below(&r, CHK_PRODUCERS_MAX - 1);
	cfg->relays = 1 + (int)chk_below(&r, CHK_RELAYS_MAX);
	cfg->okeys = 1 + (int)chk_below(&r, 3);
	cfg->skip_dead = chk_below(&r, 100) < 30;
	cfg->poison_pct = (int)chk_below(&r, 5);
	cfg->reject_pct = (int)chk_below(&r, 7);
	cfg->retry_pct = (int)chk_below(&r, 25);
}

static void
producer_step(struct chk_rng *r, const struct chk_view *v, int p, struct chk_step *s)
{
	const struct chk_config *c = v->cfg;
	if (!v->in_txn[p]) {
		s->act = chk_below(r, 100) < 97 ? ACT_BEGIN : ACT_TERMINATE;
		return;
	}
	if (v->aborted[p]) {
		uint32_t x = chk_below(r, 100);
		s->act = x < 40 && v->savepoint[p] ? ACT_ROLLBACK_TO : x < 92 ? ACT_ROLLBACK
		                                                          : ACT_TERMINATE;
		return;
	}
	uint32_t x = chk_below(r, 100);
	if (x < 45) {
		s->act = ACT_ENQUEUE;
		uint32_t kind = chk_below(r, 100);
		if (kind < 15 && v->known_keys > 0) {
			/* a key enqueued before: the same message (or, with another
			 * payload, the error that aborts the transaction) */
			const char *topic, *okey;
			const char *key = v->known(v->ctx, (int)chk_below(r, (uint32_t)v->known_keys),
			    &topic, &okey);
			snprintf(s->topic, sizeof(s->topic), "%s", topic);
			snprintf(s->key, sizeof(s->key), "%s", key);
			snprintf(s->okey, sizeof(s->okey), "%s", okey);
			s->a = chk_below(r, 100) < 15;
			return;
		}
		/* tc: a topic no relay routes until the drain (it waits) */
		snprintf(s->topic, sizeof(s->topic), "t%c",
		    chk_below(r, 100) < 8 ? 'c' : 'a' + (int)chk_below(r, 2));
		if (chk_below(r, 100) < 55)
			snprintf(s->okey, sizeof(s->okey), "%s",
			    chk_okey_names[1 + chk_below(r, (uint32_t)c->okeys)]);
		if (chk_below(r, 100) < 3) /* bad input: refused, changes nothing */
			s->a = 2 + (int)chk_below(r, 7);
		if (kind < 50) {
			/* a small pool of fresh keys that two producers race for (it
			 * moves on as messages commit); one logical message each, so
			 * one ordering key each (mostly) */
			uint32_t n = (uint32_t)v->pool_committed + chk_below(r, 2);
			snprintf(s->topic, sizeof(s->topic), "ta");
			snprintf(s->key, sizeof(s->key), "s-%u", n);
			s->okey[0] = '\0';
			if (n % 4 != 0)
				snprintf(s->okey, sizeof(s->okey), "%s",
				    chk_okey_names[1 + n % (uint32_t)c->okeys]);
		} else {
			snprintf(s->key, sizeof(s->key), "p%d-%d", p, v->next_key[p]);
			/* not before a day from now: not claimable until days pass
			 * (ACT_AGE), and its key's later messages wait behind it */
			s->b = s->a < 2 && chk_below(r, 100) < 4;
		}
		return;
	}
	if (x < 53)
		s->act = ACT_WRITE;
	else if (x < 57)
		s->act = ACT_XID;
	else if (x < 62)
		s->act = v->savepoint[p] ? ACT_ROLLBACK_TO : ACT_SAVEPOINT;
	else if (x < 66)
		s->act = v->savepoint[p] ? ACT_RELEASE : ACT_WRITE;
	else if (x < 86)
		s->act = ACT_COMMIT;
	else if (x < 95)
		s->act = ACT_ROLLBACK;
	else
		s->act = ACT_TERMINATE;
}

static void
relay_step(struct chk_rng *r, const struct chk_view *v, int i, struct chk_step *s)
{
	int holds = v->holds[i];
	uint32_t x = chk_below(r, 100);
	if (holds == 0 || (x < 40 && holds < CHK_HOLDS_MAX)) {
		s->act = ACT_CLAIM;
		s->a = chk_below(r, 100) < 2 ? 0 : 1 + (int)chk_below(r, CHK_BATCH_MAX);
		s->b = (int)chk_below(r, 2);
		s->c = chk_below(r, 100) < 20;
	} else if (x < 68) {
		s->act = ACT_SEND;
		s->a = (int)chk_below(r, CHK_HOLDS_MAX);
		uint32_t f = chk_below(r, 100);
		s->b = f < 7 ? 1 : f < 12 ? 2 : 0;
	} else if (x < 96) {
		s->act = ACT_RECORD;
		s->a = (int)chk_below(r, CHK_HOLDS_MAX);
		uint32_t f = chk_below(r, 100);
		s->b = f < 85 ? 0 : f < 92 ? 1 : f < 98 ? 2 : 3;
	} else {
		s->act = ACT_DIE;
	}
}

static void
operator_step(struct chk_rng *r, const struct chk_view *v, struct chk_step *s)
{
	uint32_t x = chk_below(r, 100);
	if (x < 45) {
		s->act = ACT_HOUSEKEEP;
		s->a = chk_below(r, 100) < 80;
		s->b = chk_below(r, 100) < 60;
		s->c = chk_below(r, 100) < 50;
		if (chk_below(r, 100) < 5) /* two passes at once */
			s->c = 2;
	} else if (x < 72) {
		s->act = ACT_AGE;
	} else if (x < 94 && v->dead_letters > 0) {
		s->act = ACT_REQUEUE;
		s->a = (int)chk_below(r, 64);
	} else if (x >= 94 && !v->restore_pending) {
		/* a second restore before the first was adopted is outside what
		 * adoption can sort out (docs/operations.md): not generated */
		s->act = ACT_RESTORE;
	} else {
		s->act = ACT_AGE;
	}
}

bool
chk_gen_next(struct chk_rng *rng, const struct chk_view *v, struct chk_step *out)
{
	const struct chk_config *c = v->cfg;
	int n = c->producers + c->relays + 1, weight[CHK_SESSIONS_MAX], total = 0;
	for (int i = 0; i < n; i++) {
		/* a producer that waits for a lock can still be killed */
		weight[i] = v->waiting[i] ? (i < c->producers ? 1 : 0)
		          : i < c->producers ? 6 : i < n - 1 ? 5 : 1;
		total += weight[i];
	}
	if (total == 0)
		return false;
	int pick = (int)chk_below(rng, (uint32_t)total), i = 0;
	while (pick >= weight[i])
		pick -= weight[i++];
	memset(out, 0, sizeof(*out));
	out->sess = i;
	if (v->waiting[i])
		out->act = ACT_TERMINATE;
	else if (i < c->producers)
		producer_step(rng, v, i, out);
	else if (i < n - 1)
		relay_step(rng, v, i - c->producers, out);
	else
		operator_step(rng, v, out);
	return true;
}
