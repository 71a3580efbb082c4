-- 001_app.sql: the demo business, installed only when asked for
-- (`outboxctl migrate --demo`; scripts/demo.sh, the compose scenario and the
-- tests ask): schema app, the bug reports an agent tool submits (POST
-- /v1/reports, `outbox-producer enqueue`, the MCP tool), and their
-- Idempotency-Key claims (the table common/keyclaim.c drives: claim with a
-- lease and a fencing token, complete with the stored response, replay).
--
-- Until issue 33 these were made by outbox/001 and 002 in every database
-- the outbox was migrated into. A database migrated then has them already:
-- every statement here is IF NOT EXISTS, so --demo adopts them as they are.
CREATE SCHEMA IF NOT EXISTS app;

CREATE TABLE IF NOT EXISTS app.bug_reports (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    title           text        NOT NULL CHECK (length(title) BETWEEN 1 AND 200),
    module          text        NOT NULL CHECK (length(module) BETWEEN 1 AND 100),
    steps           text        NOT NULL DEFAULT '' CHECK (length(steps) <= 10000),
    severity        text        NOT NULL
        CHECK (severity IN ('low', 'medium', 'high', 'critical')),
    idempotency_key text,
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS app.idempotency_keys (
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
CREATE INDEX IF NOT EXISTS idempotency_keys_created_at ON app.idempotency_keys (created_at);

-- GET /v1/reports?idempotency_key=K. Deliberately NOT unique: the broken
-- modes (none, split) must be able to show a duplicate as a second row
-- instead of having it masked by a constraint error.
CREATE INDEX IF NOT EXISTS bug_reports_idempotency_key ON app.bug_reports (idempotency_key);
