-- outbox.check_same_payload (function), its current definition: outboxctl migrate
-- re-applies this file after the numbered migrations (sql/README.md). History: none
-- (it came with the schema files).
--
-- An idempotency key names one message: enqueue calls this when the key of
-- topic is already stored (as a message, a retry or a dead letter) and
-- raises SQLSTATE OB002 when that message's payload is not this one. The
-- comparison is jsonb equality: key order and whitespace do not count. The
-- same rule as the consumer's and the producer API's 422 for a key reused
-- with another body.
CREATE OR REPLACE FUNCTION outbox.check_same_payload(topic text, idempotency_key text,
                                                     payload jsonb)
    RETURNS void
    LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_variable
DECLARE
    first_id bigint;
BEGIN
    SELECT x.id INTO first_id
      FROM ((SELECT e.id, e.payload FROM outbox.events e
              WHERE e.topic = check_same_payload.topic
                AND e.idempotency_key = check_same_payload.idempotency_key LIMIT 1)
            UNION ALL
            (SELECT r.id, r.payload FROM outbox.retries r
              WHERE r.topic = check_same_payload.topic
                AND r.idempotency_key = check_same_payload.idempotency_key)
            UNION ALL
            (SELECT d.id, d.payload FROM outbox.dead d
              WHERE d.topic = check_same_payload.topic
                AND d.idempotency_key = check_same_payload.idempotency_key)
            LIMIT 1) x
     WHERE x.payload <> payload;
    IF first_id IS NOT NULL THEN
        RAISE EXCEPTION 'outbox.enqueue: idempotency key "%" of topic "%" was already used with another payload (message %)',
            idempotency_key, topic, first_id
            USING ERRCODE = 'OB002',
                  HINT = 'A key names one message: the same key must carry the same payload; use a new key for new content.';
    END IF;
END
$$;
