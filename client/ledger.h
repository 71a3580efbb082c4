/*
 * ledger.h - the agent-side tool ledger: an append-only file of JSON
 * lines, one per state change of one logical call (planned, started,
 * succeeded, failed, uncertain), each fsynced before the call goes on.
 *
 * After a crash or a timeout the ledger says what may have happened: a key
 * whose last state is "uncertain" must be looked up before it is posted
 * again.
 */
#ifndef OUTBOX_CLIENT_LEDGER_H
#define OUTBOX_CLIENT_LEDGER_H

#include <stddef.h>
#include <stdint.h>

#define LEDGER_MAX_LINE 8192  /* longest line read back; longer ones are skipped */

/* Append {"ts","tool","key","state",...extra} and fsync. extra_json is
 * NULL or a JSON object whose members are merged in (borrowed). OB_OK, or
 * OB_EINVAL with the reason (the caller must not go on without its entry). */
int ledger_append(const char *path, const char *key, const char *state,
    const char *extra_json, char *err, size_t errlen);

/* The last state recorded for key ("" when none; the file may be absent).
 * out must hold 16 bytes. Lines that are not valid JSON (a torn last write)
 * are skipped. */
int ledger_last_state(const char *path, const char *key, char *out, size_t outlen,
    char *err, size_t errlen);

#endif
