-- outbox.backlog_empty (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012.
--
-- Whether nothing is left to deliver: no stream has a message not yet
-- assigned, no batch is open, no retry waits. A few index probes per
-- stream: cheap enough to poll (the benchmarks and the scenario do).
CREATE OR REPLACE FUNCTION outbox.backlog_empty() RETURNS boolean
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN NOT EXISTS (SELECT 1 FROM outbox.retries)
       AND NOT EXISTS (SELECT 1 FROM outbox.batches b WHERE b.state = 'leased')
       AND NOT EXISTS (
            SELECT 1 FROM outbox.all_streams() st
             WHERE EXISTS (SELECT 1 FROM outbox.stream_read(st.topic, st.lane,
                                     COALESCE(st.snap_hi, st.snap_lo), pg_current_snapshot(),
                                     NULL, NULL, 1))
                OR (st.snap_hi IS NOT NULL AND EXISTS (
                        SELECT 1 FROM outbox.stream_read(st.topic, st.lane, st.snap_lo,
                                     st.snap_hi, st.pos_txid, st.pos_id, 1))));
END
$$;
