-- 005_ordering.sql: per-key ordering. Messages sharing an ordering_key are
-- delivered one at a time in id order; only the key's HEAD is claimable.
--
-- is_head marks the one message of a key that may be claimed. enqueue sets
-- it when the key has no message in flight or blocking; the relay moves it
-- to the next message when it records the head's final outcome. Both take
-- the key's row in outbox.ordering_keys FOR UPDATE first, so a head handed
-- on and a message enqueued at the same moment can never both miss it.
ALTER TABLE outbox.messages
    ADD COLUMN ordering_seq bigint,
    ADD COLUMN is_head boolean NOT NULL DEFAULT false;

-- One row per ordering key: the last sequence number handed out, and the
-- lock that serialises enqueue and head hand-over for that key.
CREATE TABLE outbox.ordering_keys (
    ordering_key text   PRIMARY KEY,
    last_seq     bigint NOT NULL
);

-- Rows enqueued with an ordering key before this migration: number them and
-- mark each key's oldest open message as its head.
INSERT INTO outbox.ordering_keys (ordering_key, last_seq)
SELECT ordering_key, count(*) FROM outbox.messages
 WHERE ordering_key IS NOT NULL GROUP BY ordering_key;
UPDATE outbox.messages m SET ordering_seq = s.seq
  FROM (SELECT id, row_number() OVER (PARTITION BY ordering_key ORDER BY id) AS seq
          FROM outbox.messages WHERE ordering_key IS NOT NULL) s
 WHERE m.id = s.id;
UPDATE outbox.messages m SET is_head = true
 WHERE m.id IN (SELECT min(id) FROM outbox.messages
                 WHERE ordering_key IS NOT NULL AND status IN ('pending', 'dead')
                 GROUP BY ordering_key);

-- The claim only ever looks at claimable rows: unordered ones and heads.
-- Followers waiting behind a head stay out of the index it scans.
DROP INDEX outbox.messages_pending_due;
CREATE INDEX messages_claimable ON outbox.messages (available_at, id)
    WHERE status = 'pending' AND (ordering_key IS NULL OR is_head);
-- Finding the next message of a key.
CREATE INDEX messages_key_order ON outbox.messages (ordering_key, id)
    WHERE ordering_key IS NOT NULL AND status = 'pending';

CREATE OR REPLACE FUNCTION outbox.enqueue(topic text, idempotency_key text, payload jsonb,
                                          ordering_key text DEFAULT NULL)
    RETURNS bigint
    LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
DECLARE
    new_id bigint;
    seq    bigint;
    head   boolean := false;
BEGIN
    IF topic IS NULL OR octet_length(topic) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'outbox.enqueue: topic must be 1..255 bytes'
            USING ERRCODE = '22023';
    END IF;
    IF idempotency_key IS NULL OR octet_length(idempotency_key) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'outbox.enqueue: idempotency_key must be 1..255 bytes'
            USING ERRCODE = '22023';
    END IF;
    IF ordering_key IS NOT NULL AND octet_length(ordering_key) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'outbox.enqueue: ordering_key must be NULL or 1..255 bytes'
            USING ERRCODE = '22023';
    END IF;
    IF payload IS NULL THEN
        RAISE EXCEPTION 'outbox.enqueue: payload must not be NULL'
            USING ERRCODE = '22023';
    END IF;
    IF octet_length(payload::text) > outbox.max_payload_bytes() THEN
        RAISE EXCEPTION 'outbox.enqueue: payload is % bytes, the maximum is %',
            octet_length(payload::text), outbox.max_payload_bytes()
            USING ERRCODE = '54000';
    END IF;

    SELECT m.id INTO new_id FROM outbox.messages m
     WHERE m.topic = enqueue.topic AND m.idempotency_key = enqueue.idempotency_key;
    IF new_id IS NOT NULL THEN
        RETURN new_id;
    END IF;

    IF ordering_key IS NOT NULL THEN
        -- Takes the key's row lock until commit (see the header).
        INSERT INTO outbox.ordering_keys AS k (ordering_key, last_seq)
        VALUES (ordering_key, 1)
        ON CONFLICT ON CONSTRAINT ordering_keys_pkey
            DO UPDATE SET last_seq = k.last_seq + 1
        RETURNING k.last_seq INTO seq;
        head := NOT EXISTS (
            SELECT 1 FROM outbox.messages p
             WHERE p.ordering_key = enqueue.ordering_key
               AND (p.status = 'pending' OR (p.status = 'dead' AND p.is_head)));
    END IF;

    INSERT INTO outbox.messages AS m (topic, idempotency_key, payload, ordering_key,
                                      ordering_seq, is_head)
    VALUES (topic, idempotency_key, payload, ordering_key, seq, head)
    ON CONFLICT ON CONSTRAINT messages_topic_key_unique DO NOTHING
    RETURNING m.id INTO new_id;

    IF new_id IS NULL THEN
        -- A concurrent transaction enqueued the same key and committed
        -- first (ON CONFLICT waited for it). Its sequence number is used;
        -- ours is a harmless gap.
        SELECT m.id INTO new_id FROM outbox.messages m
         WHERE m.topic = enqueue.topic
           AND m.idempotency_key = enqueue.idempotency_key;
    END IF;
    RETURN new_id;
END
$$;

-- record_outcomes: the relay's batched outcome write, with the head of each
-- ordering key handed on in the same transaction. One call per batch.
--   kinds: delivered | retry | dead | release; delays in ms; refunds 0/1.
--   fencing = false is the BROKEN mode (--no-fencing).
--   skip_dead_heads: --on-dead-head skip (a dead head stops blocking its key).
-- Returns the ids written; the caller's other ids were fenced out.
CREATE FUNCTION outbox.record_outcomes(ids bigint[], fences bigint[], kinds text[],
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
        UPDATE outbox.messages m SET is_head = true
          FROM (SELECT DISTINCT ON (p.ordering_key) p.id
                  FROM outbox.messages p
                 WHERE p.ordering_key = ANY(done_keys) AND p.status = 'pending'
                 ORDER BY p.ordering_key, p.id) nxt
         WHERE m.id = nxt.id AND NOT m.is_head
           AND NOT EXISTS (SELECT 1 FROM outbox.messages h
                            WHERE h.ordering_key = m.ordering_key AND h.is_head);
    END IF;

    RETURN QUERY SELECT unnest(written);
END
$$;
