-- outbox.split_batch (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012.
--
-- A stream batch taken over too often goes to outbox.retries, one row per
-- message (its attempts carried over, due now); an ordered message there
-- blocks its key, as a retry would. The batch is done.
CREATE OR REPLACE FUNCTION outbox.split_batch(b outbox.batches) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO outbox.retries (id, topic, idempotency_key, payload, ordering_key,
                                ordering_seq, created_at, attempts, claims, due_at, last_error,
                                fence)
    SELECT e.id, e.topic, e.idempotency_key, e.payload, e.ordering_key, e.ordering_seq,
           e.created_at, b.attempts - 1, b.claims, now(),
           format('batch %s taken over %s times: split into single messages', b.id,
                  b.takeovers), b.fence
      FROM outbox.batch_events(b) e
    ON CONFLICT DO NOTHING;
    INSERT INTO outbox.ordering_blocks (topic, ordering_key, state)
    SELECT DISTINCT b.topic, e.ordering_key, 'retry' FROM outbox.batch_events(b) e
     WHERE e.ordering_key IS NOT NULL
    ON CONFLICT DO NOTHING;
    UPDATE outbox.batches x SET state = 'done', done_at = now() WHERE x.id = b.id;
    IF b.lane > 0 THEN
        UPDATE outbox.streams s SET inflight = NULL
         WHERE s.topic = b.topic AND s.lane = b.lane AND s.inflight = b.id;
    END IF;
END
$$;
