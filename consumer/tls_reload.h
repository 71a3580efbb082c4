/*
 * tls_reload.h - SIGHUP re-reads the consumer's TLS files (--tls-cert,
 * --tls-key, --tls-ca: the same paths, their contents renewed) and serves
 * with them from the next connection on.
 *
 * The files are read and checked first (common/bus_tls.c: readable, PEM
 * that mbedTLS parses, the key is the certificate's); a bad one keeps the
 * running configuration: one warning, consumer.tls.reload_failed, with
 * the reason, and outbox_consumer_tls_reload_total{result="failed"}. Good
 * ones re-open the listener with them (consumer_server_relisten: every
 * connection is closed and handshaked again, under the new files), one
 * info line consumer.tls.reloaded naming the files (never their
 * contents), and {result="ok"}.
 */
#ifndef OUTBOX_CONSUMER_TLS_RELOAD_H
#define OUTBOX_CONSUMER_TLS_RELOAD_H

#include "outbox/bus_tls.h"

struct consumer_server;
struct consumer_metrics;

/* While the listener is lost (neither the new nor the old configuration
 * could listen again: the port was taken meanwhile), it is tried again
 * after a jittered backoff (outbox/backoff.h: a wait drawn from [0,
 * ceiling], the ceiling doubling from 2 * BASE to CAP), until it listens
 * or a stop signal comes. */
#define CONSUMER_RELISTEN_LOST_BASE_MS 500
#define CONSUMER_RELISTEN_LOST_CAP_MS 5000

struct consumer_tls_reload {
	struct consumer_server *srv;   /* borrowed */
	struct ob_bus_tls_files files; /* borrowed paths, as at start */
	const char *listen;            /* the tls+tcp:// URL served (with its bound
	                                * port: consumer_server_url), borrowed */
	struct consumer_metrics *metrics; /* borrowed; NULL: metrics off */
};

/* One reload (ob_reload_until_stop_then's after: arg is a struct
 * consumer_tls_reload). Main thread only; blocks while the listener is
 * re-opened (and, if it was lost, until it listens again or a stop
 * signal). */
void consumer_tls_reload(void *arg);

#endif
