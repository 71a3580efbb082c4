-- outbox.stream_backlog (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012, 025.
--
-- The backlog of stream st: messages never assigned to a batch (waiting),
-- with the oldest of them, and the batches still open (in flight: held
-- under a live lease; held: released until later, or whose holder's lease
-- ran out), with the oldest message they hold; and total, every message
-- of the stream. An index range scan over the backlog (which counts what
-- it passes that is not waiting too), one index-only count below it (the
-- floor's xmin: read long ago, mostly all-visible), a read of each open
-- batch: for status, not for a hot path. total was a second count over
-- the whole topic in outbox.topic_stats, 84 ms at a backlog of 250,000,
-- 42 ms of it that count (025).
CREATE OR REPLACE FUNCTION outbox.stream_backlog(st outbox.streams, OUT waiting bigint,
                                      OUT oldest_waiting timestamptz, OUT in_flight bigint,
                                      OUT held bigint, OUT oldest_open timestamptz,
                                      OUT due_since timestamptz, OUT total bigint)
    LANGUAGE plpgsql STABLE
    -- by the stream's index, never a scan of the table (see stream_read)
    SET enable_seqscan = off SET jit = off AS $$
DECLARE
    lo_min xid8 := COALESCE(pg_snapshot_xmin(st.snap_lo), '0'::xid8);
    p_txid xid8 := COALESCE(st.pos_txid, '0'::xid8);
    p_id   bigint := COALESCE(st.pos_id, 0);
    lo_xmax xid8 := COALESCE(pg_snapshot_xmax(st.snap_lo), '0'::xid8);
BEGIN
    -- Waiting: not in the floor (snap_lo), and not in the open window
    -- (snap_hi) up to its position: what the claims have not read. What
    -- is older than the floor's xmin is in it, so the index range starts
    -- there. Counted where they lie, not read out (stream_read carries
    -- every row, payload included, through a function's result: 214 ms at
    -- a backlog of 250,000 for outboxctl status).
    SELECT count(*) FILTER (WHERE w.waits), min(w.created_at) FILTER (WHERE w.waits), count(*)
      INTO waiting, oldest_waiting, total
      -- (the cheap comparisons first: a snapshot is asked only of what
      -- it may hold)
      FROM (SELECT e.created_at,
                   NOT (e.txid < lo_xmax AND pg_visible_in_snapshot(e.txid, st.snap_lo))
                   AND NOT (st.snap_hi IS NOT NULL AND (e.txid, e.id) <= (p_txid, p_id)
                            AND pg_visible_in_snapshot(e.txid, st.snap_hi)) AS waits
              FROM outbox.events e
             WHERE e.topic = st.topic AND e.lane = st.lane AND e.txid >= lo_min) w;
    total := total + (SELECT count(*) FROM outbox.events e
                       WHERE e.topic = st.topic AND e.lane = st.lane AND e.txid < lo_min);
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
