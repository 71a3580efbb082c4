-- 011_chain_heads.sql: the worker that records a head's delivery is handed
-- the key's next message, already claimed, in the same statement.
--
-- Before, a delivered head cost its key three row versions: the claim (lease
-- and fence), the outcome (delivered), and the hand-over (the next message
-- becomes the head), which the next claim then updated once more. Unordered
-- messages cost two (claim, outcome). The hand-over now writes the next
-- message's lease, fence and attempt in the same UPDATE that makes it the
-- head, and returns it; the relay delivers it in its next round without
-- claiming it. The key is never without a head or a holder: the next
-- message is head and leased in the transaction that records its
-- predecessor, so a worker that dies holding it only delays it until the
-- lease expires, when any worker takes it over (fence bumped) as before.
--
-- chain_owner NULL: no chaining, the hand-over of 009 (and the result has
-- only written rows). At most chain_max keys are chained per call, so a
-- worker always keeps room to claim other keys and unordered messages;
-- a next message not yet due, or (BROKEN --no-ordering mode) one under
-- another worker's lease, is made head without a lease.
--
-- Also: messages_heads (009) is dropped. Every hand-over and chained claim
-- inserted an entry into it, only for the "does this key still have a head"
-- check, which needs no index of its own: a key's pending head is always
-- its lowest pending message (enqueue makes a message head only when the
-- key has nothing pending, the hand-over picks the lowest), which the
-- probe on messages_key_order has just found, and a dead head kept
-- blocking is in messages_dead_heads (007).
--
-- And a recorded head's key is locked (outbox.ordering_keys, against a
-- concurrent enqueue) only when the hand-over finds no next message: when
-- it finds one, an enqueue in flight cannot make its own message head
-- anyway (it sees the old head still pending). Over 10,000 busy keys that
-- is nearly never; before, every recorded head locked its key (a WAL
-- record each). The lock joins the keys to the primary key, where
-- "= ANY(done_keys)" in a generic plan compared every row of the table
-- with every key of the batch.
--
-- Result rows: chained = false: an outcome written (id only; the caller's
-- other ids were fenced out); chained = true: a message claimed for
-- chain_owner, with the columns the relay's claim returns.
DROP INDEX outbox.messages_heads;

CREATE FUNCTION outbox.record_outcomes_chain(ids bigint[], fences bigint[], kinds text[],
                                             delays bigint[], refunds int[], errors text[],
                                             fencing boolean, skip_dead_heads boolean,
                                             chain_owner text, chain_lease_ms bigint,
                                             chain_max integer)
    RETURNS TABLE (chained boolean, id bigint, fence bigint, attempts integer,
                   created_us bigint, topic text, idempotency_key text, payload text,
                   ordering_key text, ordering_seq bigint)
    LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    written     bigint[];
    done_keys   text[];
    keys        text[];
    chain_left  integer := chain_max;
    chained_now integer;
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
           -- Redundant with the join: keeps the plan a primary-key lookup
           -- (009_plans_by_index.sql).
           AND m.id = ANY(ids)
           AND (NOT fencing OR (m.status = 'pending' AND m.fence = o.fence))
        RETURNING m.id, m.ordering_key, o.kind)
    SELECT array_agg(w.id),
           array_agg(DISTINCT w.ordering_key ORDER BY w.ordering_key)
               FILTER (WHERE w.ordering_key IS NOT NULL
                         AND (w.kind = 'delivered' OR (w.kind = 'dead' AND skip_dead_heads)))
      INTO written, done_keys
      FROM w;

    RETURN QUERY SELECT false, x.id, NULL::bigint, NULL::integer, NULL::bigint, NULL::text,
                        NULL::text, NULL::text, NULL::text, NULL::bigint
                   FROM unnest(written) AS x(id);

    IF done_keys IS NOT NULL THEN
        -- Pass 1, without locks: the keys whose next message this new
        -- statement (new snapshot) can see. It is made head; an enqueue
        -- committing meanwhile saw the old head still pending, so its
        -- message is not a head, and follows.
        -- Pass 2, the keys left with no pending head: an enqueue may be
        -- committing their next message right now, unseen. Lock these keys
        -- (the lock enqueue takes, 005_ordering.sql; in key order, so two
        -- relays never wait on each other in a cycle), then look again in a
        -- new snapshot, which sees what those enqueues committed.
        keys := done_keys;
        FOR pass IN 1..2 LOOP
            IF pass = 2 THEN
                SELECT array_agg(dk.k ORDER BY dk.k) INTO keys
                  FROM unnest(done_keys) AS dk(k)
                 WHERE NOT EXISTS (SELECT 1 FROM outbox.messages p
                                    WHERE p.ordering_key = dk.k AND p.status = 'pending'
                                      AND p.is_head);
                EXIT WHEN keys IS NULL;
                PERFORM 1 FROM unnest(keys) AS dk(ordering_key)
                          JOIN outbox.ordering_keys k ON k.ordering_key = dk.ordering_key
                  ORDER BY k.ordering_key FOR UPDATE OF k;
            END IF;
            -- One index probe per key (messages_key_order, LIMIT 1).
            RETURN QUERY
            WITH h AS (
            UPDATE outbox.messages m SET
                is_head = true,
                lease_owner = CASE WHEN nxt.chain THEN chain_owner ELSE m.lease_owner END,
                lease_until = CASE WHEN nxt.chain
                              THEN now() + chain_lease_ms * interval '1 millisecond'
                              ELSE m.lease_until END,
                fence = m.fence + CASE WHEN nxt.chain THEN 1 ELSE 0 END,
                attempts = m.attempts + CASE WHEN nxt.chain THEN 1 ELSE 0 END
              FROM unnest(keys) WITH ORDINALITY AS dk(ordering_key, n),
                   LATERAL (SELECT p.id,
                                   chain_owner IS NOT NULL AND dk.n <= chain_left
                                   AND p.available_at <= now() AND p.lease_until IS NULL
                                   AS chain
                              FROM outbox.messages p
                             WHERE p.ordering_key = dk.ordering_key AND p.status = 'pending'
                             ORDER BY p.id LIMIT 1) nxt
             WHERE m.id = nxt.id AND NOT m.is_head
               AND NOT EXISTS (SELECT 1 FROM outbox.messages h
                                WHERE h.ordering_key = m.ordering_key
                                  AND h.status = 'dead' AND h.is_head)
            RETURNING nxt.chain, m.id, m.fence, m.attempts,
                      (extract(epoch FROM m.created_at) * 1000000)::bigint AS created_us,
                      m.topic, m.idempotency_key, m.payload::text AS payload, m.ordering_key,
                      COALESCE(m.ordering_seq, 0) AS ordering_seq)
            -- Only the chained rows go back to the caller.
            SELECT true, h.id, h.fence, h.attempts, h.created_us, h.topic, h.idempotency_key,
                   h.payload, h.ordering_key, h.ordering_seq
              FROM h WHERE h.chain;
            GET DIAGNOSTICS chained_now = ROW_COUNT;
            chain_left := chain_left - chained_now;
        END LOOP;
    END IF;
END
$$;

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
