-- 002_idempotency_keys.sql: the producer HTTP API's idempotency keys (the
-- table common/keyclaim.c drives: claim with a lease and a fencing token,
-- complete with the stored response, replay), and the recovery lookup of a
-- report by its key.
CREATE TABLE app.idempotency_keys (
    idempotency_key text        PRIMARY KEY,
    fingerprint     text        NOT NULL,
    state           text        NOT NULL,
    fence           bigint      NOT NULL,
    lease_until     timestamptz NOT NULL,
    response_status integer,
    response_body   text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    completed_at    timestamptz,
    CONSTRAINT idempotency_keys_state_check CHECK (state IN ('started', 'done')),
    CONSTRAINT idempotency_keys_key_check
        CHECK (octet_length(idempotency_key) BETWEEN 1 AND 255),
    CONSTRAINT idempotency_keys_done_check
        CHECK (state <> 'done' OR response_status IS NOT NULL)
);

-- The retention GC deletes the oldest keys in batches.
CREATE INDEX idempotency_keys_created_at ON app.idempotency_keys (created_at);

-- GET /v1/reports?idempotency_key=K. Deliberately NOT unique: the broken
-- modes (none, split) must be able to show a duplicate as a second row
-- instead of having it masked by a constraint error.
CREATE INDEX bug_reports_idempotency_key ON app.bug_reports (idempotency_key);
