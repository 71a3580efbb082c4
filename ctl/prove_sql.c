/*
 * prove_sql.c - the history checker of `outboxctl prove` (prove.h): reads
 * the producer database and the consumer database and sorts every message
 * created at or after T into classes, per dedup identity (source, topic,
 * idempotency key). It owns the statements and the joining of the two
 * sides; it never writes, prints or decides an exit code.
 *
 * Set-based. The outbox.messages view derives each status through
 * outbox.event_state, a plpgsql call per row that also searches the
 * stream's last 50 done batches: 14.6 s to count 50,000 delivered
 * messages. Here one statement reads the window's events with their
 * stream rows and derives the same status from the stream positions
 * (event_state's rule, sql/outbox/functions/event_state.sql), and the open
 * batches through outbox.batch_holds, inlined: ~0.1 s for 50,000.
 *
 * The two databases may be two servers, so they are joined here: the
 * window's identities go to the inbox as arrays (one statement, unnest),
 * and the inbox's identities that the window does not hold come back to
 * the outbox, which says whether it holds them at all (phantoms).
 *
 * Snapshots: the outbox is read first, the inbox second, each in one
 * REPEATABLE READ READ ONLY transaction (JIT off: compiling the window's
 * plan took 0.9 s of a 1.0 s run). A delivery recorded in the outbox's
 * snapshot was answered, so committed in the inbox, before the inbox's
 * snapshot (S7): a message is never lost by the order of the reads. A
 * message enqueued after the outbox's snapshot and applied before the
 * inbox's would look like a phantom, so the phantom candidates are looked
 * up again in a third, newer outbox snapshot.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_util.h"
#include "outbox/buf.h"
#include "outbox/err.h"
#include "outbox/pg.h"
#include "prove.h"

static const char *const class_names[PROVE_CLASS_COUNT] = {
	[PROVE_COMMITTED] = "committed",
	[PROVE_DELIVERED] = "delivered",
	[PROVE_APPLIED] = "applied",
	[PROVE_PENDING] = "pending",
	[PROVE_DEAD] = "dead",
	[PROVE_LOST] = "lost",
	[PROVE_DUPLICATED] = "duplicated",
	[PROVE_OUT_OF_ORDER] = "out_of_order",
	[PROVE_PHANTOM] = "phantom",
	[PROVE_DELIVERED_NOT_APPLIED] = "delivered_not_applied",
	[PROVE_TAKEOVERS] = "takeovers",
	[PROVE_PARKED] = "parked_webhook_calls",
};

/* A dead letter's reason by the leading words of its last_error. */
static const struct {
	const char *prefix;
	const char *name;
} reasons[PROVE_REASON_COUNT] = {
	[PROVE_REASON_REJECTED] = { "rejected by consumer", "rejected by consumer" },
	[PROVE_REASON_MAX_ATTEMPTS] = { "max attempts", "max attempts" },
	[PROVE_REASON_MAX_AGE] = { "max age", "max age" },
	[PROVE_REASON_PAYLOAD] = { "payload larger", "payload larger" },
	[PROVE_REASON_NO_ROUTE] = { "no route", "no route" },
	[PROVE_REASON_OTHER] = { NULL, "other" },
};

const char *
prove_class_name(enum prove_class c)
{
	return (unsigned)c < PROVE_CLASS_COUNT ? class_names[c] : "?";
}

const char *
prove_reason_name(enum prove_reason reason)
{
	return (unsigned)reason < PROVE_REASON_COUNT ? reasons[reason].name : "?";
}

bool
prove_class_violates(enum prove_class c, bool drained)
{
	switch (c) {
	case PROVE_LOST:
	case PROVE_DUPLICATED:
	case PROVE_OUT_OF_ORDER:
	case PROVE_PHANTOM:
	case PROVE_DELIVERED_NOT_APPLIED:
		return true;
	case PROVE_PENDING:
		return drained;
	default:
		return false;
	}
}

static enum prove_reason
reason_of(const char *last_error)
{
	for (int i = 0; i < PROVE_REASON_OTHER; i++)
		if (last_error != NULL &&
		    strncmp(last_error, reasons[i].prefix, strlen(reasons[i].prefix)) == 0)
			return (enum prove_reason)i;
	return PROVE_REASON_OTHER;
}

