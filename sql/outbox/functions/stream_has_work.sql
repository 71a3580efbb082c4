-- outbox.stream_has_work (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012.
--
-- Whether stream (topic, lane) may have messages not yet assigned: any
-- message not visible in snap_lo. Two index probes; a window already cut
-- to its end still answers true once, until the next cut moves snap_lo.
CREATE OR REPLACE FUNCTION outbox.stream_has_work(topic text, lane smallint, lo pg_snapshot)
    RETURNS boolean
    LANGUAGE plpgsql STABLE
    -- Index probes only. The session's generic plan, made for any topic,
    -- judges "some message of (topic, lane) with txid = ANY(xip)" by the
    -- biggest topic in the statistics and picks a scan that stops at the
    -- first match: over a big history of another topic it reads it all
    -- (test_drain_never_scans_a_big_table). No JIT (see stream_read).
    SET enable_seqscan = off SET jit = off
    AS $$
#variable_conflict use_variable
DECLARE
    newest xid8;
    x xid8;
BEGIN
    -- The stream's newest transaction: a backward walk of the index, one
    -- entry; the planner takes it whatever it guesses of the bounds (an
    -- EXISTS over "txid >= $1" it was seen to answer by a scan).
    SELECT e.txid INTO newest FROM outbox.events e
     WHERE e.topic = stream_has_work.topic AND e.lane = stream_has_work.lane
     ORDER BY e.txid DESC LIMIT 1;
    IF newest IS NULL THEN
        RETURN false;
    END IF;
    IF lo IS NULL OR newest >= pg_snapshot_xmax(lo) THEN
        RETURN true;
    END IF;
    -- one probe per transaction in progress at lo: "txid = ANY(xip)" in a
    -- generic plan was a filter over the stream's whole history
    FOR x IN SELECT pg_snapshot_xip(lo) LOOP
        IF EXISTS (SELECT 1 FROM outbox.events e
                    WHERE e.topic = stream_has_work.topic AND e.lane = stream_has_work.lane
                      AND e.txid = x) THEN
            RETURN true;
        END IF;
    END LOOP;
    RETURN false;
END
$$;
