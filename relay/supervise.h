/*
 * supervise.h - the relay's process model: one supervisor, N workers.
 *
 * The supervisor forks the workers before it opens any nng socket or
 * database connection of its own (it has none), restarts a worker that
 * dies (with backoff, one log line each), and on SIGTERM/SIGINT forwards
 * SIGTERM to the workers, waits up to --shutdown-grace for them to finish
 * their in-flight deliveries and release what they never sent, and then
 * SIGKILLs what is left; a second signal SIGKILLs at once.
 *
 * With --metrics it also forks the metrics process (metrics_serve.c) before
 * the workers, restarts it when it dies, and stops it after the workers.
 */
#ifndef OUTBOX_RELAY_SUPERVISE_H
#define OUTBOX_RELAY_SUPERVISE_H

#include "relay.h"

/* Restart backoff of a dying worker: a wait drawn from [0, ceiling], the
 * ceiling doubling from 2 * MIN to MAX (outbox/backoff.h); back to MIN
 * after a worker has run RESET ms. */
#define RELAY_RESTART_MIN_MS 100
#define RELAY_RESTART_MAX_MS 10000
#define RELAY_RESTART_RESET_MS 30000

/* How long the supervisor waits for the metrics process to bind at start
 * (a failure then is fatal: exit 1), and at least for it to stop at the
 * end (--shutdown-grace when longer). */
#define RELAY_METRICS_START_MS 10000
#define RELAY_METRICS_STOP_MS 3000

/* Run the supervisor until shutdown. Takes the signals through the signal
 * layer (common/sig.c: SIGTERM, SIGINT, SIGHUP, and SIGCHLD). Must be called before any nng or libpq state
 * exists in this process; flushes stdio before each fork. shared must be a
 * MAP_SHARED mapping (relay_shared_new). Returns the exit code: 0 when
 * every worker stopped cleanly within the grace, 1 otherwise. */
int relay_supervise(const struct relay_config *cfg, struct relay_shared *shared);

#endif
