-- outbox.within_bytes (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 019 (in SQL there).
--
-- How many of the first messages of cand fit in max_bytes of payload (the
-- payload as the claim returns it, JSON text, in bytes): the claim's byte
-- budget (outbox.claim's max_bytes, the relay's --batch-bytes), which bounds
-- what a batch holds in the relay's memory whatever the payloads' sizes.
-- Never less than 1 while cand has a message: a message larger than the
-- budget goes alone. NULL max_bytes: all of cand.
-- PL/pgSQL, not SQL: a SQL function that cannot be inlined (this one reads
-- cand three times) is parsed and planned again in every transaction that
-- calls it from PL/pgSQL, 113 us a call at a steady 1,000/s (bench/peers
-- steady.sh, pg_stat_user_functions), against ~1 us for this loop.
CREATE OR REPLACE FUNCTION outbox.within_bytes(cand outbox.events[], max_bytes bigint)
    RETURNS integer
    LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    n    integer := COALESCE(cardinality(cand), 0);
    used bigint := 0;
BEGIN
    IF max_bytes IS NULL THEN
        RETURN n;
    END IF;
    FOR i IN 1 .. n LOOP
        used := used + octet_length(cand[i].payload::text);
        IF used > max_bytes THEN
            RETURN GREATEST(i - 1, 1);
        END IF;
    END LOOP;
    RETURN n;
END
$$;
