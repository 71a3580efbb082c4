/*
 * wire.h - the relay <-> consumer frame format (versions 1 to 3).
 *
 * A request carries 1..N messages; a reply carries one status per message,
 * in the same order. Every integer is big-endian. docs/protocol.md describes
 * the layout byte by byte. The decoder never reads past its buffer and
 * returns a specific OB_EWIRE_* code for each kind of malformed input.
 *
 * Versions: a request's version is the highest reply version its sender
 * understands; the answer is a reply of min(that, OB_WIRE_VERSION). The
 * decoders accept every version in [OB_WIRE_VERSION_MIN, OB_WIRE_VERSION]
 * and say which one they read; the encoders write the version they are
 * given (the *_v functions) or OB_WIRE_VERSION. A new field is a new
 * version: bump OB_WIRE_VERSION, read and write the field only from that
 * version on, and keep the older layouts decodable.
 */
#ifndef OUTBOX_WIRE_H
#define OUTBOX_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "outbox/buf.h"

/* The versions this codec reads and writes: 1 = the first; 2 = each reply
 * result carries retry_after_ms (requests are laid out alike in 1 and 2);
 * 3 = the request header carries the sender's source name after count
 * (replies are laid out as in 2). */
#define OB_WIRE_VERSION_MIN 1
#define OB_WIRE_VERSION 3
/* The first version whose results carry retry_after_ms. */
#define OB_WIRE_VERSION_RETRY_AFTER 2
/* The first version whose requests carry a source. */
#define OB_WIRE_VERSION_SOURCE 3

/* Hard limits of the format (every version). */
#define OB_WIRE_MAX_KEY 255         /* idempotency key: 1..255 bytes */
#define OB_WIRE_MAX_TOPIC 255       /* topic: 1..255 bytes */
#define OB_WIRE_MAX_ORDKEY 255      /* ordering key: 0..255 bytes (0 = none) */
#define OB_WIRE_MAX_DETAIL 1024     /* reply detail text: 0..1024 bytes */
#define OB_WIRE_MAX_BATCH 1000      /* messages per frame, absolute ceiling */
#define OB_WIRE_MAX_PAYLOAD (16u * 1024 * 1024) /* absolute payload ceiling */
/* Source name (version 3 on): 0..63 bytes of [A-Za-z0-9._-]; 0 bytes (and
 * every version 1 or 2 request) = the source "" (one producer database,
 * before sources existed). A relay always names one (1..63 bytes). */
#define OB_WIRE_MAX_SOURCE 63

/* Defaults for the configurable limits (flags --max-payload, --max-batch). */
#define OB_WIRE_DEFAULT_MAX_PAYLOAD (1024u * 1024)
#define OB_WIRE_DEFAULT_MAX_BATCH 100

/* Header sizes, exposed for tests and docs. */
#define OB_WIRE_REQ_HEADER 12  /* magic 4, version 1, kind 1, flags 2, count 4 */
/* Version 3 on, after count: source_len 1 and the source. */
#define OB_WIRE_REQ_SOURCE_MAX (1 + OB_WIRE_MAX_SOURCE)
/* Fixed bytes of one request message: id 8, fence 8, attempt 4,
 * created_at 8, ordering_seq 8, the lengths of topic, key and ordering key
 * 2 each, payload length 4. */
#define OB_WIRE_REQ_MSG_FIXED 46
/* The most one request message adds beyond its payload: its fixed bytes
 * and every string at its maximum. */
#define OB_WIRE_REQ_MSG_OVERHEAD_MAX (OB_WIRE_REQ_MSG_FIXED + OB_WIRE_MAX_TOPIC + \
	OB_WIRE_MAX_KEY + OB_WIRE_MAX_ORDKEY)
/* A bound on the size of any request of at most n messages whose payloads
 * are at most p bytes each: what a consumer with those limits must accept,
 * and the most it needs to (its receive limit, NNG_OPT_RECVMAXSZ). */
