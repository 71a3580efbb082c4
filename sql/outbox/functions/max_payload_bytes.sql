-- outbox.max_payload_bytes (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 001.
--
-- Largest payload enqueue accepts (bytes of its JSON text), 1 MiB: the same
-- as the relay's and consumer's default --max-payload.
CREATE OR REPLACE FUNCTION outbox.max_payload_bytes() RETURNS integer
    LANGUAGE sql IMMUTABLE AS 'SELECT 1048576';
