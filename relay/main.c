/*
 * main.c - outbox-relay: parse and check config, set up the log and the
 * shared state, then hand over to the supervisor (supervise.c), which forks
 * the workers (and, with --metrics, the metrics process). The option table
 * below is the one source of --help and of the configuration reference in
 * docs/configuration.md (--help-markdown).
 */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <nng/nng.h>

#include "outbox/bus_tls.h"
#include "outbox/config_rows.h"
#include "outbox/err.h"
#include "outbox/log.h"
#include "outbox/pg.h"
#include "outbox/program.h"
#include "outbox/protocol.h"
#include "outbox/wire.h"
#include "relay.h"
#include "routes.h"
#include "supervise.h"
#include "route_tls.h"
#include "outbox/source.h"
#include "standby_gate.h"

#define OB_CFG_STRUCT struct relay_config

static const struct ob_cfg_opt relay_options[] = {
	OB_CFG_OPT_DB(db, "the producer's database (outbox schema)"),
	OB_CFG_OPT("route", "OUTBOX_ROUTE", OB_CFG_LIST, NULL, 0, 0, NULL, true, routes,
	    "TOPIC=URL, repeatable; TOPIC * is the default route (env: comma-separated);"
	    " a tls+tcp:// URL is dialed with mutual TLS (--tls-cert, --tls-key, --tls-ca)"),
	OB_CFG_OPT("source", "OUTBOX_SOURCE", OB_CFG_STRING, NULL, 0, 0, NULL, false, source,
	    "this producer database's name in every frame (wire version 3), 1..63 bytes of"
	    " [A-Za-z0-9._-]; a consumer's dedup identity is (source, topic, key). Default:"
	    " derived from the database, '<system identifier in hex>.<database name>' (a name"
	    " that is not 1..46 bytes of [A-Za-z0-9_-] is hashed: '<id>.sha256.<16 hex>')."
	    " Every relay of one database must send the same; name it when two servers are"
	    " clones of one base backup"),
	OB_CFG_OPT("no-source", "OUTBOX_NO_SOURCE", OB_CFG_BOOL, "false", 0, 0, NULL, false,
	    no_source, "send the empty source, the identity of relays before wire version 3: one"
	    " producer database upgrading keeps every message's identity (and the webhook's"
	    " Idempotency-Key, the key alone). Never with two databases into one consumer:"
	    " their equal keys collide. Not with --source"),
	OB_CFG_OPT_TLS_CERT(tls_cert, "with a tls+tcp:// route: this relay's client certificate"
	    " (PEM; chain allowed), signed by the CA the consumers trust (--tls-ca of"
	    " outbox-consumer); SIGHUP re-reads it, --tls-key and --tls-ca for new connections"),
	OB_CFG_OPT_TLS_KEY(tls_key, "with a tls+tcp:// route"),
	OB_CFG_OPT_TLS_CA(tls_ca, "with a tls+tcp:// route: CA certificate(s) (PEM) the"
	    " consumer's certificate must be signed by; use a CA of this hop's own"
	    " (docs/security.md)"),
	OB_CFG_OPT("tls-server-name", "OUTBOX_TLS_SERVER_NAME", OB_CFG_STRING, NULL, 0, 0, NULL,
	    false, tls_server_name, "with a tls+tcp:// route: the DNS name the consumer's"
	    " certificate must carry (default: each route URL's host; give one when the"
	    " routes name IP addresses)"),
	OB_CFG_OPT("workers", "OUTBOX_WORKERS", OB_CFG_INT, "1", 1, RELAY_MAX_WORKERS, NULL, false,
	    workers, "worker processes forked by the supervisor, each with its own connections"),
	OB_CFG_OPT("shutdown-grace", "OUTBOX_SHUTDOWN_GRACE", OB_CFG_DURATION, "10s", 0, 3600000,
	    NULL, false, shutdown_grace_ms, "on SIGTERM/SIGINT: time for in-flight deliveries"
	    " and releasing unsent claims before workers are SIGKILLed"),
	OB_CFG_OPT("batch", "OUTBOX_BATCH", OB_CFG_INT, "500", 1, OB_WIRE_MAX_BATCH, NULL, false,
	    batch, "messages per request frame"),
	OB_CFG_OPT("batch-bytes", "OUTBOX_BATCH_BYTES", OB_CFG_SIZE, "1m", 1, RELAY_MAX_BATCH_BYTES,
	    NULL, false, batch_bytes, "payload bytes per request frame: a batch ends before the"
	    " message that would pass this (a larger message goes alone); with --batch,"
	    " --max-inflight and --max-payload it bounds a worker's memory"
	    " (docs/operations.md)"),
	OB_CFG_OPT("max-inflight", "OUTBOX_MAX_INFLIGHT", OB_CFG_INT, "4", 1, 256, NULL, false,
	    max_inflight, "batches (one request frame each) in flight per worker; to one"
	    " destination at most this many, fewer while its frames fail"),
	OB_CFG_OPT("lease-ms", "OUTBOX_LEASE_MS", OB_CFG_DURATION, "30s", 100, 86400000, NULL,
	    false, lease_ms, "how long a claim is held; must exceed --delivery-timeout-ms + 1s"),
	OB_CFG_OPT("delivery-timeout-ms", "OUTBOX_DELIVERY_TIMEOUT_MS", OB_CFG_DURATION, "10s",
	    10, 3600000, NULL, false, delivery_timeout_ms,
	    "deadline for a request's round trip (send + consumer COMMIT + reply)"),
	OB_CFG_OPT("poll-ms", "OUTBOX_POLL_MS", OB_CFG_DURATION, "1s", 10, 600000, NULL, false,
	    poll_ms, "poll interval when idle (LISTEN/NOTIFY wakes the relay sooner)"),
	OB_CFG_OPT("linger-ms", "OUTBOX_LINGER_MS", OB_CFG_DURATION, "0", 0, 1000, NULL, false,
	    linger_ms, "after a wakeup, wait this long before claiming, so that a trickle"
	    " leaves in fewer, fuller batches: less database CPU per message, this much more"
	    " latency (docs/operations.md); 0: claim at once"),
	OB_CFG_OPT("backoff-base-ms", "OUTBOX_BACKOFF_BASE_MS", OB_CFG_DURATION, "100ms", 1,
	    3600000, NULL, false, backoff_base_ms, "Full Jitter backoff base"),
	OB_CFG_OPT("backoff-cap-ms", "OUTBOX_BACKOFF_CAP_MS", OB_CFG_DURATION, "30s", 1,
	    86400000, NULL, false, backoff_cap_ms, "Full Jitter backoff cap"),
	OB_CFG_OPT("max-attempts", "OUTBOX_MAX_ATTEMPTS", OB_CFG_INT, "25", 1, 1000000, NULL,
	    false, max_attempts, "attempts that reached a consumer before dead-lettering;"
	    " an attempt that reached none (no connection, an open breaker) is not counted"),
	OB_CFG_OPT("max-age", "OUTBOX_MAX_AGE", OB_CFG_DURATION, "24h", 1000, 365LL * 86400000,
	    NULL, false, max_age_ms, "a message older than this (since its enqueue) is"
	    " dead-lettered when an attempt that reached a consumer fails (answered retry, or"
	    " sent on a connection and never answered); an outage, however long, never"
	    " dead-letters: no attempt reaches a consumer. So a message can be delivered later"
	    " than this after an outage: keep the consumer's --dedup-retention above it plus"
	    " the longest outage to ride out (docs/guarantees.md)"),
	OB_CFG_OPT("max-payload", "OUTBOX_MAX_PAYLOAD", OB_CFG_SIZE, "1m", 0, OB_WIRE_MAX_PAYLOAD,
	    NULL, false, max_payload, "largest payload sent; larger ones are dead-lettered"),
	OB_CFG_OPT("breaker-threshold", "OUTBOX_BREAKER_THRESHOLD", OB_CFG_INT, "5", 1, 1000000,
	    NULL, false, breaker_threshold, "consecutive transport failures that open a"
	    " destination's circuit breaker"),
	OB_CFG_OPT("breaker-probe-interval", "OUTBOX_BREAKER_PROBE_INTERVAL", OB_CFG_DURATION, "2s",
	    10, 3600000, NULL, false, breaker_probe_ms, "while a breaker is open: one probe"
	    " frame per interval; held messages are due again after about this long"),
	OB_CFG_OPT("retention", "OUTBOX_RETENTION", OB_CFG_DURATION, "24h", 0, 3650LL * 86400000,
	    NULL, false, retention_ms, "delivered messages are kept at least this long, then"
	    " dropped with their slot (0 = never)"),
	OB_CFG_OPT("dead-retention", "OUTBOX_DEAD_RETENTION", OB_CFG_DURATION, "7d", 0,
	    3650LL * 86400000, NULL, false, dead_retention_ms, "dead letters older than this"
	    " are deleted, but one that blocks its ordering key (0 = never; keep it longer than"
	    " --retention)"),
	OB_CFG_OPT("purge-interval", "OUTBOX_PURGE_INTERVAL", OB_CFG_DURATION, "60s", 10, 86400000,
	    NULL, false, purge_interval_ms, "how often worker 0 runs a housekeeping pass"),
	OB_CFG_OPT("long-xact-warn", "OUTBOX_LONG_XACT_WARN", OB_CFG_DURATION, "5m", 1000,
	    86400000, NULL, false, long_xact_warn_ms, "a transaction open this long in the"
	    " database (it holds vacuum back) is logged by name at each housekeeping pass"),
	OB_CFG_OPT("on-dead-head", "OUTBOX_ON_DEAD_HEAD", OB_CFG_ENUM, "block", 0, 0, "block|skip",
	    false, on_dead_head, "a dead-lettered head of an ordering key (also a poison message"
	    " the claim dead-letters): block the key until requeued, or skip to its next message"),
	OB_CFG_OPT("synchronous-commit", "OUTBOX_SYNCHRONOUS_COMMIT", OB_CFG_ENUM, "off", 0, 0,
	    "on|off", false, synchronous_commit, "whether the relay's outcome writes and"
	    " empty claims wait for PostgreSQL's WAL flush (a claim that returns messages"
	    " always does, so the producers' commits it read are on disk before delivery);"
	    " off is safe because a write lost in a database crash only causes a redelivery"
	    " the consumer answers as duplicate (docs/relay.md)"),
	OB_CFG_OPT_POOLER(pooler),
	OB_CFG_OPT("retry-budget", "OUTBOX_RETRY_BUDGET", OB_CFG_ENUM, "on", 0, 0, "on|off", false,
	    retry_budget, "pay each retry of a frame from its destination's budget (per worker:"
	    " 500 tokens, a retry 5, after a timeout 10; a delivered frame puts back 1, or 5 when"
	    " it held a redelivery); a retry the budget cannot pay waits --retry-budget-slow"
	    " (outbox_relay_retry_budget_spent_total). off: every retry waits its backoff only"
	    " (docs/retries.md)"),
	OB_CFG_OPT("retry-budget-slow", "OUTBOX_RETRY_BUDGET_SLOW", OB_CFG_DURATION, "10s", 100,
	    3600000, NULL, false, retry_budget_slow_ms, "the slow rate: a retry the budget"
	    " refused waits at least this long (spread by up to a quarter)"),
	OB_CFG_OPT("standby-gate", "OUTBOX_STANDBY_GATE", OB_CFG_ENUM, "none", 0, 0,
	    "none|flush|replay", false, standby_gate, "deliver a batch only once every standby"
	    " of --standby-names has its WAL: flush = on the standby's disk, replay = also"
	    " replayed; none delivers what the primary committed (a failover to an"
	    " asynchronous standby may then leave effects of lost commits; docs/guarantees.md)"),
	OB_CFG_OPT("standby-names", "OUTBOX_STANDBY_NAMES", OB_CFG_LIST, NULL, 0, 0, NULL, false,
	    standby_names, "with --standby-gate: the standbys' application_name (as in"
	    " pg_stat_replication), repeatable; each must be streaming and have caught up"),
	OB_CFG_OPT("standby-gate-timeout", "OUTBOX_STANDBY_GATE_TIMEOUT", OB_CFG_DURATION, "2s", 1,
	    3600000, NULL, false, standby_gate_timeout_ms, "with --standby-gate: how long a"
	    " claimed batch waits for the standbys before it goes back unsent (attempt not"
	    " counted); --lease-ms must exceed it + --delivery-timeout-ms + 1 s"),
	OB_CFG_OPT("standby-poll-ms", "OUTBOX_STANDBY_POLL_MS", OB_CFG_DURATION, "2ms", 1, 10000,
	    NULL, false, standby_poll_ms, "with --standby-gate: how often a waiting worker asks"
	    " pg_stat_replication"),
	OB_CFG_OPT("no-ordering", "OUTBOX_NO_ORDERING", OB_CFG_BOOL, "false", 0, 0, NULL, false,
	    no_ordering, "BROKEN MODE for demos and tests: claim messages of one ordering"
	    " key in parallel, out of order"),
	OB_CFG_OPT("unrouted", "OUTBOX_UNROUTED", OB_CFG_ENUM, "wait", 0, 0, "wait|dead-letter",
	    false, unrouted, "a topic no --route matches (without a default route, TOPIC *):"
	    " wait = never claimed, its messages stay pending for a relay that routes it,"
	    " reported by worker 0 (relay.topic.unrouted, outbox_relay_unrouted_pending;"
	    " outboxctl status shows them unclaimed); dead-letter = claimed and dead-lettered"
	    " at once as 'no route for topic ...'"),
	OB_CFG_OPT("unrouted-log-interval", "OUTBOX_UNROUTED_LOG_INTERVAL", OB_CFG_DURATION, "1m",
	    1000, 86400000, NULL, false, unrouted_log_interval_ms, "with --unrouted wait: worker"
	    " 0 logs relay.topic.unrouted for a topic this relay has no route for whose"
	    " messages have waited longer than this, at most once per topic per interval (and"
	    " reads the outbox's per-topic figures this often when --metrics is off)"),
	OB_CFG_OPT("only-routed", "OUTBOX_ONLY_ROUTED", OB_CFG_BOOL, "false", 0, 0, NULL, false,
	    only_routed, "DEPRECATED: the old name of --unrouted wait, which is the default now;"
	    " accepted with a warning (relay.config.deprecated), not with --unrouted"
	    " dead-letter"),
	OB_CFG_OPT_NO_FENCING(no_fencing,
	    "BROKEN MODE for demos and tests: outcome writes ignore the fence"),
	OB_CFG_OPT_FAULT("fault-die-after-claim", "OUTBOX_FAULT_DIE_AFTER_CLAIM",
	    fault_die_after_claim,
	    "fault: a worker SIGKILLs itself right after a claim, N times in the whole relay"),
	OB_CFG_OPT_FAULT("fault-die-after-send", "OUTBOX_FAULT_DIE_AFTER_SEND",
	    fault_die_after_send, "fault: a worker SIGKILLs itself after a batch's frame was"
	    " sent and answered, before recording its outcome, N times"),
	OB_CFG_OPT_FAULT("fault-stall-after-claim", "OUTBOX_FAULT_STALL_AFTER_CLAIM",
	    fault_stall_after_claim,
	    "fault: a worker sleeps --fault-stall-ms after a claim, before sending, N times"),
	OB_CFG_OPT("fault-stall-ms", "OUTBOX_FAULT_STALL_MS", OB_CFG_DURATION, "0", 0, 86400000,
	    NULL, false, fault_stall_ms, "how long a --fault-stall-after-claim stall lasts"
	    " (required with it; longer than --lease-ms to get fenced out)"),
	OB_CFG_OPT_LOG_LEVEL(log_level),
	OB_CFG_OPT_LOG_FORMAT(log_format),
	OB_CFG_OPT_CONFIG(config),
	OB_CFG_OPT_METRICS(metrics, " from a separate process"),
	OB_CFG_OPT("metrics-interval", "OUTBOX_METRICS_INTERVAL", OB_CFG_DURATION, "5s", 100,
	    3600000, NULL, false, metrics_interval_ms, "how often worker 0 reads the"
	    " pending, oldest-claimable-age, blocked-keys and unrouted-pending gauges from the"
	    " database"),
	OB_CFG_END,
};