#define ISO_UTC(col) "to_char((" col ") AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"

/* Each side's transaction. The joins on (topic, key) are hash joins: with
 * the default work_mem the planner sorted both sides for merge joins
 * (0.8 s of the inbox's statement for 50,000 messages, 0.3 s hashed);
 * JIT off, see above. */
static const char sql_begin[] =
    "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET LOCAL jit = off;"
    " SET LOCAL work_mem = '64MB'; SET LOCAL enable_mergejoin = off";

static const char sql_since_ago[] =
    "SELECT " ISO_UTC("now() - $1::bigint * interval '1 millisecond'");

/*
 * The window: every committed message created at or after $1, by id, with
 * its state in the outbox:
 *   x  dead         a row of outbox.dead (its last_error: the reason)
 *   r  pending      a row of outbox.retries (answered retry, or parked
 *                   behind its ordering key)
 *   w  pending      not yet assigned to a batch: its stream has no row, or
 *                   the stream's read position has not passed it (neither
 *                   visible in snap_lo, nor visible in snap_hi and at or
 *                   before (pos_txid, pos_id))
 *   l  pending      in a stream batch still leased (or released until later)
 *   d  delivered    assigned, and in no open batch, retry or dead letter;
 *                   and every event of lane -1 (history carried over by 012)
 * That is outbox.event_state's rule with the retries and dead letters of
 * outbox.messages first. A retry or dead letter keeps its own copy after
 * its event's slot was truncated: those count too, once. The open batches
 * are read once (open): probed per event through an index of
 * outbox.batches, which also holds the done batches of the done
 * retention, a fresh drain of 50,000 messages (7,075 batches, no
 * statistics yet) took 5 s.
 */
static const char sql_window[] =
    "WITH open AS MATERIALIZED ("
    "  SELECT b AS batch, b.topic, b.lane FROM outbox.batches b"
    "  WHERE b.state = 'leased' AND b.kind = 's')"
    " SELECT m.id, m.topic, m.idempotency_key, m.ordering_key, m.ordering_seq, m.state,"
    "  m.last_error"
    " FROM ("
    "  SELECT e.id, e.topic, e.idempotency_key, e.ordering_key, e.ordering_seq,"
    "   CASE WHEN d.id IS NOT NULL THEN 'x'"
    "    WHEN r.id IS NOT NULL THEN 'r'"
    "    WHEN e.lane < 0 THEN 'd'"
    "    WHEN st.topic IS NULL THEN 'w'"
    "    WHEN NOT (COALESCE(pg_visible_in_snapshot(e.txid, st.snap_lo), false)"
    "     OR (COALESCE(pg_visible_in_snapshot(e.txid, st.snap_hi), false)"
    "         AND (e.txid, e.id) <= (st.pos_txid, st.pos_id))) THEN 'w'"
    "    WHEN EXISTS (SELECT 1 FROM open o WHERE o.topic = e.topic AND o.lane = e.lane"
    "     AND outbox.batch_holds(o.batch, e)) THEN 'l'"
    "    ELSE 'd' END AS state,"
    "   COALESCE(d.last_error, r.last_error) AS last_error"
    "  FROM outbox.events e"
    "  LEFT JOIN outbox.streams st ON st.topic = e.topic AND st.lane = e.lane"
    "  LEFT JOIN outbox.dead d ON d.id = e.id"
    "  LEFT JOIN outbox.retries r ON r.id = e.id"
    "  WHERE e.created_at >= $1::timestamptz"
    "  UNION ALL"
    "  SELECT r.id, r.topic, r.idempotency_key, r.ordering_key, r.ordering_seq, 'r',"
    "   r.last_error"
    "  FROM outbox.retries r"
    "  WHERE r.created_at >= $1::timestamptz"
    "   AND NOT EXISTS (SELECT 1 FROM outbox.events e WHERE e.id = r.id)"
    "   AND NOT EXISTS (SELECT 1 FROM outbox.dead d WHERE d.id = r.id)"
    "  UNION ALL"
    "  SELECT d.id, d.topic, d.idempotency_key, d.ordering_key, d.ordering_seq, 'x',"
    "   d.last_error"
    "  FROM outbox.dead d"
    "  WHERE d.created_at >= $1::timestamptz"
    "   AND NOT EXISTS (SELECT 1 FROM outbox.events e WHERE e.id = d.id)) m"
    " ORDER BY m.id";
