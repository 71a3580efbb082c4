-- 007_dead_heads_index.sql: ordering keys blocked by a dead head are
-- counted often (relay metrics, outboxctl status); keep that count off the
-- table's dead-letter history.
CREATE INDEX messages_dead_heads ON outbox.messages (ordering_key)
    WHERE status = 'dead' AND is_head;
