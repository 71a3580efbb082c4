-- outbox.lock_next_stream (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012, 023.
--
-- The stream a claim cuts next, its row locked (FOR UPDATE SKIP LOCKED: a
-- stream another claim is cutting is left to it), or NULL: of the streams
-- the claim may take (its topics; a lane only while it has no batch out;
-- not tried yet in this claim), the least recently cut that may have new
-- messages. The probe for new messages (two index probes) is made in that
-- order and stops at the first stream that has some, rather than for every
-- stream before sorting them. busy: a stream with work was skipped, locked.
-- dry: the streams (TOPIC/LANE) the probe found without new messages, which
-- the claim's `more` need not probe again (outbox.more_claimable).
-- One plan (013): a custom plan, with the claim's topics and ordering flag
-- as constants, is priced below the generic one on a table of a few rows,
-- so the plan cache kept none and the loop was planned on every call (0.12
-- ms each, eight times its run time). The generic plan reads the same rows.
CREATE OR REPLACE FUNCTION outbox.lock_next_stream(include text[], exclude text[], others boolean,
                                        ordering boolean, tried text[],
                                        OUT st outbox.streams, OUT busy boolean,
                                        OUT dry text[])
    LANGUAGE plpgsql
    SET plan_cache_mode = force_generic_plan
    AS $$
DECLARE
    c  record;
BEGIN
    busy := false;
    dry := '{}';
    FOR c IN SELECT s.topic, s.lane, s.snap_lo FROM outbox.streams s
              WHERE outbox.topic_claimable(s.topic, include, exclude, others)
                AND (s.lane = 0 OR s.inflight IS NULL OR NOT ordering)
                AND NOT ((s.topic || '/' || s.lane) = ANY(tried))
              ORDER BY s.cut_at NULLS FIRST, s.topic, s.lane
    LOOP
        -- snap_lo read unlocked can only be older than the row's: the probe
        -- may say yes once too often (the cut then finds nothing), never no
        IF NOT outbox.stream_has_work(c.topic, c.lane, c.snap_lo) THEN
            dry := dry || (c.topic || '/' || c.lane);
            CONTINUE;
        END IF;
        SELECT * INTO st FROM outbox.streams s
         WHERE s.topic = c.topic AND s.lane = c.lane
           AND (s.lane = 0 OR s.inflight IS NULL OR NOT ordering)
           FOR UPDATE SKIP LOCKED;
        IF FOUND THEN
            RETURN;
        END IF;
        -- another relay is cutting it
        busy := true;
    END LOOP;
    st := NULL;
END
$$;
