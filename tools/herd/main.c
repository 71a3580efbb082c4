/*
 * main.c - outbox-herd: the thundering-herd simulation of retries with
 * backoff and jitter, or the same strategies against the real system
 * (--target: a running producer API); docs/retries.md.
 *
 * Wiring only: read the flags, then either run one cell per (strategy,
 * client count) through sim.c (and with --histogram-bins its run 0's
 * arrival histogram) and print the table, or run one herd against
 * --target through target.c and print its report (table.c).
 * Exit 0 with the table, or with the report when every client's call
 * completed; 1 when one did not (the report is printed), or when out of
 * memory; 2 on a bad flag (one line on stderr, before anything runs). The
 * simulation's output depends only on the flags: the same --seed gives
 * the same bytes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>

#include "jitter.h"
#include "outbox/clock.h"
#include "outbox/config.h"
#include "outbox/err.h"
#include "outbox/log.h"
#include "sim.h"
#include "table.h"
#include "target.h"

#define HERD_CLIENTS_MIN 1
#define HERD_CLIENTS_MAX 1000  /* clients in one cell */
#define HERD_COLUMNS_MAX 16    /* client counts in one table */
#define HERD_RUNS_MAX 100000   /* runs averaged per cell */
#define HERD_MS_MAX 3600000    /* base, cap, network delays, --target's deadline: an hour */
#define HERD_ATTEMPT_MS_MAX 600000 /* one --target attempt: ten minutes */
/* The defaults that a flag of the other mode is compared with: a
 * simulation flag changed with --target, or a --target flag without it, is
 * refused rather than ignored. */
#define HERD_RUNS_DEFAULT 100
#define HERD_DELAY_MEAN_DEFAULT 10
#define HERD_DELAY_SD_DEFAULT 2
#define HERD_DEADLINE_DEFAULT 60000
#define HERD_ATTEMPT_DEFAULT 5000
#define HERD_HISTOGRAM_DEFAULT 0 /* no histogram */
#define HERD_STR_(x) #x
#define HERD_STR(x) HERD_STR_(x)
#define HERD_SEED_MAX INT64_MAX
#define HERD_STRATEGY_ALL "all"
/* "all" and jitter.c's names, in its order */
#define HERD_STRATEGY_CHOICES "all|none|expo|expo-10pct|equal|full|decorrelated"

struct herd_config {
	struct ob_cfg_list clients;
	int64_t runs;
	int64_t seed;
	int64_t base_ms;
	int64_t cap_ms;
	int64_t delay_mean_ms;
	int64_t delay_sd_ms;
	char *strategy;
	bool json;
	int64_t histogram_bins;
	char *target;
	int64_t deadline_ms;
	int64_t request_timeout_ms;
	char *key_prefix;
};

#define OB_CFG_STRUCT struct herd_config

