/*
 * main.c - outbox-fault-matrix: run every (mode, fault) cell for real and
 * print the table of effect rows per message.
 *
 * Starts its own throwaway PostgreSQL (scripts/pg-tmp.sh) unless --server
 * names one, checks which fault flags the programs in --bin-dir have (a
 * column whose flag is missing is reported as not run, never guessed), runs
 * the cells one after another (matrix.c), and prints the matrix, the
 * bookkeeping of each cell and a verdict. Exit 0 only when the full row is
 * all 1s and every cell that ran completed with its fault fired; 1 when
 * not; 2 on bad configuration or when the run could not be set up.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "matrix.h"
#include "outbox/clock.h"
#include "outbox/config.h"
#include "outbox/err.h"
#include "outbox/log.h"
#include "outbox/proc.h"

#ifndef FM_SOURCE_DIR
#define FM_SOURCE_DIR "."
#endif

/* How long `program --help` may take when the fault flags are probed. */
#define FM_HELP_WAIT_MS 20000

struct fm_config {
	char *server;
	char *bin_dir;
	char *pg_script;
	struct ob_cfg_list modes;
	struct ob_cfg_list faults;
	char *format;
	int64_t lease_ms;
	int64_t delivery_timeout_ms;
	int64_t stall_ms;
	int64_t slow_ms;
	int64_t restart_ms;
	int64_t settle_ms;
	int64_t cell_timeout_ms;
	bool keep;
};

#define OB_CFG_STRUCT struct fm_config

static const struct ob_cfg_opt fm_options[] = {
	OB_CFG_OPT("server", "OUTBOX_FM_SERVER", OB_CFG_STRING, NULL, 0, 0, NULL, false, server,
	    "conninfo of a PostgreSQL server to create the cell databases on (no dbname);"
	    " default: start a throwaway one with --pg-script"),
	OB_CFG_OPT("bin-dir", "OUTBOX_BIN_DIR", OB_CFG_STRING, NULL, 0, 0, NULL, false, bin_dir,
	    "directory of outbox-relay and outbox-consumer; default: this program's own"),
	OB_CFG_OPT("pg-script", "OUTBOX_FM_PG_SCRIPT", OB_CFG_STRING,
	    FM_SOURCE_DIR "/scripts/pg-tmp.sh", 0, 0, NULL, false, pg_script,
	    "the throwaway-PostgreSQL script (start DIR / stop DIR)"),
	OB_CFG_OPT("modes", "OUTBOX_FM_MODES", OB_CFG_LIST, NULL, 0, 0, NULL, false, modes,
	    "rows to run, repeatable: no-dedup, no-fencing, full (default: all)"),
	OB_CFG_OPT("faults", "OUTBOX_FM_FAULTS", OB_CFG_LIST, NULL, 0, 0, NULL, false, faults,
	    "columns to run, repeatable: none, drop-reply, die-before-commit,"
	    " die-after-commit, slow, relay-die-after-claim, relay-die-after-send,"
	    " relay-stall, relay-stall-release (default: all)"),
	OB_CFG_OPT("format", "OUTBOX_FM_FORMAT", OB_CFG_ENUM, "table", 0, 0, "table|kv", false,
	    format, "table for people; kv = one key=value line per cell, for tests"),
	OB_CFG_OPT("lease-ms", "OUTBOX_FM_LEASE_MS", OB_CFG_DURATION, "1500ms", 100, 600000, NULL,
	    false, lease_ms, "relay --lease-ms"),
	OB_CFG_OPT("delivery-timeout-ms", "OUTBOX_FM_DELIVERY_TIMEOUT_MS", OB_CFG_DURATION,
	    "400ms", 10, 600000, NULL, false, delivery_timeout_ms,
	    "relay --delivery-timeout-ms"),
	OB_CFG_OPT("stall-ms", "OUTBOX_FM_STALL_MS", OB_CFG_DURATION, "3s", 1, 600000, NULL, false,
	    stall_ms, "relay stall after claim; must exceed --lease-ms + 1s"),
	OB_CFG_OPT("slow-ms", "OUTBOX_FM_SLOW_MS", OB_CFG_DURATION, "1s", 1, 600000, NULL, false,
	    slow_ms, "consumer sleep before COMMIT; must exceed --delivery-timeout-ms"),
	OB_CFG_OPT("restart-ms", "OUTBOX_FM_RESTART_MS", OB_CFG_DURATION, "600ms", 0, 600000,
	    NULL, false, restart_ms,
	    "a consumer that died is restarted after this; must exceed --delivery-timeout-ms"),
	OB_CFG_OPT("settle-ms", "OUTBOX_FM_SETTLE_MS", OB_CFG_DURATION, "700ms", 0, 600000, NULL,
	    false, settle_ms, "the record must stay delivered this long to end a cell"),
	OB_CFG_OPT("cell-timeout", "OUTBOX_FM_CELL_TIMEOUT", OB_CFG_DURATION, "60s", 1000,
	    3600000, NULL, false, cell_timeout_ms, "give up on a cell after this"),
	OB_CFG_OPT("keep", "OUTBOX_FM_KEEP", OB_CFG_BOOL, "false", 0, 0, NULL, false, keep,
	    "keep the work directory (logs), the cell databases and the throwaway server"),
	OB_CFG_END,
};

