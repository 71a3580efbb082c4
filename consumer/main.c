/*
 * main.c - outbox-consumer: parse config, set up log and signals, serve.
 * The option table below is the one source of --help and of the
 * configuration reference in docs/configuration.md (--help-markdown).
 * With --metrics, /metrics, /healthz and /readyz are served from nng's HTTP
 * threads off the metrics registry (consumer/metrics.h): a scrape reads
 * atomics only and never waits for a request. With --demo-admin (demos
 * only; --metrics must be loopback) the same listener serves
 * /admin/faults (outbox/demo_admin.h): the fault counters and the dedup
 * mode, an atomic the serving threads read once per batch
 * (inbox_options.live_dedup).
 */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>

#include "outbox/bus_tls.h"
#include "outbox/config_rows.h"
#include "outbox/err.h"
#include "outbox/demo_admin.h"
#include "outbox/http_endpoint.h"
#include "outbox/log.h"
#include "outbox/program.h"
#include "outbox/reload.h"
#include "handler_webhook.h"
#include "retry_after.h"
#include "webhook_http.h"
#include "metrics.h"
#include "server.h"
#include "tls_reload.h"

struct consumer_config {
	char *db;
	char *listen;
	char *tls_cert;
	char *tls_key;
	char *tls_ca;
	int64_t threads;
	char *handler;
	char *pooler;
	char *webhook_url;
	char *webhook_ca;
	char *webhook_server_name;
	char *webhook_secret_file;
	int64_t webhook_timeout;
	int64_t webhook_lease;
	int64_t webhook_max_retry_after;
	struct ob_cfg_list webhook_at_most_once;
	int64_t lock_timeout;
	int64_t dedup_retention;
	int64_t max_redelivery_age;
	int64_t purge_interval;
	int64_t purge_batch;
	int64_t max_payload;
	int64_t max_batch;
	bool no_dedup;
	bool no_fencing;
	bool no_source_gate;
	char *log_level;
	char *log_format;
	char *config;
	char *metrics;
	bool demo_admin;
	char *ready_file;
	int64_t fault_drop_reply;
	int64_t fault_die_before_commit;
	int64_t fault_die_after_commit;
	int64_t fault_slow;
	int64_t fault_slow_ms;
	int64_t fault_die_after_call;
	int64_t fault_stall_after_call;
	int64_t fault_stall_before_call;
};

#define OB_CFG_STRUCT struct consumer_config

