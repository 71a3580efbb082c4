-- outbox.max_delay (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 022.
--
-- How far ahead enqueue's not_before may be: 366 days. A later time is a
-- mistake more often than a plan (a timestamp in milliseconds read as
-- seconds), and the message would hold its key that long.
CREATE OR REPLACE FUNCTION outbox.max_delay() RETURNS interval
    LANGUAGE sql IMMUTABLE AS $$SELECT interval '366 days'$$;