enum { W_ID, W_TOPIC, W_KEY, W_OKEY, W_SEQ, W_STATE, W_ERROR };

/* The oldest message outbox.events still holds (by id: the index), and
 * whether the window starts before it. */
static const char sql_oldest[] =
    "SELECT e.id, " ISO_UTC("e.created_at") ", $1::timestamptz < e.created_at"
    " FROM outbox.events e ORDER BY e.id LIMIT 1";

/* Batches created in the window that were taken over (a holder's lease
 * ran out): how many, their takeovers in all, the first $2 by id. Done
 * batches are deleted after the relays' done retention: older ones are
 * not counted. */
static const char sql_takeovers[] =
    "SELECT count(*) OVER (), sum(b.takeovers) OVER (), b.id, b.topic,"
    "  format('%s takeover%s, lane %s, %s', b.takeovers,"
    "   CASE WHEN b.takeovers = 1 THEN '' ELSE 's' END, b.lane, b.state)"
    " FROM outbox.batches b"
    " WHERE b.created_at >= $1::timestamptz AND b.takeovers > 0"
    " ORDER BY b.id LIMIT GREATEST($2::bigint, 1)";

/*
 * The inbox's side of the window. c: the window's messages ($1..$6: id,
 * topic, key, state d/p/x, ordering key, ordering seq), joined on the
 * dedup identity ($7 the source, topic, key) with the effect rows
 * (inbox.notifications) and the dedup records (inbox.processed):
 *   applied                 at least one effect row
 *   lost                    delivered (state d), no effect row
 *   delivered_not_applied   delivered, no effect row and no dedup record
 *   duplicated              more than one effect row (any state)
 *   out_of_order            per (topic, ordering key), each message's first
 *                           effect row in notifications.id order: one whose
 *                           ordering_seq is lower than a seq applied before
 *                           it (the seq is the outbox's)
 * and every candidate phantom: an identity of the source with an effect row
 * or a dedup record of a message created at or after $9 (the dedup
 * record's created_at, the message's enqueue time as the relay sent it;
 * else processed_at, else the first applied_at) that the window does not
 * hold. Rows: class, the class's count, id, topic, key, detail; the first
 * $8 by id of each class (at least one, for the count), every candidate.
 */
