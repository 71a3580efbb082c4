-- 001_outbox.sql: the producer side. The outbox table, the enqueue function
-- (the stable contract), and the wakeup notification for relays.
CREATE SCHEMA IF NOT EXISTS outbox;

CREATE TABLE outbox.messages (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    topic           text        NOT NULL,
    idempotency_key text        NOT NULL,
    payload         jsonb       NOT NULL,
    ordering_key    text,
    status          text        NOT NULL DEFAULT 'pending',
    attempts        integer     NOT NULL DEFAULT 0,
    fence           bigint      NOT NULL DEFAULT 0,
    lease_owner     text,
    lease_until     timestamptz,
    available_at    timestamptz NOT NULL DEFAULT now(),
    created_at      timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz,
    last_error      text,
    CONSTRAINT messages_status_check
        CHECK (status IN ('pending', 'delivered', 'dead')),
    CONSTRAINT messages_topic_check
        CHECK (octet_length(topic) BETWEEN 1 AND 255),
    CONSTRAINT messages_key_check
        CHECK (octet_length(idempotency_key) BETWEEN 1 AND 255),
    CONSTRAINT messages_ordering_key_check
        CHECK (ordering_key IS NULL OR octet_length(ordering_key) BETWEEN 1 AND 255),
    CONSTRAINT messages_topic_key_unique UNIQUE (topic, idempotency_key)
);

-- The claim scans pending rows in due order; delivered and dead rows are
-- outside the index so it stays small however much history is kept.
CREATE INDEX messages_pending_due ON outbox.messages (available_at, id)
    WHERE status = 'pending';
-- Housekeeping purges delivered rows oldest first.
CREATE INDEX messages_delivered_at ON outbox.messages (delivered_at)
    WHERE status = 'delivered';

-- Largest payload enqueue accepts (bytes of its JSON text), 1 MiB: the same
-- as the relay's and consumer's default --max-payload.
CREATE FUNCTION outbox.max_payload_bytes() RETURNS integer
    LANGUAGE sql IMMUTABLE AS 'SELECT 1048576';

-- enqueue: call inside the caller's business transaction. Idempotent per
-- (topic, idempotency_key): a second call returns the first id, adds nothing.
CREATE FUNCTION outbox.enqueue(topic text, idempotency_key text, payload jsonb,
                               ordering_key text DEFAULT NULL)
    RETURNS bigint
    LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
DECLARE
    new_id bigint;
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

    INSERT INTO outbox.messages AS m (topic, idempotency_key, payload, ordering_key)
    VALUES (topic, idempotency_key, payload, ordering_key)
    ON CONFLICT ON CONSTRAINT messages_topic_key_unique DO NOTHING
    RETURNING m.id INTO new_id;

    IF new_id IS NULL THEN
        -- Already enqueued (possibly by a concurrent transaction that has
        -- just committed: ON CONFLICT waited for it).
        SELECT m.id INTO new_id FROM outbox.messages m
         WHERE m.topic = enqueue.topic
           AND m.idempotency_key = enqueue.idempotency_key;
    END IF;
    RETURN new_id;
END
$$;

-- Relays LISTEN on this channel; one notification per inserting statement,
-- delivered at commit (never for a rolled-back insert).
CREATE FUNCTION outbox.notify_enqueued() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('outbox_enqueued', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER messages_notify AFTER INSERT ON outbox.messages
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.notify_enqueued();
