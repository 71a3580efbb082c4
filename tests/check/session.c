/*
 * session.c - the checker's database sessions, driven non-blocking from
 * one thread: a statement is sent and run until it has finished or waits
 * for a lock that another of our sessions holds (pg_blocking_pids, asked
 * on the monitor connection); a waiting session is disabled until a
 * commit, a rollback or a kill lets it go on. Whatever finishes meanwhile
 * keeps its result in its session until the model takes it, so the model
 * sees every outcome in a fixed order whatever the timing.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"

/* How long a running statement may stay silent before the monitor asks
 * whether it waits for a lock. */
#define SETTLE_QUIET_MS 5

int64_t
chk_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool
exec_ok(PGconn *c, const char *sql, char *why, size_t len)
{
	PGresult *r = PQexec(c, sql);
	ExecStatusType st = PQresultStatus(r);
	bool ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
	if (!ok)
		snprintf(why, len, "%s: %s", sql, PQresultErrorMessage(r));
	PQclear(r);
	return ok;
}

int64_t
chk_mon_int(struct chk_db *db, const char *sql, char *why, size_t len)
{
	PGresult *r = PQexec(db->mon, sql);
	int64_t v = -1;
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		snprintf(why, len, "monitor: %s: %s", sql, PQresultErrorMessage(r));
	} else {
		v = PQntuples(r) > 0 && !PQgetisnull(r, 0, 0) ? atoll(PQgetvalue(r, 0, 0)) : 0;
	}
	PQclear(r);
	return v;
}

void
chk_sess_close(struct chk_sess *s)
{
	if (s->res != NULL)
		PQclear(s->res);
	if (s->conn != NULL)
		PQfinish(s->conn);
	memset(s, 0, sizeof(*s));
}

bool
chk_sess_open(struct chk_db *db, int i, const char *name, const char *user, char *why,
    size_t len)
{
	struct chk_sess *s = &db->s[i];
	chk_sess_close(s);
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->user, sizeof(s->user), "%s", user != NULL ? user : "");
	char ci[1200];
	snprintf(ci, sizeof(ci), "%s%s%s", db->conninfo, s->user[0] ? " user=" : "", s->user);
	s->conn = PQconnectdb(ci);
	if (PQstatus(s->conn) != CONNECTION_OK) {
		snprintf(why, len, "connect %s: %s", name, PQerrorMessage(s->conn));
		return false;
	}
	char sql[256];
	/* a deadlock between producers is broken at once (the first waiter
	 * gives up), not after a second; the test database needs no fsync */
	snprintf(sql, sizeof(sql), "SET application_name = 'check-%s'; SET deadlock_timeout = '20ms';"
	    " SET synchronous_commit = off", name);
	if (!exec_ok(s->conn, sql, why, len))
		return false;
	if (db->profile && !exec_ok(s->conn, "SET plpgsql_check.profiler = on", why, len))
		return false;
	s->pid = PQbackendPID(s->conn);
	if (PQsetnonblocking(s->conn, 1) != 0) {
		snprintf(why, len, "nonblocking %s: %s", name, PQerrorMessage(s->conn));
		return false;
	}
	return true;
}

/* Take the finished statement's results of s: its first error, or else
 * its last result (a statement gives one). */
static void
collect(struct chk_sess *s)
{
	PGresult *r;
	if (s->res != NULL) {
		PQclear(s->res);
		s->res = NULL;
	}
	s->failed = false;
	s->sqlstate[0] = s->errmsg[0] = '\0';
	while ((r = PQgetResult(s->conn)) != NULL) {
		ExecStatusType st = PQresultStatus(r);
		bool error = st == PGRES_FATAL_ERROR || st == PGRES_NONFATAL_ERROR;
		if (s->failed) {
			PQclear(r);
			continue;
		}
		if (error) {
			const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
			snprintf(s->sqlstate, sizeof(s->sqlstate), "%s", state ? state : "");
			snprintf(s->errmsg, sizeof(s->errmsg), "%s", PQresultErrorMessage(r));
			s->errmsg[strcspn(s->errmsg, "\n")] = '\0';
			s->failed = true;
		}
		if (s->res != NULL)
			PQclear(s->res);
		s->res = r;
	}
	if (s->res == NULL && PQstatus(s->conn) == CONNECTION_BAD) {
		s->failed = true;
		snprintf(s->sqlstate, sizeof(s->sqlstate), "08006");
		snprintf(s->errmsg, sizeof(s->errmsg), "connection lost");
	}
	s->pending = s->blocked = false;
}

