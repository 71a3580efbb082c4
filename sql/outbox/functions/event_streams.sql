-- outbox.event_streams (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012.
--
-- Give every (topic, lane) that has messages a stream row; returns how
-- many were new. The relays do it (each claim that finds no stream with
-- work, and every poll interval), not enqueue: a producer's transaction
-- must never wait on another's for the first message of a topic. A loose
-- index scan: one probe per stream and partition, however many messages.
-- The (topic, lane) pairs that have messages in outbox.events: a loose
-- index scan, one index probe per slot and (topic, lane), however many
-- messages (history, lane -1, is stepped over like a stream).
CREATE OR REPLACE FUNCTION outbox.event_streams(OUT topic text, OUT lane smallint) RETURNS SETOF record
    LANGUAGE sql STABLE ROWS 20 AS $$
    WITH RECURSIVE s AS (
        (SELECT e.topic, e.lane FROM outbox.events e ORDER BY e.topic, e.lane LIMIT 1)
        UNION ALL
        SELECT n.topic, n.lane FROM s, LATERAL (
            SELECT e.topic, e.lane FROM outbox.events e
             WHERE (e.topic, e.lane) > (s.topic, s.lane)
             ORDER BY e.topic, e.lane LIMIT 1) n)
    SELECT s.topic, s.lane FROM s WHERE s.lane >= 0
$$;
