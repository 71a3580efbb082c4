/*
 * web_poll.c - the ONE poller of `outboxctl web` (web.h): a thread with its
 * own libpq connection to the producer database (and one to the inbox
 * with --inbox-db) that, every poll interval, reads one snapshot and keeps
 * it as the JSON text of GET /api/overview, in two forms: with the
 * payloads and without. Requests copy the latest text (web_poll_snapshot);
 * they never query, so N open pages cost the database what one does.
 *
 * Each connection runs with statement_timeout (--statement-timeout) and
 * default_transaction_read_only on, and reads one snapshot in one
 * REPEATABLE READ READ ONLY transaction (one commit per poll and
 * database). The per-topic figures are `outboxctl status`'s query and the
 * dead letters `outboxctl dead list`'s (queries.c). The role needs no more
 * than outbox_viewer's grants (sql/outbox/016_viewer.sql).
 *
 * With --consumer-metrics it also reads the consumer's duplicates and
 * key-reuse rejects from its /metrics (web_scrape.c), which it counts but
 * does not store.
 *
 * Text from producers (keys, payloads, errors) goes into the JSON as
 * strings only; '<', '>' and '&' are written \u003c, \u003e, \u0026, so
 * the text holds no markup even if something served it as HTML.
 *
 * Never: block a request; write to the database.
 */
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl_util.h"
#include "outbox/err.h"
#include "outbox/log.h"
#include "outbox/pg.h"
#include "outbox/protocol.h"
#include "outbox/ticker.h"
#include "queries.h"
#include "web.h"
#include "web_json.h"

struct point {
	int64_t t;             /* unix seconds */
	double delivered_per_s;
	double lag_s;
};

struct web_poll {
	struct web_poll_config cfg;
	struct ob_ticker ticker; /* poll_tick, every interval_ms */
	pthread_mutex_t mu;
	char *full, *redacted; /* the latest snapshot, under mu */
	size_t full_len, redacted_len;
	uint64_t count;        /* under mu */
	/* the poller thread's own */
	PGconn *db, *inbox;
	bool failing;          /* logged the current outage */
	bool scrape_failing;   /* logged the consumer's /metrics unreachable */
	struct point *series;
	int64_t nseries;
	double last_t;         /* monotonic seconds of the previous poll */
	int64_t last_delivered;
	bool have_last;
};

/* The newest $1 messages and the claim that holds them. The view's rows
 * are the ids of outbox.events, outbox.retries and outbox.dead; the newest
 * $1 of those are found by index first, and only they are read through the
 * view, by id (each of its branches finds them by its id index; a range
 * "id >= the oldest of them" left the planner reading every delivered
 * message of a stream: 430 ms a poll at 250,000 retained, issue 32 item 5). */
static const char messages_sql[] =
    "WITH newest AS ("
    "  (SELECT e.id FROM outbox.events e ORDER BY e.id DESC LIMIT $1::bigint)"
    "  UNION (SELECT r.id FROM outbox.retries r ORDER BY r.id DESC LIMIT $1::bigint)"
    "  UNION (SELECT d.id FROM outbox.dead d ORDER BY d.id DESC LIMIT $1::bigint)"
    "  ORDER BY 1 DESC LIMIT $1::bigint)"
    " SELECT m.id, m.topic, m.idempotency_key AS key, outbox.message_state(m) AS status,"
    " m.attempts, m.ordering_key, m.ordering_seq, m.lease_owner, m.fence,"
    " CASE WHEN m.lease_owner IS NOT NULL AND m.lease_until > now()"
    "  THEN (extract(epoch FROM m.lease_until - now()) * 1000)::bigint END AS lease_left_ms,"
    " m.payload"
    " FROM outbox.messages m WHERE m.id = ANY(ARRAY(SELECT id FROM newest))"
    " ORDER BY m.id DESC LIMIT $1::bigint";

/* outboxctl dead list's rows ($1 topic NULL, $2 the limit), with when each
 * died and whether a requeue would take it (dead_cmd.c's dedup-retention
 * rule, $3 ms). */
static const char dead_sql_fmt[] =
    "SELECT q.id, q.topic, q.key, q.attempts, q.last_error AS error,"
    " to_char(d.died_at, 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') AS dead_at,"
    " d.created_at >= now() - $3::bigint * interval '1 millisecond' AS requeueable"
    " FROM (%s) q JOIN outbox.dead d ON d.id = q.id ORDER BY q.id";