/* The pids that pid waits for, from "{1,2}". */
static int
parse_pids(const char *txt, int *out, int max)
{
	int n = 0;
	for (const char *p = txt; *p != '\0' && n < max; p++)
		if (*p >= '0' && *p <= '9') {
			out[n++] = (int)strtol(p, (char **)&p, 10);
			p--;
		}
	return n;
}

/* Which pending sessions wait for a lock one of ours holds, and whether
 * such waits form a cycle (a deadlock the server is about to break). */
static bool
mark_blocked(struct chk_db *db, bool *cycle, char *why, size_t len)
{
	char sql[1024], list[512] = "";
	int wait_for[CHK_SESSIONS_MAX][CHK_SESSIONS_MAX] = { { 0 } };
	size_t used = 0;
	for (int i = 0; i < db->n; i++)
		if (db->s[i].pending)
			used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%d", used ? "," : "",
			    db->s[i].pid);
	snprintf(sql, sizeof(sql), "SELECT p, pg_blocking_pids(p) FROM unnest('{%s}'::int[]) p", list);
	PGresult *r = PQexec(db->mon, sql);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		snprintf(why, len, "monitor: %s", PQresultErrorMessage(r));
		PQclear(r);
		return false;
	}
	for (int row = 0; row < PQntuples(r); row++) {
		int pid = atoi(PQgetvalue(r, row, 0)), holders[64];
		int nh = parse_pids(PQgetvalue(r, row, 1), holders, 64);
		for (int i = 0; i < db->n; i++) {
			if (db->s[i].pid != pid || !db->s[i].pending)
				continue;
			db->s[i].blocked = false;
			memset(db->s[i].waits_for, 0, sizeof(db->s[i].waits_for));
			for (int h = 0; h < nh; h++)
				for (int j = 0; j < db->n; j++)
					if (j != i && db->s[j].pid == holders[h] && db->s[j].conn != NULL) {
						db->s[i].blocked = true;
						db->s[i].waits_for[j] = true;
						wait_for[i][j] = 1;
					}
		}
	}
	PQclear(r);
	/* a cycle: transitive closure over at most CHK_SESSIONS_MAX nodes */
	for (int k = 0; k < db->n; k++)
		for (int i = 0; i < db->n; i++)
			for (int j = 0; j < db->n; j++)
				if (wait_for[i][k] && wait_for[k][j])
					wait_for[i][j] = 1;
	*cycle = false;
	for (int i = 0; i < db->n; i++)
		*cycle |= wait_for[i][i] != 0;
	return true;
}

bool
chk_sess_settle(struct chk_db *db, char *why, size_t len)
{
	int64_t deadline = chk_now_ms() + 60000;
	for (;;) {
		int pending = 0, running = 0, unknown = 0;
		struct pollfd fds[CHK_SESSIONS_MAX];
		for (int i = 0; i < db->n; i++) {
			struct chk_sess *s = &db->s[i];
			if (!s->pending)
				continue;
			if (!PQconsumeInput(s->conn) || !PQisBusy(s->conn)) {
				collect(s);
				continue;
			}
			fds[pending].fd = PQsocket(s->conn);
			fds[pending].events = POLLIN;
			pending++;
			unknown += !s->blocked;
		}
		if (pending == 0)
			return true;
		/* most statements finish within a few milliseconds: only one that
		 * sends nothing for a while is asked about locks (one known to wait
		 * is asked at once: the monitor says whether it still does) */
		if (poll(fds, (nfds_t)pending, unknown > 0 ? SETTLE_QUIET_MS : 0) > 0)
			continue;
		bool cycle;
		if (!mark_blocked(db, &cycle, why, len))
			return false;
		for (int i = 0; i < db->n; i++)
			running += db->s[i].pending && !db->s[i].blocked;
		if (running == 0 && !cycle)
			return true;
		if (chk_now_ms() > deadline) {
			snprintf(why, len, "a statement neither finished nor waited for a lock in 60 s");
			return false;
		}
	}
}

