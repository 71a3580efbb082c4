-- outbox.stream_backlog (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012.
--
-- The backlog of stream st: messages never assigned to a batch (waiting),
-- with the oldest of them, and the batches still open (in flight: held
-- under a live lease; held: released until later, or whose holder's lease
-- ran out), with the oldest message they hold. An index range scan over
-- the backlog, a read of each open batch: for status, not for a hot path.
CREATE OR REPLACE FUNCTION outbox.stream_backlog(st outbox.streams, OUT waiting bigint,
                                      OUT oldest_waiting timestamptz, OUT in_flight bigint,
                                      OUT held bigint, OUT oldest_open timestamptz,
                                      OUT due_since timestamptz)
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    now_snap pg_snapshot := pg_current_snapshot();
    w1 bigint := 0;
    o1 timestamptz;
BEGIN
    -- the rest of the open window, then what came after it
    IF st.snap_hi IS NOT NULL THEN
        SELECT count(*), min(e.created_at) INTO w1, o1
          FROM outbox.stream_read(st.topic, st.lane, st.snap_lo, st.snap_hi, st.pos_txid,
                                  st.pos_id, 2147483647) e;
    END IF;
    SELECT w1 + count(*), LEAST(o1, min(e.created_at)) INTO waiting, oldest_waiting
      FROM outbox.stream_read(st.topic, st.lane, COALESCE(st.snap_hi, st.snap_lo), now_snap,
                              NULL, NULL, 2147483647) e;
    SELECT COALESCE(sum(b.size) FILTER (WHERE b.owner IS NOT NULL AND b.lease_until > now()), 0),
           COALESCE(sum(b.size) FILTER (WHERE b.owner IS NULL OR b.lease_until <= now()), 0),
           min(b.lease_until) FILTER (WHERE b.lease_until <= now())
      INTO in_flight, held, due_since
      FROM outbox.batches b
     WHERE b.state = 'leased' AND b.kind = 's' AND b.topic = st.topic AND b.lane = st.lane;
    SELECT min(e.created_at) INTO oldest_open
      FROM outbox.batches b, LATERAL outbox.batch_events(b) e
     WHERE b.state = 'leased' AND b.kind = 's' AND b.topic = st.topic AND b.lane = st.lane;
    -- a lane with a batch out cannot be cut: its waiting messages are not
    -- claimable yet
    IF st.lane > 0 AND st.inflight IS NOT NULL THEN
        oldest_waiting := CASE WHEN oldest_waiting IS NULL THEN NULL
                               ELSE 'infinity'::timestamptz END;
    END IF;
END
$$;
