/*
 * web_demo_steps.c - the steps of the guided demonstration (issue 17,
 * part 2), against the real processes of scripts/demo.sh --web:
 *
 *   1 lost response   producer.lose_response armed once over the producer's
 *                     /admin/faults; the agent-side client (producer/
 *                     client.c) retries with the same key: one report,
 *                     the retry answered from the stored response.
 *   2 broken mode     the same with --idempotency none switched on at run
 *                     time (switched back after): two reports.
 *   3 relay dies      after sending: a short-lived relay A with
 *                     --fault-die-after-send 1 delivers, dies before
 *                     recording; relay B takes the message over once A's
 *                     lease expired and redelivers: the consumer answers
 *                     duplicate, one effect.
 *   4 relay stalls    relay A with --fault-stall-after-claim sleeps past its
 *                     lease; B takes over with fence+1 and delivers; A's
 *                     late outcome write is refused (relay.record.fenced_out).
 *   5 no dedup        step 3 with the consumer's dedup switched off at run
 *                     time (back on after): two effects.
 *
 * Relay faults: each step starts its own relays (outbox-relay from the
 * config's bin_dir, posix_spawn through common/proc.c, each in
 * its own process group), routed to ONE topic of the step's own
 * (demo.redelivery, demo.fencing, demo.nodedup) that the demo's relay does
 * not serve, and stops and reaps them before it ends, on every path. The
 * interleavings are the fault matrix's (tools/fault-matrix/matrix.c), by
 * fault counters and deadlines, polled, never a sleep hoping for a race.
 *
 * Facts come from the databases (the web view's --db and --inbox-db),
 * the consumer's /metrics and the relays' logs; nothing is inferred.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "client.h"
#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/pg.h"
#include "outbox/proc.h"
#include "web_demo_steps.h"

#define DEMO_HTTP_TIMEOUT_MS 5000    /* one admin call, one attempt of a submit */
#define DEMO_SUBMIT_ATTEMPTS 5
#define DEMO_SUBMIT_BASE_MS 100      /* the client's Full Jitter */
#define DEMO_SUBMIT_CAP_MS 1000
#define DEMO_WAIT_MS 60000           /* the longest wait for any condition */
#define DEMO_POLL_MS 50
#define DEMO_STOP_GRACE_MS 8000      /* a step relay's SIGTERM grace */
/* The step relays (the fault matrix's defaults: the stall exceeds the lease
 * by more than a delivery timeout, so the takeover happens mid-stall). */
#define DEMO_LEASE_MS "1500"
#define DEMO_DELIVERY_TIMEOUT_MS "400"
#define DEMO_STALL_MS "3500"
#define DEMO_STALL_WAIT_MS 20000     /* the stalled worker's late write, after the takeover */
#define DEMO_RELAY_POLL_MS "100"
#define DEMO_MATRIX_MS (20 * 60 * 1000) /* the longest a matrix may run */
#define DEMO_TAIL_LINES 6            /* of a relay's log, when a step failed */

/* --- calls ------------------------------------------------------------- */

/* POST body to base/admin/faults; it must answer 200. */
static int
admin(struct demo_run *r, const char *what, const char *base, const char *body)
{
	struct client_http_reply rep;
	client_http_call(base, NULL, "POST", "/admin/faults", NULL, body, DEMO_HTTP_TIMEOUT_MS,
	    &rep);
	int rc = OB_OK;
	if (rep.outcome != CLIENT_HTTP_ANSWERED) {
		snprintf(r->err, sizeof(r->err), "%s admin endpoint %s: %s (is it started with"
		    " --demo-admin?)", what, base, rep.why);
		rc = OB_ENET;
	} else if (rep.status != 200) {
		snprintf(r->err, sizeof(r->err), "%s admin endpoint %s answered %d: %.200s", what,
		    base, rep.status, rep.body ? rep.body : "");
		rc = OB_EINVAL;
	} else
		demo_event(r, strcmp(what, "consumer") == 0 ? DEMO_NODE_CONSUMER : DEMO_NODE_PRODUCER,
		    "POST /admin/faults %s -> 200", body);
	free(rep.body);
	return rc;
}