static const struct ob_cfg_opt herd_options[] = {
	OB_CFG_OPT("clients", "OUTBOX_HERD_CLIENTS", OB_CFG_LIST, "10,50,100", 0, 0, NULL, false,
	    clients, "client counts, the table's columns: comma-separated or repeated, each"
	    " 1..1000, at most 16; with --target exactly one (the client threads)"),
	OB_CFG_OPT("runs", "OUTBOX_HERD_RUNS", OB_CFG_INT, HERD_STR(HERD_RUNS_DEFAULT), 1,
	    HERD_RUNS_MAX, NULL, false, runs, "runs averaged per cell (simulation only)"),
	OB_CFG_OPT("seed", "OUTBOX_HERD_SEED", OB_CFG_INT, "1", 0, HERD_SEED_MAX, NULL, false,
	    seed, "the generator's seed: the same seed prints the same table"),
	OB_CFG_OPT("base-ms", "OUTBOX_HERD_BASE_MS", OB_CFG_INT, "5", 1, HERD_MS_MAX, NULL, false,
	    base_ms, "backoff base: the first retry's exponential value is 2 x base"),
	OB_CFG_OPT("cap-ms", "OUTBOX_HERD_CAP_MS", OB_CFG_INT, "2000", 1, HERD_MS_MAX, NULL,
	    false, cap_ms, "backoff cap (at least --base-ms)"),
	OB_CFG_OPT("delay-mean-ms", "OUTBOX_HERD_DELAY_MEAN_MS", OB_CFG_INT,
	    HERD_STR(HERD_DELAY_MEAN_DEFAULT), 0, HERD_MS_MAX, NULL, false, delay_mean_ms,
	    "one-way network delay |N(mean, sd)|: the mean (simulation only)"),
	OB_CFG_OPT("delay-sd-ms", "OUTBOX_HERD_DELAY_SD_MS", OB_CFG_INT,
	    HERD_STR(HERD_DELAY_SD_DEFAULT), 0, HERD_MS_MAX, NULL, false, delay_sd_ms,
	    "one-way network delay: the standard deviation (simulation only)"),
	OB_CFG_OPT("strategy", "OUTBOX_HERD_STRATEGY", OB_CFG_ENUM, HERD_STRATEGY_ALL, 0, 0,
	    HERD_STRATEGY_CHOICES, false, strategy, "the table's rows: all, or one strategy;"
	    " with --target one strategy"),
	OB_CFG_OPT("json", "OUTBOX_HERD_JSON", OB_CFG_BOOL, "false", 0, 0, NULL, false, json,
	    "print one JSON object instead of the table (or --target's report)"),
	OB_CFG_OPT("histogram-bins", "OUTBOX_HERD_HISTOGRAM_BINS", OB_CFG_INT,
	    HERD_STR(HERD_HISTOGRAM_DEFAULT), 0, HERD_HISTOGRAM_BINS_MAX, NULL, false,
	    histogram_bins, "with --json, N > 0 adds to every cell \"histogram\": {\"run\": 0,"
	    " \"calls\": C, \"ms\": T, \"bin_ms\": W, \"counts\": [N integers]}, run 0 of the"
	    " cell (the run the averages start from; with --runs 1 the cell's calls and ms):"
	    " C its write requests, T its ms, counts[i] the writes that arrived at the server"
	    " in [i x W, (i+1) x W) ms of simulated time, W = floor(last arrival / N) + 1 (the"
	    " smallest whole W >= 1 holding them all); the counts sum to C. 0: none"
	    " (simulation only)"),
	OB_CFG_OPT("target", "OUTBOX_HERD_TARGET", OB_CFG_STRING, NULL, 0, 0, NULL, false, target,
	    "run against the real system instead of simulating: the base URL of a running"
	    " producer API (http://HOST:PORT, no token). --clients threads each POST"
	    " /v1/messages once (topic herd.test, an Idempotency-Key of its own) and retry with"
	    " --strategy on no connection, no answer, 409, 429 and 5xx until a 2xx or"
	    " --deadline-ms; any other answer ends the call. Retry-After is ignored, so that"
	    " the strategies are compared as they are"),
	OB_CFG_OPT("deadline-ms", "OUTBOX_HERD_DEADLINE_MS", OB_CFG_INT,
	    HERD_STR(HERD_DEADLINE_DEFAULT), 1, HERD_MS_MAX, NULL, false, deadline_ms,
	    "with --target: no attempt starts this long after the start; a client still"
	    " failing then gives up (exit 1)"),
	OB_CFG_OPT("request-timeout-ms", "OUTBOX_HERD_REQUEST_TIMEOUT_MS", OB_CFG_INT,
	    HERD_STR(HERD_ATTEMPT_DEFAULT), 1, HERD_ATTEMPT_MS_MAX, NULL, false,
	    request_timeout_ms, "with --target: one attempt, connect to answer; one that times"
	    " out is retried (its key makes that safe)"),
	OB_CFG_OPT("key-prefix", "OUTBOX_HERD_KEY_PREFIX", OB_CFG_STRING, NULL, 0, 0, NULL, false,
	    key_prefix, "with --target: client i sends Idempotency-Key PREFIX-i; default"
	    " herd-SEED-MS (MS: the start, Unix ms), new keys every run"),
	OB_CFG_END,
};

static const struct ob_cfg_program herd_program = {
	.name = "outbox-herd",
	.synopsis = "outbox-herd [--clients N,N...] [--runs N] [--seed N] [--strategy S] [--json"
	    " [--histogram-bins N]]\n"
	    "       outbox-herd --target URL --clients N --strategy S [--deadline-ms MS] [--json]",
	.description =
    "Simulate a thundering herd: N clients each update one row once under optimistic"
    " concurrency (read the version, write with it; a write whose version is stale fails,"
    " and the client backs off and reads again). Prints, per backoff strategy and client"
    " count, the write requests (calls) and the time until every client is done (ms),"
    " averaged over --runs runs. Strategies, with v = min(cap, base x 2^retry):"
    " none (retry at once), expo (v), expo-10pct (v x [0.9, 1.1)), equal (v/2 +"
    " [0, v/2)), full ([0, v)), decorrelated (min(cap, [base, 3 x previous sleep))). Synthetic:"
    " the server never overloads. With --target, one strategy against a running producer"
    " instead: prints the requests sent, the calls completed, and when (ms from the start)"
    " the first and the last client got its 2xx. See docs/retries.md.",
	.options = herd_options,
};

/* Parse "10,50,100" items (each flag's value may hold several) into
 * counts. OB_OK or OB_EINVAL with one line in err. */