static const struct ob_program program = { .events = "relay", .config = {
	.name = "outbox-relay",
	.synopsis = "outbox-relay --db CONNINFO --route TOPIC=URL... [options]",
	.description =
    "Deliver committed outbox records to consumers, at least once. Reads each"
    " topic's messages in commit order and claims them in batches, each under a"
    " lease with a fencing token from one sequence; sends a batch as one nng REQ"
    " frame and records its outcome in one write, refused once another worker"
    " took the batch over. Retries back off with Full Jitter; a destination"
    " that is down costs no database writes. A tls+tcp:// route is dialed with"
    " mutual TLS; a consumer that refuses the handshake (or is refused) is a"
    " destination that is down: nothing sent, attempts refunded, a warning"
    " (docs/security.md).",
	.options = relay_options,
} };

/* Checks that need more than one option, and the routes parsed into rt
 * (zeroed; the caller frees it); exit 2 material. */
static int
check_config(const struct relay_config *c, struct relay_routes *rt, char *err, size_t errlen)
{
	if (c->lease_ms <= c->delivery_timeout_ms + RELAY_LEASE_MARGIN_MS) {
		snprintf(err, errlen, "--lease-ms (%lld) must exceed --delivery-timeout-ms (%lld)"
		    " + %d ms, or a slow delivery outlives its claim and is sent twice",
		    (long long)c->lease_ms, (long long)c->delivery_timeout_ms,
		    RELAY_LEASE_MARGIN_MS);
		return OB_EINVAL;
	}
	struct relay_gate gate;
	if (relay_gate_init(&gate, c->standby_gate, c->standby_names.items, c->standby_names.n,
	    c->standby_gate_timeout_ms, c->standby_poll_ms, err, errlen) != OB_OK)
		return OB_EINVAL;
	if (gate.mode != RELAY_GATE_NONE &&
	    c->lease_ms <= c->standby_gate_timeout_ms + c->delivery_timeout_ms +
	    RELAY_LEASE_MARGIN_MS) {
		snprintf(err, errlen, "--lease-ms (%lld) must exceed --standby-gate-timeout (%lld)"
		    " + --delivery-timeout-ms (%lld) + %d ms: a batch waits for the standbys"
		    " under its lease", (long long)c->lease_ms, (long long)c->standby_gate_timeout_ms,
		    (long long)c->delivery_timeout_ms, RELAY_LEASE_MARGIN_MS);
		return OB_EINVAL;
	}
	if (c->source != NULL && c->source[0] != '\0' &&
	    ob_source_check(c->source, err, errlen) != OB_OK)
		return OB_EINVAL;
	if (c->no_source && c->source != NULL && c->source[0] != '\0') {
		snprintf(err, errlen, "--no-source and --source '%s': choose one", c->source);
		return OB_EINVAL;
	}
	if (c->backoff_base_ms > c->backoff_cap_ms) {
		snprintf(err, errlen, "--backoff-base-ms (%lld) exceeds --backoff-cap-ms (%lld)",
		    (long long)c->backoff_base_ms, (long long)c->backoff_cap_ms);
		return OB_EINVAL;
	}
	if (c->only_routed && strcmp(c->unrouted, "wait") != 0) {
		snprintf(err, errlen, "--only-routed and --unrouted %s: choose one (--only-routed"
		    " is the old name of --unrouted wait, now the default)", c->unrouted);
		return OB_EINVAL;
	}
	if (c->fault_stall_after_claim > 0 && c->fault_stall_ms <= 0) {
		snprintf(err, errlen, "--fault-stall-after-claim needs --fault-stall-ms > 0");
		return OB_EINVAL;
	}
	/* also at start (ob_program_start), here for a reload */
	if (ob_program_check(relay_options, c, err, errlen) != OB_OK)
		return OB_EINVAL;
	if (c->retention_ms > 0 && c->retention_ms < 1000) {
		snprintf(err, errlen, "--retention (%lld ms) must be 0 (never purge) or at least 1s",
		    (long long)c->retention_ms);
		return OB_EINVAL;
	}
	int rc = relay_routes_parse(rt, c->routes.items, c->routes.n, err, errlen);
	if (rc != OB_OK)
		return rc;
	struct ob_bus_tls_files tls = relay_tls_files(c);
	return ob_bus_tls_check((const char *const *)rt->urls, (size_t)rt->nurls, &tls, false,
	    err, errlen);
}

