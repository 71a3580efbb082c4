-- outbox.record (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012, 022.
--
-- record: the outcome of batch `batch`, written only while it is still
-- held with `fence` (fencing = false is the BROKEN --no-fencing mode).
-- relay/record.c passes every argument by name.
-- outcome, for the whole batch:
--   'done'     every message delivered but those listed, whose kinds say
--              'retry' (a retry row, due after delays[i] ms) or 'dead';
--              for a retry batch ('r') every message is listed, and may
--              also say 'delivered';
--   'release'  not sent (breaker open, shutdown) or failed in transport:
--              the batch (or its retries) is due again after delay_ms,
--              its attempt given back when refund.
-- A retry or dead letter of an ordering key blocks the key (a dead one
-- only with skip_dead_heads false); a delivered head frees it once no
-- message of the key waits. Returns false when fenced out (nothing is
-- written).
CREATE OR REPLACE FUNCTION outbox.record(protocol integer, batch bigint, fence bigint, fencing boolean,
                              outcome text, delay_ms bigint, refund boolean, ids bigint[],
                              kinds text[], delays bigint[], errors text[],
                              skip_dead_heads boolean)
    RETURNS boolean
    LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    b     outbox.batches;
    freed text[];
BEGIN
    PERFORM outbox.check_protocol('relay', protocol);
    SELECT * INTO b FROM outbox.batches x
     WHERE x.id = batch AND (NOT fencing OR (x.state = 'leased' AND x.fence = record.fence))
       FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF outcome NOT IN ('done', 'release') THEN
        RAISE EXCEPTION 'outbox.record: outcome must be done or release, not %', outcome
            USING ERRCODE = '22023';
    END IF;

    IF outcome = 'release' THEN
        IF b.kind = 's' THEN
            UPDATE outbox.batches x
               SET owner = NULL, lease_until = now() + delay_ms * interval '1 millisecond',
                   attempts = x.attempts - CASE WHEN refund THEN 1 ELSE 0 END, state = 'leased',
                   last_error = COALESCE(NULLIF(errors[1], ''), x.last_error)
             WHERE x.id = b.id;
        ELSE
            UPDATE outbox.retries r
               SET batch_id = NULL, due_at = now() + delay_ms * interval '1 millisecond',
                   attempts = r.attempts - CASE WHEN refund THEN 1 ELSE 0 END,
                   last_error = COALESCE(NULLIF(errors[1], ''), r.last_error)
             WHERE r.batch_id = b.id;
            UPDATE outbox.batches x SET state = 'done', done_at = now() WHERE x.id = b.id;
        END IF;
        RETURN true;
    END IF;

    IF b.kind = 's' THEN
        INSERT INTO outbox.retries (id, topic, idempotency_key, payload, ordering_key,
                                    ordering_seq, created_at, headers, not_before, attempts,
                                    claims, due_at, last_error, fence)
        SELECT e.id, e.topic, e.idempotency_key, e.payload, e.ordering_key, e.ordering_seq,
               e.created_at, e.headers, e.not_before, b.attempts, b.claims,
               now() + o.delay_ms * interval '1 millisecond', NULLIF(o.error, ''), b.fence
          FROM unnest(ids, kinds, delays, errors) o(id, kind, delay_ms, error)
          JOIN outbox.events e ON e.id = o.id
         WHERE o.kind = 'retry'
        ON CONFLICT DO NOTHING;
        INSERT INTO outbox.dead (id, topic, idempotency_key, payload, ordering_key,
                                 ordering_seq, created_at, headers, not_before, attempts, claims,
                                 fence, last_error)
        SELECT e.id, e.topic, e.idempotency_key, e.payload, e.ordering_key, e.ordering_seq,
               e.created_at, e.headers, e.not_before, b.attempts, b.claims, b.fence, NULLIF(o.error, '')
          FROM unnest(ids, kinds, errors) o(id, kind, error)
          JOIN outbox.events e ON e.id = o.id
         WHERE o.kind = 'dead'
        ON CONFLICT DO NOTHING;
        IF b.lane > 0 THEN
            INSERT INTO outbox.ordering_blocks (topic, ordering_key, state)
            SELECT DISTINCT e.topic, e.ordering_key,
                   CASE o.kind WHEN 'dead' THEN 'dead' ELSE 'retry' END
              FROM unnest(ids, kinds) o(id, kind)
              JOIN outbox.events e ON e.id = o.id
             WHERE e.ordering_key IS NOT NULL
               AND (o.kind = 'retry' OR (o.kind = 'dead' AND NOT skip_dead_heads))
            ON CONFLICT (topic, ordering_key) DO UPDATE SET state = EXCLUDED.state;
            UPDATE outbox.streams s SET inflight = NULL
             WHERE s.topic = b.topic AND s.lane = b.lane AND s.inflight = b.id;
        END IF;
    ELSE
        -- A retry batch: every message has its own outcome.
        WITH o AS (SELECT * FROM unnest(ids, kinds, delays, errors)
                                 o(id, kind, delay_ms, error)),
        d AS (
            INSERT INTO outbox.dead (id, topic, idempotency_key, payload, ordering_key,
                                     ordering_seq, created_at, headers, not_before, attempts,
                                     claims, fence, last_error)
            SELECT r.id, r.topic, r.idempotency_key, r.payload, r.ordering_key, r.ordering_seq,
                   r.created_at, r.headers, r.not_before, r.attempts, r.claims, r.fence,
                   COALESCE(NULLIF(o.error, ''), r.last_error)
              FROM o JOIN outbox.retries r ON r.id = o.id AND r.batch_id = b.id
             WHERE o.kind = 'dead'
            ON CONFLICT DO NOTHING
            RETURNING id)
        UPDATE outbox.retries r
           SET batch_id = NULL, due_at = now() + o.delay_ms * interval '1 millisecond',
               last_error = COALESCE(NULLIF(o.error, ''), r.last_error)
          FROM o WHERE r.id = o.id AND r.batch_id = b.id AND o.kind = 'retry';
        -- A dead head kept blocking its key (--on-dead-head block).
        UPDATE outbox.ordering_blocks k SET state = 'dead'
          FROM unnest(ids, kinds) o(id, kind)
          JOIN outbox.retries r ON r.id = o.id AND r.batch_id = b.id
         WHERE o.kind = 'dead' AND NOT skip_dead_heads
           AND k.topic = r.topic AND k.ordering_key = r.ordering_key;
        WITH gone AS (
            DELETE FROM outbox.retries r
             USING unnest(ids, kinds) o(id, kind)
             WHERE r.id = o.id AND r.batch_id = b.id AND o.kind IN ('delivered', 'dead')
            RETURNING r.ordering_key, o.kind)
        SELECT array_agg(DISTINCT g.ordering_key) INTO freed FROM gone g
         WHERE g.ordering_key IS NOT NULL AND (g.kind = 'delivered' OR skip_dead_heads);
        IF freed IS NOT NULL THEN
            -- Free a key whose last waiting message went: lock its block row
            -- first (a lane cut parking behind it holds FOR SHARE until it
            -- commits), then look again in a new snapshot.
            PERFORM 1 FROM outbox.ordering_blocks k
              WHERE k.topic = b.topic AND k.ordering_key = ANY(freed)
              ORDER BY k.ordering_key FOR UPDATE;
            DELETE FROM outbox.ordering_blocks k
             WHERE k.topic = b.topic AND k.ordering_key = ANY(freed) AND k.state = 'retry'
               AND NOT EXISTS (SELECT 1 FROM outbox.retries r
                                WHERE r.topic = k.topic AND r.ordering_key = k.ordering_key);
        END IF;
    END IF;
    UPDATE outbox.batches x SET state = 'done', done_at = now() WHERE x.id = b.id;
    RETURN true;
END
$$;
