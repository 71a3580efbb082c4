-- outbox.batch_events (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012.
--
-- The messages of stream batch b, in commit order (without the ones it
-- parked).
CREATE OR REPLACE FUNCTION outbox.batch_events(b outbox.batches) RETURNS SETOF outbox.events
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT e.* FROM outbox.stream_read(b.topic, b.lane, b.snap_lo, b.snap_hi, b.from_txid,
                                       b.from_id, b.size + COALESCE(cardinality(b.skip_ids), 0)) e
     WHERE (e.txid, e.id) <= (b.to_txid, b.to_id)
       AND NOT (e.id = ANY(COALESCE(b.skip_ids, '{}')));
END
$$;