static const struct ob_cfg_program fm_program = {
	.name = "outbox-fault-matrix",
	.synopsis = "outbox-fault-matrix [--server CONNINFO] [options]",
	.description =
    "Run the fault matrix: for each mode (no dedup; dedup without fencing; full)"
    " and each fault, enqueue ONE message on a fresh database, run the real"
    " consumer and relay with that fault armed, and count the effect rows in"
    " inbox.notifications (1 = exactly once). Prints the table and each cell's"
    " bookkeeping (status, attempts, fenced_out). Exit 0 only if the full row"
    " is all 1s. See docs/faults.md.",
	.options = fm_options,
};

static volatile sig_atomic_t interrupted;

static void
on_signal(int sig)
{
	interrupted = sig;
}

static int
find_id(const char *id, bool modes)
{
	int n = modes ? fm_nmodes : fm_nfaults;
	for (int i = 0; i < n; i++)
		if (strcmp(modes ? fm_modes[i].id : fm_faults[i].id, id) == 0)
			return i;
	return -1;
}

/* Mark the selected rows or columns; all when the list is empty. */
static int
select_ids(const struct ob_cfg_list *l, bool modes, bool *sel, char *err, size_t errlen)
{
	int n = modes ? fm_nmodes : fm_nfaults;
	for (int i = 0; i < n; i++)
		sel[i] = l->n == 0;
	for (size_t k = 0; k < l->n; k++) {
		int i = find_id(l->items[k], modes);
		if (i < 0) {
			snprintf(err, errlen, "--%s: unknown %s '%s'", modes ? "modes" : "faults",
			    modes ? "mode" : "fault", l->items[k]);
			return OB_EINVAL;
		}
		sel[i] = true;
	}
	return OB_OK;
}

static int
check_config(const struct fm_config *c, char *err, size_t errlen)
{
	if (c->lease_ms <= c->delivery_timeout_ms + 1000) {
		snprintf(err, errlen, "--lease-ms must exceed --delivery-timeout-ms + 1000"
		    " (the relay refuses to start otherwise)");
		return OB_EINVAL;
	}
	if (c->stall_ms <= c->lease_ms + 1000) {
		snprintf(err, errlen, "--stall-ms must exceed --lease-ms + 1000, so that"
		    " another relay takes the message over before the stalled one wakes");
		return OB_EINVAL;
	}
	if (c->slow_ms <= c->delivery_timeout_ms) {
		snprintf(err, errlen, "--slow-ms must exceed --delivery-timeout-ms");
		return OB_EINVAL;
	}
	if (c->restart_ms <= c->delivery_timeout_ms) {
		snprintf(err, errlen, "--restart-ms must exceed --delivery-timeout-ms");
		return OB_EINVAL;
	}
	return OB_OK;
}

