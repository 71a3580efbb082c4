-- outbox.new_streams (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: none
-- (issue 32 item 5).
--
-- The streams that have messages but no row in outbox.streams yet (no
-- relay has read them: every message of theirs waits), as the rows they
-- will get: outbox.all_streams without the rows. For the view
-- outbox.messages: plpgsql, declared ROWS 1, so that the planner, which
-- cannot know how many there are (the loose scan of outbox.event_streams,
-- inlined, is judged at ~35), reads their messages by index and keeps the
-- plan's cost under jit_above_cost (a plan judged at 35 such streams of a
-- 250,000-message outbox spent ~700 ms compiling for a count that takes
-- less than 100 ms).
CREATE OR REPLACE FUNCTION outbox.new_streams() RETURNS SETOF outbox.streams
    LANGUAGE plpgsql STABLE ROWS 1 AS $$
BEGIN
    RETURN QUERY
    SELECT e.topic, e.lane, NULL::pg_snapshot, NULL::pg_snapshot, NULL::xid8, NULL::bigint,
           NULL::bigint, NULL::timestamptz
      FROM outbox.event_streams() e
     WHERE NOT EXISTS (SELECT 1 FROM outbox.streams x
                        WHERE x.topic = e.topic AND x.lane = e.lane);
END
$$;
