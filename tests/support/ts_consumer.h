/*
 * ts_consumer.h - test fixtures for the consumer: outbox-consumer started
 * with extra flags, and a real nng REQ client that sends frames to it and
 * decodes its replies.
 */
#ifndef OUTBOX_TS_CONSUMER_H
#define OUTBOX_TS_CONSUMER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <nng/nng.h>

#include "outbox/wire.h"

#define TS_CONSUMER_REPLY_TIMEOUT_MS 30000

/* The wire's largest limits, for encoding requests and decoding replies. */
extern const struct ob_wire_limits ts_consumer_limits;

struct ts_consumer_conn {
	nng_socket sock;
};

/* A reply and the message it borrows its strings from. */
struct ts_consumer_reply {
	nng_msg *msg;
	struct ob_wire_reply rep;
};

/* Start outbox-consumer on db listening on url, with extra flags
 * (NULL-ended, may be NULL); its output goes to log (ts_spawn). */
pid_t ts_consumer_spawn(char *log, const char *db, const char *url, const char *const *extra);

/* A message created now, fence 1, attempt 1, no ordering key. Strings are
 * borrowed. */
struct ob_wire_msg ts_consumer_msg(uint64_t id, const char *topic, const char *key,
    const char *payload);

/* Dial url (in the background: connects and reconnects by itself). */
void ts_consumer_open(struct ts_consumer_conn *c, const char *url);
void ts_consumer_close(struct ts_consumer_conn *c);

/* Send bytes as they are, or msgs encoded as one request frame. */
void ts_consumer_send_raw(struct ts_consumer_conn *c, const void *p, size_t n);
void ts_consumer_send(struct ts_consumer_conn *c, const struct ob_wire_msg *msgs, uint32_t n);
/* The same as a request of a given wire version (what a relay of that
 * version sends). */
void ts_consumer_send_v(struct ts_consumer_conn *c, int version, const struct ob_wire_msg *msgs,
    uint32_t n);

/* Receive and decode one reply; returns the nng error (0 = r filled). */
int ts_consumer_recv(struct ts_consumer_conn *c, struct ts_consumer_reply *r, int timeout_ms);
void ts_consumer_reply_fini(struct ts_consumer_reply *r);

/* Send and wait for the reply (asserting one arrives, for all n). */
void ts_consumer_call(struct ts_consumer_conn *c, const struct ob_wire_msg *msgs, uint32_t n,
    struct ts_consumer_reply *r);

/* The reply to one message sent before (ts_consumer_send), asserting it
 * arrives whole: its status; its detail copied into detail (may be NULL). */
int ts_consumer_recv1(struct ts_consumer_conn *c, char *detail, size_t detaillen);

/* One message, one status; its detail copied into detail (may be NULL). */
int ts_consumer_call1(struct ts_consumer_conn *c, struct ob_wire_msg m, char *detail,
    size_t detaillen);

#endif
