-- outbox.record_outcomes (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 005, 009, 011.
--
-- The old entry point (relays built before 011): the same write, no chaining.
CREATE OR REPLACE FUNCTION outbox.record_outcomes(ids bigint[], fences bigint[], kinds text[],
                                       delays bigint[], refunds int[], errors text[],
                                       fencing boolean, skip_dead_heads boolean)
    RETURNS SETOF bigint
    LANGUAGE sql
AS $$
    SELECT r.id FROM outbox.record_outcomes_chain(ids, fences, kinds, delays, refunds,
                                                  errors, fencing, skip_dead_heads,
                                                  NULL, 0, 0) r
     WHERE NOT r.chained;
$$;
