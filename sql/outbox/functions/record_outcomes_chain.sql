-- outbox.record_outcomes_chain (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 011, 012.
--
-- For relays built before 012 (relay protocol 1): their outcome writes for
-- what they held when migration 012 ran are accepted and change nothing.
-- Those messages were carried over as retries due after the lease, and are
-- delivered again (the consumer answers duplicate to what the old relay had
-- delivered). Their claims fail against the view: they take nothing new.
CREATE OR REPLACE FUNCTION outbox.record_outcomes_chain(ids bigint[], fences bigint[],
                                             kinds text[], delays bigint[], refunds int[],
                                             errors text[], fencing boolean,
                                             skip_dead_heads boolean, chain_owner text,
                                             chain_lease_ms bigint, chain_max integer)
    RETURNS TABLE (chained boolean, id bigint, fence bigint, attempts integer,
                   created_us bigint, topic text, idempotency_key text, payload text,
                   ordering_key text, ordering_seq bigint)
    LANGUAGE sql AS $$
    SELECT false, x.id, NULL::bigint, NULL::integer, NULL::bigint, NULL::text, NULL::text,
           NULL::text, NULL::text, NULL::bigint
      FROM unnest(ids) AS x(id)
$$;
