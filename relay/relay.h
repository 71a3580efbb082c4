/*
 * relay.h - the relay's configuration, the state its processes share, and
 * the worker loop.
 *
 * outbox-relay is a supervisor (supervise.h) that forks --workers worker
 * processes. A worker owns one database connection (claims, outcome writes,
 * LISTEN, housekeeping) and one deliverer (its own nng sockets). It keeps
 * up to --max-inflight batches out, records each as its frame comes back,
 * and with nothing due waits for an enqueue notification or the poll
 * interval.
 */
#ifndef OUTBOX_RELAY_RELAY_H
#define OUTBOX_RELAY_RELAY_H

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "claim.h"
#include "outbox/config.h"
#include "outbox/fault.h"
#include "outbox/reload.h"
#include "metrics.h"

struct relay_routes; /* routes.h */

struct relay_config {
	char *db;
	struct ob_cfg_list routes;
	char *source;             /* --source; NULL or "" = derived (source.h) */
	bool no_source;           /* --no-source: send "" (the identity before wire v3) */
	char *tls_cert;           /* tls+tcp:// routes: client certificate (PEM) */
	char *tls_key;            /* ... its private key (PEM, unencrypted) */
	char *tls_ca;             /* ... the CA the consumers' certificates chain to */
	char *tls_server_name;    /* ... the name they must carry; NULL = the URL's host */
	int64_t workers;
	int64_t batch;            /* messages per batch (one request frame) */
	int64_t batch_bytes;      /* payload bytes per batch (a larger message goes alone) */
	int64_t max_inflight;     /* batches in flight per worker */
	int64_t lease_ms;
	int64_t delivery_timeout_ms;
	int64_t poll_ms;
	int64_t linger_ms;        /* --linger-ms: a wakeup's claim waits this long */
	int64_t backoff_base_ms;
	int64_t backoff_cap_ms;
	int64_t max_attempts;
	int64_t max_age_ms;
	int64_t max_payload;
	int64_t shutdown_grace_ms;
	int64_t breaker_threshold;
	int64_t breaker_probe_ms;
	int64_t retention_ms;     /* delivered messages kept; 0 = forever */
	int64_t dead_retention_ms; /* dead letters kept; 0 = forever */
	int64_t purge_interval_ms; /* housekeeping every */
	int64_t long_xact_warn_ms; /* an open transaction this old is logged */
	bool no_fencing;          /* BROKEN mode */
	bool no_ordering;         /* BROKEN mode: ignore ordering keys when claiming */
	bool only_routed;         /* deprecated alias of --unrouted wait (the default) */
	char *unrouted;           /* wait | dead-letter: a topic no route matches */
	int64_t unrouted_log_interval_ms; /* relay.topic.unrouted: per topic at most this often */
	char *on_dead_head;       /* block | skip */
	char *synchronous_commit; /* on | off: the relay's own commits wait for the WAL flush */
	char *pooler;             /* direct | session: how --db reaches PostgreSQL */
	char *retry_budget;       /* on | off: retries of frames paid from a budget per
	                           * destination (outbox/token_bucket.h) */
	int64_t retry_budget_slow_ms; /* a retry the budget refused waits at least this */
	char *standby_gate;       /* none | flush | replay (standby_gate.h) */
	struct ob_cfg_list standby_names; /* application_name of the standbys gated on */
	int64_t standby_gate_timeout_ms; /* a batch waits this long, then goes back unsent */
	int64_t standby_poll_ms;  /* pg_stat_replication asked this often while waiting */
	int64_t fault_die_after_claim;
	int64_t fault_die_after_send;
	int64_t fault_stall_after_claim;
	int64_t fault_stall_ms;
	char *log_level;
	char *log_format;
	char *config;             /* --config FILE, re-read on SIGHUP */
	char *metrics;            /* --metrics ADDR; NULL or "" = no endpoint */
	int64_t metrics_interval_ms; /* worker 0's refresh of the database gauges */
	/* not settings: how SIGHUP re-reads the settings (main.c; NULL in
	 * tests that run a worker without main), and the route table parsed
	 * once from `routes` before the fork (routes.h) */
	const struct ob_reload *reload;
	const struct relay_routes *route_table;
	/* the source every frame names: --source, or derived at start in
	 * main.c before the fork ("" in tests that run a worker without main) */
	char source_id[OB_WIRE_MAX_SOURCE + 1];
};

/* The margin the lease must keep over the delivery timeout: time to write
 * the outcomes after the last reply. */
#define RELAY_LEASE_MARGIN_MS 1000

/* Exit code of a worker, and of the relay, when the database schema does
 * not serve this relay's protocol (outbox.check_protocol): a restart
 * cannot help, so the supervisor stops every worker instead. */
#define RELAY_EXIT_PROTOCOL 3

/* Largest --batch-bytes: a batch's payloads, held in a worker's memory
 * once as claimed and once in its frame. */
#define RELAY_MAX_BATCH_BYTES (256 * 1024 * 1024)

/* Most worker processes one relay runs. */
#define RELAY_MAX_WORKERS 64

/* Totals of the whole process tree (every worker, including dead ones). */
struct relay_totals {
	_Atomic uint64_t claimed;
	_Atomic uint64_t delivered;
	_Atomic uint64_t retried;
	_Atomic uint64_t dead;
	_Atomic uint64_t released;     /* handed back as a batch: unsent, or its frame failed */
	_Atomic uint64_t fenced_out;   /* outcome writes refused by the fence */
	_Atomic uint64_t frames_sent;  /* request frames handed to nng */
	_Atomic uint64_t frames_failed;/* of those: no reply / transport error */
	_Atomic uint64_t budget_spent; /* frames whose retry the destination's budget refused */
	_Atomic uint64_t purged;
};

/* State shared by the supervisor and every worker it forks: created with
 * mmap(MAP_SHARED | MAP_ANONYMOUS) before the first fork, so a fault armed
 * to fire N times fires N times in the whole tree (a restarted worker does
 * not fire again), and the totals survive a worker's death. Plain atomics
 * only: no pointers into one process's heap (the metric handles point into
 * the registry's own shared mapping, made before the first fork too). */
struct relay_shared {
	struct ob_fault die_after_claim;
	struct ob_fault die_after_send;
	struct ob_fault stall_after_claim;
	struct relay_totals totals;
	struct relay_metrics metrics;               /* written before fork only */
	struct relay_worker_live live[RELAY_MAX_WORKERS]; /* one row per worker (by index) */
};

/* Map and arm the shared state from cfg. NULL when mmap fails. Release with
 * relay_shared_free (once, in the supervisor). */
struct relay_shared *relay_shared_new(const struct relay_config *cfg);
void relay_shared_free(struct relay_shared *s);

/* Log the totals as one machine-readable line under event (e.g.
 * "relay.totals"), with prefix (e.g. "worker=3 ") before the counters. */
void relay_totals_log(const char *event, const char *prefix,
    const struct relay_totals *t);

#endif
