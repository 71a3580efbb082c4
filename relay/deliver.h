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
 * bounded by the delivery timeout. The destinations (sockets, breakers,
 * windows, the pick) are dest.h's; this is the frame state machine and
 * the mapping of replies to outcomes. Nothing here touches the database.
 */
#ifndef OUTBOX_RELAY_DELIVER_H
#define OUTBOX_RELAY_DELIVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/supplemental/util/platform.h>

#include "claim.h"
#include "dest.h"
#include "outbox/buf.h"
#include "outbox/metrics.h"
#include "outbox/wire.h"
#include "record.h"
#include "routes.h"

/* How long a frame waits for a connection to a destination that has none
 * when it is sent (then it fails, attempt refunded): a consumer that is
 * starting is waited for, one that is gone fails the frame in time to open
 * the breaker quickly rather than after a whole delivery timeout. */
#define RELAY_CONNECT_WAIT_MS 1000

/* relay.retry_budget.spent at most this often per worker, with the count. */
#define RELAY_BUDGET_LOG_EVERY_MS 30000

/* A consumer that refuses our wire version (older than this relay) is
 * logged once, then at most this often while it keeps refusing. */
#define RELAY_TOO_OLD_LOG_EVERY_MS 60000

struct relay_deliverer {
	struct relay_dest_table table; /* the destinations (dest.h): settings filled
	                                * in by the caller before relay_deliverer_init */
	struct ob_wire_limits limits;
	const char *source;            /* borrowed: the source every frame names ("" = none) */
	int64_t timeout_ms;            /* a frame's whole round trip */
	/* counters, read by the caller */
	uint64_t frames_sent;
	uint64_t frames_failed;
	uint64_t budget_spent;  /* frames whose retry the destination's budget refused */
	/* each replied frame's round trip is observed here (NULL = none) */
	struct ob_metric *frame_seconds;
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

/* Set d (zeroed, its limits and d->table's settings filled) up for the
 * routes of rt, which it borrows (relay_dest_table_init). OB_OK or
 * OB_ENOMEM. */
int relay_deliverer_init(struct relay_deliverer *d, const struct relay_routes *rt);

/* Open the wakeup pipe and the destinations (relay_dest_table_open: one
 * REQ socket each, dialing, replies up to the largest for d->limits).
 * OB_OK, OB_ENOMEM, OB_ENET, or OB_EINVAL (a TLS file that does not parse:
 * relay_tls_probe checked them at start), with one line in err. */
int relay_deliverer_open(struct relay_deliverer *d, char *err, size_t errlen);

/* Close the destinations and free everything (safe on a half-opened
 * deliverer). */
void relay_deliverer_close(struct relay_deliverer *d);

/* Give a frame its aio (once per pipeline slot). OB_OK or OB_ENOMEM. */
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
