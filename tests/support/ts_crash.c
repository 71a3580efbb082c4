/*
 * ts_crash.c - the crash harness (ts_crash.h): a server of ts_pgserver's
 * set up so that only synchronous commits survive an immediate stop, the
 * stop itself (pg-tmp.sh crash), and the marker that tells whether a crash
 * lost what it should have.
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "testsupport.h"
#include "ts_crash.h"
#include "ts_pgserver.h"

/* The server's own settings, on top of pg-tmp.sh's (ALTER SYSTEM, then a
 * restart). synchronous_commit: the default of every session; the rest
 * keep the WAL in memory until the test's crash: the WAL writer's round
 * at its longest, no autovacuum (a worker's commit flushes the WAL), no
 * background writer rounds (writing a dirty page flushes the WAL up to
 * it), no timed checkpoint. */
static const char *const settings[] = {
	"ALTER SYSTEM SET synchronous_commit = off",
	"ALTER SYSTEM SET wal_writer_delay = '10s'",
	"ALTER SYSTEM SET autovacuum = off",
	"ALTER SYSTEM SET bgwriter_lru_maxpages = 0",
	"ALTER SYSTEM SET checkpoint_timeout = '1h'",
	NULL,
};

void
ts_crash_init(struct ts_crash *h)
{
	memset(h, 0, sizeof(*h));
	snprintf(h->base, sizeof(h->base), "/tmp/obcrash.XXXXXX");
	if (mkdtemp(h->base) == NULL) { /* outside a test: no ck_assert */
		perror("crash harness: mkdtemp");
		exit(EXIT_FAILURE);
	}
	snprintf(h->dir, sizeof(h->dir), "%s/pg", h->base);
	snprintf(h->pids, sizeof(h->pids), "%s/pids", h->base);
}

static void
show_is(PGconn *c, const char *name, const char *want)
{
	char sql[128];
	snprintf(sql, sizeof(sql), "SHOW %s", name);
	PGresult *r = PQexec(c, sql);
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	ck_assert_msg(strcmp(PQgetvalue(r, 0, 0), want) == 0, "crash harness: %s is %s, not %s",
	    name, PQgetvalue(r, 0, 0), want);
	PQclear(r);
}

void
ts_crash_start(struct ts_crash *h)
{
	ts_pgserver_start(h->dir, h->conninfo, sizeof(h->conninfo));
	PGconn *c = ts_connect(h->conninfo);
	for (int i = 0; settings[i] != NULL; i++)
		ts_exec(c, settings[i]); /* one at a time: not in a transaction block */
	PQfinish(c);
	ts_pgserver_crash(h->dir); /* nothing to lose yet: a restart with them */
	c = ts_connect(h->conninfo);
	show_is(c, "synchronous_commit", "off");
	show_is(c, "wal_writer_delay", "10s");
	show_is(c, "autovacuum", "off");
	ts_exec(c, "SET synchronous_commit = on;"
	    " CREATE TABLE ts_crash_marker (n int PRIMARY KEY)");
	PQfinish(c);
	h->marker = NULL;
	h->markers = 0;
}

void
ts_crash_db(struct ts_crash *h, const char *name, const char *set, char *out, size_t outlen)
{
	ts_pgserver_db_create(h->conninfo, name, set, out, outlen);
}

pid_t
ts_crash_track(struct ts_crash *h, pid_t pid)
{
	FILE *f = fopen(h->pids, "a");
	ck_assert_msg(f != NULL, "crash harness: cannot write %s", h->pids);
	fprintf(f, "%d\n", (int)pid);
	fclose(f);
	return pid;
}

void
ts_crash_arm(struct ts_crash *h)
{
	if (h->marker == NULL)
		h->marker = ts_connect(h->conninfo);
	/* the switch record is flushed, and with it everything before */
	PGresult *r = PQexec(h->marker, "SELECT pg_switch_wal()");
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "pg_switch_wal: %s",
	    PQerrorMessage(h->marker));
	PQclear(r);
}

bool
ts_crash_now(struct ts_crash *h)
{
	char sql[128];
	if (h->marker == NULL)
		h->marker = ts_connect(h->conninfo);
	int n = ++h->markers;
	snprintf(sql, sizeof(sql), "SET synchronous_commit = off;"
	    " INSERT INTO ts_crash_marker VALUES (%d)", n);
	ts_exec(h->marker, sql);
	ts_pgserver_crash(h->dir);
	PQfinish(h->marker);
	h->marker = NULL;
	PGconn *c = ts_connect(h->conninfo);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM ts_crash_marker WHERE n = %d", n);
	bool lost = ts_query_int(c, sql) == 0;
	PQfinish(c);
	return lost;
}

/* Whether the NUL-separated command line of pid mentions needle. */
static bool
cmdline_has(long pid, const char *needle)
{
	char path[64], buf[8192];
	snprintf(path, sizeof(path), "/proc/%ld/cmdline", pid);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	return memmem(buf, n, needle, strlen(needle)) != NULL;
}

void
ts_crash_teardown(struct ts_crash *h)
{
	char *pids = ts_read_file(h->pids);
	for (char *p = pids, *end; p != NULL && *p != '\0'; p = end) {
		long pid = strtol(p, &end, 10);
		if (end == p)
			break;
		/* a pid the test's program no longer has is another's: left be */
		if (pid > 1 && cmdline_has(pid, h->base))
			kill((pid_t)pid, SIGKILL);
	}
	free(pids);
	unlink(h->pids);
	/* every server started under base: the harness's, and any other the
	 * test made there (ts_pgserver_start(base/NAME)) */
	DIR *d = opendir(h->base);
	struct dirent *e;
	while (d != NULL && (e = readdir(d)) != NULL) {
		char dir[400];
		if (e->d_name[0] == '.')
			continue;
		snprintf(dir, sizeof(dir), "%s/%s", h->base, e->d_name);
		ts_pgserver_stop_quiet(dir);
	}
	if (d != NULL)
		closedir(d);
}

void
ts_crash_fini(struct ts_crash *h)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", h->base);
	if (system(cmd) != 0)
		fprintf(stderr, "crash harness: could not remove %s\n", h->base);
}