static const char sql_inbox[] =
    "WITH c AS MATERIALIZED ("
    "  SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[],"
    "   $6::bigint[]) AS u(id, topic, key, state, okey, seq)),"
    " n AS ("
    "  SELECT c.id, count(*) AS effects, min(x.id) AS first_effect"
    "  FROM c JOIN inbox.notifications x"
    "   ON x.idempotency_key = c.key AND x.topic = c.topic AND x.source = $7"
    "  GROUP BY c.id),"
    " m AS ("
    "  SELECT c.*, COALESCE(n.effects, 0) AS effects, n.first_effect,"
    "   EXISTS (SELECT 1 FROM inbox.processed p WHERE p.idempotency_key = c.key"
    "    AND p.topic = c.topic AND p.source = $7) AS recorded"
    "  FROM c LEFT JOIN n ON n.id = c.id),"
    " o AS ("
    "  SELECT m.id, m.topic, m.key, m.okey, m.seq,"
    "   max(m.seq) OVER (PARTITION BY m.topic, m.okey ORDER BY m.first_effect"
    "    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS after_seq"
    "  FROM m WHERE m.okey IS NOT NULL AND m.first_effect IS NOT NULL),"
    " a AS MATERIALIZED ("
    "  SELECT x.topic, x.idempotency_key AS key, x.message_id, NULL::timestamptz AS created,"
    "   x.applied_at AS at, true AS effect"
    "  FROM inbox.notifications x WHERE x.source = $7 AND x.applied_at >= $9::timestamptz"
    "   AND NOT EXISTS (SELECT 1 FROM c WHERE c.topic = x.topic AND c.key = x.idempotency_key)"
    "  UNION ALL"
    "  SELECT p.topic, p.idempotency_key, p.message_id, COALESCE(p.created_at, p.processed_at),"
    "   p.processed_at, false"
    "  FROM inbox.processed p WHERE p.source = $7 AND p.processed_at >= $9::timestamptz"
    "   AND NOT EXISTS (SELECT 1 FROM c WHERE c.topic = p.topic AND c.key = p.idempotency_key)),"
    " k AS ("
    "  SELECT 'applied' AS class, m.id, m.topic, m.key, NULL::text AS detail"
    "  FROM m WHERE m.effects > 0"
    "  UNION ALL"
    "  SELECT 'lost', m.id, m.topic, m.key,"
    "   CASE WHEN m.recorded THEN 'a dedup record, no effect row'"
    "    ELSE 'no dedup record, no effect row' END"
    "  FROM m WHERE m.state = 'd' AND m.effects = 0"
    "  UNION ALL"
    "  SELECT 'delivered_not_applied', m.id, m.topic, m.key, NULL"
    "  FROM m WHERE m.state = 'd' AND m.effects = 0 AND NOT m.recorded"
    "  UNION ALL"
    "  SELECT 'duplicated', m.id, m.topic, m.key, m.effects || ' effect rows'"
    "  FROM m WHERE m.effects > 1"
    "  UNION ALL"
    "  SELECT 'out_of_order', o.id, o.topic, o.key,"
    "   format('ordering key ''%s'': seq %s applied after seq %s', o.okey, o.seq, o.after_seq)"
    "  FROM o WHERE o.seq < o.after_seq"
    "  UNION ALL"
    "  SELECT 'candidate', min(a.message_id), a.topic, a.key,"
    "   concat_ws(', ', CASE count(*) FILTER (WHERE a.effect) WHEN 0 THEN NULL WHEN 1"
    "     THEN 'an effect row' ELSE count(*) FILTER (WHERE a.effect) || ' effect rows' END,"
    "    CASE WHEN bool_or(NOT a.effect) THEN 'a dedup record' END)"
    "  FROM a GROUP BY a.topic, a.key"
    "  HAVING COALESCE(min(a.created), min(a.at)) >= $9::timestamptz)"
    " SELECT class, n, id, topic, key, detail FROM ("
    "  SELECT k.*, count(*) OVER (PARTITION BY k.class) AS n,"
    "   row_number() OVER (PARTITION BY k.class ORDER BY k.id) AS rn FROM k) x"
    " WHERE rn <= GREATEST($8::bigint, 1) OR class = 'candidate'"
    " ORDER BY class, id";
enum { I_CLASS, I_COUNT, I_ID, I_TOPIC, I_KEY, I_DETAIL };

/* The candidates ($1 topic, $2 key, $3 id, $4 detail) of which the outbox
 * holds no message at all (event, retry or dead letter; any time): the
 * phantoms, by id. */
static const char sql_phantoms[] =
    "SELECT c.id, c.topic, c.key, c.detail"
    " FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[]) AS c(topic, key, id, detail)"
    " WHERE NOT EXISTS (SELECT 1 FROM outbox.events e"
    "   WHERE e.topic = c.topic AND e.idempotency_key = c.key)"
    "  AND NOT EXISTS (SELECT 1 FROM outbox.retries r"
    "   WHERE r.topic = c.topic AND r.idempotency_key = c.key)"
    "  AND NOT EXISTS (SELECT 1 FROM outbox.dead d"
    "   WHERE d.topic = c.topic AND d.idempotency_key = c.key)"
    " ORDER BY c.id";

/* Parked webhook calls (inbox.webhook_calls state unknown) parked in the
 * window; a named source's claim keys are SOURCE/TOPIC/KEY
 * (common/include/outbox/webhook_key.h), the empty source's the key alone, which can
 * hold a '/' too: for it, every parked call is listed. */
static const char sql_parked[] =
    "SELECT count(*) OVER (), w.topic, w.idempotency_key,"
    "  'parked ' || " ISO_UTC("w.parked_at") " || COALESCE(': ' || left(w.parked_error, 200), '')"
    " FROM inbox.webhook_calls w"
    " WHERE w.state = 'unknown' AND w.parked_at >= $1::timestamptz"
    "  AND ($2 = '' OR starts_with(w.idempotency_key, $2 || '/'))"
    " ORDER BY w.parked_at, w.idempotency_key LIMIT GREATEST($3::bigint, 1)";