static int
parse_clients(const struct ob_cfg_list *l, uint32_t *counts, size_t *n, char *err,
    size_t errlen)
{
	*n = 0;
	for (size_t k = 0; k < l->n; k++) {
		const char *p = l->items[k];
		for (;;) {
			size_t len = strcspn(p, ",");
			char item[32];
			if (len == 0) {
				snprintf(err, errlen, "--clients: an empty item in '%s'", l->items[k]);
				return OB_EINVAL;
			}
			if (len >= sizeof(item)) {
				snprintf(err, errlen, "--clients: '%.*s...' is not a number of clients",
				    (int)sizeof(item) - 1, p);
				return OB_EINVAL;
			}
			memcpy(item, p, len);
			item[len] = '\0';
			char *end = NULL;
			errno = 0;
			long long v = strtoll(item, &end, 10);
			if (item[0] < '0' || item[0] > '9' || *end != '\0' || errno != 0) {
				snprintf(err, errlen, "--clients: '%s' is not a number of clients",
				    item);
				return OB_EINVAL;
			}
			if (v < HERD_CLIENTS_MIN || v > HERD_CLIENTS_MAX) {
				snprintf(err, errlen, "--clients: %lld is outside %d..%d", v,
				    HERD_CLIENTS_MIN, HERD_CLIENTS_MAX);
				return OB_EINVAL;
			}
			if (*n >= HERD_COLUMNS_MAX) {
				snprintf(err, errlen, "--clients: more than %d client counts",
				    HERD_COLUMNS_MAX);
				return OB_EINVAL;
			}
			counts[(*n)++] = (uint32_t)v;
			if (p[len] == '\0')
				break;
			p += len + 1;
		}
	}
	if (*n == 0) {
		snprintf(err, errlen, "--clients: no client count");
		return OB_EINVAL;
	}
	return OB_OK;
}

/* The rows: every strategy, or the one named. */
static int
pick_strategies(const char *name, enum ob_jitter_kind *rows, size_t *n, char *err,
    size_t errlen)
{
	*n = 0;
	if (strcmp(name, HERD_STRATEGY_ALL) == 0) {
		for (size_t i = 0; i < OB_JITTER_COUNT; i++)
			rows[(*n)++] = ob_jitter_strategies[i].kind;
		return OB_OK;
	}
	const struct ob_jitter_strategy *s = ob_jitter_find(name);
	if (s == NULL) {
		snprintf(err, errlen, "--strategy: unknown strategy '%s'", name);
		return OB_EINVAL;
	}
	rows[(*n)++] = s->kind;
	return OB_OK;
}

/* A flag of the other mode set to anything but its default is refused, not
 * ignored: --runs, a network delay or --histogram-bins with --target, a
 * --target flag without it; and --histogram-bins without --json. OB_OK or
 * OB_EINVAL with one line in err. */
static int
check_mode(const struct herd_config *cfg, size_t nclients, size_t nrows, char *err,
    size_t errlen)
{
	const char *stray = NULL;
	if (cfg->target != NULL) {
		if (nclients != 1) {
			snprintf(err, errlen, "--target runs one herd: give one --clients count,"
			    " not %zu", nclients);
			return OB_EINVAL;
		}
		if (nrows != 1) {
			snprintf(err, errlen, "--target runs one herd: name one --strategy, not %s",
			    cfg->strategy);
			return OB_EINVAL;
		}
		if (cfg->runs != HERD_RUNS_DEFAULT)
			stray = "--runs";
		else if (cfg->histogram_bins != HERD_HISTOGRAM_DEFAULT)
			stray = "--histogram-bins";
		else if (cfg->delay_mean_ms != HERD_DELAY_MEAN_DEFAULT)
			stray = "--delay-mean-ms";
		else if (cfg->delay_sd_ms != HERD_DELAY_SD_DEFAULT)
			stray = "--delay-sd-ms";
		if (stray != NULL) {
			snprintf(err, errlen, "%s is the simulation's: --target makes one run over"
			    " the real network", stray);
			return OB_EINVAL;
		}
		return OB_OK;
	}
	if (cfg->deadline_ms != HERD_DEADLINE_DEFAULT)
		stray = "--deadline-ms";
	else if (cfg->request_timeout_ms != HERD_ATTEMPT_DEFAULT)
		stray = "--request-timeout-ms";
	else if (cfg->key_prefix != NULL)
		stray = "--key-prefix";
	if (stray != NULL) {
		snprintf(err, errlen, "%s needs --target", stray);
		return OB_EINVAL;
	}
	if (cfg->histogram_bins != HERD_HISTOGRAM_DEFAULT && !cfg->json) {
		snprintf(err, errlen, "--histogram-bins needs --json: the text table has no"
		    " histogram");
		return OB_EINVAL;
	}
	return OB_OK;
}

/* The --target run: check, run, print. Returns the exit code (2: a bad
 * URL or key prefix, one line in err, nothing run). */
