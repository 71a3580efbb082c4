/*
 * server.h - the consumer's nng REP server: receive -> apply -> reply.
 *
 * N serving threads, each with its own nng context and its own PostgreSQL
 * connection, so N requests are in flight at once. A request that does not
 * decode gets an error reply (one log line, a counter, no database write).
 * A reply is sent only after the batch's COMMIT returned.
 */
#ifndef OUTBOX_CONSUMER_SERVER_H
#define OUTBOX_CONSUMER_SERVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "inbox.h"
#include "outbox/wire.h"

struct consumer_counters {
	_Atomic uint64_t requests;
	_Atomic uint64_t bad_frames;
	_Atomic uint64_t applied;
	_Atomic uint64_t duplicate;
	_Atomic uint64_t retried;
	_Atomic uint64_t rejected;
	_Atomic uint64_t db_failures;
};

struct consumer_server_config {
	const char *db;          /* conninfo, borrowed */
	const char *listen;      /* nng URL, borrowed */
	int threads;             /* serving threads = requests in flight */
	struct ob_wire_limits limits;
	struct inbox_options inbox;
	struct ob_fault *drop_reply; /* close without replying after commit; may be NULL */
};

struct consumer_server;

/* Listen and start serving. Connects every thread's database connection
 * first, so a bad conninfo fails here (OB_EDB) rather than per request.
 * On success *out is owned: stop with consumer_server_stop. */
int consumer_server_start(const struct consumer_server_config *cfg,
    struct consumer_server **out, char *err, size_t errlen);

/* Counters, live; valid until stop. */
const struct consumer_counters *consumer_server_counters(
    const struct consumer_server *s);

/* Close the socket, wait for in-flight requests to finish, free. */
void consumer_server_stop(struct consumer_server *s);

#endif
