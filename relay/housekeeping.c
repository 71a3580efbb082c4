/*
 * housekeeping.c - worker 0's periodic maintenance: retention and stream
 * discovery, each on its own interval (housekeeping.h). Never touches a
 * batch or a frame.
 */
#include <inttypes.h>

#include "housekeeping.h"
#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/housekeep.h"
#include "outbox/log.h"
#include "outbox/pg.h"

void
relay_housekeeping_purge(struct relay_housekeeping *hk, PGconn *conn,
    const struct relay_config *c, struct relay_tally *t)
{
	if (ob_mono_ms() < hk->next_purge_ms)
		return;
	hk->next_purge_ms = ob_mono_ms() + c->purge_interval_ms;
	char err[1024], q[1100];
	struct ob_housekeep h;
	int64_t t0 = ob_mono_ms();
	if (ob_housekeep(conn, c->retention_ms, c->dead_retention_ms, false, &h, err,
	        sizeof(err)) != OB_OK) {
		ob_warn("relay.housekeep.failed", "err=%s", ob_log_q(err, q, sizeof(q)));
		return;
	}
	if (!h.ran) {
		ob_debug("relay.housekeep.skipped", "reason=%s", "another process holds it");
		return;
	}
	if (h.read_again >= 0)
		ob_warn("relay.housekeep.restore_adopted", "read_again=%" PRId64 " hint=\"the outbox"
		    " was restored from another cluster: messages no consumer was known to have"
		    " answered are delivered again (docs/operations.md)\"", h.read_again);
	if (h.truncated_rows > 0) {
		RELAY_TALLY_ADD(t, purged, h.truncated_rows);
		ob_metric_add(RELAY_TALLY_METRIC(t, purged), h.truncated_rows);
	}
	if (h.truncated_slot >= 0 || h.switched_to >= 0 || h.dead_deleted > 0)
		ob_info("relay.housekeep.done", "truncated_slot=%d purged=%" PRId64
		    " switched_to=%d dead_deleted=%" PRId64 " batches_deleted=%" PRId64
		    " retention_ms=%" PRId64 " ms=%" PRId64, h.truncated_slot, h.truncated_rows,
		    h.switched_to, h.dead_deleted, h.batches_deleted, c->retention_ms,
		    ob_mono_ms() - t0);
	if (h.waiting[0] != '\0')
		ob_warn("relay.housekeep.waiting", "why=%s", ob_log_q(h.waiting, q, sizeof(q)));
	ob_metric_set(RELAY_TALLY_METRIC(t, oldest_xact_age), h.oldest_xact_age_s);
	ob_metric_set(RELAY_TALLY_METRIC(t, oldest_xact_pid), (double)h.oldest_xact_pid);
	if (h.oldest_xact_pid != 0 && h.oldest_xact_age_s * 1000 >= (double)c->long_xact_warn_ms)
		ob_warn("relay.db.long_transaction", "pid=%d application_name=%s xact_age_s=%.1f"
		    " hint=\"vacuum waits for it: the outbox's bookkeeping grows until it ends\"",
		    h.oldest_xact_pid, ob_log_q(h.oldest_xact_application, q, sizeof(q)),
		    h.oldest_xact_age_s);
}

/* A claim that finds no work discovers streams too; this is for a relay
 * that always finds work elsewhere. */
void
relay_housekeeping_discover(struct relay_housekeeping *h, PGconn *conn,
    const struct relay_config *c)
{
	if (ob_mono_ms() < h->next_discover_ms)
		return;
	h->next_discover_ms = ob_mono_ms() + c->poll_ms;
	char err[512], q[600];
	if (ob_pg_exec(conn, "SELECT outbox.discover_streams()", "discover streams", err,
	        sizeof(err)) != OB_OK)
		ob_warn("relay.streams.discover_failed", "err=%s", ob_log_q(err, q, sizeof(q)));
}
