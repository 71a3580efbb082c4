/*
 * route_tls.h - the relay's side of mutual TLS to its consumers (tls+tcp://
 * routes): the settings, their check at start, and what a refused
 * handshake looks like from here.
 *
 * The supervisor must fork its workers before any nng state exists, yet a
 * certificate is only known to parse once mbedTLS (inside nng) parsed it:
 * relay_tls_probe does that in a throwaway child process and reports the
 * first failure back, so a bad file stops the start (exit 2) with one
 * line. Each worker then builds its own configuration per destination
 * (relay_deliverer_open).
 *
 * A refused handshake never becomes a connection: the destination has no
 * pipe, its frames fail without reaching a consumer (attempt refunded, the
 * breaker counts them: the destination is down). Why, nng says only in
 * the dialer's counters; relay_dest_refusals (dest.h) reads them after a
 * failed frame and logs and counts their growth (relay.handshake.refused).
 */
#ifndef OUTBOX_RELAY_ROUTE_TLS_H
#define OUTBOX_RELAY_ROUTE_TLS_H

#include <stddef.h>

#include "outbox/bus_tls.h"
#include "relay.h"
#include "routes.h"

struct relay_dest_table; /* dest.h */

/* The TLS settings of c (borrowed from it). */
struct ob_bus_tls_files relay_tls_files(const struct relay_config *c);

/* Build (and drop) the TLS configuration of every tls+tcp:// URL of rt in a
 * child process. OB_OK (also when there is none), or OB_EINVAL with the
 * child's one line in err (which file, why). Blocks until the child exits;
 * this process creates no nng state. */
int relay_tls_probe(const struct ob_bus_tls_files *f, const struct relay_routes *rt,
    char *err, size_t errlen);

/* SIGHUP in a worker: when a route is tls+tcp://, re-read the TLS files
 * (relay_dest_table_reload_tls) and log the result: relay.tls.reloaded
 * (info: which files, how many destinations) or relay.tls.reload_failed
 * (warn: why; the running configuration is kept); counted in t's
 * tls_reload metrics. Connections up now keep going; new dials (after a
 * consumer closed its connections, as its own reload does) use the new
 * files. Worker loop only. */
void relay_tls_reload(struct relay_dest_table *t, int worker);

#endif
