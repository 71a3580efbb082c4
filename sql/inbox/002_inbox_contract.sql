-- 002_inbox_contract.sql: the idempotency contract of the dedup record, its
-- retention, and the key-claim table of the webhook handler.

-- fingerprint: hex sha256 over (topic, 0x00, payload), computed by the server
-- with sha256() when the record is written. A redelivery of the key with the
-- same fingerprint is a duplicate; with another one it is the 422 case
-- (key reused for a different payload). NULL only on rows written before
-- this migration, which are treated as matching.
-- outcome/detail: the first outcome and its detail, replayed to duplicates.
-- processed_at is when the effect was applied (committed with it).
ALTER TABLE inbox.processed ADD COLUMN fingerprint text;
ALTER TABLE inbox.processed ADD COLUMN created_at timestamptz;
COMMENT ON COLUMN inbox.processed.fingerprint IS
    'hex sha256(topic || 0x00 || payload), computed by PostgreSQL';
COMMENT ON COLUMN inbox.processed.created_at IS
    'the message''s enqueue time as the relay sent it';
COMMENT ON COLUMN inbox.processed.processed_at IS
    'when the effect was applied (the dedup record commits with it)';

-- Retention deletes the oldest records in batches (--dedup-retention). BRIN:
-- rows arrive in processed_at order, and a B-tree here would cost every
-- insert another index write.
CREATE INDEX processed_processed_at ON inbox.processed USING brin (processed_at);

-- The webhook handler's key claims (common/include/outbox/keyclaim.h): a row
-- is 'started' (with a lease and a fencing token) and COMMITTED before the
-- downstream call, and 'done' with the downstream status and body after it.
CREATE TABLE inbox.webhook_calls (
    idempotency_key text        PRIMARY KEY,
    fingerprint     text        NOT NULL,
    state           text        NOT NULL CHECK (state IN ('started', 'done')),
    fence           bigint      NOT NULL,
    lease_until     timestamptz NOT NULL,
    response_status integer,
    response_body   text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    completed_at    timestamptz
);
CREATE INDEX webhook_calls_created_at ON inbox.webhook_calls (created_at);
