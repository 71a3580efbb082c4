-- 026_message_keys_in_outbox.sql: the idempotency keys of POST /v1/messages
-- live in schema outbox (outbox.message_keys), not in the demo's schema
-- app, which a database gets only with `outboxctl migrate --demo`. The
-- same shape as the demo's app.idempotency_keys and driven by the same
-- code (common/keyclaim.c): a key used for a report and the same key used
-- for a message are two operations, and neither endpoint's replay or
-- lookup ever answers with the other's.
--
-- A database migrated before has the table in app, with its keys (a
-- client's retry within --key-retention replays from them): it is moved,
-- rows, indexes and constraints as they are. Otherwise it is made here.
DO $$
BEGIN
    IF to_regclass('app.message_keys') IS NOT NULL THEN
        ALTER TABLE app.message_keys SET SCHEMA outbox;
    ELSE
        CREATE TABLE outbox.message_keys (
            idempotency_key text        PRIMARY KEY,
            fingerprint     text        NOT NULL,
            state           text        NOT NULL,
            fence           bigint      NOT NULL,
            lease_until     timestamptz NOT NULL,
            response_status integer,
            response_body   text,
            created_at      timestamptz NOT NULL DEFAULT now(),
            completed_at    timestamptz,
            CONSTRAINT message_keys_state_check CHECK (state IN ('started', 'done')),
            CONSTRAINT message_keys_key_check
                CHECK (octet_length(idempotency_key) BETWEEN 1 AND 255),
            CONSTRAINT message_keys_done_check
                CHECK (state <> 'done' OR response_status IS NOT NULL)
        );
        -- the retention GC deletes the oldest keys in batches
        CREATE INDEX message_keys_created_at ON outbox.message_keys (created_at);
    END IF;
END
$$;

-- producer 3: /v1/messages writes outbox.message_keys. A producer of 2
-- wrote app.message_keys, which is gone: it refuses to start here.
UPDATE outbox.protocols SET min_version = 3, max_version = 3 WHERE component = 'producer';