/* Dedup records of other sources in the window: how many, and one. */
static const char sql_other_sources[] =
    "SELECT count(*), min(p.source) FROM inbox.processed p"
    " WHERE p.processed_at >= $1::timestamptz AND p.source <> $2";

/* --- building the result -------------------------------------------- */

/* Append one member to class c when fewer than max are listed; counts
 * are the callers'. OB_OK or OB_ENOMEM. */
static int
list_add(struct prove_list *l, int64_t max, int64_t id, const char *topic, const char *key,
    const char *detail, int reason)
{
	if ((int64_t)l->n >= max)
		return OB_OK;
	if (l->n == l->cap) {
		size_t cap = l->cap == 0 ? 8 : l->cap * 2;
		struct prove_item *items = realloc(l->items, cap * sizeof *items);
		if (items == NULL)
			return OB_ENOMEM;
		l->items = items;
		l->cap = cap;
	}
	struct prove_item *it = &l->items[l->n];
	it->id = id;
	it->topic = topic != NULL ? strdup(topic) : NULL;
	it->key = key != NULL ? strdup(key) : NULL;
	it->detail = detail != NULL ? strdup(detail) : NULL;
	it->reason = reason;
	l->n++;
	if ((topic != NULL && it->topic == NULL) || (key != NULL && it->key == NULL) ||
	    (detail != NULL && it->detail == NULL))
		return OB_ENOMEM;
	return OB_OK;
}

/* A row's text column, or NULL when it is SQL NULL. */
static const char *
cell(const PGresult *res, int row, int col)
{
	return PQgetisnull(res, row, col) ? NULL : PQgetvalue(res, row, col);
}

/* The six arrays of the window that the inbox joins on, as text-array
 * literals. */
struct window_arrays {
	struct ob_buf ids, topics, keys, states, okeys, seqs;
};

static void
arrays_fini(struct window_arrays *a)
{
	ob_buf_fini(&a->ids);
	ob_buf_fini(&a->topics);
	ob_buf_fini(&a->keys);
	ob_buf_fini(&a->states);
	ob_buf_fini(&a->okeys);
	ob_buf_fini(&a->seqs);
}

static int
put_text(struct ob_buf *b, const char *s, bool first)
{
	int rc = ob_buf_puts(b, first ? "" : ",");
	if (rc == OB_OK)
		rc = s != NULL ? ob_buf_put_pg_array_text(b, s, strlen(s)) : ob_buf_puts(b, "NULL");
	return rc;
}

/* A bigint as an array element: digits (and a sign) only, no quoting. */
static int
put_int(struct ob_buf *b, const char *digits, bool first)
{
	int rc = ob_buf_puts(b, first ? "" : ",");
	return rc == OB_OK ? ob_buf_puts(b, digits != NULL ? digits : "NULL") : rc;
}

/* The window's rows into committed, delivered, pending and dead, and
 * into the arrays for the inbox. */
static int
take_window(const PGresult *w, const struct prove_query *q, struct prove_result *r,
    struct window_arrays *a)
{
	int rows = PQntuples(w), rc = OB_OK;
	struct ob_buf *all[] = { &a->ids, &a->topics, &a->keys, &a->states, &a->okeys, &a->seqs };