/* True when `<bindir>/<program> --help` mentions flag. */
static bool
program_has_flag(const char *bindir, const char *workdir, const char *program,
    const char *flag)
{
	struct ob_argv a;
	struct ob_proc p = { 0 };
	char log[600], err[256], want[128];
	ob_argv_init(&a, program);
	ob_argv_add(&a, "--help");
	snprintf(log, sizeof(log), "%s/%s.help", workdir, program);
	if (ob_proc_start(&p, bindir, &a, log, err, sizeof(err)) != OB_OK)
		return false;
	int64_t end = ob_mono_ms() + FM_HELP_WAIT_MS;
	while (ob_proc_alive(&p) && ob_mono_ms() < end)
		ob_sleep_ms(10);
	ob_proc_stop(&p, 0);
	char *text = ob_read_file(log);
	snprintf(want, sizeof(want), "%s ", flag);
	bool found = text != NULL && (strstr(text, want) != NULL ||
	    (snprintf(want, sizeof(want), "%s\n", flag), strstr(text, want) != NULL) ||
	    (snprintf(want, sizeof(want), "%s=", flag), strstr(text, want) != NULL));
	free(text);
	return found;
}

static int
start_server(const char *script, const char *workdir, char *out, size_t outlen,
    char *err, size_t errlen)
{
	char cmd[1400], line[1024];
	snprintf(cmd, sizeof(cmd), "'%s' start '%s/pg'", script, workdir);
	FILE *f = popen(cmd, "r");
	if (f == NULL) {
		snprintf(err, errlen, "cannot run %s: %s", script, strerror(errno));
		return OB_EINVAL;
	}
	out[0] = '\0';
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if (strstr(line, "host=") != NULL)
			snprintf(out, outlen, "%s", line);
	}
	int st = pclose(f);
	if (st != 0 || out[0] == '\0') {
		snprintf(err, errlen, "%s start failed (exit %d)", script, st);
		return OB_EDB;
	}
	/* The server conninfo names dbname=postgres; cells append their own. */
	return OB_OK;
}

static void
stop_server(const char *script, const char *workdir)
{
	char cmd[1400];
	snprintf(cmd, sizeof(cmd), "'%s' stop '%s/pg' >/dev/null 2>&1", script, workdir);
	if (system(cmd) != 0)
		fprintf(stderr, "outbox-fault-matrix: could not stop %s/pg\n", workdir);
}

static void
remove_dir(const char *dir)
{
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "outbox-fault-matrix: could not remove %s\n", dir);
}

/* A cell is trustworthy when it settled and, for a fault column, its fault
 * really fired. */
static bool
cell_ok(const struct fm_fault *f, const struct fm_result *r)
{
	return r->ran && r->completed && (f->side == FM_SIDE_NONE || r->fired > 0);
}

/* A cell's text: the effect count (with ! when the cell cannot be trusted)
 * or its bookkeeping. */
typedef void (*cell_fn)(const struct fm_fault *f, const struct fm_result *r, char *out,
    size_t outlen);

static void
effects_cell(const struct fm_fault *f, const struct fm_result *r, char *out, size_t outlen)
{
	if (!r->ran)
		snprintf(out, outlen, "error");
	else
		snprintf(out, outlen, "%" PRId64 "%s", r->effects, cell_ok(f, r) ? "" : "!");
}

static void
bookkeeping_cell(const struct fm_fault *f, const struct fm_result *r, char *out,
    size_t outlen)
{
	(void)f;
	bool delivered = strcmp(r->status, "delivered") == 0;
	if (!r->ran)
		snprintf(out, outlen, "error");
	else
		snprintf(out, outlen, "%s%sa%" PRId64 " c%" PRId64 " f%" PRId64 " d%" PRId64,
		    delivered ? "" : r->status, delivered ? "" : " ", r->attempts, r->fence,
		    r->fenced_out, r->dup_replies);
}

/* One grid: a header of the selected, available faults, a row per selected
 * mode. */
static void
print_grid(const bool *msel, const bool *fsel, const bool *avail,
    struct fm_result res[][16], cell_fn cell)
{
	printf("%-18s", "mode");
	for (int j = 0; j < fm_nfaults; j++)
		if (fsel[j] && avail[j])
			printf(" %15s", fm_faults[j].head);
	printf("\n");
	for (int i = 0; i < fm_nmodes; i++) {
		if (!msel[i])
			continue;
		printf("%-18s", fm_modes[i].title);
		for (int j = 0; j < fm_nfaults; j++) {
			if (!fsel[j] || !avail[j])
				continue;
			char text[64];
			cell(&fm_faults[j], &res[i][j], text, sizeof(text));
			printf(" %15s", text);
		}
		printf("\n");
	}
}

