/*
 * err.c - names and descriptions of the shared error codes.
 *
 * The dotted names are part of the log format and of the test data
 * (tests/data/wire/cases.txt): rename one and you break both. Add a code to
 * enum ob_err and the static assert below reminds you to name it here.
 */
#include "outbox/err.h"

struct err_info {
	const char *name;
	const char *text;
};

static const struct err_info err_table[] = {
	[OB_OK] = { "ok", "success" },
	[OB_EINVAL] = { "invalid", "invalid argument or configuration" },
	[OB_ENOMEM] = { "nomem", "out of memory" },
	[OB_EDB] = { "db", "database error" },
	[OB_ENET] = { "net", "network or transport error" },
	[OB_ETIMEDOUT] = { "timeout", "deadline passed" },
	[OB_EFENCED] = { "fenced", "claim taken over by another relay" },
	[OB_ECLOSED] = { "closed", "object closed or shutting down" },
	[OB_EWIRE_TRUNC] = { "wire.truncated",
	    "frame ends before a field or length says" },
	[OB_EWIRE_MAGIC] = { "wire.magic", "wrong magic bytes" },
	[OB_EWIRE_VERSION] = { "wire.version", "unsupported protocol version" },
	[OB_EWIRE_KIND] = { "wire.kind",
	    "request where a reply was expected, or vice versa" },
	[OB_EWIRE_COUNT] = { "wire.count",
	    "message count zero or over the batch limit" },
	[OB_EWIRE_KEY] = { "wire.key",
	    "idempotency key empty or over 255 bytes" },
	[OB_EWIRE_TOPIC] = { "wire.topic", "topic empty or over 255 bytes" },
	[OB_EWIRE_ORDKEY] = { "wire.ordering_key",
	    "ordering key over 255 bytes" },
	[OB_EWIRE_PAYLOAD] = { "wire.payload",
	    "payload over the configured maximum" },
	[OB_EWIRE_STATUS] = { "wire.status", "unknown reply status code" },
	[OB_EWIRE_DETAIL] = { "wire.detail", "reply detail over its maximum" },
	[OB_EWIRE_TRAILING] = { "wire.trailing",
	    "bytes left after the last field" },
	[OB_EWIRE_FLAGS] = { "wire.flags", "reserved header bits set" },
	[OB_EPROTO] = { "protocol",
	    "the database schema does not serve this program's protocol version" },
	[OB_EEXIST] = { "exists", "already there: nothing written" },
	[OB_EWIRE_SOURCE] = { "wire.source",
	    "request source over 63 bytes or not of [A-Za-z0-9._-]" },
};

_Static_assert(sizeof(err_table) / sizeof(err_table[0]) == OB_ERR_COUNT,
    "every enum ob_err code needs an entry in err_table");

static const struct err_info *
err_lookup(int err)
{
	if (err < 0 || err >= OB_ERR_COUNT || err_table[err].name == NULL)
		return NULL;
	return &err_table[err];
}

const char *
ob_err_name(int err)
{
	const struct err_info *e = err_lookup(err);

	return e != NULL ? e->name : "unknown";
}

const char *
ob_strerror(int err)
{
	const struct err_info *e = err_lookup(err);

	return e != NULL ? e->text : "unknown";
}
