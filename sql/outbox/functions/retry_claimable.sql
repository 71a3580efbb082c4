-- outbox.retry_claimable (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012, 018.
--
-- Whether a free, due retry r may go now: an unordered one always; of an
-- ordering key only the lowest waiting message, once every earlier number
-- of the key has left its stream (outbox.ordering_next: a message parked
-- early waits for its predecessor), while no other message of the key is
-- out (in a retry batch, or in its lane's batch: a dead letter requeued
-- under --on-dead-head skip comes back after later messages went), and
-- not while the key waits on a dead letter (ordering false: the BROKEN
-- --no-ordering mode).
CREATE OR REPLACE FUNCTION outbox.retry_claimable(r outbox.retries, ordering boolean) RETURNS boolean
    LANGUAGE sql STABLE AS $$
    SELECT r.ordering_key IS NULL OR NOT ordering OR (
        NOT EXISTS (SELECT 1 FROM outbox.retries p
                     WHERE p.topic = r.topic AND p.ordering_key = r.ordering_key
                       AND (p.ordering_seq < r.ordering_seq OR p.batch_id IS NOT NULL))
        AND r.ordering_seq < COALESCE((SELECT x.next_seq FROM outbox.ordering_next x
                                        WHERE x.topic = r.topic
                                          AND x.ordering_key = r.ordering_key), 1)
        AND NOT EXISTS (SELECT 1 FROM outbox.streams s
                         WHERE s.topic = r.topic AND s.lane = outbox.lane_of(r.ordering_key)
                           AND s.inflight IS NOT NULL)
        AND NOT EXISTS (SELECT 1 FROM outbox.ordering_blocks k
                         WHERE k.topic = r.topic AND k.ordering_key = r.ordering_key
                           AND k.state = 'dead'))
$$;
