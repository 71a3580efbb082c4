/*
 * deliver.h - send claimed messages to their destinations over nng REQ and
 * turn the replies into outcomes.
 *
 * Messages are grouped by destination into request frames of at most
 * frame_batch messages; up to max_inflight frames are in flight at once,
 * each on its own nng context. Every frame's round trip (send + reply) is
 * bounded by the delivery timeout. Nothing here touches the database.
 */
#ifndef OUTBOX_RELAY_DELIVER_H
#define OUTBOX_RELAY_DELIVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <nng/nng.h>

#include <signal.h>

#include "breaker.h"
#include "metrics.h"
#include "outbox/metrics.h"
#include "outbox/wire.h"
#include "record.h"

/* One consumer URL: a REQ socket that dials it (and redials forever). */
struct relay_dest {
	char *url;             /* owned */
	nng_socket sock;
	_Atomic int pipes;     /* live connections: 0 = the consumer is down */
	struct relay_breaker breaker;
};

/* Topic -> destinations. topic "*" is the default route. */
struct relay_route {
	char *topic;           /* owned */
	int *dests;            /* owned, indices into relay_deliverer.dests */
	int ndests;
	unsigned next;         /* round-robin cursor */
};

struct relay_deliverer {
	struct relay_dest *dests;
	int ndests;
	struct relay_route *routes;
	int nroutes;
	struct ob_wire_limits limits;
	int64_t timeout_ms;
	uint32_t max_inflight;
	uint32_t breaker_threshold;
	int64_t breaker_probe_ms;
	/* Shutdown: once *stop is set (NULL = never), frames still in flight
	 * get stop_cut_ms more, then are cancelled (outcome RETRY). */
	volatile sig_atomic_t *stop;
	int64_t stop_cut_ms;
	/* counters, read and reset by the caller */
	uint64_t frames_sent;
	uint64_t frames_failed;
	/* metrics (NULL = none): each replied frame's round trip is observed
	 * in frame_seconds; breakers[i] (i < breakers_n) gets destination i's
	 * breaker state and the time of its last failed / replied frame, for
	 * the supervisor to fold (metrics.h). */
	struct ob_metric *frame_seconds;
	struct relay_breaker_live *breakers;
	int breakers_n;
};

/* Parse "TOPIC=URL" specs (URL checked by nng_url_parse) into d, without
 * opening anything. OB_OK or OB_EINVAL with a one-line reason in err. */
int relay_routes_parse(struct relay_deliverer *d, char **specs, size_t n,
    char *err, size_t errlen);

/* Open one REQ socket per destination and start dialing (non-blocking: a
 * consumer that is down is retried by nng). OB_OK or OB_ENET. */
int relay_deliverer_open(struct relay_deliverer *d, char *err, size_t errlen);

/* Close sockets and free everything (safe on a half-opened deliverer). */
void relay_deliverer_close(struct relay_deliverer *d);

/* The destination for topic, or -1 when no route matches (the message is
 * then dead-lettered with "no route"). Round-robin over the destinations
 * that have a live connection and a closed breaker; else over those with a
 * closed breaker; else one whose probe is due; else any. */
int relay_route_pick(struct relay_deliverer *d, const char *topic, size_t len);

/* Deliver n messages and write one outcome per message into out (same
 * order). Outcomes are DELIVERED, DEAD (reject / no route), RELEASE (the
 * destination's breaker is open: not sent, attempt refunded, due again
 * after about a probe interval) or RETRY with the error; the caller turns
 * RETRY into a backoff or a dead letter. Blocks up to the delivery timeout
 * (less once *stop is set). */
void relay_deliver(struct relay_deliverer *d, const struct ob_wire_msg *msgs,
    uint32_t n, struct relay_outcome *out);

#endif