static const struct ob_cfg_opt consumer_options[] = {
	OB_CFG_OPT_DB(db, "the consumer's database (inbox schema)"),
	OB_CFG_OPT("listen", "OUTBOX_LISTEN", OB_CFG_STRING, "tcp://127.0.0.1:7450", 0, 0, NULL,
	    false, listen, "nng URL to serve requests on (tcp://, ipc://, tls+tcp:// = mutual"
	    " TLS, needs --tls-cert, --tls-key, --tls-ca; tcp port 0 = any free port, see"
	    " --ready-file)"),
	OB_CFG_OPT_TLS_CERT(tls_cert, "with --listen tls+tcp://: this consumer's certificate"
	    " (PEM; chain allowed); SIGHUP re-reads it, --tls-key and --tls-ca and re-opens the"
	    " listener"),
	OB_CFG_OPT_TLS_KEY(tls_key, "with --listen tls+tcp://"),
	OB_CFG_OPT_TLS_CA(tls_ca, "with --listen tls+tcp://: CA certificate(s) (PEM); a relay"
	    " must present a client certificate signed by it. Every certificate it ever signed is"
	    " admitted (nng 1.5 cannot read the peer's name): give this hop a CA of its own"
	    " (docs/security.md)"),
	OB_CFG_OPT("threads", "OUTBOX_THREADS", OB_CFG_INT, "4", 1, 256, NULL, false, threads,
	    "serving threads, each with its own DB connection: requests in flight"),
	OB_CFG_OPT_POOLER(pooler),
	OB_CFG_OPT("handler", "OUTBOX_HANDLER", OB_CFG_ENUM, "record", 0, 0, "record|webhook",
	    false, handler, "effect to apply: record = a row in inbox.notifications;"
	    " webhook = POST to --webhook-url with the Idempotency-Key passed on"),
	OB_CFG_OPT("webhook-url", "OUTBOX_WEBHOOK_URL", OB_CFG_STRING, NULL, 0, 0, NULL, false,
	    webhook_url, "downstream URL of the webhook handler (required with it): http://, or"
	    " https:// (the target's certificate always verified: against the system CA store,"
	    " SSL_CERT_FILE / SSL_CERT_DIR when set, or --webhook-ca). A proxy from the"
	    " environment: https_proxy / HTTPS_PROXY, http_proxy (http://), all_proxy, no_proxy /"
	    " NO_PROXY; connections are kept and reused"),
	OB_CFG_OPT("webhook-ca", "OUTBOX_WEBHOOK_CA", OB_CFG_STRING, NULL, 0, 0, NULL, false,
	    webhook_ca,
	    "with an https:// --webhook-url: trust only these CA certificate(s) (PEM) for the"
	    " target, instead of the system CA store; a handshake that fails is retried, never"
	    " skipped"),
	OB_CFG_OPT("webhook-server-name", "OUTBOX_WEBHOOK_SERVER_NAME", OB_CFG_STRING, NULL, 0, 0,
	    NULL, false, webhook_server_name, "with an https:// --webhook-url: the DNS name the"
	    " target's certificate must carry, and the Host the request is sent to (TLS SNI"
	    " too, and what no_proxy matches), the connection still going to the URL's host and"
	    " port; default: the URL's host"),
	OB_CFG_OPT("webhook-secret-file", "OUTBOX_WEBHOOK_SECRET_FILE", OB_CFG_STRING, NULL, 0, 0,
	    NULL, false, webhook_secret_file, "sign every webhook call: header Outbox-Signature:"
	    " t=UNIX_SECONDS,v1=HEX(HMAC-SHA256(secret, t + '.' + body)), one v1 per secret in"
	    " this file (one per line, 16..256 printable characters, up to 4: rotation); read"
	    " at start, never logged"),
	OB_CFG_OPT("webhook-timeout", "OUTBOX_WEBHOOK_TIMEOUT", OB_CFG_DURATION, "5s", 10, 600000,
	    NULL, false, webhook_timeout, "longest wait for one downstream call"),
	OB_CFG_OPT("webhook-lease", "OUTBOX_WEBHOOK_LEASE", OB_CFG_DURATION, "30s", 100, 86400000,
	    NULL, false, webhook_lease, "lease of a webhook key claim; a claim left by a"
	    " crashed consumer is taken over after it (must exceed --webhook-timeout)"),
	OB_CFG_OPT("webhook-max-retry-after", "OUTBOX_WEBHOOK_MAX_RETRY_AFTER", OB_CFG_DURATION,
	    "1h", 0, WEBHOOK_RETRY_AFTER_CEILING_MS, NULL, false, webhook_max_retry_after,
	    "longest delay a downstream's Retry-After (seconds or HTTP-date, on any answer"
	    " that is retried) may ask for: passed on to the relay, which sends that message"
	    " again no earlier; longer ones are cut to this; 0 = pass none on"),
	OB_CFG_OPT("webhook-at-most-once", "OUTBOX_WEBHOOK_AT_MOST_ONCE", OB_CFG_LIST, NULL, 0, 0,
	    NULL, false, webhook_at_most_once, "topic pattern (fnmatch: notify.sms, pager.*) whose"
	    " webhook calls are made at most once, for a downstream that ignores the"
	    " Idempotency-Key: a call whose outcome is unknown (timeout, connection lost) is"
	    " parked for outboxctl webhook resolve, never sent again; repeatable or"
	    " comma-separated; default none: at-least-once with the key"),
	OB_CFG_OPT("lock-timeout", "OUTBOX_LOCK_TIMEOUT", OB_CFG_DURATION, "1s", 1, 600000, NULL,
	    false, lock_timeout, "longest wait for a key another transaction is applying;"
	    " then that message is answered retry"),
	OB_CFG_OPT("dedup-retention", "OUTBOX_DEDUP_RETENTION", OB_CFG_DURATION, "7d", 60000,
	    3650LL * 86400000, NULL, false, dedup_retention, "a dedup record is purged once"
	    " its message was enqueued longer ago than this (plus 1h) and applied longer ago;"
	    " a message enqueued longer ago is rejected, never applied blindly (both by the"
	    " inbox database's clock)"),
	OB_CFG_OPT("max-redelivery-age", "OUTBOX_MAX_REDELIVERY_AGE", OB_CFG_DURATION, "24h", 1000,
	    3650LL * 86400000, NULL, false, max_redelivery_age, "the relay's --max-age plus"
	    " the longest outage to ride out (an outage delays redeliveries past --max-age):"
	    " a warning at start when --dedup-retention is shorter"),
	OB_CFG_OPT("purge-interval", "OUTBOX_PURGE_INTERVAL", OB_CFG_DURATION, "1m", 0, 86400000,
	    NULL, false, purge_interval, "how often expired dedup records are purged (0 = never)"),
	OB_CFG_OPT("purge-batch", "OUTBOX_PURGE_BATCH", OB_CFG_INT, "10000", 1, 1000000, NULL,
	    false, purge_batch, "dedup records deleted per purge statement"),
	OB_CFG_OPT("max-payload", "OUTBOX_MAX_PAYLOAD", OB_CFG_SIZE, "1m", 0, OB_WIRE_MAX_PAYLOAD,
	    NULL, false, max_payload, "largest payload accepted, in bytes; with --max-batch"
	    " it sets the receive limit: a frame longer than --max-batch x (--max-payload +"
	    " 811) + 76 bytes closes its connection unread"),
	OB_CFG_OPT("max-batch", "OUTBOX_MAX_BATCH", OB_CFG_INT, "1000", 1, OB_WIRE_MAX_BATCH, NULL,
	    false, max_batch, "most messages accepted in one request (keep it near the"
	    " relays' --batch: it bounds the receive limit, see --max-payload)"),
	OB_CFG_OPT("no-dedup", "OUTBOX_NO_DEDUP", OB_CFG_BOOL, "false", 0, 0, NULL, false,
	    no_dedup, "BROKEN MODE for demos and tests: apply without the dedup record"),
	OB_CFG_OPT_NO_FENCING(no_fencing, "BROKEN MODE for demos and tests: the webhook handler"
	    " records a call whoever holds its key now (a stale holder's write is not refused)"),
	OB_CFG_OPT("no-source-gate", "OUTBOX_NO_SOURCE_GATE", OB_CFG_BOOL, "false", 0, 0, NULL,
	    false, no_source_gate,
	    "BROKEN MODE for tests: dedup without the source gate (a frame of"
	    " the empty source and a named one of one key can both apply)"),
	OB_CFG_OPT_LOG_LEVEL(log_level),
	OB_CFG_OPT_LOG_FORMAT(log_format),
	OB_CFG_OPT_CONFIG(config),
	OB_CFG_OPT_METRICS(metrics, ""),
	OB_CFG_OPT_DEMO_ADMIN(demo_admin, "the consumer.* faults and the mode dedup (on|off;"
	    " off is --no-dedup)"),
	OB_CFG_OPT_READY_FILE("OUTBOX_READY_FILE", ready_file),
	OB_CFG_OPT_FAULT("fault-drop-reply", "OUTBOX_FAULT_DROP_REPLY", fault_drop_reply,
	    "fault: drop the reply after COMMIT, N times"),
	OB_CFG_OPT_FAULT("fault-die-before-commit", "OUTBOX_FAULT_DIE_BEFORE_COMMIT",
	    fault_die_before_commit,
	    "fault: SIGKILL self before COMMIT, N times (once per process life)"),
	OB_CFG_OPT_FAULT("fault-die-after-commit", "OUTBOX_FAULT_DIE_AFTER_COMMIT",
	    fault_die_after_commit, "fault: SIGKILL self after COMMIT, before replying, N times"),
	OB_CFG_OPT_FAULT("fault-slow", "OUTBOX_FAULT_SLOW", fault_slow,
	    "fault: sleep --fault-slow-ms before COMMIT, N times"),
	OB_CFG_OPT("fault-slow-ms", "OUTBOX_FAULT_SLOW_MS", OB_CFG_DURATION, "5s", 0, 3600000,
	    NULL, false, fault_slow_ms, "how long a --fault-slow (or --fault-stall-after-call,"
	    " --fault-stall-before-call) sleep lasts"),
	OB_CFG_OPT_FAULT("fault-die-after-call", "OUTBOX_FAULT_DIE_AFTER_CALL",
	    fault_die_after_call,
	    "fault (webhook): SIGKILL self after the downstream call returned, N times"),
	OB_CFG_OPT_FAULT("fault-stall-after-call", "OUTBOX_FAULT_STALL_AFTER_CALL",
	    fault_stall_after_call, "fault (webhook): sleep --fault-slow-ms after the downstream"
	    " call returned, before recording it, N times"),
	OB_CFG_OPT_FAULT("fault-stall-before-call", "OUTBOX_FAULT_STALL_BEFORE_CALL",
	    fault_stall_before_call, "fault (webhook): sleep --fault-slow-ms after claiming the"
	    " key, before calling the downstream, N times (a holder that outlives its lease and"
	    " calls late)"),
	OB_CFG_END,
};