#define OB_WIRE_REQUEST_MAX_BYTES(n, p) ((size_t)OB_WIRE_REQ_HEADER + \
	OB_WIRE_REQ_SOURCE_MAX + \
	(size_t)(n) * ((size_t)OB_WIRE_REQ_MSG_OVERHEAD_MAX + (size_t)(p)))
/* Fixed bytes of the reply header: magic 4, version 1, kind 1, flags 2,
 * frame_err 1, reserved 1, detail_len 2, count 4. The detail_len bytes of
 * frame detail sit between detail_len and count (offset 12). */
#define OB_WIRE_REP_HEADER 16
/* Fixed bytes of one result: id 8, status 1, detail_len 2 (version 1);
 * version 2 adds retry_after_ms 4 after status. */
#define OB_WIRE_REP_RESULT 11
#define OB_WIRE_REP_RESULT_V2 15
/* A bound on the size of any reply (of any version) to a request of n
 * messages (every detail at its maximum; an error reply is smaller): what
 * a relay must accept. */
#define OB_WIRE_REPLY_MAX_BYTES(n) ((size_t)OB_WIRE_REP_HEADER + OB_WIRE_MAX_DETAIL + \
	(size_t)(n) * (OB_WIRE_REP_RESULT_V2 + OB_WIRE_MAX_DETAIL))

/* Limits the decoder enforces; the configured ones, not above the hard ones. */
struct ob_wire_limits {
	uint32_t max_payload; /* <= OB_WIRE_MAX_PAYLOAD */
	uint32_t max_batch;   /* 1..OB_WIRE_MAX_BATCH */
};

/* One message. Strings are NOT NUL-terminated; after decoding they point into
 * the decoded buffer (borrowed: valid while that buffer lives). */
struct ob_wire_msg {
	uint64_t id;           /* the message id: outbox.events.id */
	uint64_t fence;        /* fencing token of the claim that sent it */
	uint32_t attempt;      /* delivery attempt, 1-based */
	int64_t created_at_us; /* enqueue time, Unix microseconds */
	uint64_t ordering_seq; /* position within its ordering key, 0 = none */
	const char *topic;
	uint16_t topic_len;
	const char *key;
	uint16_t key_len;
	const char *ordering_key; /* NULL when ordering_key_len == 0 */
	uint16_t ordering_key_len;
	const char *payload;   /* JSON text */
	uint32_t payload_len;
	/* The frame's source (version 3 on; "" before): the same for every
	 * message of a frame. The decoder points every message at the header's
	 * bytes; the encoder writes it once and refuses (OB_EINVAL) messages
	 * that disagree, or a source in a version before 3. NULL when 0. */
	const char *source;
	uint8_t source_len;
};

enum ob_wire_status {
	OB_WIRE_APPLIED = 1,   /* effect applied now */
	OB_WIRE_DUPLICATE = 2, /* key seen before: nothing applied */
	OB_WIRE_RETRY = 3,     /* transient failure: deliver again later */
	OB_WIRE_REJECT = 4,    /* permanent failure: dead-letter */
};

/* Stable lower-case name ("applied", ...), or "unknown". */
const char *ob_wire_status_name(int status);

struct ob_wire_result {
	uint64_t id;          /* echoes the message id */
	uint8_t status;       /* enum ob_wire_status */
	const char *detail;   /* not NUL-terminated; may be NULL when len 0 */
	uint16_t detail_len;
	/* Version 2 on: with status retry, the consumer asks not to be sent
	 * this message again before this many ms (a downstream's Retry-After);
	 * 0 = no such wish. Version 1 neither carries nor decodes it (0). The
	 * relay ignores it with any other status. */
	uint32_t retry_after_ms;
};

/* A decoded request. msgs is owned by the struct: release with
 * ob_wire_request_fini(). The strings inside borrow the input buffer. */
