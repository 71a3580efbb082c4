-- outbox.within_bytes (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 019.
--
-- How many of the first messages of cand fit in max_bytes of payload (the
-- payload as the claim returns it, JSON text, in bytes): the claim's byte
-- budget (outbox.claim's max_bytes, the relay's --batch-bytes), which bounds
-- what a batch holds in the relay's memory whatever the payloads' sizes.
-- Never less than 1 while cand has a message: a message larger than the
-- budget goes alone. NULL max_bytes: all of cand.
CREATE OR REPLACE FUNCTION outbox.within_bytes(cand outbox.events[], max_bytes bigint)
    RETURNS integer
    LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN max_bytes IS NULL THEN COALESCE(cardinality(cand), 0)
                ELSE GREATEST(LEAST(COALESCE(cardinality(cand), 0), 1),
                              (SELECT count(*) FROM (
                                   SELECT sum(octet_length(u.payload::text))
                                              OVER (ORDER BY u.ordinality) AS upto
                                     FROM unnest(cand) WITH ORDINALITY u) x
                                WHERE x.upto <= max_bytes)::integer) END
$$;
