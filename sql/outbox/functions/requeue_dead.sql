-- outbox.requeue_dead (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012, 022.
--
-- requeue_dead: dead letters back to pending, as retries due now with
-- attempts 0 (the fence moves on at their next claim). An ordering key
-- such a message belongs to waits behind it again (a block 'retry'), so a
-- key's later messages are not delivered before it. Returns the ids
-- requeued (ids not dead are left alone).
CREATE OR REPLACE FUNCTION outbox.requeue_dead(ids bigint[]) RETURNS SETOF bigint
    LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
    WITH d AS (
        DELETE FROM outbox.dead d WHERE d.id = ANY(ids) RETURNING d.*),
    r AS (
        INSERT INTO outbox.retries (id, topic, idempotency_key, payload, ordering_key,
                                    ordering_seq, created_at, headers, not_before, attempts,
                                    claims, due_at, last_error, fence)
        SELECT d.id, d.topic, d.idempotency_key, d.payload, d.ordering_key, d.ordering_seq,
               d.created_at, d.headers, d.not_before, 0, d.claims, now(), d.last_error, d.fence
          FROM d
        RETURNING outbox.retries.id, outbox.retries.topic, outbox.retries.ordering_key),
    k AS (
        INSERT INTO outbox.ordering_blocks (topic, ordering_key, state)
        SELECT DISTINCT r.topic, r.ordering_key, 'retry' FROM r WHERE r.ordering_key IS NOT NULL
        ON CONFLICT (topic, ordering_key) DO UPDATE SET state = 'retry')
    SELECT r.id FROM r ORDER BY r.id;
END
$$;
