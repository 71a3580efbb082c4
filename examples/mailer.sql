-- mailer.sql: the receiving service's own table in the examples (a mailer
-- that sends one email per order). Its database also holds the inbox's SQL
-- contract: `outboxctl migrate --schema inbox`.
CREATE TABLE IF NOT EXISTS sent_emails (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    idempotency_key text        NOT NULL,
    payload         jsonb       NOT NULL,
    sent_at         timestamptz NOT NULL DEFAULT now()
);
