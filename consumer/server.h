/*
 * server.h - the consumer's nng REP server: receive -> apply -> reply.
 *
 * N serving threads, each with its own nng context and its own PostgreSQL
 * connection, so N requests are in flight at once. A request that does not
 * decode gets an error reply (one log line, a counter, no database write).
 * A reply is sent only after the batch's COMMIT returned. A housekeeping
 * thread with its own connection purges dedup records past the retention.
 *
 * An idle serving thread wakes every CONSUMER_IDLE_CHECK_MS to look at its
 * connection without blocking (a backend terminated by the server is seen
 * then, not only at the next request) and re-opens a broken one; readiness
 * (consumer_server_ready) is "every serving thread has a usable connection".
 *
 * The listener refuses a frame larger than CONSUMER_RECV_MAX(limits) from
 * its length header, before reading or allocating it; on tls+tcp:// it
 * admits only peers with a client certificate signed by the configured CA.
 * Refused connections are counted and logged (listen_watch.h).
 */
#ifndef OUTBOX_CONSUMER_SERVER_H
#define OUTBOX_CONSUMER_SERVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

#include "handler_webhook.h"
#include "inbox.h"
#include "outbox/bus_tls.h"
#include "outbox/buf.h"
#include "outbox/err.h"
#include "outbox/wire.h"

/* Every counter the consumer keeps; the operations side exports them.
 * Statuses are counted per message, after the reply's statuses are final. */
struct consumer_counters {
	_Atomic uint64_t requests;
	_Atomic uint64_t bad_frames;                    /* requests refused as a whole */
	_Atomic uint64_t bad_frames_by[OB_ERR_COUNT];   /* ... by decoder error code */
	_Atomic uint64_t applied;
	_Atomic uint64_t duplicate;
	_Atomic uint64_t retried;
	_Atomic uint64_t rejected;
	_Atomic uint64_t retried_by[INBOX_WHY_COUNT];   /* by enum inbox_why */
	_Atomic uint64_t rejected_by[INBOX_WHY_COUNT];  /* by enum inbox_why */
	_Atomic uint64_t fingerprint_mismatch;          /* = rejected_by[INBOX_WHY_MISMATCH] */
	_Atomic uint64_t db_failures;                   /* batches whose transaction failed */
	_Atomic uint64_t purged;                        /* dedup records removed by retention */
	_Atomic uint64_t purge_failures;
	_Atomic uint64_t handshake_refused[OB_BUS_REFUSED_COUNT]; /* connections refused,
	                                                 * by class (listen_watch.h) */
	struct webhook_counters webhook;                /* outcomes of the webhook handler */
};

#define CONSUMER_IDLE_CHECK_MS 1000      /* idle thread's connection check */
#define CONSUMER_RECONNECT_LOG_EVERY 50  /* failed reconnects per warning line */
/* After a failed reconnect a thread waits a jittered backoff (outbox/
 * backoff.h) before it answers RETRY: drawn from [0, ceiling], the ceiling
 * doubling from 2 * BASE to CAP, so threads (and consumers) that lost the
 * database together do not try it again together. CAP stays well under a
 * relay's delivery timeout: the request waits it out. */
#define CONSUMER_RECONNECT_BASE_MS 100
#define CONSUMER_RECONNECT_CAP_MS 1000
/* What nng's REQ/REP adds to a request on the wire: the request id and the
 * backtrace of any devices in between, 4 bytes a hop (nng's largest TTL is
 * 15 hops). Part of the receive limit. */
#define CONSUMER_SP_HEADER_MAX 64

/* The receive limit for limits (NNG_OPT_RECVMAXSZ on the listener): the
 * largest request they admit (OB_WIRE_REQUEST_MAX_BYTES) plus
 * CONSUMER_SP_HEADER_MAX. nng reads a frame's 8-byte length first and
 * closes the connection when it exceeds this, before allocating or reading
 * the frame. */
#define CONSUMER_RECV_MAX(lim) (OB_WIRE_REQUEST_MAX_BYTES((lim)->max_batch, \
	(lim)->max_payload) + CONSUMER_SP_HEADER_MAX)