/* --max-payload's help states the receive limit in numbers. */
_Static_assert(OB_WIRE_REQ_MSG_OVERHEAD_MAX == 811 &&
    OB_WIRE_REQ_HEADER + CONSUMER_SP_HEADER_MAX == 76, "--max-payload's help");

static const struct ob_program program = { .events = "consumer", .config = {
	.name = "outbox-consumer",
	.synopsis = "outbox-consumer --db CONNINFO [--listen URL] [options]",
	.description =
    "Serve outbox deliveries over nng REP. Each request's messages are applied in"
    " one transaction: the dedup record (inbox.processed) and the effect commit"
    " together; a (topic, key) already processed answers 'duplicate' and applies"
    " nothing (the same key on another topic is another message). The reply is"
    " sent only after COMMIT. A (topic, key) redelivered with a different"
    " payload is rejected (fingerprint mismatch). With --listen tls+tcp:// only"
    " relays holding a client certificate signed by --tls-ca are served"
    " (docs/security.md). Run `outboxctl migrate --schema inbox` first.",
	.options = consumer_options,
} };

static uint64_t
consumer_refusals_total(const struct consumer_counters *c)
{
	uint64_t n = 0;
	for (int r = 0; r < OB_BUS_REFUSED_COUNT; r++)
		n += c->handshake_refused[r];
	return n;
}

