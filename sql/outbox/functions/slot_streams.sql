-- outbox.slot_streams (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 024.
--
-- The streams (topic, lane; lane >= 0) that have messages in slot: a skip
-- scan of that slot's own table (outbox.events_N) by its events_stream
-- index, one descent per stream, as outbox.event_streams does over every
-- slot. Read through the slot's table, with its own plan: a generic plan
-- over outbox.events would lock every slot and its indexes first (see
-- outbox.slot_find). The body is a template, made for each slot of
-- outbox.event_slots() when the file is applied (outbox.slot_branches).
DO $gen$
BEGIN
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION outbox.slot_streams(slot smallint, OUT topic text, OUT lane smallint)
    RETURNS SETOF record
    LANGUAGE plpgsql STABLE ROWS 20
AS $body$
BEGIN
    CASE slot_streams.slot %s
    END CASE;
END
$body$$f$, outbox.slot_branches($b$
            WHEN %1$s THEN
                RETURN QUERY
                WITH RECURSIVE r AS (
                    (SELECT e.topic, e.lane FROM outbox.events_%1$s e
                      ORDER BY e.topic, e.lane LIMIT 1)
                    UNION ALL
                    SELECT n.topic, n.lane FROM r, LATERAL (
                        SELECT e.topic, e.lane FROM outbox.events_%1$s e
                         WHERE (e.topic, e.lane) > (r.topic, r.lane)
                         ORDER BY e.topic, e.lane LIMIT 1) n)
                SELECT r.topic, r.lane FROM r WHERE r.lane >= 0;$b$));
END
$gen$;
