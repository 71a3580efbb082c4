/*
 * main.c - outbox-check: the deterministic protocol checker's command
 * line (tests/check/check.h says what it does). It makes its own database
 * on the server it is given, migrates it (optionally replacing schema
 * files with modified ones: --functions), runs seeds, and on the first
 * violation shrinks the history and writes a psql script that replays
 * it. With --coverage it prints the statement and branch coverage of the
 * protocol's functions (plpgsql_check's profiler; the server must load
 * plpgsql_check in shared_preload_libraries).
 *
 * Exit: 0 no violation; 1 a violation (or coverage below --min-*, or two
 * runs of one seed that differ); 2 bad arguments or a failure of the
 * checker itself (no database, a statement that hangs).
 */
#include <dirent.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "inbox_drive.h"
#include "outbox/migrate.h"
#include "slot_drive.h"

#define DEFAULT_STEPS 250
#define DEFAULT_SHRINK_MS 120000
#define DBNAME_MAX 63

/* The protocol's functions whose coverage is measured (PL/pgSQL only:
 * plpgsql_check's profiler does not see SQL-language functions such as
 * outbox.retry_claimable, whose conditions the claims evaluate). */
static const char *const covered[] = {
	"outbox.claim", "outbox.record", "outbox.enqueue", "outbox.housekeep",
	"outbox.split_batch", "outbox.requeue_dead", NULL,
};
/* Printed, not counted: adopt_restore's branch for a concurrent commit
 * between its own id and its snapshot cannot happen between two steps. */
static const char *const also_shown[] = { "outbox.adopt_restore", NULL };

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: outbox-check --db CONNINFO [options]\n\n"
	    "Run the outbox protocol's SQL functions through seeded interleavings of producers,\n"
	    "relays and an operator, checking the invariants S1-S6 after every step; shrink the\n"
	    "first violation and write it as a psql script.\n\n"
	    "options:\n"
	    "  --db CONNINFO       a server where the checker may create its database [OUTBOX_CHECK_DB]\n"
	    "  --dbname NAME       the database it creates (dropped first) (default outbox_check)\n"
	    "  --seed S            the first seed (default 1)\n"
	    "  --seeds N           how many seeds, S .. S+N-1 (default 1)\n"
	    "  --steps M           generated steps per seed, before the fair drain (default %d)\n"
	    "  --functions DIR     after migrating, apply the .sql files of DIR (those its ORDER file\n"
	    "                      lists first, in that order, then the rest by name): point the checker\n"
	    "                      at modified schema files, e.g. a copy of sql/outbox/functions with one\n"
	    "                      function changed, or just the changed file\n"
	    "  --simulate FILE     the restore step's SQL (default: this source tree's\n"
	    "                      tests/data/sql/simulate_restore.sql, or $OUTBOX_TEST_DATA/sql/...)\n"
	    "  --repeat            run the first seed twice; a different history hash fails\n"
	    "  --coverage          profile and print the coverage of the protocol's functions\n"
	    "  --min-statements P  with --coverage: fail below P %% of statements (all together)\n"
	    "  --min-branches P    with --coverage: fail below P %% of branches (all together)\n"
	    "  --shrink-ms MS      time for shrinking a violation (default %d)\n"
	    "  --script PATH       where the replay script goes (default outbox-check-SEED.sql)\n"
	    "  --inbox N           instead: N seeds of the inbox's driver (tests/check/inbox_drive.c)\n"
	    "  --quiet             no line per seed\n"
	    "  --drive slots       drive the relay's pipeline slots (relay/slot.h) through a simulated\n"
	    "                      transport instead (tests/check/slot_drive.c)\n"
	    "  --help\n",
	    DEFAULT_STEPS, DEFAULT_SHRINK_MS);
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The text of the file at path (malloc'ed), or NULL. */
static char *
read_text(const char *path)
{
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return NULL;
	char *text = NULL;
	size_t cap = 0, len = 0, got;
	char buf[4096];
	while ((got = fread(buf, 1, sizeof(buf), f)) > 0) {
		if (len + got + 1 > cap) {
			cap = (len + got + 1) * 2;
			char *more = realloc(text, cap);
			if (more == NULL) {
				free(text);
				fclose(f);
				return NULL;
			}
			text = more;
		}
		memcpy(text + len, buf, got);
		len += got;
	}
	fclose(f);
	if (text == NULL)
		text = calloc(1, 1);
	else
		text[len] = '\0';
	return text;
}

static bool
apply_file(PGconn *conn, const char *path)
{
	char *text = read_text(path);
	if (text == NULL) {
		fprintf(stderr, "outbox-check: cannot read %s\n", path);
		return false;
	}
	PGresult *r = PQexec(conn, text);
	bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
	if (!ok)
		fprintf(stderr, "outbox-check: %s: %s", path, PQresultErrorMessage(r));
	else
		printf("outbox-check: applied %s\n", path);
	PQclear(r);
	free(text);
	return ok;
}

/* The .sql files of dir on conn: those its ORDER file lists first, in that
 * order (a copy of sql/outbox/functions keeps its own), then the others in
 * name order. */
static bool
apply_dir(PGconn *conn, const char *dir)
{
	DIR *d = opendir(dir);
	if (d == NULL) {
		fprintf(stderr, "outbox-check: cannot open --functions %s\n", dir);
		return false;
	}
	char *names[256];
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL && n < 256) {
		size_t len = strlen(e->d_name);
		if (len > 4 && strcmp(e->d_name + len - 4, ".sql") == 0)
			names[n++] = strdup(e->d_name);
	}
	closedir(d);
	qsort(names, (size_t)n, sizeof(names[0]), cmp_str);
	char path[1024];
	bool ok = true, done[256] = { false };
	snprintf(path, sizeof(path), "%s/ORDER", dir);
	char *order = read_text(path);
	for (char *line = order ? strtok(order, "\n") : NULL; line != NULL && ok;
	    line = strtok(NULL, "\n")) {
		for (int i = 0; i < n; i++)
			if (!done[i] && strcmp(names[i], line) == 0) {
				snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
				ok = apply_file(conn, path);
				done[i] = true;
			}
	}
	free(order);
	for (int i = 0; i < n; i++) {
		if (ok && !done[i]) {
			snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
			ok = apply_file(conn, path);
		}
		free(names[i]);
	}
	return ok;
}