static bool
ready_cb(void *arg)
{
	return consumer_server_ready(arg);
}

int
main(int argc, char **argv)
{
	struct consumer_config cfg;
	char err[1024];
	int code;
	struct consumer_server *srv = NULL;
	struct inbox_handler webhook = { 0 };
	struct consumer_metrics *cm = NULL;
	struct ob_http_endpoint *ep = NULL;
	bool curl_on = false;

	/* --help-markdown: docs/configuration.md, scripts/gen-config-doc.sh */
	if ((code = ob_program_start(&program, &cfg, argc, argv, NULL)) >= 0)
		return code;
	code = 2;
	bool metrics_on = cfg.metrics != NULL && cfg.metrics[0] != '\0';

	static struct inbox_faults faults = {
		.die_before_commit = { "consumer.die_before_commit", 0 },
		.die_after_commit = { "consumer.die_after_commit", 0 },
		.slow = { "consumer.slow", 0 },
	};
	static struct ob_fault drop_reply = { "consumer.drop_reply", 0 };
	ob_fault_arm(&faults.die_before_commit, cfg.fault_die_before_commit);
	ob_fault_arm(&faults.die_after_commit, cfg.fault_die_after_commit);
	ob_fault_arm(&faults.slow, cfg.fault_slow);
	faults.slow_ms = cfg.fault_slow_ms;
	faults.no_source_gate = cfg.no_source_gate;
	ob_fault_arm(&drop_reply, cfg.fault_drop_reply);
	static struct ob_fault die_after_call = { "consumer.webhook.die_after_call", 0 };
	static struct ob_fault stall_after_call = { "consumer.webhook.stall_after_call", 0 };
	static struct ob_fault stall_before_call = { "consumer.webhook.stall_before_call", 0 };
	ob_fault_arm(&die_after_call, cfg.fault_die_after_call);
	ob_fault_arm(&stall_after_call, cfg.fault_stall_after_call);
	ob_fault_arm(&stall_before_call, cfg.fault_stall_before_call);
	static _Atomic int live_dedup;
	atomic_store(&live_dedup, cfg.no_dedup ? 0 : 1);
	static struct ob_fault *const admin_faults[] = { &faults.die_before_commit,
		&faults.die_after_commit, &faults.slow, &drop_reply, &die_after_call,
		&stall_after_call, &stall_before_call, NULL };
	static const char *const dedup_names[] = { "off", "on", NULL };
	static const struct ob_demo_mode admin_modes[] = {
		{ "dedup", dedup_names, &live_dedup }, { NULL, NULL, NULL } };
	static const struct ob_demo_admin admin = { admin_faults, admin_modes };

	static struct consumer_counters counters;
	const struct inbox_handler *handler = &inbox_handler_record;
	bool is_webhook = strcmp(cfg.handler, "webhook") == 0;
	if (cfg.no_fencing && !is_webhook) {
		fprintf(stderr, "outbox-consumer: --no-fencing applies to --handler webhook only"
		    " (the record handler holds no key claim)\n");
		code = 2;
		goto out;
	}
	if (metrics_on && consumer_metrics_new(is_webhook, &cm) != OB_OK) {
		fprintf(stderr, "outbox-consumer: out of memory (metrics)\n");
		code = 1;
		goto out;
	}
	if (is_webhook) {
		if (cfg.webhook_url == NULL) {
			fprintf(stderr, "outbox-consumer: --handler webhook needs --webhook-url\n");
			goto out;
		}
		/* libcurl (and OpenSSL under it) set up before any thread of
		 * ours calls it; undone at the end */
		if (webhook_http_global_init(err, sizeof(err)) != OB_OK) {
			fprintf(stderr, "outbox-consumer: %s\n", err);
			code = 1;
			goto out;
		}
		curl_on = true;
		struct webhook_config wcfg = { cfg.webhook_url, cfg.webhook_timeout,
			cfg.webhook_lease, &counters.webhook, &die_after_call, &stall_after_call,
			&stall_before_call, cfg.fault_slow_ms, cfg.no_dedup, cfg.no_fencing,
			cm != NULL ? &cm->webhook : NULL, cfg.webhook_ca, cfg.webhook_server_name,
			cfg.webhook_secret_file, cfg.webhook_max_retry_after,
			cfg.webhook_at_most_once.items, cfg.webhook_at_most_once.n };
		if (webhook_handler_new(&wcfg, &webhook, err, sizeof(err)) != OB_OK) {
			fprintf(stderr, "outbox-consumer: %s\n", err);
			goto out;
		}
		handler = &webhook;
	} else if (cfg.webhook_url != NULL || cfg.webhook_ca != NULL ||
	    cfg.webhook_server_name != NULL || cfg.webhook_secret_file != NULL ||
	    cfg.webhook_at_most_once.n > 0) {
		fprintf(stderr, "outbox-consumer: --%s needs --handler webhook\n",
		    cfg.webhook_url != NULL ? "webhook-url" : cfg.webhook_ca != NULL ? "webhook-ca"
		    : cfg.webhook_server_name != NULL ? "webhook-server-name"
		    : cfg.webhook_secret_file != NULL ? "webhook-secret-file"
		                                      : "webhook-at-most-once");
		goto out;
	}
	if (cfg.dedup_retention < cfg.max_redelivery_age)
		ob_warn("consumer.retention.short", "dedup_retention_ms=%lld"
		    " max_redelivery_age_ms=%lld hint=\"messages redelivered after the"
		    " retention are rejected as possible duplicates of purged records\"",
		    (long long)cfg.dedup_retention, (long long)cfg.max_redelivery_age);

	/* tls+tcp:// needs the three files; they are read and parsed now, so a
	 * bad one stops the start with one line (exit 2). */
	struct ob_bus_tls_files tls_files = { cfg.tls_cert, cfg.tls_key, cfg.tls_ca, NULL };
	const char *urls[] = { cfg.listen };
	nng_tls_config *tls = NULL;
	if (ob_bus_tls_check(urls, 1, &tls_files, true, err, sizeof(err)) != OB_OK ||
	    (ob_bus_tls_url(cfg.listen) &&
	        ob_bus_tls_config_new(true, &tls_files, cfg.listen, &tls, err, sizeof(err)) !=
	            OB_OK)) {
		fprintf(stderr, "outbox-consumer: %s\n", err);
		goto out;
	}

	struct consumer_server_config scfg = {
		.db = cfg.db,
		.session_pooler = strcmp(cfg.pooler, "session") == 0,
		.listen = cfg.listen,
		.tls = tls,
		.threads = (int)cfg.threads,
		.limits = { (uint32_t)cfg.max_payload, (uint32_t)cfg.max_batch },
		.inbox = { !cfg.no_dedup, handler, &faults, cfg.dedup_retention,
			cfg.lock_timeout, cfg.demo_admin ? &live_dedup : NULL },
		.drop_reply = &drop_reply,
		.purge_interval_ms = cfg.purge_interval,
		.purge_batch = (int)cfg.purge_batch,
		.counters = &counters,
		.metrics = cm,
	};

	/* Before any thread starts: a signal only counts and wakes main. */
	if (ob_program_signals(&program) != OB_OK)
		goto out;

	int started = consumer_server_start(&scfg, &srv, err, sizeof(err));
	if (tls != NULL)
		nng_tls_config_free(tls); /* the listener holds its own reference */
	if (started != OB_OK) {
		fprintf(stderr, "outbox-consumer: %s\n", err);
		goto out;
	}
	if (ob_program_serve_metrics(&program, &cfg, cm != NULL ? cm->reg : NULL, ready_cb, srv,
	        &admin, &ep) != OB_OK) {
		code = 1;
		goto out;
	}
	/* The URL with the port bound (--listen tcp://HOST:0), for the log line
	 * and the ready file alike. */
	const char *url = consumer_server_url(srv);
	if (ob_program_ready(&program, &cfg, url) != OB_OK) {
		code = 1;
		goto out;
	}
	char q[600];
	ob_info("consumer.started", "listen=%s threads=%d dedup=%s handler=%s fencing=%s"
	    " tls=%s recv_max=%zu", ob_log_q(url, q, sizeof(q)), (int)cfg.threads,
	    cfg.no_dedup ? "OFF(broken-mode)" : "on", cfg.handler,
	    cfg.no_fencing ? "OFF(broken-mode)" : "on",
	    ob_bus_tls_url(cfg.listen) ? "mutual" : "off", CONSUMER_RECV_MAX(&scfg.limits));

	/* SIGHUP: the settings, then (tls+tcp://) the certificate files */
	struct consumer_tls_reload tls_reload = { srv, tls_files, url, cm };
	struct ob_reload reload = { &program.config, &cfg, sizeof(cfg), argc, argv, "consumer", NULL };
	ob_program_wait(&program, &reload, ob_bus_tls_url(cfg.listen) ? consumer_tls_reload : NULL,
	    &tls_reload);
	const struct consumer_counters *c = consumer_server_counters(srv);
	ob_info("consumer.stopped", "requests=%llu applied=%llu duplicate=%llu retried=%llu"
	    " rejected=%llu fingerprint_mismatch=%llu bad_frames=%llu purged=%llu"
	    " webhook_calls=%llu webhook_fenced_out=%llu handshakes_refused=%llu",
	    (unsigned long long)c->requests, (unsigned long long)c->applied,
	    (unsigned long long)c->duplicate, (unsigned long long)c->retried,
	    (unsigned long long)c->rejected, (unsigned long long)c->fingerprint_mismatch,
	    (unsigned long long)c->bad_frames, (unsigned long long)c->purged,
	    (unsigned long long)c->webhook.calls, (unsigned long long)c->webhook.fenced_out,
	    (unsigned long long)consumer_refusals_total(c));
	code = 0;
out:
	/* The endpoint's ready callback reads srv: stop it first. */
	ob_http_endpoint_stop(ep);
	if (srv != NULL)
		consumer_server_stop(srv);
	consumer_metrics_free(cm);
	if (webhook.arg != NULL)
		webhook_handler_free(&webhook);
	if (curl_on)
		webhook_http_global_fini();
	ob_cfg_free(consumer_options, &cfg);
	/* No nng_fini(): it would close the REP socket, which nng 1.5 can
	 * panic on (consumer/server.c); the exit releases it. */
	return code;
}
