/*
 * deliver.h - send claimed batches to their destinations over nng REQ, one
 * request frame per batch, and turn the replies into outcomes.
 *
 * A frame is one work item with its own nng context and aio; the aio
 * callback moves it SEND -> RECV -> DONE (nng demo/async style) and then
 * wakes the worker through a pipe, so the worker can wait for a finished
 * frame and for a PostgreSQL notification at once. Frames finish, and are
 * recorded, independently: a frame to a destination that is down never
 * holds up the outcome of one to another. Every frame's round trip is
 * bounded by the delivery timeout. Nothing here touches the database.
 */
#ifndef OUTBOX_RELAY_DELIVER_H
#define OUTBOX_RELAY_DELIVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/supplemental/util/platform.h>

#include "breaker.h"
#include "claim.h"
#include "metrics.h"
#include "outbox/buf.h"
#include "outbox/bus_tls.h"
#include "outbox/metrics.h"
#include "outbox/wire.h"
#include "record.h"
#include "routes.h"

/* One consumer URL: a REQ socket that dials it (and redials forever).
 * Its window bounds the frames this worker keeps out to it (additive
 * increase, multiplicative decrease: relay_frame_finish), so that a
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
	struct ob_bus_watch watch; /* the dialer's refused handshakes (route_tls.h) */
	_Atomic int pipes;     /* live connections: 0 = the consumer is down */
	int64_t alive_ms;      /* nng_clock() of its last reply (or its dialer's
	                        * start): see RELAY_REDIAL_STUCK_MS */
	unsigned redials;      /* dialers re-created since its last reply */
	struct relay_breaker breaker;
	uint32_t inflight;     /* frames out to it now */
	uint32_t window;       /* frames it may have out: 1..window_max */
	int64_t too_old_next_ms; /* nng_clock() before which relay.deliver.consumer_too_old
	                          * is not logged again; 0 = not refused for it */
};

/* How long a frame waits for a connection to a destination that has none
 * when it is sent (then it fails, attempt refunded): a consumer that is
 * starting is waited for, one that is gone fails the frame in time to open
 * the breaker quickly rather than after a whole delivery timeout. */
#define RELAY_CONNECT_WAIT_MS 1000

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

/* A consumer that refuses our wire version (older than this relay) is
 * logged once, then at most this often while it keeps refusing. */
#define RELAY_TOO_OLD_LOG_EVERY_MS 60000

struct relay_deliverer {
	const struct relay_routes *rt; /* borrowed: the parsed --route table */
	struct relay_dest *dests;      /* one per rt->urls, same index */
	int ndests;
	unsigned *next;                /* per route of rt: its round-robin cursor */
	struct ob_wire_limits limits;
	const char *source;            /* borrowed: the source every frame names ("" = none) */
	struct ob_bus_tls_files tls;   /* borrowed strings: for tls+tcp:// destinations */
	int64_t timeout_ms;
	uint32_t window_max;   /* a destination's largest window (--max-inflight) */
	uint32_t breaker_threshold;
	int64_t breaker_probe_ms;
	bool unrouted_dead;    /* --unrouted dead-letter: without a default route, claim the
	                        * topics no route matches, to dead-letter them ("no route");
	                        * else (wait) they are never claimed */
	/* counters, read by the caller */
	uint64_t frames_sent;
	uint64_t frames_failed;
	/* metrics (NULL = none): each replied frame's round trip is observed
	 * in frame_seconds; breakers[i] (i < breakers_n) gets destination i's
	 * breaker state and the time of its last failed / replied frame, for
	 * the supervisor to fold (metrics.h). */
	struct ob_metric *frame_seconds;
	struct ob_metric *handshake_refused[OB_BUS_REFUSED_COUNT];
	struct ob_metric *tls_reload[2];   /* relay_tls_reload's results: ok, failed */
	struct relay_breaker_live *breakers;
	int breakers_n;
	/* the frames' callbacks wake the worker: they set state under mtx and
	 * write a byte to wake[1] */
	nng_mtx *mtx;
	int wake[2];
	struct ob_buf encode;  /* scratch for one frame's bytes */
};

enum relay_frame_state { RELAY_FRAME_IDLE, RELAY_FRAME_SEND, RELAY_FRAME_RECV,
	RELAY_FRAME_DONE };

/* How a finished frame went (relay_frame_finish). */
enum relay_frame_result {
	RELAY_FRAME_REPLIED,    /* a reply: one status per message */
	RELAY_FRAME_NOT_SENT,   /* held by an open breaker, or nothing sendable */
	RELAY_FRAME_FAILED,     /* send failed, no reply, or a reply that does not
	                         * match: every sent message is a RETRY */
};

/* One batch on its way. The worker owns the batch; the deliverer fills the
 * rest. */
