-- 020_history_keys.sql: an index of the history's keys (the rows 012
-- carried over from the old table, lane < 0), for outbox.messages (issue
-- 32 item 5). The view reads a stream's messages per (topic, lane) by
-- events_stream and events_key; the history belongs to no stream, and
-- without this a key looked up without its topic scanned every slot.
-- Partial: no enqueue writes it (enqueue's messages have lane >= 0), and
-- it is empty on an outbox that never had the old table.
CREATE INDEX IF NOT EXISTS events_history ON outbox.events (idempotency_key, topic)
    WHERE lane < 0;
