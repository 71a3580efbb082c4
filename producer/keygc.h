/*
 * keygc.h - expiry of idempotency keys: a thread that deletes keys older
 * than --key-retention from app.idempotency_keys in batches, so that the
 * table does not grow without bound and no delete holds locks for long.
 * After expiry a key is new again (as Stripe documents for theirs).
 */
#ifndef OUTBOX_PRODUCER_KEYGC_H
#define OUTBOX_PRODUCER_KEYGC_H

#include <stddef.h>
#include <stdint.h>

struct keygc;
struct producer_metrics;

/* Start the thread (it connects to db itself). pm (borrowed, may be NULL)
 * counts the deleted keys and must outlive g. On OB_OK *out is owned:
 * keygc_stop. */
int keygc_start(const char *db, int64_t retention_ms, int64_t interval_ms, int batch,
    struct producer_metrics *pm, struct keygc **out, char *err, size_t errlen);

/* Stop and join the thread (at most one batch in flight); frees g. */
void keygc_stop(struct keygc *g);

#endif