static void
print_table(const bool *msel, const bool *fsel, const bool *avail,
    struct fm_result res[][16])
{
	printf("\nfault matrix: effect rows in inbox.notifications for ONE message"
	    " (1 = exactly once)\n\n");
	print_grid(msel, fsel, avail, res, effects_cell);
	printf("\nbookkeeping per cell: a = attempts, c = claims (the final fence),"
	    " f = fenced_out,\nd = 'duplicate' replies; status shown when not delivered\n\n");
	print_grid(msel, fsel, avail, res, bookkeeping_cell);
	printf("\nfaults:\n");
	for (int j = 0; j < fm_nfaults; j++) {
		if (!fsel[j])
			continue;
		const char *prog = fm_faults[j].side == FM_SIDE_RELAY ? "outbox-relay"
		                                                      : "outbox-consumer";
		if (!avail[j])
			printf("  %-16s NOT RUN: %s has no %s\n", fm_faults[j].head, prog,
			    fm_faults[j].flag);
		else if (fm_faults[j].flag != NULL)
			printf("  %-16s %s (%s %s 1)\n", fm_faults[j].head, fm_faults[j].title,
			    prog, fm_faults[j].flag);
		else
			printf("  %-16s %s\n", fm_faults[j].head, fm_faults[j].title);
	}
	printf("  a '!' marks a cell that did not settle or whose fault did not fire\n");
}

static void
print_kv(const struct fm_mode *m, const struct fm_fault *f, const struct fm_result *r)
{
	printf("cell mode=%s fault=%s effects=%" PRId64 " status=%s attempts=%" PRId64
	    " fence=%" PRId64 " fenced_out=%" PRId64 " fired=%d consumer_restarts=%d"
	    " relay_takeovers=%d dup_replies=%" PRId64 " completed=%d ms=%" PRId64 "\n",
	    m->id, f->id, r->effects, r->status[0] ? r->status : "-", r->attempts, r->fence,
	    r->fenced_out, r->fired, r->consumer_restarts, r->relay_takeovers,
	    r->dup_replies, r->completed ? 1 : 0, r->ms);
	fflush(stdout);
}