struct ob_wire_request {
	uint32_t count;
	struct ob_wire_msg *msgs;
	uint8_t version;       /* the highest reply version the sender reads */
	const char *source;    /* the sender's source (borrowed; NULL when ""), */
	uint8_t source_len;    /* 0 for versions 1 and 2 */
};

/* A decoded reply. If frame_err != 0 the consumer refused the whole request
 * (count is 0 and detail says why). results is owned: ob_wire_reply_fini(). */
struct ob_wire_reply {
	uint8_t frame_err;     /* 0, or an OB_EWIRE_* code the consumer reported */
	const char *detail;
	uint16_t detail_len;
	uint32_t count;
	struct ob_wire_result *results;
	uint8_t version;       /* the layout it was decoded from */
};

/* Is s[0..n) a valid source name: at most OB_WIRE_MAX_SOURCE bytes, each
 * of [A-Za-z0-9._-]? (The empty name is valid: the source "".) */
bool ob_wire_source_ok(const char *s, size_t n);

/* Encode a request of n messages by appending to out, as version
 * OB_WIRE_VERSION. The frame's source is msgs[0]'s (every message must
 * carry the same, else OB_EINVAL; a bad name is OB_EWIRE_SOURCE). Checks
 * every limit against lim; returns OB_OK, an OB_EWIRE_* code naming the
 * first violated limit (out is then unchanged), or OB_ENOMEM. */
int ob_wire_encode_request(struct ob_buf *out, const struct ob_wire_msg *msgs,
    uint32_t n, const struct ob_wire_limits *lim);

/* The same as a given version (OB_WIRE_VERSION_MIN..OB_WIRE_VERSION, else
 * OB_EINVAL): what a sender that reads replies up to that version sends.
 * Versions 1 and 2 carry no source: a message with one is OB_EINVAL. */
int ob_wire_encode_request_v(struct ob_buf *out, int version,
    const struct ob_wire_msg *msgs, uint32_t n, const struct ob_wire_limits *lim);

/* The reply version to answer the frame buf[0..len) with, decodable or
 * not: the frame's version byte when it is a request of a version this
 * codec speaks (a new consumer answers an old relay in the old layout),
 * else OB_WIRE_VERSION_MIN. Pure; never reads outside the buffer. */
int ob_wire_reply_version_for(const void *buf, size_t len);

/* Decode a request. On success *out is filled (release with
 * ob_wire_request_fini); on failure *out is untouched. Never reads outside
 * buf[0..len). */
int ob_wire_decode_request(const void *buf, size_t len,
    const struct ob_wire_limits *lim, struct ob_wire_request *out);

void ob_wire_request_fini(struct ob_wire_request *req);

/* Encode a reply with one result per message (frame_err 0), as version
 * OB_WIRE_VERSION. Details longer than OB_WIRE_MAX_DETAIL are truncated,
 * never rejected. */
int ob_wire_encode_reply(struct ob_buf *out, const struct ob_wire_result *res,
    uint32_t n);

/* The same as a given version (else OB_EINVAL); version 1 drops every
 * retry_after_ms (it has no room for it). */
int ob_wire_encode_reply_v(struct ob_buf *out, int version,
    const struct ob_wire_result *res, uint32_t n);

/* Encode a whole-frame refusal: frame_err (an OB_EWIRE_* code), no results,
 * as version OB_WIRE_VERSION_MIN (its layout is the same in every version,
 * so any relay reads it). */
int ob_wire_encode_error_reply(struct ob_buf *out, int frame_err,
    const char *detail);

/* The same as a given version (else OB_EINVAL). */
int ob_wire_encode_error_reply_v(struct ob_buf *out, int version, int frame_err,
    const char *detail);

/* Decode a reply (count may be 0 only when frame_err != 0). Same ownership
 * and safety rules as ob_wire_decode_request. */
int ob_wire_decode_reply(const void *buf, size_t len,
    const struct ob_wire_limits *lim, struct ob_wire_reply *out);

void ob_wire_reply_fini(struct ob_wire_reply *rep);

#endif
