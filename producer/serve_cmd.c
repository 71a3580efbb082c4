/*
 * serve_cmd.c - `outbox-producer serve`: the idempotent HTTP API. Parses
 * the config table, refuses a lease shorter than --max-processing, arms the
 * fault counters, starts the server, the key GC and (with --metrics) the
 * operator's endpoint, waits for a signal.
 *
 * Secrets: the conninfo is never logged or printed as given; errors that
 * name it go through ob_pg_connect, which redacts the password.
 *
 * --demo-admin (demos only): GET/POST /admin/faults on the --metrics
 * listener, which must then be loopback (outbox/demo_admin.h): the fault
 * counters below and the idempotency mode, an atomic the serving threads
 * read once per request (api_config.live_mode).
 *
 * HTTPS: `--http https://HOST:PORT` turns TLS on and needs --tls-cert and
 * --tls-key (--tls-ca adds client certificates); the files are read and
 * checked before anything opens, so a bad one is exit 2 with one line.
 * TLS flags with an http:// URL are refused too: they would protect
 * nothing.
 */
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "auth.h"
#include "http_server.h"
#include "keygc.h"
#include "metrics.h"
#include "outbox/http_endpoint.h"
#include "outbox/httpd.h"
#include "outbox/httpd_tls.h"
#include "outbox/config_rows.h"
#include "outbox/demo_admin.h"
#include "outbox/err.h"
#include "outbox/log.h"
#include "outbox/program.h"
#include "outbox/reload.h"
#include "producer.h"
#include "producer_rows.h"

struct serve_config {
	char *db;
	char *http;
	char *idempotency;
	int64_t threads;
	int64_t max_queue;
	int64_t max_body;
	int64_t max_header;
	int64_t header_timeout;
	int64_t read_timeout;
	int64_t idle_timeout;
	int64_t write_timeout;
	int64_t max_connections;
	int64_t lease;
	int64_t max_processing;
	int64_t key_retention;
	int64_t gc_interval;
	int64_t gc_batch;
	bool no_fencing;
	char *ready_file;
	char *log_level;
	char *log_format;
	char *config;
	char *metrics;
	bool demo_admin;
	char *api_token_file;
	char *tls_cert;
	char *tls_key;
	char *tls_ca;
	int64_t fault_lose_response;
	int64_t fault_crash;
	int64_t fault_slow;
	int64_t fault_slow_ms;
};

#define OB_CFG_STRUCT struct serve_config

