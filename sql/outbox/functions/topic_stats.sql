-- outbox.topic_stats (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012, 025.
--
-- Per topic: pending (waiting + in open batches + retrying), in flight
-- (under a live lease), retrying, delivered (still retained), dead, keys
-- blocked by a dead letter, and the ages of the oldest pending message and
-- of the oldest message a relay could claim now (NULL: none). The figures
-- of outboxctl status and of the relay's gauges. Counts the retained
-- messages of a topic (an index-only scan): cheap for status, not for a
-- hot path. No JIT (as outbox.stream_read): the planner prices the
-- per-stream function calls high, and at 250,000 messages the plan passed
-- jit_above_cost and compiled for ~140 ms of a 230 ms call (issue 32).
CREATE OR REPLACE FUNCTION outbox.topic_stats(only_topic text DEFAULT NULL)
    RETURNS TABLE (topic text, pending bigint, in_flight bigint, retrying bigint,
                   delivered bigint, dead bigint, blocked_keys bigint,
                   oldest_pending_s double precision, oldest_claimable_s double precision)
    LANGUAGE sql STABLE SET jit = off AS $$
    WITH t AS (
        SELECT DISTINCT x.topic FROM (
            SELECT s.topic FROM outbox.all_streams() s UNION ALL
            SELECT r.topic FROM outbox.retries r UNION ALL
            SELECT d.topic FROM outbox.dead d) x
         WHERE only_topic IS NULL OR x.topic = only_topic),
    s AS (
        SELECT st.topic, sum(b.total) AS total, sum(b.waiting) AS waiting,
               sum(b.in_flight) AS in_flight,
               sum(b.held) AS held, LEAST(min(b.oldest_waiting), min(b.oldest_open)) AS oldest,
               LEAST(min(b.oldest_waiting) FILTER (WHERE b.oldest_waiting < 'infinity'),
                     min(b.due_since)) AS claimable_since
          FROM outbox.all_streams() st, LATERAL outbox.stream_backlog(st) b
         WHERE only_topic IS NULL OR st.topic = only_topic
         GROUP BY st.topic),
    r AS (
        SELECT r.topic, count(*) AS n,
               count(*) FILTER (WHERE b.owner IS NOT NULL AND b.lease_until > now()) AS leased,
               count(*) FILTER (WHERE EXISTS (SELECT 1 FROM outbox.events e
                                               WHERE e.id = r.id)) AS with_event,
               min(r.created_at) AS oldest,
               LEAST(min(r.due_at) FILTER (WHERE b.id IS NULL AND r.due_at <= now()
                                             AND outbox.retry_claimable(r, true)),
                     min(b.lease_until) FILTER (WHERE b.lease_until <= now())) AS claimable_since
          FROM outbox.retries r
          LEFT JOIN outbox.batches b ON b.id = r.batch_id AND b.state = 'leased'
         GROUP BY r.topic),
    d AS (
        SELECT d.topic, count(*) AS n,
               count(*) FILTER (WHERE EXISTS (SELECT 1 FROM outbox.events e
                                               WHERE e.id = d.id)) AS with_event
          FROM outbox.dead d GROUP BY d.topic)
    SELECT t.topic,
           COALESCE(s.waiting, 0) + COALESCE(s.in_flight, 0) + COALESCE(s.held, 0)
               + COALESCE(r.n, 0),
           COALESCE(s.in_flight, 0) + COALESCE(r.leased, 0),
           COALESCE(r.n, 0),
           GREATEST(COALESCE(s.total, 0)
                    + (SELECT count(*) FROM outbox.events e WHERE e.topic = t.topic AND e.lane < 0)
                    - COALESCE(s.waiting, 0) - COALESCE(s.in_flight, 0) - COALESCE(s.held, 0)
                    - COALESCE(r.with_event, 0) - COALESCE(d.with_event, 0), 0),
           COALESCE(d.n, 0),
           (SELECT count(*) FROM outbox.ordering_blocks k
             WHERE k.topic = t.topic AND k.state = 'dead'),
           extract(epoch FROM now() - LEAST(s.oldest, r.oldest))::float8,
           extract(epoch FROM now() - LEAST(s.claimable_since, r.claimable_since))::float8
      FROM t LEFT JOIN s ON s.topic = t.topic LEFT JOIN r ON r.topic = t.topic
      LEFT JOIN d ON d.topic = t.topic
     ORDER BY t.topic
$$;
