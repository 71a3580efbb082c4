-- outbox.batch_split_after (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012.
--
-- A stream batch taken over this many times is split into retries, one per
-- message, so that a message that kills relays cannot take its batch with it.
CREATE OR REPLACE FUNCTION outbox.batch_split_after() RETURNS integer
    LANGUAGE sql IMMUTABLE AS 'SELECT 3';
