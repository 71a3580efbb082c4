-- 009_plans_by_index.sql: the relay's outcome write stays a handful of
-- index lookups however big outbox.messages grows.
--
-- Found by tests/integration/test_scans.c (pg_stat_user_tables.seq_scan
-- during a drain over 50,000 delivered rows): record_outcomes scanned the
-- whole table twice per batch. The fenced UPDATE joined the batch to
-- outbox.messages on status = 'pending' first when the statistics said few
-- rows were pending (the normal state of an outbox), and the hand-over's
-- "does this key still have a head" check had no index to use. Both now
-- have one: id = ANY(ids) on the primary key, and messages_heads below.
-- And the hand-over found each key's next message by reading every pending
-- message of the key (DISTINCT ON over the index range): 1,000 messages
-- waiting on each of 100 keys made every outcome write read 100,000 index
-- entries. It is now one LIMIT 1 probe per key.

-- A key's current head, pending or dead (one row per open key).
CREATE INDEX messages_heads ON outbox.messages (ordering_key) WHERE is_head;

CREATE OR REPLACE FUNCTION outbox.record_outcomes(ids bigint[], fences bigint[], kinds text[],
                                       delays bigint[], refunds int[], errors text[],
                                       fencing boolean, skip_dead_heads boolean)
    RETURNS SETOF bigint
    LANGUAGE plpgsql
AS $$
DECLARE
    written   bigint[];
    done_keys text[];
BEGIN
    WITH w AS (
        UPDATE outbox.messages m SET
            status = CASE o.kind WHEN 'delivered' THEN 'delivered'
                                 WHEN 'dead' THEN 'dead' ELSE 'pending' END,
            delivered_at = CASE WHEN o.kind = 'delivered' THEN now() END,
            available_at = CASE WHEN o.kind IN ('retry', 'release')
                           THEN now() + o.delay_ms * interval '1 millisecond'
                           ELSE m.available_at END,
            attempts = m.attempts - o.refund,
            last_error = COALESCE(NULLIF(o.error, ''), m.last_error),
            lease_owner = NULL, lease_until = NULL,
            -- A head stops being one when it is delivered, or dead and skipped;
            -- a dead head kept (block) goes on blocking its key.
            is_head = m.is_head AND NOT (o.kind = 'delivered'
                                         OR (o.kind = 'dead' AND skip_dead_heads))
          FROM unnest(ids, fences, kinds, delays, refunds, errors)
               AS o(id, fence, kind, delay_ms, refund, error)
         WHERE m.id = o.id
           -- Redundant with the join, and what keeps the plan an index
           -- lookup: without it the planner may scan the table for
           -- status = 'pending' when statistics say few rows are pending.
           AND m.id = ANY(ids)
           AND (NOT fencing OR (m.status = 'pending' AND m.fence = o.fence))
        RETURNING m.id, m.ordering_key, o.kind)
    SELECT array_agg(w.id),
           array_agg(DISTINCT w.ordering_key ORDER BY w.ordering_key)
               FILTER (WHERE w.ordering_key IS NOT NULL
                         AND (w.kind = 'delivered' OR (w.kind = 'dead' AND skip_dead_heads)))
      INTO written, done_keys
      FROM w;

    IF done_keys IS NOT NULL THEN
        -- Serialise with enqueue on these keys (see the header), in key
        -- order so two relays never wait on each other in a cycle.
        PERFORM 1 FROM outbox.ordering_keys k
          WHERE k.ordering_key = ANY(done_keys) ORDER BY k.ordering_key FOR UPDATE;
        -- A new statement, a new snapshot: it sees what enqueue committed.
        -- One index probe per key (messages_key_order, LIMIT 1), however
        -- many messages wait behind each head.
        UPDATE outbox.messages m SET is_head = true
          FROM unnest(done_keys) AS dk(ordering_key),
               LATERAL (SELECT p.id FROM outbox.messages p
                         WHERE p.ordering_key = dk.ordering_key AND p.status = 'pending'
                         ORDER BY p.id LIMIT 1) nxt
         WHERE m.id = nxt.id AND NOT m.is_head
           AND NOT EXISTS (SELECT 1 FROM outbox.messages h
                            WHERE h.ordering_key = m.ordering_key AND h.is_head);
    END IF;

    RETURN QUERY SELECT unnest(written);
END
$$;