/* Ordering keys held behind a dead letter (--on-dead-head block). */
static const char blocked_sql[] =
    "SELECT b.topic, b.ordering_key, (SELECT min(d.id) FROM outbox.dead d"
    "  WHERE d.topic = b.topic AND d.ordering_key = b.ordering_key) AS head_id"
    " FROM outbox.ordering_blocks b WHERE b.state = 'dead'"
    " ORDER BY b.topic, b.ordering_key LIMIT $1::bigint";

static const char topics_sql_fmt[] =
    "SELECT topic, is_total, pending, leased AS inflight, delivered, dead,"
    " oldest_claimable_age_seconds AS oldest_age_s FROM (%s) s ORDER BY is_total, topic";

static const char inbox_count_sql[] =
    "SELECT count(*) FILTER (WHERE outcome = 'applied') FROM inbox.processed";
static const char dedup_sql[] =
    "SELECT topic, idempotency_key AS key,"
    " to_char(processed_at, 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') AS created_at"
    " FROM inbox.processed ORDER BY processed_at DESC LIMIT $1::bigint";

static double
mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Connect, set the session's limits, check the schema serves the viewer
 * protocol (and that the role can read what it reads). */
static int
poll_connect(struct web_poll *p, const char *conninfo, const char *schema, PGconn **out,
    char *err, size_t errlen)
{
	PGconn *conn = NULL;
	char sql[160];

	if (ob_pg_connect(conninfo, "outboxctl web", &conn, err, errlen) != OB_OK)
		return OB_EDB;
	/* default_transaction_read_only below must hold for every query */
	if (ctl_need_session(conn, err, errlen) != OB_OK) {
		PQfinish(conn);
		return OB_EINVAL;
	}
	snprintf(sql, sizeof sql, "SET statement_timeout = %" PRId64 "; SET TimeZone = 'UTC';"
	    " SET default_transaction_read_only = on", p->cfg.statement_timeout_ms);
	int rc = ob_pg_exec(conn, sql, "set session", err, errlen);
	if (rc == OB_OK)
		rc = ob_protocol_check(conn, schema, "viewer", OB_PROTOCOL_VIEWER, err, errlen);
	if (rc != OB_OK) {
		PQfinish(conn);
		return rc;
	}
	*out = conn;
	return OB_OK;
}

/* Every row of res as an array of objects (ctl_json_cell's conventions),
 * the columns named in skip[] (NULL-ended, may be NULL) left out. */
static json_t *
rows_json(const PGresult *res, const char *const *skip)
{
	json_t *a = json_array();
	for (int r = 0; r < PQntuples(res); r++) {
		json_t *o = json_object();
		for (int c = 0; c < PQnfields(res); c++) {
			bool skipped = false;
			for (int k = 0; skip != NULL && skip[k] != NULL; k++)
				skipped |= strcmp(skip[k], PQfname(res, c)) == 0;
			if (!skipped)
				json_object_set_new(o, PQfname(res, c), ctl_json_cell(res, r, c));
		}
		json_array_append_new(a, o);
	}
	return a;
}

/* The outbox part of a snapshot into root, in one read-only transaction.
 * *delivered and *lag get the totals for the chart. */
static int
read_outbox(struct web_poll *p, json_t *root, int64_t *delivered, double *lag, char *err,
    size_t errlen)
{
	char sql[4096], nmsg[24], ndead[24], retention[24];
	PGresult *res = NULL;
	int rc = OB_EDB;

	snprintf(nmsg, sizeof nmsg, "%" PRId64, p->cfg.messages_max);
	snprintf(ndead, sizeof ndead, "%" PRId64, p->cfg.dead_max);
	snprintf(retention, sizeof retention, "%" PRId64, p->cfg.retention_ms);
	if (ob_pg_exec(p->db, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", "begin", err,
	    errlen) != OB_OK)
		return OB_EDB;

	const char *tparams[1] = { NULL };
	snprintf(sql, sizeof sql, topics_sql_fmt, ctl_status_sql);
	if ((res = ob_pg_rows(p->db, sql, 1, tparams, "topics", err, errlen)) == NULL)
		goto fail;
	json_t *topics = json_array();
	*delivered = 0;
	*lag = 0;
	for (int r = 0; r < PQntuples(res); r++) {
		if (PQgetvalue(res, r, 1)[0] == 't') {
			*delivered = ob_pg_int64(res, r, 4);
			*lag = PQgetisnull(res, r, 6) ? 0 : strtod(PQgetvalue(res, r, 6), NULL);
			continue;
		}
		json_t *o = json_object();
		for (int c = 0; c < PQnfields(res); c++)
			if (c != 1)
				json_object_set_new(o, PQfname(res, c), ctl_json_cell(res, r, c));
		json_array_append_new(topics, o);
	}
	json_object_set_new(root, "topics", topics);
	PQclear(res);

	const char *mparams[1] = { nmsg };
	if ((res = ob_pg_rows(p->db, messages_sql, 1, mparams, "messages", err, errlen)) == NULL)
		goto fail;
	json_object_set_new(root, "messages", rows_json(res, NULL));
	PQclear(res);

	const char *dparams[3] = { NULL, ndead, retention };
	snprintf(sql, sizeof sql, dead_sql_fmt, ctl_dead_list_sql);
	if ((res = ob_pg_rows(p->db, sql, 3, dparams, "dead letters", err, errlen)) == NULL)
		goto fail;
	json_object_set_new(root, "dead", rows_json(res, NULL));
	PQclear(res);

	if ((res = ob_pg_rows(p->db, blocked_sql, 1, dparams + 1, "blocked keys", err, errlen)) == NULL)
		goto fail;
	json_object_set_new(root, "blocked_keys", rows_json(res, NULL));
	PQclear(res);
	return ctl_read_end(p->db, NULL, OB_OK, "outbox", err, errlen);
fail:
	return ctl_read_end(p->db, res, rc, "outbox", err, errlen);
}

