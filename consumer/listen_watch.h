/*
 * listen_watch.h - what the consumer's listener refused, made visible.
 *
 * A connection whose handshake fails (TLS: no client certificate, one not
 * signed by --tls-ca, expired; or a peer that does not speak TLS, or not
 * SP) never becomes an nng pipe: nng only counts it in the listener's
 * statistics. A thread of its own reads those counters every
 * CONSUMER_REFUSAL_POLL_MS and turns their growth into counters, metrics
 * and warnings (class "closed", a peer hanging up, at info), rate-limited
 * per reason (the first at once, then one line
 * per CONSUMER_REFUSAL_LOG_EVERY_MS carrying the count). It reads nng
 * statistics and bumps atomics only: it never touches a request. (A pipe
 * whose peer is not verified cannot exist with auth mode required; the
 * serving threads check NNG_OPT_TLS_VERIFIED per request all the same,
 * server.c, and count a miss with consumer_refusal_count.)
 */
#ifndef OUTBOX_CONSUMER_LISTEN_WATCH_H
#define OUTBOX_CONSUMER_LISTEN_WATCH_H

#include <stdbool.h>

#include <nng/nng.h>

#include "outbox/bus_tls.h"

#define CONSUMER_REFUSAL_POLL_MS 1000       /* how often the counters are read */
#define CONSUMER_REFUSAL_LOG_EVERY_MS 30000 /* per reason, after its first line */

struct consumer_counters;
struct consumer_metrics;
struct consumer_listen_watch;

/* A watch for the listener on url (tls: whether it is tls+tcp://, for the
 * log line). The counters and metrics are borrowed (metrics may be NULL).
 * OB_OK or OB_ENOMEM. On OB_OK *out is owned: consumer_listen_watch_stop. */
int consumer_listen_watch_new(bool tls, const char *url, struct consumer_counters *c,
    struct consumer_metrics *m, struct consumer_listen_watch **out);

/* Start the thread that reads l's counters. OB_OK or OB_ENOMEM. */
int consumer_listen_watch_start(struct consumer_listen_watch *w, nng_listener l);

/* Stop the thread (one last look first, so nothing counted is left
 * unlogged) and free w. NULL is ok. */
void consumer_listen_watch_stop(struct consumer_listen_watch *w);

/* Count n refusals of class r in c and m (m may be NULL). */
void consumer_refusal_count(struct consumer_counters *c, struct consumer_metrics *m,
    enum ob_bus_refusal r, uint64_t n);

#endif
