-- outbox.all_streams (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012.
--
-- Every stream: the rows of outbox.streams, and for a (topic, lane) no
-- relay has read yet, the row it will get (nothing assigned yet).
CREATE OR REPLACE FUNCTION outbox.all_streams() RETURNS SETOF outbox.streams
    LANGUAGE sql STABLE ROWS 20 AS $$
    SELECT * FROM outbox.streams
    UNION ALL
    SELECT e.topic, e.lane, NULL, NULL, NULL, NULL, NULL, NULL
      FROM outbox.event_streams() e
     WHERE NOT EXISTS (SELECT 1 FROM outbox.streams x
                        WHERE x.topic = e.topic AND x.lane = e.lane)
$$;