/* The consumer part ({"applied", "duplicates", "key_reuse_rejects",
 * "dedup"}), from the inbox, in one read-only transaction. */
static int
read_inbox(struct web_poll *p, json_t **out, char *err, size_t errlen)
{
	char ndedup[24];
	PGresult *res = NULL;

	snprintf(ndedup, sizeof ndedup, "%" PRId64, p->cfg.dedup_max);
	if (ob_pg_exec(p->inbox, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", "begin", err,
	    errlen) != OB_OK)
		return OB_EDB;
	if ((res = ob_pg_rows(p->inbox, inbox_count_sql, 0, NULL, "inbox counts", err, errlen)) == NULL)
		goto fail;
	json_t *c = json_object();
	json_object_set_new(c, "applied", json_integer(ob_pg_int64(res, 0, 0)));
	/* counted by the consumer process only, not stored: from its /metrics
	 * (--consumer-metrics), else unknown */
	struct web_consumer_counts cc;
	char serr[512];
	bool have = false;
	if (p->cfg.consumer_metrics != NULL) {
		have = web_scrape_consumer(p->cfg.consumer_metrics, p->cfg.statement_timeout_ms, &cc,
		    serr, sizeof serr) == OB_OK;
		if (!have && !p->scrape_failing)
			ob_warn("web.consumer_metrics.failed", "err=%s",
			    ob_log_q(serr, (char[600]){ 0 }, 600));
		p->scrape_failing = !have;
	}
	json_object_set_new(c, "duplicates", have ? json_integer(cc.duplicates) : json_null());
	json_object_set_new(c, "key_reuse_rejects",
	    have ? json_integer(cc.key_reuse_rejects) : json_null());
	PQclear(res);
	const char *params[1] = { ndedup };
	if ((res = ob_pg_rows(p->inbox, dedup_sql, 1, params, "dedup records", err, errlen)) == NULL) {
		json_decref(c);
		goto fail;
	}
	json_object_set_new(c, "dedup", rows_json(res, NULL));
	PQclear(res);
	if (ctl_read_end(p->inbox, NULL, OB_OK, "inbox", err, errlen) != OB_OK) {
		json_decref(c);
		return OB_EDB;
	}
	*out = c;
	return OB_OK;
fail:
	return ctl_read_end(p->inbox, res, OB_EDB, "inbox", err, errlen);
}

static void
add_point(struct web_poll *p, int64_t delivered, double lag)
{
	double now = mono_s();
	double rate = 0;
	if (p->have_last && now > p->last_t && delivered > p->last_delivered)
		rate = (double)(delivered - p->last_delivered) / (now - p->last_t);
	p->last_t = now;
	p->last_delivered = delivered;
	p->have_last = true;
	if (p->nseries == p->cfg.series_max) {
		memmove(p->series, p->series + 1, (size_t)(p->nseries - 1) * sizeof *p->series);
		p->nseries--;
	}
	p->series[p->nseries++] = (struct point){ (int64_t)time(NULL), rate, lag };
}