static int
run_target(const struct herd_config *cfg, uint32_t clients, enum ob_jitter_kind strategy,
    char *err, size_t errlen)
{
	char prefix[64];
	if (cfg->key_prefix == NULL)
		snprintf(prefix, sizeof(prefix), "herd-%" PRId64 "-%" PRId64, cfg->seed,
		    ob_wall_us() / 1000);
	struct herd_target_params p = {
		.url = cfg->target,
		.key_prefix = cfg->key_prefix != NULL ? cfg->key_prefix : prefix,
		.strategy = strategy,
		.range = { (double)cfg->base_ms, (double)cfg->cap_ms },
		.clients = clients,
		.seed = (uint64_t)cfg->seed,
		.deadline_ms = cfg->deadline_ms,
		.request_timeout_ms = cfg->request_timeout_ms,
	};
	if (herd_target_check(&p, err, errlen) != OB_OK)
		return 2;
	ob_log_init("outbox-herd", OB_LOG_INFO, OB_LOG_TEXT);
	struct herd_target_result r;
	int rc = herd_target_run(&p, &r, err, errlen);
	nng_fini(); /* every client and connection is closed by now */
	if (rc != OB_OK) {
		fprintf(stderr, "outbox-herd: %s\n", err);
		return 1;
	}
	struct herd_target_report rep = { &p, &r };
	if (cfg->json)
		herd_target_json(stdout, &rep);
	else
		herd_target_text(stdout, &rep);
	if (fflush(stdout) != 0)
		return 1;
	return r.completed == clients ? 0 : 1;
}

int
main(int argc, char **argv)
{
	struct herd_config cfg;
	uint32_t clients[HERD_COLUMNS_MAX];
	enum ob_jitter_kind rows[OB_JITTER_COUNT];
	struct herd_cell cells[OB_JITTER_COUNT * HERD_COLUMNS_MAX];
	struct herd_histogram *hists = NULL; /* owned; like cells, with --histogram-bins */
	size_t nclients = 0, nrows = 0;
	char err[256];
	int code;

	if ((code = ob_cfg_load(&herd_program, &cfg, argc, argv, NULL)) >= 0)
		return code;
	code = 2;
	if (parse_clients(&cfg.clients, clients, &nclients, err, sizeof(err)) != OB_OK ||
	    pick_strategies(cfg.strategy, rows, &nrows, err, sizeof(err)) != OB_OK)
		goto bad;
	if (cfg.cap_ms < cfg.base_ms) {
		snprintf(err, sizeof(err), "--cap-ms %" PRId64 " is below --base-ms %" PRId64,
		    cfg.cap_ms, cfg.base_ms);
		goto bad;
	}
	if (check_mode(&cfg, nclients, nrows, err, sizeof(err)) != OB_OK)
		goto bad;
	if (cfg.target != NULL) {
		if ((code = run_target(&cfg, clients[0], rows[0], err, sizeof(err))) == 2)
			goto bad;
		goto out;
	}

	struct herd_table t = {
		.seed = (uint64_t)cfg.seed,
		.runs = (uint32_t)cfg.runs,
		.range = { (double)cfg.base_ms, (double)cfg.cap_ms },
		.delay_mean_ms = (double)cfg.delay_mean_ms,
		.delay_sd_ms = (double)cfg.delay_sd_ms,
		.clients = clients,
		.nclients = nclients,
		.strategies = rows,
		.nstrategies = nrows,
		.cells = cells,
	};
	if (cfg.histogram_bins > 0) {
		hists = calloc(nrows * nclients, sizeof(*hists));
		if (hists == NULL) {
			fprintf(stderr, "outbox-herd: %s\n", ob_strerror(OB_ENOMEM));
			code = 1;
			goto out;
		}
		t.histograms = hists;
	}
	for (size_t i = 0; i < nrows; i++) {
		for (size_t j = 0; j < nclients; j++) {
			struct herd_params p = { .strategy = rows[i], .range = t.range,
				.delay_mean_ms = t.delay_mean_ms, .delay_sd_ms = t.delay_sd_ms,
				.clients = clients[j] };
			int rc = herd_cell_run(&p, t.seed, t.runs, (uint32_t)cfg.histogram_bins,
			    &cells[i * nclients + j], hists != NULL ? &hists[i * nclients + j] : NULL);
			if (rc != OB_OK) {
				fprintf(stderr, "outbox-herd: %s\n", ob_strerror(rc));
				code = 1;
				goto out;
			}
		}
	}
	if (cfg.json)
		herd_table_json(stdout, &t);
	else
		herd_table_text(stdout, &t);
	code = fflush(stdout) == 0 ? 0 : 1;
	goto out;
bad:
	fprintf(stderr, "outbox-herd: %s\n", err);
out:
	free(hists);
	ob_cfg_free(herd_options, &cfg);
	return code;
}
