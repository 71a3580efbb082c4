-- outbox.discover_streams (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012.
CREATE OR REPLACE FUNCTION outbox.discover_streams() RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    added integer;
BEGIN
    INSERT INTO outbox.streams (topic, lane)
    SELECT s.topic, s.lane FROM outbox.event_streams() s
     WHERE NOT EXISTS (SELECT 1 FROM outbox.streams x
                        WHERE x.topic = s.topic AND x.lane = s.lane)
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS added = ROW_COUNT;
    RETURN added;
END
$$;
