/*
 * standby_gate.c - wait for the named standbys before a frame goes out
 * (standby_gate.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/log.h"
#include "outbox/pg.h"
#include "standby_gate.h"

#define GATE_NAME_MAX 63 /* NAMEDATALEN - 1: application_name is cut there */

/* One row: how many of the named standbys are streaming, how many WAL
 * senders this role may not see (PostgreSQL shows such a row with every
 * column but pid NULL, its state too), and the lowest position of the
 * named ones. */
#define GATE_SQL(col)                                                          \
    "SELECT count(DISTINCT application_name) FILTER (WHERE " GATE_NAMED "),"     \
    " count(*) FILTER (WHERE state IS NULL OR (" GATE_NAMED " AND " col " IS NULL)),"  \
    " (min(" col ") FILTER (WHERE " GATE_NAMED "))::text"                         \
    " FROM pg_catalog.pg_stat_replication"
#define GATE_NAMED "application_name = ANY($1::text[]) AND state = 'streaming'"
static const char gate_sql_flush[] = GATE_SQL("flush_lsn");
static const char gate_sql_replay[] = GATE_SQL("replay_lsn");

int
relay_gate_init(struct relay_gate *g, const char *mode, char *const *names, size_t n,
    int64_t timeout_ms, int64_t poll_ms, char *err, size_t errlen)
{
	size_t at = 0;

	memset(g, 0, sizeof(*g));
	g->timeout_ms = timeout_ms;
	g->poll_ms = poll_ms;
	if (mode == NULL || strcmp(mode, "none") == 0) {
		if (n > 0) {
			snprintf(err, errlen, "--standby-names needs --standby-gate flush or replay");
			return OB_EINVAL;
		}
		return OB_OK;
	}
	g->mode = strcmp(mode, "replay") == 0 ? RELAY_GATE_REPLAY : RELAY_GATE_FLUSH;
	if (n == 0) {
		snprintf(err, errlen, "--standby-gate %s needs --standby-names (the standbys'"
		    " application_name in pg_stat_replication)", mode);
		return OB_EINVAL;
	}
	if (n > GATE_NAMES_MAX) {
		snprintf(err, errlen, "--standby-names: %zu names, at most %d", n, GATE_NAMES_MAX);
		return OB_EINVAL;
	}
	g->names[at++] = '{';
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(names[i]);
		if (len == 0 || len > GATE_NAME_MAX || strpbrk(names[i], "\"',{}\\ ") != NULL) {
			snprintf(err, errlen, "--standby-names: '%.80s' is not a standby name (1..%d"
			    " characters, no quotes, commas, braces, backslashes or spaces)", names[i],
			    GATE_NAME_MAX);
			return OB_EINVAL;
		}
		at += (size_t)snprintf(g->names + at, sizeof(g->names) - at, "%s%s",
		    i > 0 ? "," : "", names[i]);
	}
	snprintf(g->names + at, sizeof(g->names) - at, "}");
	g->nnames = (int)n;
	return OB_OK;
}

int
relay_gate_parse_lsn(const char *text, uint64_t *out)
{
	char *end;
	if (text == NULL || text[0] == '\0' || text[0] == '-' || text[0] == '+')
		return OB_EINVAL;
	unsigned long long hi = strtoull(text, &end, 16);
	if (end == text || *end != '/' || hi > UINT32_MAX)
		return OB_EINVAL;
	const char *lo_text = end + 1;
	if (*lo_text == '\0' || *lo_text == '-' || *lo_text == '+')
		return OB_EINVAL;
	unsigned long long lo = strtoull(lo_text, &end, 16);
	if (*end != '\0' || lo > UINT32_MAX)
		return OB_EINVAL;
	*out = ((uint64_t)hi << 32) | (uint64_t)lo;
	return OB_OK;
}

/* Ask the primary once: OB_OK with the lowest position in *reached (0 when
 * a named standby is not streaming), OB_EPROTO when hidden, OB_EDB. */
