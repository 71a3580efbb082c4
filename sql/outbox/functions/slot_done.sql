-- outbox.slot_done (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012.
--
-- Whether every message in slot s is done (of the streams that have a row:
-- housekeep discovers the others first): for each stream, all of its
-- messages there are visible in its floor (snap_lo: assigned to a batch)
-- and in the floor of each of its batches still open (so none of those
-- holds one). A transaction held open elsewhere does not hold a slot back
-- (only one still writing into it does: housekeep waits for its lock).
CREATE OR REPLACE FUNCTION outbox.slot_done(s smallint) RETURNS boolean
    LANGUAGE sql STABLE AS $$
    SELECT NOT EXISTS (
        SELECT 1 FROM outbox.streams st
         WHERE outbox.slot_has_after(s, st.topic, st.lane, st.snap_lo)
            OR EXISTS (SELECT 1 FROM outbox.batches b
                        WHERE b.state = 'leased' AND b.kind = 's'
                          AND b.topic = st.topic AND b.lane = st.lane
                          AND outbox.slot_has_after(s, st.topic, st.lane, b.snap_lo)))
$$;