int
main(int argc, char **argv)
{
	struct fm_config cfg;
	char err[1024], workdir[64] = "", server[1024], bindir[PATH_MAX];
	int code;
	bool own_server = false;
	bool msel[8], fsel[16], avail[16];
	static struct fm_result res[8][16];

	if ((code = ob_cfg_load(&fm_program, &cfg, argc, argv, NULL)) >= 0)
		return code;
	code = 2;
	if (select_ids(&cfg.modes, true, msel, err, sizeof(err)) != OB_OK ||
	    select_ids(&cfg.faults, false, fsel, err, sizeof(err)) != OB_OK ||
	    check_config(&cfg, err, sizeof(err)) != OB_OK) {
		fprintf(stderr, "outbox-fault-matrix: %s\n", err);
		goto out;
	}
	if (cfg.bin_dir != NULL)
		snprintf(bindir, sizeof(bindir), "%s", cfg.bin_dir);
	else {
		ssize_t n = readlink("/proc/self/exe", bindir, sizeof(bindir) - 1);
		bindir[n > 0 ? n : 0] = '\0';
		char *slash = strrchr(bindir, '/');
		if (slash == NULL) {
			fprintf(stderr, "outbox-fault-matrix: cannot find my own directory;"
			    " set --bin-dir\n");
			goto out;
		}
		*slash = '\0';
	}
	char probe[PATH_MAX + 32];
	snprintf(probe, sizeof(probe), "%s/outbox-relay", bindir);
	if (access(probe, X_OK) != 0) {
		fprintf(stderr, "outbox-fault-matrix: --bin-dir %s has no outbox-relay\n", bindir);
		goto out;
	}
	ob_log_init("outbox-fault-matrix", OB_LOG_WARN, OB_LOG_TEXT);
	snprintf(workdir, sizeof(workdir), "/tmp/fm.XXXXXX");
	if (mkdtemp(workdir) == NULL) {
		fprintf(stderr, "outbox-fault-matrix: mkdtemp: %s\n", strerror(errno));
		workdir[0] = '\0';
		goto out;
	}
	chmod(workdir, 0755);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	for (int j = 0; j < fm_nfaults; j++) {
		const struct fm_fault *f = &fm_faults[j];
		avail[j] = f->flag == NULL || !fsel[j] ||
		    program_has_flag(bindir, workdir, f->side == FM_SIDE_RELAY ? "outbox-relay"
		        : "outbox-consumer", f->flag);
	}
	if (cfg.server != NULL)
		snprintf(server, sizeof(server), "%s", cfg.server);
	else {
		fprintf(stderr, "fault-matrix: starting a throwaway PostgreSQL in %s/pg\n", workdir);
		if (start_server(cfg.pg_script, workdir, server, sizeof(server), err,
		        sizeof(err)) != OB_OK) {
			fprintf(stderr, "outbox-fault-matrix: %s\n", err);
			goto out;
		}
		own_server = true;
	}

	struct fm_env env = {
		.server = server, .bindir = bindir, .workdir = workdir,
		.lease_ms = cfg.lease_ms, .delivery_timeout_ms = cfg.delivery_timeout_ms,
		.stall_ms = cfg.stall_ms, .slow_ms = cfg.slow_ms,
		.restart_ms = cfg.restart_ms, .settle_ms = cfg.settle_ms,
		.cell_timeout_ms = cfg.cell_timeout_ms, .keep = cfg.keep,
	};
	bool table = strcmp(cfg.format, "table") == 0;
	bool full_ok = true, all_ok = true, setup_failed = false;
	for (int j = 0; j < fm_nfaults; j++)
		if (fsel[j] && !avail[j] && !table)
			printf("skipped fault=%s reason=no_flag flag=%s\n", fm_faults[j].id,
			    fm_faults[j].flag);
	for (int i = 0; i < fm_nmodes && !interrupted; i++) {
		if (!msel[i])
			continue;
		for (int j = 0; j < fm_nfaults && !interrupted; j++) {
			if (!fsel[j] || !avail[j])
				continue;
			struct fm_result *r = &res[i][j];
			if (fm_run_cell(&env, &fm_modes[i], &fm_faults[j], r, err,
			        sizeof(err)) != OB_OK) {
				fprintf(stderr, "fault-matrix: %s / %s: %s\n", fm_modes[i].id,
				    fm_faults[j].id, err);
				setup_failed = true;
				all_ok = false;
				if (!table)
					printf("error mode=%s fault=%s\n", fm_modes[i].id, fm_faults[j].id);
				continue;
			}
			bool ok = cell_ok(&fm_faults[j], r);
			all_ok = all_ok && ok;
			if (strcmp(fm_modes[i].id, "full") == 0)
				full_ok = full_ok && ok && r->effects == 1;
			fprintf(stderr, "fault-matrix: %-17s %-22s effects=%" PRId64
			    " status=%s attempts=%" PRId64 " fenced_out=%" PRId64 " fired=%d%s"
			    " (%.1f s)\n", fm_modes[i].title, fm_faults[j].id, r->effects, r->status,
			    r->attempts, r->fenced_out, r->fired,
			    r->completed ? "" : " DID-NOT-SETTLE", (double)r->ms / 1000.0);
			if (!table)
				print_kv(&fm_modes[i], &fm_faults[j], r);
		}
	}
	if (interrupted) {
		fprintf(stderr, "outbox-fault-matrix: interrupted\n");
		code = 1;
		goto out;
	}
	if (table)
		print_table(msel, fsel, avail, res);
	bool pass = full_ok && all_ok;
	if (table)
		printf("\nverdict: %s\n", pass ? "PASS: the full row is all 1s"
		    : "FAIL: see the cells marked above");
	else
		printf("verdict %s\n", pass ? "pass" : "fail");
	code = setup_failed ? 2 : pass ? 0 : 1;
out:
	if (own_server && !cfg.keep)
		stop_server(cfg.pg_script, workdir);
	if (workdir[0] && !cfg.keep)
		remove_dir(workdir);
	else if (workdir[0])
		fprintf(stderr, "fault-matrix: kept %s\n", workdir);
	ob_cfg_free(fm_options, &cfg);
	return code;
}
