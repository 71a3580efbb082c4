-- bench/peers/sql/peer_tables.sql: the consumer side of graphile-worker and
-- PgQ in the peer benchmark. The same shape of work as outbox-consumer's
-- `record` handler (inbox.processed + inbox.notifications): a dedup record
-- keyed by the text idempotency key (B-tree primary key), and an effect row
-- with the payload, with its own identity key and an index on the key.
-- (Ours writes wider rows: inbox.processed also keeps topic, message id,
-- fence, outcome, a sha256 fingerprint and the enqueue time.)
CREATE TABLE dedup (
    key          text        PRIMARY KEY,
    processed_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE effects (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key        text        NOT NULL,
    payload    jsonb       NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX effects_key ON effects (key);