static const struct ob_cfg_opt serve_options[] = {
	PRODUCER_OPT_DB(db),
	OB_CFG_OPT("http", "OUTBOX_HTTP", OB_CFG_STRING, "http://127.0.0.1:8080", 0, 0, NULL, false,
	    http, "address to serve the API on: http://HOST:PORT, or https://HOST:PORT (TLS;"
	    " needs --tls-cert and --tls-key); port 0 = any free port"),
	OB_CFG_OPT("idempotency", "OUTBOX_IDEMPOTENCY", OB_CFG_ENUM, "atomic", 0, 0,
	    "none|split|atomic", false, idempotency,
	    "key handling: atomic (the real one); split and none are BROKEN modes for demos"),
	OB_CFG_OPT("threads", "OUTBOX_THREADS", OB_CFG_INT, "0", 0, 256, NULL, false, threads,
	    "serving threads, each with its own DB connection; 0 = two per CPU (more"
	    " threads only add context switches: bench/producer/README.md)"),
	OB_CFG_OPT("max-queue", "OUTBOX_MAX_QUEUE", OB_CFG_INT, "1024", 1, 1000000, NULL, false,
	    max_queue, "requests waiting for a serving thread; beyond it 503 + Retry-After"),
	OB_CFG_OPT("max-body", "OUTBOX_MAX_BODY", OB_CFG_SIZE, "64k", 256, 1048576, NULL, false,
	    max_body, "largest request body accepted (larger: 413)"),
	OB_CFG_OPT("max-header", "OUTBOX_MAX_HEADER", OB_CFG_SIZE, "16k", 1024, 1048576, NULL,
	    false, max_header,
	    "largest request line + headers accepted (larger: 431, connection closed)"),
	OB_CFG_OPT("header-timeout", "OUTBOX_HEADER_TIMEOUT", OB_CFG_DURATION, "5s", 100, 600000,
	    NULL, false, header_timeout, "a request's headers must be complete this long after its"
	    " first byte (a total, not an inactivity timer); else 408 and the connection is"
	    " closed"),
	OB_CFG_OPT("read-timeout", "OUTBOX_READ_TIMEOUT", OB_CFG_DURATION, "10s", 100, 600000, NULL,
	    false, read_timeout, "a whole request, headers and body, must arrive this long after"
	    " its first byte (a total: a client sending a byte a second cannot extend it); else"
	    " 408 and the connection is closed. No serving thread waits for a body"),
	OB_CFG_OPT("idle-timeout", "OUTBOX_IDLE_TIMEOUT", OB_CFG_DURATION, "30s", 0, 3600000, NULL,
	    false, idle_timeout, "close a connection with no request in progress (new, or"
	    " keep-alive between requests) after this; 0 = never (unsafe: idle connections"
	    " pile up)"),
	OB_CFG_OPT("write-timeout", "OUTBOX_WRITE_TIMEOUT", OB_CFG_DURATION, "10s", 100, 600000,
	    NULL, false, write_timeout,
	    "a response must be written within this; else the connection is closed"),
	OB_CFG_OPT("max-connections", "OUTBOX_MAX_CONNECTIONS", OB_CFG_INT, "512", 0, 1000000, NULL,
	    false, max_connections, "open connections; at the cap the one idle the longest is"
	    " closed, and with none idle a new connection gets 503 and is closed at once; 0 = no"
	    " cap (unsafe: descriptors run out)"),
	OB_CFG_OPT("lease", "OUTBOX_LEASE", OB_CFG_DURATION, "5s", 10, 3600000, NULL, false, lease,
	    "idempotency key lease: a claim older than this is taken over (fencing token bumped)"),
	OB_CFG_OPT("max-processing", "OUTBOX_MAX_PROCESSING", OB_CFG_DURATION, "3s", 1, 3600000,
	    NULL, false, max_processing,
	    "client timeout + longest processing; the server refuses a --lease shorter than this"),
	OB_CFG_OPT("key-retention", "OUTBOX_KEY_RETENTION", OB_CFG_DURATION, "24h", 1000,
	    31536000000LL, NULL, false, key_retention,
	    "keys older than this are deleted; the same key is then a new request"),
	OB_CFG_OPT("gc-interval", "OUTBOX_GC_INTERVAL", OB_CFG_DURATION, "1m", 100, 86400000, NULL,
	    false, gc_interval, "how often expired keys are deleted"),
	OB_CFG_OPT("gc-batch", "OUTBOX_GC_BATCH", OB_CFG_INT, "1000", 1, 100000, NULL, false,
	    gc_batch, "keys deleted per statement"),
	OB_CFG_OPT_NO_FENCING(no_fencing,
	    "BROKEN MODE for tests: complete the key without checking the token"),
	OB_CFG_OPT_READY_FILE("OUTBOX_READY_FILE", ready_file),
	OB_CFG_OPT_LOG_LEVEL(log_level),
	OB_CFG_OPT_LOG_FORMAT(log_format),
	OB_CFG_OPT_CONFIG(config),
	OB_CFG_OPT_METRICS(metrics, ""),
	OB_CFG_OPT_DEMO_ADMIN(demo_admin,
	    "the producer.* faults and the mode idempotency (none|split|atomic)"),
	OB_CFG_OPT("api-token-file", "OUTBOX_API_TOKEN_FILE", OB_CFG_STRING, NULL, 0, 0, NULL,
	    false, api_token_file,
	    "require Authorization: Bearer TOKEN on every route but GET /healthz"
	    " (else 401); the file holds the accepted tokens, one per line (16..256 printable"
	    " characters; '#' comments), read at start; tokens are never logged. A line"
	    " 'scope=NAME TOKEN' puts the token in scope NAME (a-z 0-9 _ -, up to 32):"
	    " idempotency keys and reports are per scope (another scope's same key is a new"
	    " request); a bare TOKEN is in the default scope. 'topics=P1,P2' before the token"
	    " (after the scope) limits POST /v1/messages to topics matching those shell patterns"
	    " (else 403)"),
	OB_CFG_OPT_TLS_CERT(tls_cert,
	    "with --http https://: the server's certificate (PEM; chain allowed)"),
	OB_CFG_OPT_TLS_KEY(tls_key, "with --http https://"),
	OB_CFG_OPT_TLS_CA(tls_ca, "with --http https://, optional: CA certificate(s)"
	    " (PEM); every client must then present a certificate signed by it (mutual TLS),"
	    " else the handshake fails"),
	OB_CFG_OPT_FAULT("fault-lose-response", "OUTBOX_FAULT_LOSE_RESPONSE",
	    fault_lose_response, "fault: after COMMIT close the connection without a byte, N times"),
	OB_CFG_OPT_FAULT("fault-crash", "OUTBOX_FAULT_CRASH", fault_crash,
	    "fault: SIGKILL self mid-request (none: after commit; split: before the key is"
	    " recorded; atomic: after the claim), N times"),
	OB_CFG_OPT_FAULT("fault-slow", "OUTBOX_FAULT_SLOW", fault_slow,
	    "fault: sleep --fault-slow-ms after the key claim, N times"),
	OB_CFG_OPT("fault-slow-ms", "OUTBOX_FAULT_SLOW_MS", OB_CFG_DURATION, "1s", 0, 3600000, NULL,
	    false, fault_slow_ms, "how long a --fault-slow sleep lasts"),
	OB_CFG_END,
};

