/*
 * relay.h - the relay's configuration and its worker loop.
 *
 * A worker owns one database connection (claims, outcome writes and LISTEN)
 * and one deliverer (its own nng sockets). It loops claim -> deliver ->
 * record until told to stop; with nothing due it waits for an enqueue
 * notification or the poll interval.
 */
#ifndef OUTBOX_RELAY_RELAY_H
#define OUTBOX_RELAY_RELAY_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "outbox/config.h"

struct relay_config {
	char *db;
	struct ob_cfg_list routes;
	int64_t workers;
	int64_t batch;            /* messages per request frame */
	int64_t max_inflight;     /* frames in flight per worker */
	int64_t lease_ms;
	int64_t delivery_timeout_ms;
	int64_t poll_ms;
	int64_t backoff_base_ms;
	int64_t backoff_cap_ms;
	int64_t max_attempts;
	int64_t max_age_ms;
	int64_t max_payload;
	bool no_fencing;          /* BROKEN mode */
	char *log_level;
	char *log_format;
};

/* The margin the lease must keep over the delivery timeout: time to write
 * the outcomes after the last reply. */
#define RELAY_LEASE_MARGIN_MS 1000

/* Run one worker until *stop becomes non-zero (set from a signal handler).
 * Returns the process exit code. Reconnects to the database with backoff. */
int relay_worker_run(const struct relay_config *cfg, int worker_index,
    volatile sig_atomic_t *stop);

#endif
