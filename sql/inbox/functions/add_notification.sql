-- inbox.add_notification (function), its current definition: outboxctl
-- migrate re-applies this file after the numbered migrations
-- (sql/README.md). History: consumer/handler_record.c's INSERT until
-- issue 31.
--
-- The built-in `record` handler's effect for one message (the demo
-- effect): one row in inbox.notifications. payload is the message's bytes,
-- which must be UTF-8 JSON: otherwise it raises a data error (class 22),
-- which the consumer answers reject. ordering_key and ordering_seq NULL
-- for an unordered message.
CREATE OR REPLACE FUNCTION inbox.add_notification(source text, topic text, idempotency_key text,
                                                  payload bytea, message_id bigint,
                                                  ordering_key text, ordering_seq bigint)
    RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO inbox.notifications (idempotency_key, topic, payload, message_id, ordering_key,
                                     ordering_seq, source)
    VALUES (add_notification.idempotency_key, add_notification.topic,
            convert_from(add_notification.payload, 'UTF8')::jsonb, add_notification.message_id,
            add_notification.ordering_key, add_notification.ordering_seq,
            add_notification.source);
END
$$;