bool
chk_sess_finish(struct chk_db *db, int i, char *why, size_t len)
{
	int64_t deadline = chk_now_ms() + 60000;
	while (db->s[i].pending) {
		if (!chk_sess_settle(db, why, len))
			return false;
		if (!db->s[i].pending)
			break;
		if (chk_now_ms() > deadline) {
			snprintf(why, len, "%s: a statement with a lock timeout ran 60 s", db->s[i].name);
			return false;
		}
		poll(&(struct pollfd){ .fd = PQsocket(db->s[i].conn), .events = POLLIN }, 1, 2);
	}
	return true;
}

/* Whether session i's wait (just begun) shares a holder with another
 * waiter, or closes a cycle of waits. */
static bool
racy_wait(struct chk_db *db, int i)
{
	for (int j = 0; j < db->n; j++) {
		if (!db->s[i].waits_for[j])
			continue;
		for (int k = 0; k < db->n; k++)
			if (k != i && db->s[k].pending && db->s[k].blocked && db->s[k].waits_for[j])
				return true;
	}
	/* a cycle back to i, through the sessions it waits for */
	bool seen[CHK_SESSIONS_MAX] = { false }, grew = true;
	for (int j = 0; j < db->n; j++)
		seen[j] = db->s[i].waits_for[j];
	while (grew) {
		grew = false;
		for (int j = 0; j < db->n; j++)
			if (seen[j] && db->s[j].pending && db->s[j].blocked)
				for (int k = 0; k < db->n; k++)
					if (db->s[j].waits_for[k] && !seen[k])
						seen[k] = grew = true;
	}
	return seen[i];
}

bool
chk_sess_run(struct chk_db *db, int i, const char *sql, char *why, size_t len)
{
	struct chk_sess *s = &db->s[i];
	if (s->res != NULL) {
		PQclear(s->res);
		s->res = NULL;
	}
	snprintf(s->sql, sizeof(s->sql), "%s", sql);
	if (!PQsendQuery(s->conn, sql)) {
		/* a connection the server closed (a kill): the statement fails */
		s->failed = true;
		snprintf(s->sqlstate, sizeof(s->sqlstate), "08006");
		snprintf(s->errmsg, sizeof(s->errmsg), "%s", PQerrorMessage(s->conn));
		s->pending = false;
		return true;
	}
	while (PQflush(s->conn) == 1)
		;
	s->pending = true;
	s->blocked = false;
	s->gave_up = false;
	if (!chk_sess_settle(db, why, len))
		return false;
	if (s->pending && s->blocked && !s->bounded && racy_wait(db, i)) {
		char err[256];
		PGcancel *c = PQgetCancel(s->conn);
		if (c == NULL || !PQcancel(c, err, sizeof(err))) {
			snprintf(why, len, "%s: cancel: %s", s->name, c == NULL ? "no handle" : err);
			PQfreeCancel(c);
			return false;
		}
		PQfreeCancel(c);
		s->gave_up = true;
		return chk_sess_finish(db, i, why, len);
	}
	return true;
}

PGresult *
chk_sess_take(struct chk_db *db, int i)
{
	PGresult *r = db->s[i].res;
	db->s[i].res = NULL;
	return r;
}

bool
chk_sess_kill(struct chk_db *db, int i, char *why, size_t len)
{
	char sql[128];
	snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(%d, 10000)::int", db->s[i].pid);
	if (chk_mon_int(db, sql, why, len) < 0)
		return false;
	/* a statement it was running ends in an error: taken and dropped */
	if (db->s[i].pending) {
		int64_t deadline = chk_now_ms() + 10000;
		while (PQconsumeInput(db->s[i].conn) && PQisBusy(db->s[i].conn) &&
		    chk_now_ms() < deadline)
			poll(&(struct pollfd){ .fd = PQsocket(db->s[i].conn), .events = POLLIN }, 1, 5);
		collect(&db->s[i]);
	}
	char name[16], user[64];
	snprintf(name, sizeof(name), "%s", db->s[i].name);
	snprintf(user, sizeof(user), "%s", db->s[i].user);
	if (!chk_sess_open(db, i, name, user, why, len))
		return false;
	/* what its death released (its locks) lets others go on */
	return chk_sess_settle(db, why, len);
}
