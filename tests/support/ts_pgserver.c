/*
 * ts_pgserver.c - a test's own PostgreSQL servers through scripts/pg-tmp.sh,
 * and PgBouncers through scripts/pgbouncer-tmp.sh (ts_pgserver.h). The
 * scripts do the work (initdb, start, pg_basebackup, stop); this file runs
 * them and reads the env files they write.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>
#include <libpq-fe.h>

#include "outbox/migrate.h"
#include "testsupport.h"
#include "ts_pgserver.h"

#define PGTMP_TIMEOUT_MS 120000

static void
script_path(const char *name, char *out, size_t outlen)
{
	const char *src = getenv("OUTBOX_SOURCE_DIR");
	ck_assert_msg(src != NULL, "OUTBOX_SOURCE_DIR not set");
	snprintf(out, outlen, "%s/scripts/%s", src, name);
}

/* scripts/name cmd a b c, with env (NULL-ended "K=V", may be NULL) added
 * to its environment. */
static void
run_script(const char *name, char *const env[], const char *cmd, const char *a, const char *b,
    const char *c)
{
	char script[600];
	static char out[8192];
	script_path(name, script, sizeof(script));
	char *argv[] = { "/bin/bash", script, (char *)cmd, (char *)a, (char *)b, (char *)c, NULL };
	ck_assert_msg(ts_run(argv, env, out, sizeof(out), PGTMP_TIMEOUT_MS) == 0,
	    "%s %s %s: %s", name, cmd, a, out);
}

static void
pg_tmp(char *const env[], const char *cmd, const char *a, const char *b, const char *c)
{
	run_script("pg-tmp.sh", env, cmd, a, b, c);
}

/* host and port from dir/env, as a conninfo of database db. */
static void
env_conninfo(const char *dir, const char *db, char *out, size_t outlen)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/env", dir);
	char *env = ts_read_file(path);
	ck_assert_msg(env != NULL, "no %s", path);
	const char *host = strstr(env, "PGHOST="), *port = strstr(env, "PGPORT=");
	ck_assert_msg(host != NULL && port != NULL, "%s: no PGHOST or PGPORT", path);
	int hl = (int)strcspn(host + 7, "\n"), pl = (int)strcspn(port + 7, "\n");
	snprintf(out, outlen, "host=%.*s port=%.*s user=postgres dbname=%s", hl, host + 7, pl,
	    port + 7, db);
	free(env);
}

void
ts_pgserver_start(const char *dir, char *out, size_t outlen)
{
	pg_tmp(NULL, "start", dir, NULL, NULL);
	env_conninfo(dir, "postgres", out, outlen);
}

void
ts_pgserver_start_at_xid(const char *dir, uint64_t next_xid, char *out, size_t outlen)
{
	char var[64];
	snprintf(var, sizeof(var), "OUTBOX_PG_NEXT_XID=%" PRIu64, next_xid);
	char *env[] = { var, NULL };
	pg_tmp(env, "start", dir, NULL, NULL);
	env_conninfo(dir, "postgres", out, outlen);
}

void
ts_pgserver_standby(const char *primary_dir, const char *dir, const char *name, char *out,
    size_t outlen)
{
	pg_tmp(NULL, "standby", primary_dir, dir, name);
	env_conninfo(dir, "postgres", out, outlen);
}

void
ts_pgserver_crash(const char *dir)
{
	pg_tmp(NULL, "crash", dir, NULL, NULL);
}

void
ts_pgserver_kill(const char *dir)
{
	pg_tmp(NULL, "kill", dir, NULL, NULL);
}

void
ts_pgserver_resume(const char *dir)
{
	pg_tmp(NULL, "resume", dir, NULL, NULL);
}

/* scripts/name stop dir, if dir holds what it started; no assertion. */
static void
stop_quiet(const char *name, const char *dir)
{
	char env[600], script[600], cmd[1400];
	snprintf(env, sizeof(env), "%s/env", dir);
	if (access(env, F_OK) != 0)
		return;
	const char *src = getenv("OUTBOX_SOURCE_DIR");
	if (src == NULL)
		return;
	snprintf(script, sizeof(script), "%s/scripts/%s", src, name);
	snprintf(cmd, sizeof(cmd), "/bin/bash '%s' stop '%s' >/dev/null 2>&1", script, dir);
	if (system(cmd) != 0)
		fprintf(stderr, "ts_pgserver: %s could not stop what runs in %s\n", name, dir);
}

void
ts_pgserver_stop_quiet(const char *dir)
{
	stop_quiet("pg-tmp.sh", dir);
}

void
ts_pgbouncer_start(const char *dir, const char *mode)
{
	const char *env = getenv("OUTBOX_TEST_PGENV");
	ck_assert_msg(env != NULL, "OUTBOX_TEST_PGENV is not set (run the test through ctest)");
	char pg_dir[600];
	snprintf(pg_dir, sizeof(pg_dir), "%s", env);
	char *slash = strrchr(pg_dir, '/');
	ck_assert(slash != NULL);
	*slash = '\0';
	run_script("pgbouncer-tmp.sh", NULL, "start", dir, pg_dir, mode);
}

void
ts_pgbouncer_conninfo(const char *dir, const char *conninfo, char *out, size_t outlen)
{
	char *errmsg = NULL;
	PQconninfoOption *opts = PQconninfoParse(conninfo, &errmsg);
	ck_assert_msg(opts != NULL, "conninfo: %s", errmsg ? errmsg : "out of memory");
	const char *db = "postgres";
	for (PQconninfoOption *o = opts; o->keyword != NULL; o++)
		if (strcmp(o->keyword, "dbname") == 0 && o->val != NULL)
			db = o->val;
	char quoted[300];
	snprintf(quoted, sizeof(quoted), "'%s'", db);
	env_conninfo(dir, quoted, out, outlen);
	PQconninfoFree(opts);
}

void
ts_pgbouncer_stop_quiet(const char *dir)
{
	stop_quiet("pgbouncer-tmp.sh", dir);
}

void
ts_pgserver_db_create(const char *conninfo, const char *name, const char *set, char *out,
    size_t outlen)
{
	char sql[200];
	PGconn *admin = ts_connect(conninfo);
	snprintf(sql, sizeof(sql), "CREATE DATABASE \"%s\"", name);
	ts_exec(admin, sql);
	PQfinish(admin);
	snprintf(out, outlen, "%s dbname='%s'", conninfo, name);
	if (set != NULL) {
		PGconn *c = ts_connect(out);
		ts_migrate(c, set);
		PQfinish(c);
	}
}
