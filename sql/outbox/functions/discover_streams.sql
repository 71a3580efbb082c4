-- outbox.discover_streams (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012, 024.
--
-- A row in outbox.streams for every stream of the current slot that has
-- none yet (a new topic, or a new lane of one); how many were added. Only
-- the current slot takes messages, and the slot switch
-- (outbox.housekeep) runs this on the slot it closes, while no enqueue
-- can write it: so every stream of a closed slot has its row, and a
-- claim's `more` or empty claim reads one slot's streams, not every
-- slot's (76 us a call at a steady 1,000/s over ten slots, before 024).
CREATE OR REPLACE FUNCTION outbox.discover_streams() RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    added integer;
BEGIN
    INSERT INTO outbox.streams (topic, lane)
    SELECT s.topic, s.lane
      FROM outbox.slot_streams((SELECT c.slot FROM outbox.slots c WHERE c.state = 'current')) s
     WHERE NOT EXISTS (SELECT 1 FROM outbox.streams x
                        WHERE x.topic = s.topic AND x.lane = s.lane)
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS added = ROW_COUNT;
    RETURN added;
END
$$;
