-- 015_message_keys.sql: the idempotency keys of POST /v1/messages, the
-- producer HTTP API's generic message endpoint (docs/producer.md). A key
-- table of its own, of the same shape as app.idempotency_keys and driven
-- by the same code (common/keyclaim.c): a key used for a report and the
-- same key used for a message are two operations, and neither endpoint's
-- replay or lookup ever answers with the other's.
CREATE TABLE app.message_keys (LIKE app.idempotency_keys INCLUDING ALL);

-- producer 2: serve's /v1/messages writes app.message_keys. A producer of
-- protocol 1 (no /v1/messages) still works on this schema; a producer 2
-- on a schema before this one refuses to start.
UPDATE outbox.protocols SET max_version = 2 WHERE component = 'producer';
