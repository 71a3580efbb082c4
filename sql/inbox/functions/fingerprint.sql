-- inbox.fingerprint (function), its current definition: outboxctl migrate
-- re-applies this file after the numbered migrations (sql/README.md).
-- Part of the inbox's SQL contract (docs/inbox-sql.md). History: the
-- expression was written into consumer/inbox.c's statements until issue 31.
--
-- What a dedup record stores to tell a redelivery from a key reused with
-- another payload: hex sha256 over the topic's bytes, one 0x00 byte and the
-- payload's bytes (002_inbox_contract.sql). STABLE, not IMMUTABLE: it calls
-- convert_to; a one-expression SQL function, so a query that calls it has
-- it inlined (no call per row).
CREATE OR REPLACE FUNCTION inbox.fingerprint(topic text, payload bytea) RETURNS text
    LANGUAGE sql STABLE AS $$
    SELECT encode(sha256(convert_to(topic, 'UTF8') || '\x00'::bytea || payload), 'hex')
$$;
