/*
 * ledger.h - the agent-side tool ledger: an append-only file of JSON
 * lines, one per state change of one logical call (planned, approved,
 * started, succeeded, failed, uncertain), each fsynced before the call
 * goes on. Each line names the tool, the key and the state; the client
 * adds the call's run and step ids, the hash of its input, the tool's
 * declared idempotency and replay policy, and what it made (docs/
 * producer.md, "The ledger").
 *
 * After a crash or a timeout the ledger says what may have happened: a key
 * whose last state is "uncertain" must be looked up before it is posted
 * again.
 */
#ifndef OUTBOX_CLIENT_LEDGER_H
#define OUTBOX_CLIENT_LEDGER_H

#include <stddef.h>
#include <stdint.h>

struct json_t; /* jansson's */

#define LEDGER_MAX_LINE 8192  /* longest line read back; longer ones are skipped */

/* Append {"ts","tool","key","state",...extra} and fsync. extra is NULL or
 * a JSON object whose members are merged in (borrowed). OB_OK, or
 * OB_EINVAL with the reason (the caller must not go on without its entry). */
int ledger_append(const char *path, const char *tool, const char *key, const char *state,
    const struct json_t *extra, char *err, size_t errlen);

/* Every entry of key, oldest first, as a JSON array (owned; empty when
 * none or no file); NULL with the reason in err when the file cannot be
 * read. Torn lines are skipped. */
struct json_t *ledger_entries(const char *path, const char *key, char *err, size_t errlen);

/* The last state recorded for key ("" when none; the file may be absent).
 * out must hold 16 bytes. Lines that are not valid JSON (a torn last write)
 * are skipped. */
int ledger_last_state(const char *path, const char *key, char *out, size_t outlen,
    char *err, size_t errlen);

#endif