	for (size_t i = 0; i < sizeof all / sizeof all[0] && rc == OB_OK; i++)
		rc = ob_buf_puts(all[i], "{");
	for (int i = 0; i < rows && rc == OB_OK; i++) {
		int64_t id = ob_pg_int64(w, i, W_ID);
		const char *topic = cell(w, i, W_TOPIC), *key = cell(w, i, W_KEY);
		const char *error = cell(w, i, W_ERROR);
		char state = PQgetvalue(w, i, W_STATE)[0];
		char detail[512];
		bool first = i == 0;

		r->classes[PROVE_COMMITTED].count++;
		rc = list_add(&r->classes[PROVE_COMMITTED], q->max_ids, id, topic, key, NULL, -1);
		switch (state) {
		case 'd':
			r->classes[PROVE_DELIVERED].count++;
			if (rc == OB_OK)
				rc = list_add(&r->classes[PROVE_DELIVERED], q->max_ids, id, topic, key,
				    NULL, -1);
			break;
		case 'x': {
			enum prove_reason why = reason_of(error);
			r->classes[PROVE_DEAD].count++;
			r->dead_by_reason[why]++;
			if (rc == OB_OK)
				rc = list_add(&r->classes[PROVE_DEAD], q->max_ids, id, topic, key, error,
				    (int)why);
			break;
		}
		default: /* w, l, r */
			snprintf(detail, sizeof detail, "%s%s%s",
			    state == 'w' ? "not yet claimed by a relay"
			    : state == 'l' ? "in a claimed batch (leased, or released until later)"
			                   : "a retry",
			    state == 'r' && error != NULL ? ": " : "",
			    state == 'r' && error != NULL ? error : "");
			r->classes[PROVE_PENDING].count++;
			if (rc == OB_OK)
				rc = list_add(&r->classes[PROVE_PENDING], q->max_ids, id, topic, key, detail,
				    -1);
			break;
		}
		char one[2] = { state == 'd' || state == 'x' ? state : 'p', '\0' };
		if (rc == OB_OK)
			rc = put_int(&a->ids, PQgetvalue(w, i, W_ID), first);
		if (rc == OB_OK)
			rc = put_text(&a->topics, topic, first);
		if (rc == OB_OK)
			rc = put_text(&a->keys, key, first);
		if (rc == OB_OK)
			rc = put_text(&a->states, one, first);
		if (rc == OB_OK)
			rc = put_text(&a->okeys, cell(w, i, W_OKEY), first);
		if (rc == OB_OK)
			rc = put_int(&a->seqs, cell(w, i, W_SEQ), first);
	}
	for (size_t i = 0; i < sizeof all / sizeof all[0] && rc == OB_OK; i++)
		rc = ob_buf_puts(all[i], "}");
	return rc;
}

/* A class's rows of sql_takeovers or sql_parked: count in column 0. */
static int
take_listed(const PGresult *res, int idcol, int topiccol, int keycol, int detailcol,
    int64_t max, struct prove_list *l)
{
	int rc = OB_OK;
	if (PQntuples(res) > 0)
		l->count = ob_pg_int64(res, 0, 0);
	for (int i = 0; i < PQntuples(res) && rc == OB_OK; i++)
		rc = list_add(l, max, idcol >= 0 ? ob_pg_int64(res, i, idcol) : 0,
		    cell(res, i, topiccol), keycol >= 0 ? cell(res, i, keycol) : NULL,
		    cell(res, i, detailcol), -1);
	return rc;
}

static enum prove_class
class_by_name(const char *name)
{
	for (int c = 0; c < PROVE_CLASS_COUNT; c++)
		if (strcmp(class_names[c], name) == 0)
			return (enum prove_class)c;
	return PROVE_CLASS_COUNT;
}

/* The inbox statement's rows into their classes; its candidates into the
 * four arrays of sql_phantoms (cand[0..3]: topics, keys, ids, details). */
static int
take_inbox(const PGresult *res, const struct prove_query *q, struct prove_result *r,
    struct ob_buf cand[4], int *ncand)
{
	int rc = OB_OK;
	*ncand = 0;
	for (int i = 0; i < 4 && rc == OB_OK; i++)
		rc = ob_buf_puts(&cand[i], "{");
	for (int i = 0; i < PQntuples(res) && rc == OB_OK; i++) {
		const char *name = PQgetvalue(res, i, I_CLASS);
		if (strcmp(name, "candidate") == 0) {
			bool first = *ncand == 0;
			rc = put_text(&cand[0], cell(res, i, I_TOPIC), first);
			if (rc == OB_OK)
				rc = put_text(&cand[1], cell(res, i, I_KEY), first);
			if (rc == OB_OK)
				rc = put_int(&cand[2], cell(res, i, I_ID), first);
			if (rc == OB_OK)
				rc = put_text(&cand[3], cell(res, i, I_DETAIL), first);
			(*ncand)++;
			continue;
		}
		enum prove_class c = class_by_name(name);
		if (c == PROVE_CLASS_COUNT)
			continue;
		r->classes[c].count = ob_pg_int64(res, i, I_COUNT);
		rc = list_add(&r->classes[c], q->max_ids, ob_pg_int64(res, i, I_ID),
		    cell(res, i, I_TOPIC), cell(res, i, I_KEY), cell(res, i, I_DETAIL), -1);
	}
	for (int i = 0; i < 4 && rc == OB_OK; i++)
		rc = ob_buf_puts(&cand[i], "}");
	return rc;
}

