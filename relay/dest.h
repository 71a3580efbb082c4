/*
 * dest.h - a worker's destination table: one nng REQ socket and dialer per
 * consumer URL of the route table (TLS configured on it for tls+tcp://),
 * each with its circuit breaker (breaker.h), its window of frames out, its
 * refused-handshake watch and its redial watchdog; the pick among a
 * route's destinations; which topics a claim may take now; the breaker's
 * probes.
 *
 * The frames (deliver.c) use the table; this file knows nothing of frames,
 * replies or the database. A breaker changes only through breaker.h's
 * functions. Worker loop only, except the pipe counters (nng's threads).
 */
#ifndef OUTBOX_RELAY_DEST_H
#define OUTBOX_RELAY_DEST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

#include "breaker.h"
#include "claim.h"
#include "metrics.h"
#include "outbox/token_bucket.h"
#include "outbox/buf.h"
#include "outbox/bus_tls.h"
#include "outbox/metrics.h"
#include "routes.h"

/* Per destination and reason, after the first line: one
 * relay.handshake.refused line per this. */
#define RELAY_REFUSAL_LOG_EVERY_MS 30000

/* A destination that has replied to nothing for this long (or twice the
 * delivery timeout, when longer), whose frames fail, gets a new dialer. nng 1.5's dialer stops redialing for good after a
 * connection attempt that ends in NNG_ECLOSED or NNG_ECANCELED (dialer.c,
 * dialer_connect_cb: "no further action", meant for a dialer being
 * closed); a TLS handshake cut off by the consumer closing its listener
 * (its SIGHUP reload) ends so now and then, and the destination would stay
 * down until a restart. After many re-opens of the consumer's listener
 * the relay was also seen sending frames into a connection that no longer
 * existed (counted as live, no TCP connection, every frame timing out): a
 * new dialer ended both. A healthy dialer tries at least every 2 s
 * (NNG_OPT_RECONNMAXT) and a handshake takes at most 10 s
 * (OB_BUS_TLS_NEGOTIATE_MS), so this only ever replaces one that gave up,
 * or adds one attempt to an outage. */
#define RELAY_REDIAL_STUCK_MS 15000

/* One consumer URL: a REQ socket that dials it (and redials forever).
 * Its window bounds the frames this worker keeps out to it (additive
 * increase, multiplicative decrease: relay_dest_window_result), so that a
 * destination that is slow or gone holds at most a slot or two of the
 * worker's pipeline, never all of it. */
struct relay_dest {
	const char *url;       /* borrowed from the route table */
	nng_socket sock;
	nng_dialer dialer;     /* its one dialer (TLS configured on it for tls+tcp://) */
	nng_tls_config *tls;      /* tls+tcp://: the configuration on the dialer (our hold) */
	nng_tls_config *tls_prev; /* the one it replaced at the last reload, held until the
	                           * next: a dial that began just before the swap may still
	                           * be taking its own hold of it (nng 1.5 reads the
	                           * dialer's configuration without its lock) */
	struct ob_bus_watch watch; /* the dialer's refused handshakes (relay_dest_refusals) */
	_Atomic int pipes;     /* live connections: 0 = the consumer is down */
	int64_t alive_ms;      /* nng_clock() of its last reply (or its dialer's
	                        * start): see RELAY_REDIAL_STUCK_MS */
	unsigned redials;      /* dialers re-created since its last reply */
	struct relay_breaker breaker;
	struct ob_token_bucket budget; /* its retry budget (outbox/token_bucket.h):
	                        * this worker's retries of frames to it */
	bool budget_ok;        /* budget initialised (fini at close) */
	uint32_t inflight;     /* frames out to it now */
	uint32_t window;       /* frames it may have out: 1..window_max */
	int64_t too_old_next_ms; /* nng_clock() before which relay.deliver.consumer_too_old
	                          * is not logged again; 0 = not refused for it
	                          * (relay_dest_version_refused) */
};

struct relay_dest_table {
	const struct relay_routes *rt; /* borrowed: the parsed --route table */
	struct relay_dest *dest;       /* one per rt->urls, same index */
	int n;
	unsigned *next;                /* per route of rt: its round-robin cursor */
	/* settings, filled in before relay_dest_table_init */
	struct ob_bus_tls_files tls;   /* borrowed strings: for tls+tcp:// destinations */
	uint32_t window_max;   /* a destination's largest window (--max-inflight) */
	uint32_t breaker_threshold;
	int64_t breaker_probe_ms;
	bool retry_budget;     /* --retry-budget on: a retry of a frame is paid from its
	                        * destination's budget */
	int64_t budget_slow_ms; /* --retry-budget-slow: a retry the budget refused waits
	                         * at least this long */
	bool unrouted_dead;    /* --unrouted dead-letter: without a default route, claim the
	                        * topics no route matches, to dead-letter them ("no route");
	                        * else (wait) they are never claimed */
	/* metrics (NULL = none): refused handshakes by reason, SIGHUP's TLS
	 * reloads (ok, failed: route_tls.c), and breakers[i] (i < breakers_n)
	 * gets destination i's breaker state and the time of its last failed /
	 * replied frame, for the supervisor to fold (metrics.h) */
	struct ob_metric *handshake_refused[OB_BUS_REFUSED_COUNT];
	struct ob_metric *tls_reload[2];
	struct relay_breaker_live *breakers;
	int breakers_n;
};

