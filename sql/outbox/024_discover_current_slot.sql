-- 024_discover_current_slot.sql: outbox.discover_streams reads the current
-- slot only (its file), and the slot switch runs it on the slot it closes,
-- so every stream of a closed slot has its row in outbox.streams. A
-- database of before may hold closed slots with streams no relay has read
-- yet (no row): they get their rows here, once, from outbox.event_streams
-- (every slot's streams, as 012 defined it and discover_streams read it
-- until now).
INSERT INTO outbox.streams (topic, lane)
SELECT s.topic, s.lane FROM outbox.event_streams() s
ON CONFLICT DO NOTHING;