static const struct ob_program program = { .events = "producer",
	.config = PRODUCER_PROGRAM("serve",
    "--db CONNINFO [--http http(s)://HOST:PORT] [options]",
    "Serve the idempotent bug-report API: POST /v1/reports (Idempotency-Key required),"
    " GET /v1/reports?idempotency_key=K, GET /v1/reports/{id}, GET /healthz. In atomic mode"
    " the report, its outbox record (topic report.created) and the key's stored response"
    " commit in ONE transaction, only while the key still carries this request's fencing"
    " token. With --http https:// the API is served over TLS, and with --tls-ca only"
    " to clients holding a certificate from that CA (docs/security.md).",
    serve_options) };

static bool
ready_cb(void *arg)
{
	return http_server_ready(arg);
}

static bool
is_set(const char *s)
{
	return s != NULL && s[0] != '\0';
}

/* --http's scheme against the TLS flags; with https://, the files read and
 * checked into *out (NULL for http://). OB_OK, or OB_EINVAL with one line. */
static int
serve_tls(const struct serve_config *cfg, struct ob_httpd_tls **out, char *err, size_t errlen)
{
	bool https = strncmp(cfg->http, "https://", 8) == 0;
	*out = NULL;
	if (!https) {
		const char *flag = is_set(cfg->tls_cert) ? "--tls-cert"
		    : is_set(cfg->tls_key)              ? "--tls-key"
		    : is_set(cfg->tls_ca)               ? "--tls-ca"
		                                        : NULL;
		if (flag != NULL) {
			snprintf(err, errlen, "%s is set but --http %s is not https:// (it would protect"
			    " nothing)", flag, cfg->http);
			return OB_EINVAL;
		}
		return OB_OK;
	}
	if (!is_set(cfg->tls_cert) || !is_set(cfg->tls_key)) {
		snprintf(err, errlen, "--http %s needs %s", cfg->http,
		    !is_set(cfg->tls_cert) && !is_set(cfg->tls_key) ? "--tls-cert and --tls-key"
		    : !is_set(cfg->tls_cert)                        ? "--tls-cert (--tls-key is set)"
		                                                    : "--tls-key (--tls-cert is set)");
		return OB_EINVAL;
	}
	struct ob_httpd_tls_files f = { cfg->tls_cert, cfg->tls_key,
		is_set(cfg->tls_ca) ? cfg->tls_ca : NULL };
	return ob_httpd_tls_new(&f, out, err, errlen);
}