/* Set t (zeroed, its settings filled) up for the routes of rt, which it
 * borrows: one destination per URL, every breaker closed, nothing opened
 * yet. OB_OK or OB_ENOMEM. */
int relay_dest_table_init(struct relay_dest_table *t, const struct relay_routes *rt);

/* Open one REQ socket per destination, replies up to max_reply bytes, and
 * start dialing (non-blocking: a consumer that is down is retried by nng;
 * a tls+tcp:// one with mutual TLS from t->tls). OB_OK, OB_ENET, or
 * OB_EINVAL (a TLS file that does not parse: relay_tls_probe checked them
 * at start), with one line in err. */
int relay_dest_table_open(struct relay_dest_table *t, size_t max_reply, char *err,
    size_t errlen);

/* SIGHUP: read t->tls's files again (same paths) and build a new
 * configuration for every tls+tcp:// destination; only when all of them
 * build, put each on its dialer, where the next dial uses it (connections
 * up now keep going: see relay_tls_reload). *ndests: how many got one.
 * OB_OK; OB_EINVAL with one line in err (which file, why) when a file does
 * not read or parse, and then nothing changed; OB_ENET when nng refused a
 * configuration (err says which destination; those before it took theirs);
 * OB_ENOMEM. */
int relay_dest_table_reload_tls(struct relay_dest_table *t, int *ndests, char *err,
    size_t errlen);

/* Close the sockets and free everything (safe on a half-opened table). */
void relay_dest_table_close(struct relay_dest_table *t);

/* The destination for topic, or -1 when no route matches (the message is
 * then dead-lettered with "no route" under --unrouted dead-letter, else
 * handed back unsent). Round-robin over the destinations
 * that have a live connection and a closed breaker; else over those with a
 * closed breaker; else one whose probe is due; else any. */
int relay_route_pick(struct relay_dest_table *t, const char *topic, size_t len);

/* The topics a claim may take now (claim.h): explicitly routed topics
 * with a destination whose breaker is closed and whose window has room;
 * every other topic when the default route has one. Without a default
 * route, topics no route matches are left alone (they wait), or, with
 * t->unrouted_dead, claimed to be dead-lettered "no route". The arrays
 * are written into inc and exc. OB_OK or OB_ENOMEM. */
int relay_topics_now(struct relay_dest_table *t, struct ob_buf *inc, struct ob_buf *exc,
    struct relay_topics *out);

/* A route whose every destination is open, with a probe due: reserves the
 * probe of one destination (*dest) and fills *out with a claim filter for
 * just that route (claim one message). false when none is due. When the
 * claim finds nothing to probe with, call relay_probe_unused. */
bool relay_probe_due(struct relay_dest_table *t, struct ob_buf *inc, struct ob_buf *exc,
    struct relay_topics *out, int *dest);
void relay_probe_unused(struct relay_dest_table *t, int dest);

/* The breaker's verdict on one frame sent to dest (ok: a decodable reply),
 * logged when it changes state (relay.breaker.open / .closed), and
 * published for the metrics. */
void relay_dest_breaker_result(struct relay_dest_table *t, int dest, bool ok);

/* A frame was handed to dest's socket: one more out (until
 * relay_dest_window_result). */
void relay_dest_frame_out(struct relay_dest_table *t, int dest);

/* A frame to dest is over: one fewer out, and its window halved (at least
 * one) when it failed, one more (up to window_max) when it was answered. */
void relay_dest_window_result(struct relay_dest_table *t, int dest, bool failed,
    bool replied);

/* ds's consumer refused our wire version at now_ms (nng_clock()): true
 * when that is to be logged (the first refusal, then at most one per
 * RELAY_TOO_OLD_LOG_EVERY_MS, deliver.h). */
bool relay_dest_version_refused(struct relay_dest *ds, int64_t now_ms, int64_t every_ms);

/* ds's consumer read a frame of our wire version: its next refusal is
 * logged at once. */
void relay_dest_version_read(struct relay_dest *ds);

/* ds answered a frame: its dialer is alive. */
void relay_dest_alive(struct relay_dest *ds);

/* After a frame to ds failed: a new dialer when ds has replied to nothing
 * for RELAY_REDIAL_STUCK_MS or twice timeout_ms (the delivery timeout),
 * when longer; logged (relay.dial.restarted). */
void relay_dest_redial_if_stuck(struct relay_dest *ds, int64_t timeout_ms);

/* After a frame to ds failed without reaching a connection: read ds's
 * dialer counters, count what is new in t's metrics, log it (rate-limited:
 * RELAY_REFUSAL_LOG_EVERY_MS per reason: relay.handshake.refused). */
void relay_dest_refusals(struct relay_dest_table *t, struct relay_dest *ds);

#endif