/* A fresh database name on the server of server_ci, migrated, with the
 * business table the producers write; its conninfo into db->conninfo. */
static bool
setup(struct chk_db *db, const char *server_ci, const char *dbname, const char *functions,
    bool coverage)
{
	PGconn *srv = PQconnectdb(server_ci);
	if (PQstatus(srv) != CONNECTION_OK) {
		fprintf(stderr, "outbox-check: connect %s: %s", server_ci, PQerrorMessage(srv));
		PQfinish(srv);
		return false;
	}
	char sql[256];
	snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s WITH (FORCE)", dbname);
	PQclear(PQexec(srv, sql));
	snprintf(sql, sizeof(sql), "CREATE DATABASE %s", dbname);
	PGresult *r = PQexec(srv, sql);
	bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
	if (!ok)
		fprintf(stderr, "outbox-check: %s: %s", sql, PQresultErrorMessage(r));
	PQclear(r);
	PQfinish(srv);
	if (!ok)
		return false;
	snprintf(db->conninfo, sizeof(db->conninfo), "%s dbname=%s", server_ci, dbname);
	db->mon = PQconnectdb(db->conninfo);
	if (PQstatus(db->mon) != CONNECTION_OK) {
		fprintf(stderr, "outbox-check: connect %s: %s", db->conninfo, PQerrorMessage(db->mon));
		return false;
	}
	char err[1024];
	struct ob_migrate_report rep;
	if (ob_migrate(db->mon, &(struct ob_migrate_opts){ .set = "all" }, &rep, err, sizeof(err)) != 0) {
		fprintf(stderr, "outbox-check: migrate: %s\n", err);
		return false;
	}
	char big[1024];
	/* login roles for producers and relays, with the programs' grants
	 * (roles belong to the server: named after the database) */
	for (int k = 0; k < 2; k++) {
		const char *group = k == 0 ? "outbox_producer" : "outbox_relay";
		snprintf(db->user[k], sizeof(db->user[k]), "%s_%s", dbname, k == 0 ? "producer" : "relay");
		snprintf(big, sizeof(big), "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles"
		    " WHERE rolname = '%s') THEN CREATE ROLE %s LOGIN; END IF; END $$;"
		    " GRANT %s TO %s; GRANT SET ON PARAMETER deadlock_timeout TO %s", db->user[k],
		    db->user[k], group, db->user[k], db->user[k]);
		r = PQexec(db->mon, big);
		ok = PQresultStatus(r) == PGRES_COMMAND_OK;
		if (!ok)
			fprintf(stderr, "outbox-check: roles: %s", PQresultErrorMessage(r));
		PQclear(r);
		if (!ok)
			return false;
	}
	snprintf(big, sizeof(big), "CREATE TABLE public.check_business (id bigserial PRIMARY KEY,"
	    " note text); GRANT USAGE ON SCHEMA public TO %s;"
	    " GRANT INSERT ON public.check_business TO %s;"
	    " GRANT USAGE ON SEQUENCE public.check_business_id_seq TO %s;"
	    " SET application_name = 'check-monitor'", db->user[0], db->user[0], db->user[0]);
	r = PQexec(db->mon, big);
	ok = PQresultStatus(r) == PGRES_COMMAND_OK;
	if (!ok)
		fprintf(stderr, "outbox-check: business table: %s", PQresultErrorMessage(r));
	PQclear(r);
	if (ok && coverage) {
		r = PQexec(db->mon, "CREATE EXTENSION plpgsql_check");
		ok = PQresultStatus(r) == PGRES_COMMAND_OK;
		if (!ok)
			fprintf(stderr, "outbox-check: --coverage: %s", PQresultErrorMessage(r));
		PQclear(r);
		db->profile = ok;
	}
	if (ok && functions != NULL)
		ok = apply_dir(db->mon, functions);
	return ok;
}