/* One integer from sql with one text parameter (NULL: none); -1 on error. */
static int64_t
q_int(struct demo_run *r, PGconn *conn, const char *sql, const char *param)
{
	const char *params[1] = { param };
	PGresult *res = PQexecParams(conn, sql, param != NULL ? 1 : 0, NULL, params, NULL, NULL, 0);
	int64_t v = -1;
	if (ob_pg_check(res, PGRES_TUPLES_OK, "query", r->err, sizeof(r->err)) == OB_OK)
		v = PQntuples(res) > 0 && !PQgetisnull(res, 0, 0) ? ob_pg_int64(res, 0, 0) : 0;
	PQclear(res);
	return v;
}

/* Poll sql(param) until it is at least want, up to DEMO_WAIT_MS. */
static int
wait_int(struct demo_run *r, PGconn *conn, const char *what, const char *sql,
    const char *param, int64_t want)
{
	int64_t end = ob_mono_ms() + DEMO_WAIT_MS, v = -1;
	while ((v = q_int(r, conn, sql, param)) < want) {
		if (v < 0)
			return OB_EDB;
		if (demo_cancelled(r)) {
			snprintf(r->err, sizeof(r->err), "cancelled: the web view is stopping");
			return OB_ECLOSED;
		}
		if (ob_mono_ms() >= end) {
			snprintf(r->err, sizeof(r->err), "%s: not so after %d s (%" PRId64 ", want %"
			    PRId64 ")", what, DEMO_WAIT_MS / 1000, v, want);
			return OB_ETIMEDOUT;
		}
		ob_sleep_ms(DEMO_POLL_MS);
	}
	return OB_OK;
}

static void
submit_opts(struct demo_run *r, struct client_opts *o, const char *key)
{
	memset(o, 0, sizeof(*o));
	o->url = r->conf->producer_url;
	o->key_source = CLIENT_KEY_FIXED;
	o->key = key;
	o->attempts = DEMO_SUBMIT_ATTEMPTS;
	o->base_ms = DEMO_SUBMIT_BASE_MS;
	o->cap_ms = DEMO_SUBMIT_CAP_MS;
	o->timeout_ms = DEMO_HTTP_TIMEOUT_MS;
	o->max_retry_after_ms = DEMO_SUBMIT_CAP_MS;
}

/* The client's one logical call; logs each attempt's outcome. */
static int
submit(struct demo_run *r, const struct client_opts *o, struct client_result *res)
{
	client_submit(o, res);
	demo_event(r, DEMO_NODE_AGENT, "%d attempt(s) with Idempotency-Key %s, last status %d%s: %s",
	    res->attempts, o->key, res->last_status, res->replayed ? " (Idempotent-Replayed)" : "",
	    res->code);
	if (!res->ok) {
		snprintf(r->err, sizeof(r->err), "the call did not succeed: %s (%s)", res->code,
		    r->conf->producer_url);
		return OB_EINVAL;
	}
	return OB_OK;
}

/* The value of series (exactly as exposed) on base/metrics; 0 when absent,
 * -1 when the scrape failed. */