int
producer_cmd_serve(int argc, char **argv)
{
	struct serve_config cfg;
	char err[1024];
	int code;
	struct http_server *srv = NULL;
	struct keygc *gc = NULL;
	struct producer_metrics *pm = NULL;
	struct ob_http_endpoint *ep = NULL;
	struct producer_tokens *tokens = NULL;
	struct ob_httpd_tls *tls = NULL;

	if ((code = ob_program_start(&program, &cfg, argc, argv, NULL)) >= 0)
		return code;
	code = 2;
	bool metrics_on = cfg.metrics != NULL && cfg.metrics[0] != '\0';
	if (cfg.lease < cfg.max_processing) {
		fprintf(stderr, "outbox-producer serve: --lease %" PRId64 "ms is shorter than"
		    " --max-processing %" PRId64 "ms: a live slow request would be taken over and"
		    " fenced out\n", cfg.lease, cfg.max_processing);
		goto out;
	}
	if (cfg.header_timeout > cfg.read_timeout) {
		fprintf(stderr, "outbox-producer serve: --header-timeout %" PRId64 "ms is longer than"
		    " --read-timeout %" PRId64 "ms (the whole request's deadline)\n",
		    cfg.header_timeout, cfg.read_timeout);
		goto out;
	}
	if (serve_tls(&cfg, &tls, err, sizeof(err)) != OB_OK) {
		fprintf(stderr, "outbox-producer serve: %s\n", err);
		goto out;
	}
	if (cfg.api_token_file != NULL && cfg.api_token_file[0] != '\0' &&
	    producer_tokens_load(cfg.api_token_file, &tokens, err, sizeof(err)) != OB_OK) {
		fprintf(stderr, "outbox-producer serve: %s\n", err);
		goto out;
	}

	static struct producer_faults faults = {
		.lose_response = { "producer.lose_response", 0 },
		.crash = { "producer.crash", 0 },
		.slow = { "producer.slow", 0 },
	};
	ob_fault_arm(&faults.lose_response, cfg.fault_lose_response);
	ob_fault_arm(&faults.crash, cfg.fault_crash);
	ob_fault_arm(&faults.slow, cfg.fault_slow);
	faults.slow_ms = cfg.fault_slow_ms;
	static _Atomic int live_mode;
	static struct ob_fault *const admin_faults[] = { &faults.lose_response, &faults.crash,
		&faults.slow, NULL };
	static const char *const mode_names[] = { "none", "split", "atomic", NULL };
	static const struct ob_demo_mode admin_modes[] = {
		{ "idempotency", mode_names, &live_mode }, { NULL, NULL, NULL } };
	static const struct ob_demo_admin admin = { admin_faults, admin_modes };

	if (cfg.threads == 0) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		cfg.threads = cpus > 1 ? 2 * cpus : 2;
	}
	/* Every connection the cap allows, the metrics endpoint's, one per
	 * serving thread, and the rest of the process must fit. */
	if (cfg.max_connections > 0 &&
	    ob_httpd_reserve_fds(cfg.max_connections + OB_HTTP_ENDPOINT_MAX_CONNS + cfg.threads +
	            OB_HTTPD_FD_RESERVE, err, sizeof(err)) != OB_OK) {
		fprintf(stderr, "outbox-producer serve: --max-connections %" PRId64 ": %s\n",
		    cfg.max_connections, err);
		goto out;
	}
	struct http_server_config hcfg = {
		.url = cfg.http,
		.tls = tls,
		.db = cfg.db,
		.threads = (int)cfg.threads,
		.max_queue = (int)cfg.max_queue,
		.limits = {
			.max_conns = (int)cfg.max_connections,
			.idle_timeout_ms = cfg.idle_timeout,
			.header_timeout_ms = cfg.header_timeout,
			.request_timeout_ms = cfg.read_timeout,
			.write_timeout_ms = cfg.write_timeout,
			.max_header = (size_t)cfg.max_header,
			.max_body = (size_t)cfg.max_body,
		},
		.api = { .lease_ms = cfg.lease, .fencing = !cfg.no_fencing, .faults = &faults },
	};
	producer_mode_parse(cfg.idempotency, &hcfg.api.mode);
	_Static_assert(PRODUCER_MODE_NONE == 0 && PRODUCER_MODE_SPLIT == 1 &&
	    PRODUCER_MODE_ATOMIC == 2, "mode_names is indexed by the mode");
	atomic_store(&live_mode, (int)hcfg.api.mode);
	if (cfg.demo_admin)
		hcfg.api.live_mode = &live_mode;
	if (metrics_on && producer_metrics_new(&pm) != OB_OK) {
		fprintf(stderr, "outbox-producer serve: out of memory (metrics)\n");
		code = 1;
		goto out;
	}
	hcfg.api.metrics = pm;
	hcfg.conn_metrics = pm != NULL ? pm->reg : NULL;
	hcfg.tokens = tokens;

	/* Before any thread starts: a signal only counts and wakes main. */
	code = 1;
	if (ob_program_signals(&program) != OB_OK)
		goto out;
	if (http_server_start(&hcfg, &srv, err, sizeof(err)) != OB_OK) {
		fprintf(stderr, "outbox-producer serve: %s\n", err);
		goto out;
	}
	if (keygc_start(cfg.db, cfg.key_retention, cfg.gc_interval, (int)cfg.gc_batch, pm, &gc,
	        err, sizeof(err)) != OB_OK) {
		fprintf(stderr, "outbox-producer serve: %s\n", err);
		goto out;
	}
	if (ob_program_serve_metrics(&program, &cfg, pm != NULL ? pm->reg : NULL, ready_cb, srv,
	        &admin, &ep) != OB_OK)
		goto out;
	int port = http_server_port(srv);
	char url[64];
	snprintf(url, sizeof(url), "%s://127.0.0.1:%d", tls != NULL ? "https" : "http", port);
	if (ob_program_ready(&program, &cfg, url) != OB_OK)
		goto out;
	ob_info("producer.started", "http=%s port=%d idempotency=%s%s threads=%d lease_ms=%" PRId64
	    " key_retention_ms=%" PRId64 " max_connections=%" PRId64 " idle_timeout_ms=%" PRId64
	    " header_timeout_ms=%" PRId64 " read_timeout_ms=%" PRId64 " tls=%s", cfg.http, port,
	    cfg.idempotency, hcfg.api.mode != PRODUCER_MODE_ATOMIC ? "(broken-mode)" : "",
	    (int)cfg.threads, cfg.lease, cfg.key_retention, cfg.max_connections, cfg.idle_timeout,
	    cfg.header_timeout, cfg.read_timeout,
	    tls == NULL ? "off" : ob_httpd_tls_mutual(tls) ? "mutual" : "on");
	if (cfg.max_connections == 0 || cfg.idle_timeout == 0)
		ob_warn("producer.http.unprotected", "max_connections=%" PRId64 " idle_timeout_ms=%"
		    PRId64 " risk=descriptor_exhaustion", cfg.max_connections, cfg.idle_timeout);
	if (cfg.no_fencing)
		ob_warn("producer.fencing_off", "mode=%s", "TEST-ONLY");
	if (tokens != NULL)
		ob_info("producer.auth.bearer", "tokens=%d scopes=%d", producer_tokens_count(tokens),
		    producer_tokens_scopes(tokens));

	struct ob_reload reload = { &program.config, &cfg, sizeof(cfg), argc, argv, "producer", NULL };
	ob_program_wait(&program, &reload, NULL, NULL);
	code = 0;
out:
	/* The endpoint's ready callback reads srv: stop it first. */
	ob_http_endpoint_stop(ep);
	if (gc != NULL)
		keygc_stop(gc);
	if (srv != NULL)
		http_server_stop(srv);
	producer_metrics_free(pm);
	producer_tokens_free(tokens);
	ob_httpd_tls_free(tls); /* after the server that borrowed it */
	ob_cfg_free(serve_options, &cfg);
	return code;
}