/* One function's coverage line; its statement counts and branch ratio. */
static bool
coverage_row(struct chk_db *db, const char *fn, int64_t *n, int64_t *h, double *br)
{
	char sql[512];
	snprintf(sql, sizeof(sql), "SELECT count(*), count(*) FILTER (WHERE exec_stmts > 0),"
	    " plpgsql_coverage_statements('%s'), plpgsql_coverage_branches('%s')"
	    " FROM plpgsql_profiler_function_statements_tb('%s')", fn, fn, fn);
	PGresult *r = PQexec(db->mon, sql);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		printf("  %-22s error: %s", fn, PQresultErrorMessage(r));
		PQclear(r);
		return false;
	}
	*n = atoll(PQgetvalue(r, 0, 0));
	*h = atoll(PQgetvalue(r, 0, 1));
	*br = atof(PQgetvalue(r, 0, 3)) * 100;
	printf("  %-22s statements %5.1f %% (%" PRId64 "/%" PRId64 ")  branches %5.1f %%\n", fn,
	    atof(PQgetvalue(r, 0, 2)) * 100, *h, *n, *br);
	PQclear(r);
	return true;
}

/* Coverage of the protocol's functions; false when below a minimum. */
static bool
report_coverage(struct chk_db *db, double min_stmts, double min_branches)
{
	int64_t all = 0, hit = 0, n, h;
	double bsum = 0, br;
	printf("outbox-check: coverage (plpgsql_check profiler, all seeds):\n");
	for (int i = 0; covered[i] != NULL; i++) {
		if (!coverage_row(db, covered[i], &n, &h, &br))
			return false;
		all += n;
		hit += h;
		bsum += br * (double)n;
	}
	double st = all > 0 ? 100.0 * (double)hit / (double)all : 0;
	double ball = all > 0 ? bsum / (double)all : 0;
	printf("  %-22s statements %5.1f %% (%" PRId64 "/%" PRId64 ")  branches %5.1f %%"
	    " (each function's, weighted by its statements)\n", "together", st, hit, all, ball);
	for (int i = 0; also_shown[i] != NULL; i++)
		coverage_row(db, also_shown[i], &n, &h, &br);
	bool ok = st >= min_stmts && ball >= min_branches;
	if (!ok)
		printf("outbox-check: coverage below the minimum (statements %.1f %%, branches %.1f %%)\n",
		    min_stmts, min_branches);
	return ok;
}