/* --- the run ----------------------------------------------------------- */

int
prove_since_ago(PGconn *outbox, int64_t ago_ms, char *out, size_t outlen, char *err,
    size_t errlen)
{
	char ms[32];
	snprintf(ms, sizeof ms, "%" PRId64, ago_ms);
	const char *params[1] = { ms };
	PGresult *res = ob_pg_rows(outbox, sql_since_ago, 1, params, "since", err, errlen);
	if (res == NULL)
		return OB_EDB;
	snprintf(out, outlen, "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	return OB_OK;
}

void
prove_result_free(struct prove_result *r)
{
	for (int c = 0; c < PROVE_CLASS_COUNT; c++) {
		struct prove_list *l = &r->classes[c];
		for (size_t i = 0; i < l->n; i++) {
			free(l->items[i].topic);
			free(l->items[i].key);
			free(l->items[i].detail);
		}
		free(l->items);
	}
	memset(r, 0, sizeof *r);
}

/* Read the outbox's side: the window (into r and the arrays), the oldest
 * retained event, the takeovers. One transaction, one snapshot. */
static int
read_outbox(PGconn *conn, const struct prove_query *q, struct prove_result *r,
    struct window_arrays *a, char *err, size_t errlen)
{
	char max[32];
	snprintf(max, sizeof max, "%" PRId64, q->max_ids);
	const char *p1[1] = { q->since }, *p2[2] = { q->since, max };
	PGresult *res = NULL;
	int rc = OB_EDB;

	if (ob_pg_exec(conn, sql_begin, "outbox: begin", err, errlen) != OB_OK)
		return OB_EDB;
	if ((res = ob_pg_rows(conn, sql_window, 1, p1, "outbox: the window", err, errlen)) == NULL)
		goto fail;
	if ((rc = take_window(res, q, r, a)) != OB_OK)
		goto fail;
	PQclear(res);
	rc = OB_EDB;
	if ((res = ob_pg_rows(conn, sql_oldest, 1, p1, "outbox: the oldest message", err, errlen)) ==
	    NULL)
		goto fail;
	if (PQntuples(res) == 1) {
		r->oldest_event_id = ob_pg_int64(res, 0, 0);
		snprintf(r->oldest_event_at, sizeof r->oldest_event_at, "%s", PQgetvalue(res, 0, 1));
		r->partial = PQgetvalue(res, 0, 2)[0] == 't' && r->oldest_event_id > 1;
	} else {
		r->emptied = true; /* partial once something applied cannot be judged */
	}
	PQclear(res);
	if ((res = ob_pg_rows(conn, sql_takeovers, 2, p2, "outbox: takeovers", err, errlen)) == NULL)
		goto fail;
	if (PQntuples(res) > 0)
		r->takeover_batches = ob_pg_int64(res, 0, 0);
	if ((rc = take_listed(res, 2, 3, -1, 4, q->max_ids, &r->classes[PROVE_TAKEOVERS])) !=
	    OB_OK)
		goto fail;
	if (PQntuples(res) > 0) /* the class counts takeovers, not batches */
		r->classes[PROVE_TAKEOVERS].count = ob_pg_int64(res, 0, 1);
	PQclear(res);
	return ctl_read_end(conn, NULL, OB_OK, "outbox", err, errlen);
fail:
	return ctl_read_end(conn, res, rc, "outbox", err, errlen);
}

/* Read the inbox's side: the classes of the window, the phantom
 * candidates (into cand), the parked calls, and (when nothing of the
 * source was applied) the other sources. */
static int
read_inbox(PGconn *conn, const struct prove_query *q, struct window_arrays *a,
    struct prove_result *r, struct ob_buf cand[4], int *ncand, char *err, size_t errlen)
{
	char max[32];
	snprintf(max, sizeof max, "%" PRId64, q->max_ids);
	const char *pi[9] = { a->ids.data, a->topics.data, a->keys.data, a->states.data,
		a->okeys.data, a->seqs.data, q->source, max, q->since };
	const char *pp[3] = { q->since, q->source, max };
	PGresult *res = NULL;
	int rc = OB_EDB;

	if (ob_pg_exec(conn, sql_begin, "inbox: begin", err, errlen) != OB_OK)
		return OB_EDB;
	if ((res = ob_pg_rows(conn, sql_inbox, 9, pi, "inbox: the window", err, errlen)) == NULL)
		goto fail;
	if ((rc = take_inbox(res, q, r, cand, ncand)) != OB_OK)
		goto fail;
	PQclear(res);
	rc = OB_EDB;
	if ((res = ob_pg_rows(conn, sql_parked, 3, pp, "inbox: parked webhook calls", err, errlen)) ==
	    NULL)
		goto fail;
	if ((rc = take_listed(res, -1, 1, 2, 3, q->max_ids, &r->classes[PROVE_PARKED])) != OB_OK)
		goto fail;
	PQclear(res);
	res = NULL;
	rc = OB_EDB;
	if (r->classes[PROVE_APPLIED].count == 0) {
		if ((res = ob_pg_rows(conn, sql_other_sources, 2, pp, "inbox: other sources", err,
		         errlen)) == NULL)
			goto fail;
		r->other_source_records = ob_pg_int64(res, 0, 0);
		snprintf(r->other_source, sizeof r->other_source, "%s",
		    PQgetisnull(res, 0, 1) ? "" : PQgetvalue(res, 0, 1));
		PQclear(res);
		res = NULL;
	}
	return ctl_read_end(conn, NULL, OB_OK, "inbox", err, errlen);
fail:
	return ctl_read_end(conn, res, rc, "inbox", err, errlen);
}

/* The candidates the outbox does not hold at all, now: phantoms; those
 * below the oldest retained event of a partial window: not judged (their
 * message may have been truncated). */
static int
read_phantoms(PGconn *conn, const struct prove_query *q, struct ob_buf cand[4],
    struct prove_result *r, char *err, size_t errlen)
{
	const char *params[4] = { cand[0].data, cand[1].data, cand[2].data, cand[3].data };
	PGresult *res = ob_pg_rows(conn, sql_phantoms, 4, params, "outbox: phantoms", err, errlen);
	int rc = OB_OK;

	if (res == NULL)
		return OB_EDB;
	for (int i = 0; i < PQntuples(res) && rc == OB_OK; i++) {
		int64_t id = ob_pg_int64(res, i, 0);
		if (r->emptied || (r->partial && id < r->oldest_event_id)) {
			r->unjudged++;
			r->partial = true;
			continue;
		}
		r->classes[PROVE_PHANTOM].count++;
		rc = list_add(&r->classes[PROVE_PHANTOM], q->max_ids, id, cell(res, i, 1),
		    cell(res, i, 2), cell(res, i, 3), -1);
	}
	PQclear(res);
	if (rc != OB_OK)
		snprintf(err, errlen, "phantoms: out of memory");
	return rc;
}

int
prove_run(PGconn *outbox, PGconn *inbox, const struct prove_query *q,
    struct prove_result *r, char *err, size_t errlen)
{
	struct window_arrays a;
	struct ob_buf cand[4];
	int ncand = 0, rc;

	memset(r, 0, sizeof *r);
	memset(&a, 0, sizeof a);
	for (int i = 0; i < 4; i++)
		ob_buf_init(&cand[i]);
	rc = read_outbox(outbox, q, r, &a, err, errlen);
	if (rc == OB_OK)
		rc = read_inbox(inbox, q, &a, r, cand, &ncand, err, errlen);
	if (rc == OB_OK && ncand > 0)
		rc = read_phantoms(outbox, q, cand, r, err, errlen);
	arrays_fini(&a);
	for (int i = 0; i < 4; i++)
		ob_buf_fini(&cand[i]);
	if (rc != OB_OK)
		prove_result_free(r);
	return rc;
}
