/*
 * ts_pgserver.c - a test's own PostgreSQL servers through scripts/pg-tmp.sh
 * (ts_pgserver.h). The script does the work (initdb, start, pg_basebackup,
 * stop); this file runs it and reads the env file it writes.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "outbox/migrate.h"
#include "testsupport.h"
#include "ts_pgserver.h"

#define PGTMP_TIMEOUT_MS 120000

static void
script_path(char *out, size_t outlen)
{
	const char *src = getenv("OUTBOX_SOURCE_DIR");
	ck_assert_msg(src != NULL, "OUTBOX_SOURCE_DIR not set");
	snprintf(out, outlen, "%s/scripts/pg-tmp.sh", src);
}

/* pg-tmp.sh cmd a b c, with env (NULL-ended "K=V", may be NULL) added to
 * its environment. */
static void
pg_tmp(char *const env[], const char *cmd, const char *a, const char *b, const char *c)
{
	char script[600];
	static char out[8192];
	script_path(script, sizeof(script));
	char *argv[] = { "/bin/bash", script, (char *)cmd, (char *)a, (char *)b, (char *)c, NULL };
	ck_assert_msg(ts_run(argv, env, out, sizeof(out), PGTMP_TIMEOUT_MS) == 0,
	    "pg-tmp.sh %s %s: %s", cmd, a, out);
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
ts_pgserver_stop_quiet(const char *dir)
{
	char env[600], script[600], cmd[1400];
	snprintf(env, sizeof(env), "%s/env", dir);
	if (access(env, F_OK) != 0)
		return;
	const char *src = getenv("OUTBOX_SOURCE_DIR");
	if (src == NULL)
		return;
	snprintf(script, sizeof(script), "%s/scripts/pg-tmp.sh", src);
	snprintf(cmd, sizeof(cmd), "/bin/bash '%s' stop '%s' >/dev/null 2>&1", script, dir);
	if (system(cmd) != 0)
		fprintf(stderr, "ts_pgserver: could not stop the server in %s\n", dir);
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
