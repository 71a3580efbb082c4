-- 024_discover_current_slot.sql: outbox.discover_streams reads the current
-- slot only (its file), and the slot switch runs it on the slot it closes,
-- so every stream of a closed slot has its row in outbox.streams. A
-- database of before may hold closed slots with streams no relay has read
-- yet (no row): they get their rows here, once, by the skip scan over
-- every slot that discover_streams made until now.
INSERT INTO outbox.streams (topic, lane)
WITH RECURSIVE s AS (
    (SELECT e.topic, e.lane FROM outbox.events e ORDER BY e.topic, e.lane LIMIT 1)
    UNION ALL
    SELECT n.topic, n.lane FROM s, LATERAL (
        SELECT e.topic, e.lane FROM outbox.events e
         WHERE (e.topic, e.lane) > (s.topic, s.lane)
         ORDER BY e.topic, e.lane LIMIT 1) n)
SELECT s.topic, s.lane FROM s WHERE s.lane >= 0
ON CONFLICT DO NOTHING;