/* check_config for a reload (ob_reload's check): the routes are parsed to
 * be checked only; a change to them needs a restart. */
static int
check_reload(const void *cfg, char *err, size_t errlen)
{
	struct relay_routes rt = { 0 };
	int rc = check_config(cfg, &rt, err, errlen);
	relay_routes_free(&rt);
	return rc;
}

int
main(int argc, char **argv)
{
	struct relay_config cfg;
	char err[1024];
	int code;

	if ((code = ob_program_start(&program, &cfg, argc, argv, NULL)) >= 0)
		return code;
	code = 2;
	static struct relay_routes route_table; /* the workers inherit it */
	if (check_config(&cfg, &route_table, err, sizeof(err)) != OB_OK) {
		fprintf(stderr, "outbox-relay: %s\n", err);
		goto out;
	}
	cfg.route_table = &route_table;
	/* The TLS files are parsed by nng in a child, so that this process
	 * forks its workers before any nng state exists (relay/route_tls.h). */
	struct ob_bus_tls_files tls = relay_tls_files(&cfg);
	if (relay_tls_probe(&tls, &route_table, err, sizeof(err)) != OB_OK) {
		fprintf(stderr, "outbox-relay: %s\n", err);
		goto out;
	}
	if (cfg.only_routed)
		ob_warn("relay.config.deprecated", "flag=--only-routed env=OUTBOX_ONLY_ROUTED"
		    " hint=\"topics no route matches wait by default now (--unrouted wait): drop"
		    " the flag; --unrouted dead-letter is the old default\"");

	/* An unreachable database, or one whose schema does not serve this
	 * relay's protocol, at start is a configuration error. The probe
	 * connection is closed before any fork: the workers open their own. */
	PGconn *probe = NULL;
	if (ob_pg_connect(cfg.db, "outbox-relay", &probe, err, sizeof(err)) != OB_OK) {
		fprintf(stderr, "outbox-relay: %s\n", err);
		goto out;
	}
	int probe_rc = ob_pg_need_session(probe, strcmp(cfg.pooler, "session") == 0,
	    "outbox-relay", "--pooler session", err, sizeof(err));
	if (probe_rc == OB_OK)
		probe_rc = ob_protocol_check(probe, "outbox", "relay", RELAY_PROTOCOL, err,
		    sizeof(err));
	if (probe_rc == OB_OK && cfg.source != NULL && cfg.source[0] != '\0')
		snprintf(cfg.source_id, sizeof(cfg.source_id), "%s", cfg.source);
	else if (probe_rc == OB_OK && cfg.no_source)
		cfg.source_id[0] = '\0';
	else if (probe_rc == OB_OK)
		probe_rc = ob_source_derive(probe, cfg.source_id, err, sizeof(err));
	PQfinish(probe);
	if (probe_rc != OB_OK) {
		fprintf(stderr, "outbox-relay: %s\n", err);
		goto out;
	}
	ob_info("relay.source", "source=%s derived=%d", cfg.source_id[0] ? cfg.source_id : "\"\"",
	    !cfg.no_source && (cfg.source == NULL || cfg.source[0] == '\0'));

	struct relay_shared *shared = relay_shared_new(&cfg);
	if (shared == NULL) {
		fprintf(stderr, "outbox-relay: cannot map shared state: out of memory\n");
		code = 1;
		goto out;
	}
	struct ob_reload reload = { &program.config, &cfg, sizeof(cfg), argc, argv, "relay",
		check_reload };
	cfg.reload = &reload;
	code = relay_supervise(&cfg, shared);
	relay_shared_free(shared);
out:
	relay_routes_free(&route_table);
	ob_cfg_free(relay_options, &cfg);
	nng_fini();
	return code;
}
