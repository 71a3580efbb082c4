-- inbox.take_source_gate (function), its current definition: outboxctl
-- migrate re-applies this file after the numbered migrations
-- (sql/README.md). Part of the inbox's SQL contract (docs/inbox-sql.md).
-- History: consumer/inbox.c sent the LOCK statements itself until issue 31.
--
-- The source gate (009_source_gate.sql): call it first in every
-- transaction that deduplicates, with the source of its messages. A named
-- source locks inbox.source_gate IN ROW EXCLUSIVE MODE, the source ''
-- IN SHARE MODE: the two kinds wait for each other's open transactions,
-- one kind never for itself, so that the two identities of one key
-- (inbox.dedup_record) never apply at once. Held until the transaction
-- ends (also across a savepoint rolled back, when taken before it). Waits
-- at most lock_timeout, then raises lock_not_available (55P03): nothing
-- was applied, answer retry.
CREATE OR REPLACE FUNCTION inbox.take_source_gate(source text) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    IF source = '' THEN
        LOCK TABLE inbox.source_gate IN SHARE MODE;
    ELSE
        LOCK TABLE inbox.source_gate IN ROW EXCLUSIVE MODE;
    END IF;
END
$$;