struct relay_frame {
	struct relay_batch batch;
	int dest;                 /* -1 until sent */
	bool probe;               /* the breaker's probe for its destination */
	bool sent;                /* handed to nng */
	bool reached;             /* handed to a connection: a consumer may have
	                           * applied it (set by the callback; cleared by
	                           * a consumer's version refusal: it applied
	                           * nothing) */
	bool *skip;               /* n: not part of the frame (outcome decided) */
	uint32_t nsent;
	struct timespec t_sent;
	nng_aio *aio;
	nng_ctx ctx;
	struct relay_deliverer *d;
	enum relay_frame_state state; /* under d->mtx while sent */
	int rv;                   /* DONE: 0 = reply in `reply`, else nng error */
	const char *failed_in;    /* DONE with rv: "send to" / "no reply from" */
	nng_msg *reply;
	double rtt_s;
};

/* Set d (zeroed, its limits and breaker settings filled) up for the
 * routes of rt, which it borrows: one destination per URL, every breaker
 * closed, nothing opened yet. OB_OK or OB_ENOMEM. */
int relay_deliverer_init(struct relay_deliverer *d, const struct relay_routes *rt);

/* Open one REQ socket per destination and start dialing (non-blocking: a
 * consumer that is down is retried by nng; a tls+tcp:// one with mutual TLS
 * from d->tls), and the wakeup pipe. OB_OK, OB_ENET, or OB_EINVAL (a TLS
 * file that does not parse: relay_tls_probe checked them at start). */
int relay_deliverer_open(struct relay_deliverer *d, char *err, size_t errlen);

/* SIGHUP: read d->tls's files again (same paths) and build a new
 * configuration for every tls+tcp:// destination; only when all of them
 * build, put each on its dialer, where the next dial uses it (connections
 * up now keep going: see relay_tls_reload). *ndests: how many got one.
 * OB_OK; OB_EINVAL with one line in err (which file, why) when a file does
 * not read or parse, and then nothing changed; OB_ENET when nng refused a
 * configuration (err says which destination; those before it took theirs). */
int relay_deliverer_reload_tls(struct relay_deliverer *d, int *ndests, char *err,
    size_t errlen);

/* Close sockets and free everything (safe on a half-opened deliverer). */
void relay_deliverer_close(struct relay_deliverer *d);

/* The destination for topic, or -1 when no route matches (the message is
 * then dead-lettered with "no route" under --unrouted dead-letter, else
 * handed back unsent). Round-robin over the destinations
 * that have a live connection and a closed breaker; else over those with a
 * closed breaker; else one whose probe is due; else any. */
int relay_route_pick(struct relay_deliverer *d, const char *topic, size_t len);

/* The topics a claim may take now (claim.h): explicitly routed topics
 * with a destination whose breaker is closed and whose window has room;
 * every other topic when the default route has one. Without a default
 * route, topics no route matches are left alone (they wait), or, with
 * d->unrouted_dead, claimed to be dead-lettered "no route". The arrays
 * are written into inc and exc. */
int relay_topics_now(struct relay_deliverer *d, struct ob_buf *inc, struct ob_buf *exc,
    struct relay_topics *out);

/* A route whose every destination is open, with a probe due: reserves the
 * probe of one destination (*dest) and fills *out with a claim filter for
 * just that route (claim one message). false when none is due. When the
 * claim finds nothing to probe with, call relay_probe_unused. */
bool relay_probe_due(struct relay_deliverer *d, struct ob_buf *inc, struct ob_buf *exc,
    struct relay_topics *out, int *dest);
void relay_probe_unused(struct relay_deliverer *d, int dest);

/* Give a frame its aio (once per slot). OB_OK or OB_ENOMEM. */
int relay_frame_init(struct relay_deliverer *d, struct relay_frame *f);
void relay_frame_fini(struct relay_frame *f);

/* Send f->batch as one frame to force_dest (>= 0: a probe) or to its
 * route's pick. Messages that cannot go (over --max-payload; no route
 * under --unrouted dead-letter) get their outcome in out now; a
 * destination held by an open breaker, or no route under --unrouted wait,
 * holds the whole frame (RELEASE, attempt refunded). A frame sent while its destination has no
 * connection waits at most RELAY_CONNECT_WAIT_MS for one. Returns true
 * when the frame is in flight (wait for relay_frame_done), false when it
 * finished at once (call relay_frame_finish all the same). */
bool relay_frame_send(struct relay_deliverer *d, struct relay_frame *f, int force_dest,
    struct relay_outcome *out);

/* Whether the frame's round trip is over (reply, error or timeout). */
bool relay_frame_done(struct relay_deliverer *d, struct relay_frame *f);

/* Cancel a frame in flight (shutdown); it finishes as failed. */
void relay_frame_cancel(struct relay_frame *f);

/* After DONE (or a false send): the outcomes of the sent messages, the
 * breaker's verdict, the destination's window, the counters; the frame's
 * context is closed. A failed frame's messages are RETRY with
 * refund_attempt set when the frame never reached a connection, or a
 * consumer refused its wire version (f->reached false); the caller decides between a retry per message and a RELEASE of
 * the batch. */
enum relay_frame_result relay_frame_finish(struct relay_deliverer *d, struct relay_frame *f,
    struct relay_outcome *out);

/* Read end of the wakeup pipe, and emptying it. */
int relay_deliverer_wake_fd(const struct relay_deliverer *d);
void relay_deliverer_drain_wake(struct relay_deliverer *d);

#endif
