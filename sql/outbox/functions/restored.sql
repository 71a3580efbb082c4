-- outbox.restored (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 018.
--
-- Whether the outbox holds transaction ids of another cluster: a dump
-- restored into a cluster whose transaction counter is behind the one it
-- was taken from. A stream's snapshot, an open batch's, or a stream's
-- newest message lies beyond every transaction this cluster has started,
-- which never happens in the cluster that wrote them (ids only grow; a
-- physical copy, a standby or pg_upgrade carry the counter over). Until
-- the restore is adopted (outbox.adopt_restore) those ids compare with
-- nothing here: a new message would look read already, and a slot done.
-- One index probe per stream; for housekeeping, not for a hot path.
CREATE OR REPLACE FUNCTION outbox.restored() RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET enable_seqscan = off SET jit = off -- index probes only (see outbox.stream_has_work)
    AS $$
DECLARE
    -- one snapshot for the whole function (STABLE): everything read here
    -- was committed before it, so nothing of this cluster can lie beyond it
    cur    xid8 := pg_snapshot_xmax(pg_current_snapshot());
    st     outbox.streams;
    newest xid8;
BEGIN
    FOR st IN SELECT * FROM outbox.all_streams() LOOP
        IF pg_snapshot_xmax(st.snap_lo) > cur OR pg_snapshot_xmax(st.snap_hi) > cur THEN
            RETURN true;
        END IF;
        -- (not the caller's own message: an uncommitted enqueue of this
        -- very transaction lies beyond its snapshot)
        SELECT e.txid INTO newest FROM outbox.events e
         WHERE e.topic = st.topic AND e.lane = st.lane
           AND e.txid IS DISTINCT FROM pg_current_xact_id_if_assigned()
         ORDER BY e.txid DESC LIMIT 1;
        IF newest >= cur THEN
            RETURN true;
        END IF;
    END LOOP;
    RETURN EXISTS (SELECT 1 FROM outbox.batches b
                    WHERE b.state = 'leased' AND b.kind = 's'
                      AND pg_snapshot_xmax(b.snap_hi) > cur);
END
$$;