int
main(int argc, char **argv)
{
	const char *server = getenv("OUTBOX_CHECK_DB"), *functions = NULL, *script = NULL;
	const char *dbname = "outbox_check", *drive = NULL;
	char simulate[1024] = "";
	uint64_t seed = 1;
	int seeds = 1, steps = DEFAULT_STEPS, inbox = 0;
	int64_t shrink_ms = DEFAULT_SHRINK_MS;
	bool coverage = false, repeat = false, quiet = false;
	double min_stmts = 0, min_branches = 0;
	const char *data = getenv("OUTBOX_TEST_DATA");
	if (data != NULL)
		snprintf(simulate, sizeof(simulate), "%s/sql/simulate_restore.sql", data);
	else
		snprintf(simulate, sizeof(simulate), "%s", OUTBOX_CHECK_SIMULATE);
	static const struct option opts[] = {
		{ "db", required_argument, 0, 'd' }, { "dbname", required_argument, 0, 'n' },
		{ "seed", required_argument, 0, 's' }, { "seeds", required_argument, 0, 'N' },
		{ "steps", required_argument, 0, 'm' }, { "functions", required_argument, 0, 'f' },
		{ "simulate", required_argument, 0, 'S' }, { "repeat", no_argument, 0, 'r' },
		{ "coverage", no_argument, 0, 'c' }, { "min-statements", required_argument, 0, 'a' },
		{ "min-branches", required_argument, 0, 'b' },
		{ "shrink-ms", required_argument, 0, 'k' }, { "script", required_argument, 0, 'o' },
		{ "quiet", no_argument, 0, 'q' }, { "help", no_argument, 0, 'h' },
		{ "drive", required_argument, 0, 'D' }, { "inbox", required_argument, 0, 'I' },
		{ 0, 0, 0, 0 },
	};
	int o;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		char *end = NULL;
		switch (o) {
		case 'd': server = optarg; break;
		case 'n': dbname = optarg; break;
		case 's': seed = strtoull(optarg, &end, 10); break;
		case 'N': seeds = (int)strtol(optarg, &end, 10); break;
		case 'm': steps = (int)strtol(optarg, &end, 10); break;
		case 'f': functions = optarg; break;
		case 'S': snprintf(simulate, sizeof(simulate), "%s", optarg); break;
		case 'r': repeat = true; break;
		case 'c': coverage = true; break;
		case 'a': min_stmts = strtod(optarg, &end); break;
		case 'b': min_branches = strtod(optarg, &end); break;
		case 'k': shrink_ms = strtoll(optarg, &end, 10); break;
		case 'o': script = optarg; break;
		case 'q': quiet = true; break;
		case 'D': drive = optarg; break;
		case 'I': inbox = (int)strtol(optarg, &end, 10); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
		if (end != NULL && (*end != '\0' || end == optarg)) {
			fprintf(stderr, "outbox-check: bad number '%s'\n", optarg);
			return 2;
		}
	}
	if (optind < argc || server == NULL || seeds < 1 || steps < 0 || seed == 0 ||
	    simulate[0] == '\0' || strlen(dbname) > DBNAME_MAX ||
	    (drive != NULL && strcmp(drive, "slots") != 0)) {
		fprintf(stderr, "outbox-check: %s\n", server == NULL ? "--db is required"
		    : simulate[0] == '\0' ? "--simulate (or OUTBOX_TEST_DATA) is required"
		    : "bad arguments (see --help)");
		return 2;
	}
	static struct chk_db db;
	snprintf(db.simulate_sql_path, sizeof(db.simulate_sql_path), "%s", simulate);
	if (getenv("OUTBOX_CHECK_TRACE") != NULL &&
	    (db.trace = fopen(getenv("OUTBOX_CHECK_TRACE"), "w")) == NULL) {
		fprintf(stderr, "outbox-check: cannot write OUTBOX_CHECK_TRACE\n");
		return 2;
	}
	if (!setup(&db, server, dbname, functions, coverage))
		return 2;
	if (inbox > 0) {
		int rc = chk_inbox_run(&db, seed, inbox, steps, quiet);
		PQfinish(db.mon);
		return rc;
	}
	if (drive != NULL) {
		int rc = chk_slot_drive(&db, seed, seeds, steps, quiet);
		PQfinish(db.mon);
		return rc;
	}

	int code = 0;
	int64_t t0 = chk_now_ms();
	struct chk_result total = { 0 }, res;
	uint64_t first_hash = 0;
	for (int i = 0; i < seeds && code == 0; i++) {
		struct chk_config cfg;
		struct chk_history ran = { 0 };
		chk_config_draw(&cfg, seed + (uint64_t)i, steps);
		if (!chk_run_seed(&db, &cfg, NULL, &ran, &res)) {
			fprintf(stderr, "outbox-check: seed %llu: the checker failed: %s\n",
			    (unsigned long long)cfg.seed, res.why);
			chk_history_free(&ran);
			code = 2;
			break;
		}
		if (i == 0)
			first_hash = res.hash;
		if (!quiet || res.violated)
			printf("outbox-check: seed %llu (producers %d, relays %d, keys %d, %s dead heads,"
			    " poison %d %%, reject %d %%, retry %d %%): %zu steps, %d messages, %d applied,"
			    " %d dead (%d poison, %d by age), %d takeovers, %d outages past --max-age,"
			    " hash %016llx%s\n",
			    (unsigned long long)cfg.seed, cfg.producers, cfg.relays, cfg.okeys,
			    cfg.skip_dead ? "skip" : "block", cfg.poison_pct, cfg.reject_pct, cfg.retry_pct,
			    ran.n, res.msgs, res.applied, res.dead, res.poison_dead, res.age_dead,
			    res.takeovers, res.outages_past_age, (unsigned long long)res.hash,
			    res.violated ? " VIOLATION" : "");
		total.msgs += res.msgs;
		total.applied += res.applied;
		total.dead += res.dead;
		total.poison_dead += res.poison_dead;
		total.takeovers += res.takeovers;
		total.age_dead += res.age_dead;
		total.outages_past_age += res.outages_past_age;
		if (res.violated) {
			printf("outbox-check: seed %llu: %s violated at step %zu of %zu: %s\n",
			    (unsigned long long)cfg.seed, res.invariant, res.at_step, ran.n, res.why);
			struct chk_history small;
			struct chk_result last;
			chk_shrink(&db, &cfg, &ran, &res, shrink_ms, &small, &last);
			printf("outbox-check: shrunk to %zu steps (%s: %s):\n", small.n, last.invariant,
			    last.why);
			chk_history_print(stdout, &small);
			printf("  (then the fair drain: every producer commits, relays claim, send and record"
			    " until nothing is left)\n");
			char path[1100];
			if (script != NULL)
				snprintf(path, sizeof(path), "%s", script);
			else
				snprintf(path, sizeof(path), "outbox-check-%llu.sql",
				    (unsigned long long)cfg.seed);
			struct chk_result again;
			if (chk_write_script(&db, &cfg, &small, path, &again))
				printf("outbox-check: replay it: psql -d '%s' -f %s\n", db.conninfo, path);
			chk_history_free(&small);
			code = 1;
		}
		chk_history_free(&ran);
	}
	if (code == 0 && repeat) {
		struct chk_config cfg;
		chk_config_draw(&cfg, seed, steps);
		if (!chk_run_seed(&db, &cfg, NULL, NULL, &res)) {
			fprintf(stderr, "outbox-check: --repeat: the checker failed: %s\n", res.why);
			code = 2;
		} else if (res.hash != first_hash) {
			printf("outbox-check: seed %llu ran twice with different histories (%016llx,"
			    " %016llx): not deterministic\n", (unsigned long long)seed,
			    (unsigned long long)first_hash, (unsigned long long)res.hash);
			code = 1;
		} else {
			printf("outbox-check: seed %llu ran twice, the same history (hash %016llx)\n",
			    (unsigned long long)seed, (unsigned long long)res.hash);
		}
	}
	if (code == 0)
		printf("outbox-check: seeds %llu..%llu, %d steps each: no violation (%d messages, %d"
		    " applied, %d dead, %d poison dead, %d dead by age, %d takeovers, %d outages past"
		    " --max-age) in %.1f s\n",
		    (unsigned long long)seed, (unsigned long long)(seed + (uint64_t)seeds - 1), steps,
		    total.msgs, total.applied, total.dead, total.poison_dead, total.age_dead,
		    total.takeovers, total.outages_past_age,
		    (double)(chk_now_ms() - t0) / 1000.0);
	if (coverage && code != 2 && !report_coverage(&db, min_stmts, min_branches) && code == 0)
		code = 1;
	for (int i = 0; i < CHK_SESSIONS_MAX; i++)
		chk_sess_close(&db.s[i]);
	PQfinish(db.mon);
	return code;
}
