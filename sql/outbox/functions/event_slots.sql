-- outbox.event_slots (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012.
--
-- Partitions of outbox.events. One takes inserts, the others hold the
-- retention window, one is kept empty to switch into.
CREATE OR REPLACE FUNCTION outbox.event_slots() RETURNS integer
    LANGUAGE sql IMMUTABLE AS 'SELECT 4';
