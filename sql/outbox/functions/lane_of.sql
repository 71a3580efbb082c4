-- outbox.lane_of (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012.
--
-- The lane of an ordering key.
CREATE OR REPLACE FUNCTION outbox.lane_of(ordering_key text) RETURNS smallint
    LANGUAGE sql IMMUTABLE AS
    'SELECT CASE WHEN ordering_key IS NULL THEN 0
            ELSE 1 + (hashtext(ordering_key) & 2147483647) % outbox.ordering_lanes() END::smallint';
