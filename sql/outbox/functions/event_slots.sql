-- outbox.event_slots (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012 (4),
-- 017 (10).
--
-- Partitions of outbox.events. One takes inserts, the others hold the
-- retention window, one waits for its truncation; outbox.housekeep closes
-- the current one every retention / (event_slots() - 2), so the table holds
-- between 1 and 1 + 1 / (event_slots() - 2) x retention x rate of messages
-- (017_finer_slots.sql). Changed only by a migration that adds the
-- partitions and their outbox.slots rows.
CREATE OR REPLACE FUNCTION outbox.event_slots() RETURNS integer
    LANGUAGE sql IMMUTABLE AS 'SELECT 10';