struct consumer_metrics; /* metrics.h */

struct consumer_server_config {
	const char *db;          /* conninfo, borrowed */
	const char *listen;      /* nng URL, borrowed; tcp port 0 = any free port */
	nng_tls_config *tls;     /* borrowed (the listener takes its own hold); set
	                          * exactly when listen is tls+tcp:// (outbox/bus_tls.h:
	                          * client certificate required) */
	int threads;             /* serving threads = requests in flight */
	bool session_pooler;     /* --pooler session: a pooler in front of db is
	                          * in session mode (ob_pg_need_session) */
	struct ob_wire_limits limits;
	struct inbox_options inbox;
	struct ob_fault *drop_reply; /* close without replying after commit; may be NULL */
	int64_t purge_interval_ms;   /* 0 = no purge thread */
	int purge_batch;             /* rows per purge statement */
	struct consumer_counters *counters; /* borrowed, or NULL: the server's own */
	struct consumer_metrics *metrics;   /* borrowed, or NULL: metrics off */
};

struct consumer_server;

/* Listen and start serving. Connects every thread's database connection
 * first, so a bad conninfo fails here (OB_EDB) rather than per request.
 * On success *out is owned: stop with consumer_server_stop. */
int consumer_server_start(const struct consumer_server_config *cfg,
    struct consumer_server **out, char *err, size_t errlen);

/* The URL the server listens on: cfg->listen with the TCP port actually
 * bound (tcp://127.0.0.1:0 -> tcp://127.0.0.1:41873); a URL without a TCP
 * port (ipc://PATH, inproc://NAME) as given. Owned by s, valid until stop. */
const char *consumer_server_url(const struct consumer_server *s);

/* Counters, live; valid until stop (or as long as cfg->counters). */
const struct consumer_counters *consumer_server_counters(
    const struct consumer_server *s);

/* True while every serving thread holds a usable database connection (as
 * last seen: at its last request or idle check). Lock-free, never blocks:
 * for a /readyz callback on another thread. */
bool consumer_server_ready(const struct consumer_server *s);

/* How long a re-opened listener waits for its port, held a moment longer
 * by the listener just closed, and how often it tries meanwhile. */
#define CONSUMER_RELISTEN_WAIT_MS 5000
#define CONSUMER_RELISTEN_RETRY_MS 20

/* SIGHUP's TLS reload (tls+tcp:// only; main thread only): close the
 * listener and open a new one on the same URL and port with tls (borrowed;
 * the server takes its own hold; NULL: the one in use). nng 1.5 cannot change a listener's TLS
 * for the connections to come: the handshake of the next connection is
 * already set up, with the configuration in use, while it waits in
 * accept; only a new listener uses the new one from its first connection.
 * Closing the listener closes its connections: a request being applied
 * meanwhile is committed, and its reply is lost with the connection; the
 * relay sends it again on a new one and gets "duplicate" (the dedup
 * record), never a second effect. The socket and its serving contexts stay.
 * OB_OK: listening with tls. Otherwise one line in err and: *listening
 * true when the old configuration listens again (kept), false when
 * nothing listens (the caller tries again). */
int consumer_server_relisten(struct consumer_server *s, nng_tls_config *tls,
    bool *listening, char *err, size_t errlen);

/* Stop serving: every thread finishes (applies and answers) the request it
 * has, then they are joined and everything is freed but the REP socket,
 * which the process's exit releases (server.c: nng 1.5 can panic closing
 * it). Call once, right before the process ends. */
void consumer_server_stop(struct consumer_server *s);

/* The front of request handling, without the database: decode one frame.
 * OB_OK: *req is filled (release with ob_wire_request_fini). Otherwise the
 * frame was refused: counted in c, logged once, and the error reply is in
 * reply (reply->len == 0 when none could be formed: drop the request). */
int consumer_request_decode(const void *body, size_t len,
    const struct ob_wire_limits *lim, struct consumer_counters *c,
    struct ob_wire_request *req, struct ob_buf *reply);

/* Count the final statuses of a batch in c. */
void consumer_count_batch(struct consumer_counters *c,
    const struct inbox_batch *b, uint32_t n);

#endif