/* One snapshot: read, build both texts, publish. */
static int
poll_once(struct web_poll *p, char *err, size_t errlen)
{
	if (p->db == NULL && poll_connect(p, p->cfg.db, "outbox", &p->db, err, errlen) != OB_OK)
		return OB_EDB;
	if (p->cfg.inbox_db != NULL && p->inbox == NULL &&
	    poll_connect(p, p->cfg.inbox_db, "inbox", &p->inbox, err, errlen) != OB_OK)
		return OB_EDB;

	json_t *root = json_object(), *consumer = NULL;
	char ts[32];
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
	json_object_set_new(root, "generated_at", json_string(ts));
	json_object_set_new(root, "poll_ms", json_integer(p->cfg.interval_ms));
	json_object_set_new(root, "payloads_visible", json_true());
	int64_t delivered = 0;
	double lag = 0;
	if (read_outbox(p, root, &delivered, &lag, err, errlen) != OB_OK ||
	    (p->inbox != NULL && read_inbox(p, &consumer, err, errlen) != OB_OK)) {
		json_decref(root);
		return OB_EDB;
	}
	/* breakers live in each relay process, not in the database */
	json_object_set_new(root, "breakers", json_array());
	json_object_set_new(root, "consumer", consumer != NULL ? consumer : json_null());
	add_point(p, delivered, lag);
	json_t *series = json_array();
	for (int64_t i = 0; i < p->nseries; i++)
		json_array_append_new(series, json_pack("{sIsfsf}", "t", (json_int_t)p->series[i].t,
		    "delivered_per_s", p->series[i].delivered_per_s, "lag_s", p->series[i].lag_s));
	json_object_set_new(root, "series", series);

	size_t flen = 0, rlen = 0;
	char *full = web_json_text(root, &flen);
	json_object_set_new(root, "payloads_visible", json_false());
	size_t i;
	json_t *m;
	json_array_foreach(json_object_get(root, "messages"), i, m)
		json_object_del(m, "payload");
	char *redacted = web_json_text(root, &rlen);
	json_decref(root);
	if (full == NULL || redacted == NULL) {
		free(full);
		free(redacted);
		snprintf(err, errlen, "out of memory");
		return OB_ENOMEM;
	}
	pthread_mutex_lock(&p->mu);
	free(p->full);
	free(p->redacted);
	p->full = full;
	p->full_len = flen;
	p->redacted = redacted;
	p->redacted_len = rlen;
	p->count++;
	pthread_mutex_unlock(&p->mu);
	return OB_OK;
}

static void
drop_conns(struct web_poll *p)
{
	if (p->db != NULL)
		PQfinish(p->db);
	if (p->inbox != NULL)
		PQfinish(p->inbox);
	p->db = p->inbox = NULL;
}

/* One poll, its failure logged once per outage (the ticker's work). */
static void
poll_tick(void *arg)
{
	struct web_poll *p = arg;
	char err[1024];

	if (poll_once(p, err, sizeof err) != OB_OK) {
		if (!p->failing)
			ob_warn("web.poll.failed", "err=%s", ob_log_q(err, (char[600]){ 0 }, 600));
		p->failing = true;
		/* a broken session, a timed-out statement: start afresh */
		drop_conns(p);
	} else if (p->failing) {
		ob_info("web.poll.recovered", "polls=%" PRIu64, web_poll_count(p));
		p->failing = false;
	}
}

int
web_poll_start(const struct web_poll_config *cfg, struct web_poll **out, char *err,
    size_t errlen)
{
	struct web_poll *p = calloc(1, sizeof *p);

	if (p == NULL || (p->series = calloc((size_t)cfg->series_max, sizeof *p->series)) == NULL) {
		free(p);
		snprintf(err, errlen, "out of memory");
		return OB_ENOMEM;
	}
	p->cfg = *cfg;
	pthread_mutex_init(&p->mu, NULL);
	if (ob_ticker_start(&p->ticker, cfg->interval_ms, poll_tick, p) != OB_OK) {
		snprintf(err, errlen, "cannot start the poller's thread");
		web_poll_stop(p);
		return OB_ENOMEM;
	}
	*out = p;
	return OB_OK;
}

char *
web_poll_snapshot(struct web_poll *p, bool payloads, size_t *len)
{
	char *copy = NULL;
	pthread_mutex_lock(&p->mu);
	const char *s = payloads ? p->full : p->redacted;
	size_t n = payloads ? p->full_len : p->redacted_len;
	if (s != NULL && (copy = malloc(n + 1)) != NULL) {
		memcpy(copy, s, n + 1);
		*len = n;
	}
	pthread_mutex_unlock(&p->mu);
	return copy;
}

uint64_t
web_poll_count(struct web_poll *p)
{
	pthread_mutex_lock(&p->mu);
	uint64_t n = p->count;
	pthread_mutex_unlock(&p->mu);
	return n;
}

void
web_poll_stop(struct web_poll *p)
{
	if (p == NULL)
		return;
	ob_ticker_stop(&p->ticker);
	drop_conns(p);
	pthread_mutex_destroy(&p->mu);
	free(p->full);
	free(p->redacted);
	free(p->series);
	free(p);
}
