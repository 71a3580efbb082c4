-- outbox.split_batch (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012, 018, 022.
--
-- A batch b that lost its holder outbox.batch_split_after() times, just
-- taken over by the calling claim (b's row is locked, with its new fence):
-- split in two halves, retry batches due at once that keep b's takeover
-- count, so that each is halved again when it loses its holder again; a
-- message left alone is dead-lettered, recorded as its relay would record
-- it (outbox.record: its key blocked unless skip_dead_heads). A message
-- that kills or stalls every relay holding it so ends dead, alone, after
-- batch_split_after() + ceil(log2(size)) takeovers, and the rest of its
-- batch is delivered. An ordered message of a stream batch blocks its key
-- while it waits here, as a retry would.
CREATE OR REPLACE FUNCTION outbox.split_batch(protocol integer, b outbox.batches,
                                              skip_dead_heads boolean) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE
    ids   bigint[];
    n     integer;
    half  integer;
    why   text := format('batch %s taken over %s times: split in two', b.id, b.takeovers);
    first bigint;
    other bigint;
BEGIN
    IF b.kind = 's' THEN
        ids := ARRAY(SELECT e.id FROM outbox.batch_events(b) e);
    ELSE
        ids := ARRAY(SELECT r.id FROM outbox.retries r WHERE r.batch_id = b.id
                      ORDER BY r.ordering_seq NULLS FIRST, r.id);
    END IF;
    n := cardinality(ids);
    IF n <= 1 THEN
        PERFORM outbox.record(protocol, b.id, b.fence, true, 'done', 0, false, ids,
                              array_fill('dead'::text, ARRAY[n]), array_fill(0::bigint, ARRAY[n]),
                              array_fill(format('taken over %s times without an outcome: every'
                                                ' relay holding it alone died or stalled (a'
                                                ' poison message?)', b.takeovers), ARRAY[n]),
                              skip_dead_heads);
        RETURN;
    END IF;
    half := (n + 1) / 2;

    INSERT INTO outbox.batches (kind, topic, size, fence, attempts, claims, takeovers, owner,
                                lease_until, last_error, state)
    VALUES ('r', b.topic, n - half, nextval('outbox.fences'), b.attempts, b.claims,
            b.takeovers, NULL, now(), why, 'leased')
    RETURNING id INTO other;
    IF b.kind = 'r' THEN
        UPDATE outbox.retries r SET batch_id = other WHERE r.id = ANY(ids[half + 1:]);
        UPDATE outbox.batches x SET size = half, owner = NULL, lease_until = now(),
                                    last_error = why
         WHERE x.id = b.id;
        RETURN;
    END IF;

    -- A stream batch: both halves become retry batches. Their messages get
    -- their own rows (attempts as before this takeover), so the slot can go.
    INSERT INTO outbox.batches (kind, topic, size, fence, attempts, claims, takeovers, owner,
                                lease_until, last_error, state)
    VALUES ('r', b.topic, half, nextval('outbox.fences'), b.attempts, b.claims, b.takeovers,
            NULL, now(), why, 'leased')
    RETURNING id INTO first;
    INSERT INTO outbox.retries (id, topic, idempotency_key, payload, ordering_key,
                                ordering_seq, created_at, headers, not_before, attempts, claims,
                                due_at, last_error, fence, batch_id)
    SELECT e.id, e.topic, e.idempotency_key, e.payload, e.ordering_key, e.ordering_seq,
           e.created_at, e.headers, e.not_before, b.attempts - 1, b.claims, now(), why, b.fence,
           CASE WHEN e.id = ANY(ids[1:half]) THEN first ELSE other END
      FROM outbox.batch_events(b) e
    ON CONFLICT DO NOTHING;
    INSERT INTO outbox.ordering_blocks (topic, ordering_key, state)
    SELECT DISTINCT b.topic, e.ordering_key, 'retry' FROM outbox.batch_events(b) e
     WHERE e.ordering_key IS NOT NULL
    ON CONFLICT DO NOTHING;
    UPDATE outbox.batches x SET state = 'done', done_at = now(), last_error = why
     WHERE x.id = b.id;
    IF b.lane > 0 THEN
        UPDATE outbox.streams s SET inflight = NULL
         WHERE s.topic = b.topic AND s.lane = b.lane AND s.inflight = b.id;
    END IF;
END
$$;
