-- inbox.clock_us (function), its current definition: outboxctl migrate
-- re-applies this file after the numbered migrations (sql/README.md).
-- History: a statement of consumer/inbox.c until issue 31.
--
-- This database's clock now (clock_timestamp(), not the transaction's
-- start), Unix microseconds: the one clock the retention is decided by
-- (docs/consumer.md, "Retention"; inbox.purge deletes by it).
CREATE OR REPLACE FUNCTION inbox.clock_us() RETURNS bigint
    LANGUAGE sql VOLATILE AS $$
    SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint
$$;
