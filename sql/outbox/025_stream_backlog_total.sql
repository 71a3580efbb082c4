-- 025_stream_backlog_total.sql: outbox.stream_backlog also returns total,
-- every message of the stream, counted in the same pass as the waiting
-- ones, and outbox.topic_stats takes its delivered count from it instead of
-- counting the whole topic again (outboxctl status at a backlog of
-- 250,000: one pass over it, not two). Another OUT column is another
-- return type: the old definition goes here, its file makes the new one.
DROP FUNCTION outbox.stream_backlog(outbox.streams);
