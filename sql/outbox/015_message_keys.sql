-- 015_message_keys.sql: producer protocol 2, POST /v1/messages, the
-- producer HTTP API's generic message endpoint (docs/producer.md).
--
-- Until issue 33 this also made its key table, app.message_keys (LIKE
-- app.idempotency_keys), in the demo's schema; 026 moved it to
-- outbox.message_keys and makes it on a fresh database.
UPDATE outbox.protocols SET max_version = 2 WHERE component = 'producer';
