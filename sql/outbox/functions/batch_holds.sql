-- outbox.batch_holds (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012.
--
-- Whether stream batch b holds message e (its range, minus what it parked).
CREATE OR REPLACE FUNCTION outbox.batch_holds(b outbox.batches, e outbox.events) RETURNS boolean
    LANGUAGE sql IMMUTABLE AS $$
    SELECT (b.snap_lo IS NULL OR NOT pg_visible_in_snapshot(e.txid, b.snap_lo))
       AND pg_visible_in_snapshot(e.txid, b.snap_hi)
       AND (b.from_txid IS NULL OR (e.txid, e.id) > (b.from_txid, b.from_id))
       AND (e.txid, e.id) <= (b.to_txid, b.to_id)
       AND NOT (e.id = ANY(COALESCE(b.skip_ids, '{}')))
$$;
