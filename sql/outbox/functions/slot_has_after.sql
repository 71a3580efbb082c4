-- outbox.slot_has_after (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012.
--
-- Whether a message of stream (topic, lane) in slot s is NOT visible in
-- snapshot lo (NULL: none is): PgQ's split again, two index probes.
CREATE OR REPLACE FUNCTION outbox.slot_has_after(s smallint, topic text, lane smallint, lo pg_snapshot)
    RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET enable_seqscan = off SET jit = off -- index probes only (see outbox.stream_has_work)
    AS $$
#variable_conflict use_variable
DECLARE
    x xid8;
BEGIN
    IF lo IS NULL THEN
        RETURN EXISTS (SELECT 1 FROM outbox.events e
                        WHERE e.slot = s AND e.topic = slot_has_after.topic
                          AND e.lane = slot_has_after.lane);
    END IF;
    IF EXISTS (SELECT 1 FROM outbox.events e
                WHERE e.slot = s AND e.topic = slot_has_after.topic
                  AND e.lane = slot_has_after.lane AND e.txid >= pg_snapshot_xmax(lo)) THEN
        RETURN true;
    END IF;
    FOR x IN SELECT pg_snapshot_xip(lo) LOOP -- one probe each (see stream_has_work)
        IF EXISTS (SELECT 1 FROM outbox.events e
                    WHERE e.slot = s AND e.topic = slot_has_after.topic
                      AND e.lane = slot_has_after.lane AND e.txid = x) THEN
            RETURN true;
        END IF;
    END LOOP;
    RETURN false;
END
$$;
