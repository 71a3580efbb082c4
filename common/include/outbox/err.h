/*
 * err.h - the one error enum shared by every module.
 *
 * A function that can fail returns one of these (0 = OB_OK) and writes its
 * out-parameters only on success. Library errors (libpq, nng, errno) are
 * translated to these at one wrapper boundary; the detail text goes into a
 * caller-supplied buffer.
 */
#ifndef OUTBOX_ERR_H
#define OUTBOX_ERR_H

#include <stddef.h>

enum ob_err {
	OB_OK = 0,
	OB_EINVAL,       /* invalid argument or configuration */
	OB_ENOMEM,       /* allocation failed */
	OB_EDB,          /* PostgreSQL error (detail in the caller's buffer) */
	OB_ENET,         /* nng / transport error */
	OB_ETIMEDOUT,    /* deadline passed */
	OB_EFENCED,      /* the claim was taken over: write refused */
	OB_ECLOSED,      /* the object was closed / shutting down */
	/* wire decoder: one code per kind of malformed input */
	OB_EWIRE_TRUNC,    /* frame ends before a field or length says */
	OB_EWIRE_MAGIC,    /* wrong magic bytes */
	OB_EWIRE_VERSION,  /* unsupported protocol version */
	OB_EWIRE_KIND,     /* request where a reply was expected, or vice versa */
	OB_EWIRE_COUNT,    /* message count 0 or over the batch limit */
	OB_EWIRE_KEY,      /* idempotency key empty or over 255 bytes */
	OB_EWIRE_TOPIC,    /* topic empty or over 255 bytes */
	OB_EWIRE_ORDKEY,   /* ordering key over 255 bytes */
	OB_EWIRE_PAYLOAD,  /* payload over the configured maximum */
	OB_EWIRE_STATUS,   /* unknown reply status code */
	OB_EWIRE_DETAIL,   /* reply detail over its maximum */
	OB_EWIRE_TRAILING, /* bytes left after the last field */
	OB_EWIRE_FLAGS,    /* reserved header bits set */
	OB_EPROTO,       /* the schema does not serve this program's protocol */
	OB_EEXIST,       /* already there: nothing written */
	OB_EWIRE_SOURCE, /* request source over 63 bytes or not [A-Za-z0-9._-] */
	OB_ERR_COUNT
};

/* Stable short name of an error code ("wire.truncated", ...). Never NULL. */
const char *ob_err_name(int err);

/* Human-readable description of an error code. Never NULL. */
const char *ob_strerror(int err);

#endif