static int
query_reached(struct relay_gate *g, PGconn *conn, uint64_t *reached, int *connected,
    char *err, size_t errlen)
{
	const char *params[1] = { g->names };
	PGresult *res = PQexecParams(conn, g->mode == RELAY_GATE_REPLAY ? gate_sql_replay :
	    gate_sql_flush, 1, NULL, params, NULL, NULL, 0);
	int rc = ob_pg_check(res, PGRES_TUPLES_OK, "standby gate", err, errlen);
	if (rc != OB_OK) {
		PQclear(res);
		return rc;
	}
	*connected = atoi(PQgetvalue(res, 0, 0));
	int hidden = atoi(PQgetvalue(res, 0, 1));
	*reached = 0;
	if (hidden > 0) {
		snprintf(err, errlen, "pg_stat_replication hides the standbys' positions from this"
		    " role: GRANT pg_monitor TO it (or run the relay as a superuser)");
		PQclear(res);
		return OB_EPROTO;
	}
	if (*connected == g->nnames && !PQgetisnull(res, 0, 2) &&
	    relay_gate_parse_lsn(PQgetvalue(res, 0, 2), reached) != OB_OK) {
		snprintf(err, errlen, "standby gate: cannot read position '%s'",
		    PQgetvalue(res, 0, 2));
		PQclear(res);
		return OB_EDB;
	}
	PQclear(res);
	return OB_OK;
}

int
relay_gate_poll(struct relay_gate *g, PGconn *conn, char *err, size_t errlen)
{
	uint64_t reached;
	int rc = query_reached(g, conn, &reached, &g->streaming, err, errlen);
	if (rc == OB_OK && reached > g->reached)
		g->reached = reached;
	return rc;
}

void
relay_gate_timed_out(struct relay_gate *g, uint64_t lsn, int64_t waited_ms)
{
	g->timeouts++;
	int64_t now = ob_mono_ms();
	if (now < g->next_log_ms)
		return;
	g->next_log_ms = now + GATE_LOG_EVERY_MS;
	ob_warn("relay.standby_gate.waiting", "standbys=%s streaming=%d/%d need=%X/%X"
	    " reached=%X/%X waited_ms=%" PRId64 " timeouts=%" PRIu64, g->names, g->streaming,
	    g->nnames, (unsigned)(lsn >> 32), (unsigned)lsn, (unsigned)(g->reached >> 32),
	    (unsigned)g->reached, waited_ms, g->timeouts);
}

bool
relay_gate_must_wait(struct relay_gate *g, uint64_t lsn, int64_t now_ms, int64_t *until_ms)
{
	if (g->mode == RELAY_GATE_NONE || lsn <= g->reached)
		return false;
	*until_ms = now_ms + g->timeout_ms;
	g->waits++;
	return true;
}

int
relay_gate_poll_logged(struct relay_gate *g, PGconn *conn, const char *owner)
{
	char err[512], q[600];
	int rc = relay_gate_poll(g, conn, err, sizeof(err));
	if (rc != OB_OK) {
		int64_t now = ob_mono_ms();
		if (now >= g->next_log_ms) {
			g->next_log_ms = now + GATE_LOG_EVERY_MS;
			ob_error("relay.standby_gate.failed", "owner=%s err=%s", owner,
			    ob_log_q(err, q, sizeof(q)));
		}
	}
	return rc;
}

enum relay_gate_step
relay_gate_step(const struct relay_gate *g, int poll_rc, uint64_t lsn, int64_t until_ms,
    int64_t now_ms, bool stopping)
{
	if (poll_rc == OB_OK && lsn <= g->reached)
		return RELAY_GATE_STEP_SEND;
	if (poll_rc != OB_OK || now_ms >= until_ms || stopping)
		return RELAY_GATE_STEP_BACK;
	return RELAY_GATE_STEP_WAIT;
}

void
relay_gate_forget(struct relay_gate *g)
{
	g->reached = 0;
}
