/*
 * worker.h - one relay worker process (worker.c): claims batches, sends
 * each as one frame, records each batch's outcome as its frame comes back.
 */
#ifndef OUTBOX_RELAY_WORKER_H
#define OUTBOX_RELAY_WORKER_H

#include <signal.h>

#include "relay.h"

/* Run one worker until *stop becomes non-zero (the first stop signal,
 * common/sig.c). Returns the process exit code (RELAY_EXIT_PROTOCOL when
 * the schema does not serve it). Reconnects to the database with backoff.
 * After *stop: claims nothing more, finishes or cuts the frames out within
 * the shutdown grace, releases what it never sent, writes its outcomes.
 * A SIGHUP (forwarded by the supervisor) reloads the settings. */
int relay_worker_run(const struct relay_config *cfg, int worker_index,
    volatile sig_atomic_t *stop, struct relay_shared *shared);

#endif
