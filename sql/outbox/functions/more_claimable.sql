-- outbox.more_claimable (function), its current definition: outboxctl migrate
-- re-applies this file after the numbered migrations (sql/README.md).
-- History: 021, 023.
--
-- Whether a claim with these topics (outbox.topic_claimable) would find
-- anything now: a batch whose lease ran out, a due retry, a stream that may
-- have new messages (outbox.stream_has_work: it may say yes once too often,
-- never no), or a stream with no row yet (its row is made here, as an empty
-- claim's discovery would). outbox.claim answers it in `more` after a cut
-- that read its window to the end, so that a relay need not claim again
-- only to learn that nothing is there. known_dry: streams (TOPIC/LANE) this
-- claim found without new messages (the probes of outbox.lock_next_stream,
-- and the streams it cut to their end), not probed again: what commits
-- after them commits after the relay announced its wait, and wakes it.
CREATE OR REPLACE FUNCTION outbox.more_claimable(include text[], exclude text[], others boolean,
                                      ordering boolean, known_dry text[])
    RETURNS boolean
    LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM outbox.batches x
                WHERE x.state = 'leased' AND x.lease_until < now()
                  AND outbox.topic_claimable(x.topic, include, exclude, others)) THEN
        RETURN true;
    END IF;
    IF EXISTS (SELECT 1 FROM outbox.retries r
                WHERE r.batch_id IS NULL AND r.due_at <= now()
                  AND outbox.topic_claimable(r.topic, include, exclude, others)
                  AND outbox.retry_claimable(r, ordering)) THEN
        RETURN true;
    END IF;
    IF EXISTS (SELECT 1 FROM outbox.streams s
                WHERE outbox.topic_claimable(s.topic, include, exclude, others)
                  AND (s.lane = 0 OR s.inflight IS NULL OR NOT ordering)
                  AND NOT ((s.topic || '/' || s.lane) = ANY(known_dry))
                  AND outbox.stream_has_work(s.topic, s.lane, s.snap_lo)) THEN
        RETURN true;
    END IF;
    RETURN outbox.discover_streams() > 0;
END
$$;
