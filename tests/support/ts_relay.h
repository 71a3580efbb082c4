/*
 * ts_relay.h - test fixtures for the relay: a fake consumer (an nng REP
 * socket served by a thread of the test process that answers every
 * request in a chosen way: applied, reject, retry (with a Retry-After
 * wish, or none), garbage, silence, or as a consumer that speaks only wire
 * version 1 would)
 * and outbox-relay started with one route and extra flags.
 */
#ifndef OUTBOX_TS_RELAY_H
#define OUTBOX_TS_RELAY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <nng/nng.h>

/* TS_FAKE_V1_ONLY: an old consumer: a request of version 1 is applied (a
 * version 1 reply), any other refused with the version 1 error reply
 * wire.version, as a consumer built before version 2 answers it.
 * TS_FAKE_V2_ONLY: the same for a consumer of versions 1..2 (before the
 * source, version 3): a version 3 request is refused. */
enum ts_fake_mode { TS_FAKE_APPLIED, TS_FAKE_REJECT, TS_FAKE_RETRY, TS_FAKE_GARBAGE,
	TS_FAKE_SILENT, TS_FAKE_V1_ONLY, TS_FAKE_V2_ONLY };

struct ts_fake_consumer {
	nng_socket sock;
	pthread_t thread;
	_Atomic int mode;           /* an enum ts_fake_mode; may change while it runs */
	_Atomic uint64_t frames;    /* requests received */
	_Atomic uint64_t messages;  /* messages in them */
	_Atomic uint32_t retry_after_ms; /* TS_FAKE_RETRY: each result's wish (0 = none) */
	bool running;
};

/* Listen on url and answer every request as mode says (ck_assert on
 * failure). */
void ts_fake_consumer_start(struct ts_fake_consumer *fc, const char *url,
    enum ts_fake_mode mode);

/* A fake consumer on a fresh ipc URL (ts_ipc_url(name), into url) and its
 * route "topic=URL" (into route), the setup of most relay tests. */
void ts_fake_consumer_routed(struct ts_fake_consumer *fc, const char *name, const char *topic,
    enum ts_fake_mode mode, char *url, size_t urllen, char *route, size_t routelen);

/* Close the socket: the relay sees the consumer go away. */
void ts_fake_consumer_stop(struct ts_fake_consumer *fc);

/* Start outbox-relay on db with one route ("TOPIC=URL") and extra flags
 * (NULL-ended, may be NULL); its output goes to log (ts_spawn). */
pid_t ts_relay_spawn(char *log, const char *db, const char *route, const char *const *extra);

#endif