static double
metric(struct demo_run *r, const char *base, const char *series)
{
	struct client_http_reply rep;
	client_http_call(base, NULL, "GET", "/metrics", NULL, NULL, DEMO_HTTP_TIMEOUT_MS, &rep);
	double v = -1;
	if (rep.outcome == CLIENT_HTTP_ANSWERED && rep.status == 200 && rep.body != NULL) {
		size_t n = strlen(series);
		v = 0;
		for (const char *p = rep.body; p != NULL && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
			if (strncmp(p, series, n) == 0 && p[n] == ' ')
				v = strtod(p + n + 1, NULL);
	} else
		snprintf(r->err, sizeof(r->err), "GET %s/metrics: %s", base,
		    rep.outcome == CLIENT_HTTP_ANSWERED ? "not 200" : rep.why);
	free(rep.body);
	return v;
}

/* --- step relays --------------------------------------------------------- */

static int
relay_start(struct demo_run *r, struct ob_proc *p, const char *which, const char *topic,
    const char *const *extra)
{
	struct ob_argv a;
	char route[DEMO_PATH_MAX + 300], log[DEMO_PATH_MAX + 100];
	ob_argv_init(&a, "outbox-relay");
	ob_argv_add2(&a, "--db", r->conf->relay_db);
	snprintf(route, sizeof(route), "%s=%s", topic, r->conf->consumer_listen);
	ob_argv_add2(&a, "--route", route);
	ob_argv_add2(&a, "--lease-ms", DEMO_LEASE_MS);
	ob_argv_add2(&a, "--delivery-timeout-ms", DEMO_DELIVERY_TIMEOUT_MS);
	ob_argv_add2(&a, "--poll-ms", DEMO_RELAY_POLL_MS);
	ob_argv_add2(&a, "--backoff-base-ms", "50");
	ob_argv_add2(&a, "--backoff-cap-ms", "200");
	for (int i = 0; extra != NULL && extra[i] != NULL; i++)
		ob_argv_add(&a, extra[i]);
	snprintf(log, sizeof(log), "%s/demo-step%d-%s-relay-%s.log", r->conf->work_dir, r->n,
	    r->stamp, which);
	int rc = ob_proc_start(p, r->conf->bin_dir, &a, log, r->err, sizeof(r->err));
	if (rc == OB_OK)
		demo_event(r, DEMO_NODE_RELAY, "relay %s started (pid %d, route %s%s%s), log %s", which,
		    (int)p->pid,
		    topic, extra != NULL && extra[0] != NULL ? ", " : "",
		    extra != NULL && extra[0] != NULL ? extra[0] : "", log);
	return rc;
}

static void
relay_stop(struct demo_run *r, struct ob_proc *p, const char *which)
{
	if (p->pid <= 0)
		return; /* never started, or stopped and reaped already */
	ob_proc_stop(p, DEMO_STOP_GRACE_MS);
	demo_event(r, DEMO_NODE_RELAY, "relay %s stopped", which);
}

/* The last DEMO_TAIL_LINES lines of p's log into the step's log (when a
 * relay did not do what the step waited for). */
static void
log_tail(struct demo_run *r, const struct ob_proc *p, const char *which)
{
	char *text = ob_read_file(p->log);
	if (text == NULL)
		return;
	const char *start = text + strlen(text);
	for (int n = 0; start > text && n <= DEMO_TAIL_LINES; )
		if (*--start == '\n' && start[1] != '\0')
			n++;
	if (*start == '\n')
		start++;
	for (const char *line = start; *line; ) {
		const char *nl = strchr(line, '\n');
		int len = nl != NULL ? (int)(nl - line) : (int)strlen(line);
		demo_log(r, "relay %s: %.*s", which, len, line);
		line += len + (nl != NULL);
	}
	free(text);
}

/* Poll until p's log holds event (or p has exited, when or_exit). */
static int
wait_log(struct demo_run *r, struct ob_proc *p, const char *which, const char *event,
    bool or_exit, int64_t wait_ms)
{
	int64_t end = ob_mono_ms() + wait_ms;
	while (ob_log_count(p->log, event) == 0) {
		if (!ob_proc_alive(p)) {
			if (or_exit)
				return OB_OK;
			snprintf(r->err, sizeof(r->err), "relay %s exited (%d) before %s; see %s", which,
			    p->exit_code, event, p->log);
			log_tail(r, p, which);
			return OB_ECLOSED;
		}
		if (demo_cancelled(r)) {
			snprintf(r->err, sizeof(r->err), "cancelled: the web view is stopping");
			return OB_ECLOSED;
		}
		if (ob_mono_ms() >= end) {
			snprintf(r->err, sizeof(r->err), "relay %s: no %s within %" PRId64 " s; see %s",
			    which, event, wait_ms / 1000, p->log);
			log_tail(r, p, which);
			return OB_ETIMEDOUT;
		}
		ob_sleep_ms(DEMO_POLL_MS);
	}
	return OB_OK;
}

/* --- the steps ------------------------------------------------------------- */

#define SQL_REPORTS "SELECT count(*) FROM app.bug_reports WHERE title = $1"
#define SQL_MSG_ID "SELECT max(id) FROM outbox.messages WHERE idempotency_key = $1"
#define SQL_SETTLED                                                           \
	"SELECT count(*) FROM outbox.messages WHERE idempotency_key = $1"     \
	" AND status = 'delivered' AND lease_owner IS NULL"
#define SQL_ATTEMPTS "SELECT max(attempts) FROM outbox.messages WHERE idempotency_key = $1"
#define SQL_FENCE "SELECT max(fence) FROM outbox.messages WHERE idempotency_key = $1"
#define SQL_EFFECTS "SELECT count(*) FROM inbox.notifications WHERE idempotency_key = $1"

/* The reports titled title: their count, and their outbox messages
 * highlighted (key "report-<id>", message id). */
static int64_t
reports_of(struct demo_run *r, const char *title)
{
	const char *params[1] = { title };
	PGresult *res = PQexecParams(r->db,
	    "SELECT b.id, m.id FROM app.bug_reports b LEFT JOIN outbox.messages m"
	    " ON m.idempotency_key = 'report-' || b.id WHERE b.title = $1 ORDER BY b.id",
	    1, NULL, params, NULL, NULL, 0);
	int64_t n = -1;
	if (ob_pg_check(res, PGRES_TUPLES_OK, "the reports", r->err, sizeof(r->err)) == OB_OK) {
		n = PQntuples(res);
		for (int i = 0; i < (int)n; i++) {
			char key[64];
			snprintf(key, sizeof(key), "report-%s", PQgetvalue(res, i, 0));
			demo_highlight_key(r, key);
			if (!PQgetisnull(res, i, 1))
				demo_highlight_id(r, ob_pg_int64(res, i, 1));
		}
	}
	PQclear(res);
	return n;
}

/* Steps 1 and 2: a report whose first response is lost, in mode. */
static int
lost_response(struct demo_run *r, const char *mode)
{
	char key[96], title[128], body[160];
	struct client_opts o;
	struct client_result res = { 0 };
	snprintf(key, sizeof(key), "demo-%d-%s", r->n, r->stamp);
	snprintf(title, sizeof(title), "Lost response, step %d (%s)", r->n, r->stamp);
	snprintf(body, sizeof(body), "{\"idempotency\":\"%s\",\"producer.lose_response\":1}", mode);
	int rc = admin(r, "producer", r->conf->producer_admin, body);
	if (rc != OB_OK)
		return rc;
	submit_opts(r, &o, key);
	o.target = CLIENT_REPORT;
	o.title = title;
	o.module = "demo";
	o.severity = "low";
	o.steps = "the response of the first attempt is lost";
	rc = submit(r, &o, &res);
	/* always back to the real mode, nothing left armed */
	int rc2 = admin(r, "producer", r->conf->producer_admin,
	    "{\"idempotency\":\"atomic\",\"producer.lose_response\":0}");
	if (rc == OB_OK)
		rc = rc2;
	if (rc == OB_OK) {
		int64_t n = reports_of(r, title);
		if (n < 0)
			rc = OB_EDB;
		else {
			demo_fact_int(r, "reports", n);
			demo_fact_int(r, "attempts", res.attempts);
			demo_fact_bool(r, "replayed", res.replayed);
			demo_fact_str(r, "mode", mode);
			demo_fact_str(r, "key", key);
			demo_event(r, DEMO_NODE_OUTBOX, "%" PRId64 " report row(s) titled '%s'", n, title);
			demo_summary(r, "%d attempts, %s: %" PRId64 " report%s", res.attempts,
			    res.replayed ? "the retry was answered from the stored response"
			                 : "the retry was a new request", n, n == 1 ? "" : "s");
		}
	}
	client_result_fini(&res);
	return rc;
}

static int
step_lost_response(struct demo_run *r)
{
	return lost_response(r, "atomic");
}

static int
step_broken_mode(struct demo_run *r)
{
	return lost_response(r, "none");
}

/* Enqueue one message on topic through the producer API; its key into key. */
static int
send_message(struct demo_run *r, const char *topic, char *key, size_t keylen)
{
	char payload[128];
	struct client_opts o;
	struct client_result res = { 0 };
	snprintf(key, keylen, "demo-%d-%s", r->n, r->stamp);
	snprintf(payload, sizeof(payload), "{\"step\":%d,\"run\":\"%s\"}", r->n, r->stamp);
	submit_opts(r, &o, key);
	o.target = CLIENT_MESSAGE;
	o.topic = topic;
	o.payload = payload;
	int rc = submit(r, &o, &res);
	if (rc == OB_OK) {
		demo_highlight_key(r, key);
		if (res.created_id > 0)
			demo_highlight_id(r, res.created_id);
		demo_event(r, DEMO_NODE_OUTBOX, "outbox record %" PRId64 " (%s), key %s, in the"
		    " transaction of its request", res.created_id, topic, key);
		demo_fact_str(r, "key", key);
	}
	client_result_fini(&res);
	return rc;
}

/* Steps 3 to 5 begin alike: one message on topic (its key into key), and
 * relay A started with fault until the fault fires (or A exits, with
 * or_exit: a fault that kills A). */
static int
message_to_faulty_a(struct demo_run *r, const char *topic, char *key, size_t keylen,
    struct ob_proc *a, const char *const *fault, bool or_exit)
{
	int rc;
	if ((rc = send_message(r, topic, key, keylen)) != OB_OK)
		return rc;
	if ((rc = relay_start(r, a, "A", topic, fault)) != OB_OK)
		return rc;
	return wait_log(r, a, "A", "fault.fired", or_exit, DEMO_WAIT_MS);
}

/* Steps 3 and 5: relay A dies after its frame was answered, B redelivers. */
static int
redelivery(struct demo_run *r, const char *topic, bool dedup)
{
	char key[96], series[200];
	struct ob_proc a = { 0 }, b = { 0 };
	static const char *const fault[] = { "--fault-die-after-send", "1", NULL };
	int rc;
	if (r->inbox == NULL) {
		snprintf(r->err, sizeof(r->err), "this step needs the web view's --inbox-db");
		return OB_EINVAL;
	}
	snprintf(series, sizeof(series), "outbox_consumer_duplicate_total{topic=\"%s\"}", topic);
	double dup0 = metric(r, r->conf->consumer_admin, series);
	if (dup0 < 0)
		return OB_ENET;
	if (!dedup && (rc = admin(r, "consumer", r->conf->consumer_admin,
	                   "{\"dedup\":\"off\"}")) != OB_OK)
		return rc;
	/* A's worker kills itself once the consumer has answered its frame */
	if ((rc = message_to_faulty_a(r, topic, key, sizeof(key), &a, fault, true)) != OB_OK)
		goto out;
	ob_proc_signal(&a, SIGKILL);
	relay_stop(r, &a, "A");
	int64_t applied = q_int(r, r->inbox, SQL_EFFECTS, key);
	demo_event(r, DEMO_NODE_RELAY, "relay A died after the consumer answered, before recording"
	    " the outcome:"
	    " %" PRId64 " effect row(s), the message still leased to A", applied);
	if ((rc = relay_start(r, &b, "B", topic, NULL)) != OB_OK)
		goto out;
	if ((rc = wait_int(r, r->db, "the message delivered", SQL_SETTLED, key, 1)) != OB_OK)
		goto out;
	relay_stop(r, &b, "B");
	int64_t attempts = q_int(r, r->db, SQL_ATTEMPTS, key);
	int64_t effects = q_int(r, r->inbox, SQL_EFFECTS, key);
	double dup1 = metric(r, r->conf->consumer_admin, series);
	if (attempts < 0 || effects < 0 || dup1 < 0) {
		rc = OB_EDB;
		goto out;
	}
	demo_fact_int(r, "attempts", attempts);
	demo_fact_int(r, "effects", effects);
	demo_fact_int(r, "duplicates", (int64_t)(dup1 - dup0));
	demo_fact_str(r, "dedup", dedup ? "on" : "off");
	demo_event(r, DEMO_NODE_CONSUMER, "delivered in %" PRId64 " attempts; the consumer"
	    " answered duplicate %g time(s)", attempts, dup1 - dup0);
	demo_event(r, DEMO_NODE_DOWNSTREAM, "%" PRId64 " effect row(s) for key %s", effects, key);
	if (dedup)
		demo_summary(r, "delivered twice, applied once: the consumer answered duplicate"
		    " (%" PRId64 " effect)", effects);
	else
		demo_summary(r, "delivered twice without dedup: %" PRId64 " effects", effects);
out:
	relay_stop(r, &a, "A");
	relay_stop(r, &b, "B");
	if (!dedup) {
		int rc2 = admin(r, "consumer", r->conf->consumer_admin, "{\"dedup\":\"on\"}");
		if (rc == OB_OK)
			rc = rc2;
	}
	return rc;
}

static int
step_relay_dies(struct demo_run *r)
{
	return redelivery(r, "demo.redelivery", true);
}

static int
step_no_dedup(struct demo_run *r)
{
	return redelivery(r, "demo.nodedup", false);
}

/* Step 4: relay A stalls past its lease, B takes over, A is fenced out. */
static int
step_fenced_out(struct demo_run *r)
{
	char key[96];
	struct ob_proc a = { 0 }, b = { 0 };
	static const char *const fault[] = { "--fault-stall-after-claim", "1", "--fault-stall-ms",
		DEMO_STALL_MS, NULL };
	const char *topic = "demo.fencing";
	int rc;
	if ((rc = message_to_faulty_a(r, topic, key, sizeof(key), &a, fault, false)) != OB_OK)
		goto out;
	int64_t fence_before = q_int(r, r->db, SQL_FENCE, key);
	demo_event(r, DEMO_NODE_RELAY, "relay A claimed the message (fence %" PRId64 ") and stalls"
	    " for %s ms,"
	    " past its %s ms lease", fence_before, DEMO_STALL_MS, DEMO_LEASE_MS);
	if ((rc = relay_start(r, &b, "B", topic, NULL)) != OB_OK)
		goto out;
	if ((rc = wait_int(r, r->db, "the message delivered by B", SQL_SETTLED, key, 1)) != OB_OK)
		goto out;
	int64_t fence_after = q_int(r, r->db, SQL_FENCE, key);
	demo_event(r, DEMO_NODE_RELAY, "relay B took the message over with fence %" PRId64
	    " and delivered it",
	    fence_after);
	if ((rc = wait_log(r, &a, "A", "relay.record.fenced_out", false, DEMO_STALL_WAIT_MS)) !=
	    OB_OK)
		goto out;
	int64_t refused = ob_log_sum(a.log, "relay.record.fenced_out", "fenced_out");
	int64_t effects = r->inbox != NULL ? q_int(r, r->inbox, SQL_EFFECTS, key) : -1;
	int64_t settled = q_int(r, r->db, SQL_SETTLED, key);
	demo_event(r, DEMO_NODE_RELAY, "relay A woke up, sent, and its outcome write was refused:"
	    " fenced_out=%"
	    PRId64 "; the message is still delivered (%" PRId64 ")", refused, settled);
	demo_fact_int(r, "fence_before", fence_before);
	demo_fact_int(r, "fence_after", fence_after);
	demo_fact_bool(r, "fenced_out", refused > 0);
	if (effects >= 0)
		demo_fact_int(r, "effects", effects);
	demo_summary(r, "fence %" PRId64 " -> %" PRId64 ": the stale worker's write was refused"
	    " (fenced_out)", fence_before, fence_after);
out:
	relay_stop(r, &a, "A");
	relay_stop(r, &b, "B");
	return rc;
}

/* --- step 6: both fault matrices, cell by cell ---------------------------- */

int
demo_stream(struct demo_run *r, struct ob_argv *a, const char *log, int64_t max_ms,
    demo_line_fn fn, void *arg)
{
	struct ob_proc p = { 0 };
	char *line = malloc(DEMO_STREAM_LINE_MAX);
	if (line == NULL) {
		snprintf(r->err, sizeof(r->err), "out of memory");
		return OB_ENOMEM;
	}
	int rc = ob_proc_start(&p, r->conf->bin_dir, a, log, r->err, sizeof(r->err));
	if (rc != OB_OK) {
		free(line);
		return rc;
	}
	demo_log(r, "%s started (pid %d), log %s", a->argv[0], (int)p.pid, log);
	long off = 0;
	int64_t end = ob_mono_ms() + max_ms;
	for (bool alive = true;;) {
		alive = ob_proc_alive(&p);
		FILE *f = fopen(log, "r");
		if (f != NULL && fseek(f, off, SEEK_SET) == 0) {
			while (fgets(line, DEMO_STREAM_LINE_MAX, f) != NULL) {
				size_t n = strlen(line);
				/* an unfinished line is read whole next time (unless
				 * the program is gone); one over the buffer is taken
				 * in pieces */
				if (line[n - 1] != '\n' && n + 1 < DEMO_STREAM_LINE_MAX && alive)
					break;
				off += (long)n;
				line[strcspn(line, "\n")] = '\0';
				fn(r, line, arg);
			}
		}
		if (f != NULL)
			fclose(f);
		if (!alive)
			break;
		if (demo_cancelled(r)) {
			ob_proc_stop(&p, DEMO_STOP_GRACE_MS);
			snprintf(r->err, sizeof(r->err), "cancelled: the web view is stopping");
			rc = OB_ECLOSED;
			goto out;
		}
		if (ob_mono_ms() >= end) {
			ob_proc_stop(&p, DEMO_STOP_GRACE_MS);
			snprintf(r->err, sizeof(r->err), "%s ran longer than %" PRId64 " s; see %s",
			    a->argv[0], max_ms / 1000, log);
			rc = OB_ETIMEDOUT;
			goto out;
		}
		ob_sleep_ms(DEMO_POLL_MS);
	}
	if (p.exit_code != 0 && p.exit_code != 1) {
		snprintf(r->err, sizeof(r->err), "%s exited %d; see %s", a->argv[0], p.exit_code, log);
		rc = OB_EINVAL;
	}
out:
	free(line);
	return rc;
}

/* The value of " key=" in a kv line into out ("" when absent). */
static const char *
kv(const char *line, const char *key, char *out, size_t outlen)
{
	char pat[64];
	snprintf(pat, sizeof(pat), " %s=", key);
	const char *p = strstr(line, pat);
	out[0] = '\0';
	if (p != NULL) {
		p += strlen(pat);
		snprintf(out, outlen, "%.*s", (int)strcspn(p, " "), p);
	}
	return out;
}

struct fm_tally {
	int cells, full_ones, full_cells;
	char verdict[16];
};

/* outbox-fault-matrix --format kv: "cell mode=M fault=F effects=N ...". */
static void
fault_line(struct demo_run *r, const char *line, void *arg)
{
	struct fm_tally *t = arg;
	char mode[64], fault[64], effects[32], attempts[32], fenced[32], dups[32];
	if (strncmp(line, "verdict ", 8) == 0) {
		snprintf(t->verdict, sizeof(t->verdict), "%s", line + 8);
		return;
	}
	if (strncmp(line, "cell ", 5) != 0)
		return;
	kv(line, "mode", mode, sizeof(mode));
	kv(line, "fault", fault, sizeof(fault));
	kv(line, "effects", effects, sizeof(effects));
	t->cells++;
	if (strcmp(mode, "full") == 0) {
		t->full_cells++;
		t->full_ones += strcmp(effects, "1") == 0;
	}
	demo_log(r, "fault matrix: %-10s x %-20s effects=%s (attempts %s, fenced_out %s,"
	    " duplicate replies %s)", mode, fault, effects, kv(line, "attempts", attempts,
	    sizeof(attempts)), kv(line, "fenced_out", fenced, sizeof(fenced)),
	    kv(line, "dup_replies", dups, sizeof(dups)));
	demo_fact_int(r, "fault_cells", t->cells);
}

struct pm_tally {
	int cells, equal;
	bool all_equal;
};

/* outbox-producer matrix: "matrix: ROW COL -> N (article: M) in X ms", and
 * at the end "matrix: all N cells equal the article's table". */
static void
producer_line(struct demo_run *r, const char *line, void *arg)
{
	struct pm_tally *t = arg;
	const char *arrow = strstr(line, " -> ");
	if (strncmp(line, "matrix: all ", 12) == 0)
		t->all_equal = true;
	if (strncmp(line, "matrix: ", 8) != 0 || arrow == NULL)
		return;
	long got = strtol(arrow + 4, NULL, 10);
	const char *art = strstr(arrow, "(article: ");
	long want = art != NULL ? strtol(art + 10, NULL, 10) : -1;
	t->cells++;
	t->equal += got == want;
	demo_log(r, "producer matrix: %.*s -> %ld report(s) (the article: %ld)%s",
	    (int)(arrow - line - 8), line + 8, got, want, got == want ? "" : " DIFFERS");
	demo_fact_int(r, "producer_cells", t->cells);
}

static int
step_matrices(struct demo_run *r)
{
	struct ob_argv a;
	char log[DEMO_PATH_MAX + 200], dir[DEMO_PATH_MAX + 100];
	struct fm_tally ft = { 0 };
	struct pm_tally pt = { 0 };
	ob_argv_init(&a, "outbox-fault-matrix");
	ob_argv_add2(&a, "--format", "kv");
	ob_argv_add2(&a, "--bin-dir", r->conf->bin_dir);
	/* faults: a comma-separated list of columns, or "" for all */
	for (const char *p = r->conf->matrix_faults; *p; ) {
		char col[64];
		size_t n = strcspn(p, ",");
		snprintf(col, sizeof(col), "%.*s", (int)n, p);
		if (col[0] != '\0')
			ob_argv_add2(&a, "--faults", col);
		p += n + (p[n] == ',');
	}
	snprintf(log, sizeof(log), "%s/demo-step6-%s-fault-matrix.log", r->conf->work_dir, r->stamp);
	demo_log(r, "the relay/consumer fault matrix: a fresh database and ONE message per"
	    " cell, the real relay and consumer, one fault each");
	int rc = demo_stream(r, &a, log, DEMO_MATRIX_MS, fault_line, &ft);
	if (rc != OB_OK)
		return rc;
	demo_fact_str(r, "fault_matrix", ft.verdict[0] ? ft.verdict : "unknown");
	demo_fact_int(r, "full_row_ones", ft.full_ones);
	demo_fact_int(r, "full_row_cells", ft.full_cells);

	ob_argv_init(&a, "outbox-producer");
	ob_argv_add(&a, "matrix");
	ob_argv_add2(&a, "--db", r->conf->relay_db);
	snprintf(dir, sizeof(dir), "%s/demo-step6-%s-producer-matrix", r->conf->work_dir, r->stamp);
	ob_argv_add2(&a, "--workdir", dir);
	snprintf(log, sizeof(log), "%s.log", dir);
	demo_log(r, "the producer's matrix: server modes x key sources x faults, each cell"
	    " a real server and the real client, next to the seed article's table");
	if ((rc = demo_stream(r, &a, log, DEMO_MATRIX_MS, producer_line, &pt)) != OB_OK)
		return rc;
	demo_fact_int(r, "producer_equal_article", pt.equal);
	demo_fact_str(r, "producer_matrix", pt.all_equal ? "equal to the article" : "differs");
	demo_summary(r, "fault matrix: %s, the full row %d of %d cells exactly once; producer"
	    " matrix: %d of %d cells as in the article", ft.verdict[0] ? ft.verdict : "unknown",
	    ft.full_ones, ft.full_cells, pt.equal, pt.cells);
	return OB_OK;
}

const struct demo_step demo_steps[] = {
	{ "The response is lost",
	    "An agent submits a bug report, the producer commits it but the response is lost;"
	    " the agent's retry with the same Idempotency-Key is answered from the stored"
	    " response, so there is one report.", step_lost_response },
	{ "The same, without idempotency",
	    "The same lost response with the producer's key handling switched off (the"
	    " broken mode --idempotency none): the retry is a new request and there are two"
	    " reports.", step_broken_mode },
	{ "A relay worker dies after sending",
	    "A relay worker delivers a message and dies before recording it; once its lease"
	    " expires another relay delivers it again and the consumer answers duplicate:"
	    " one effect.", step_relay_dies },
	{ "A worker stalls past its lease",
	    "A relay worker stalls past its lease; another takes the message over with the"
	    " fencing token plus one and delivers it, and the stale worker's late write is"
	    " refused (fenced_out).", step_fenced_out },
	{ "The consumer without dedup",
	    "The redelivery of step 3 with the consumer's dedup switched off (the broken mode"
	    " --no-dedup): the duplicate effect appears, two rows for one message.",
	    step_no_dedup },
	{ "Both fault matrices, live",
	    "Every fault against every safety mechanism switched off in turn, each cell run for"
	    " real (the relay/consumer matrix, then the producer's next to the seed article's"
	    " table), shown cell by cell as it completes.", step_matrices },
};
const int demo_nsteps = (int)(sizeof(demo_steps) / sizeof(demo_steps[0]));
