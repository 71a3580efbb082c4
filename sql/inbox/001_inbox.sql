-- 001_inbox.sql: the consumer side. The dedup record and the demo effect.
CREATE SCHEMA IF NOT EXISTS inbox;

-- One row per idempotency key ever applied (until --dedup-retention).
-- Inserted in the same transaction as the effect.
CREATE TABLE inbox.processed (
    idempotency_key text        PRIMARY KEY,
    topic           text        NOT NULL,
    message_id      bigint      NOT NULL,
    fence           bigint      NOT NULL,
    outcome         text        NOT NULL DEFAULT 'applied',
    detail          text,
    processed_at    timestamptz NOT NULL DEFAULT now()
);

-- The built-in demo effect. Deliberately NO unique constraint on the key:
-- a dedup failure must show up as a second row, not hide behind an error.
CREATE TABLE inbox.notifications (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    idempotency_key text        NOT NULL,
    topic           text        NOT NULL,
    payload         jsonb       NOT NULL,
    message_id      bigint,
    ordering_key    text,
    ordering_seq    bigint,
    applied_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX notifications_key ON inbox.notifications (idempotency_key);
