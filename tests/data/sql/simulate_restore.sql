-- simulate_restore.sql: what a dump of the outbox restored into a cluster
-- whose transaction counter is `delta` behind the old one leaves, without
-- the dump: every transaction id the outbox stores (the messages' own, the
-- streams' and the batches' snapshots and positions) moved up by delta,
-- so that it lies beyond every transaction this cluster has started.
-- Used by test_streams (test_restore_into_a_younger_cluster) and by the
-- protocol checker's restore step (tests/check/). Run as the schema's
-- owner; defines pg_temp functions, for this session only.
CREATE FUNCTION pg_temp.shift_xid(x xid8, delta numeric) RETURNS xid8
    LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT (x::text::numeric + delta)::text::xid8 $$;
CREATE FUNCTION pg_temp.shift_snapshot(s pg_snapshot, delta numeric) RETURNS pg_snapshot
    LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT format('%s:%s:%s', pg_temp.shift_xid(pg_snapshot_xmin(s), delta),
                  pg_temp.shift_xid(pg_snapshot_xmax(s), delta),
                  COALESCE((SELECT string_agg(pg_temp.shift_xid(x, delta)::text, ',' ORDER BY x)
                              FROM pg_snapshot_xip(s) x), ''))::pg_snapshot
$$;
CREATE FUNCTION pg_temp.simulate_restore(delta numeric) RETURNS void
    LANGUAGE sql AS $$
    UPDATE outbox.events SET txid = pg_temp.shift_xid(txid, delta);
    UPDATE outbox.streams
       SET snap_lo = pg_temp.shift_snapshot(snap_lo, delta),
           snap_hi = pg_temp.shift_snapshot(snap_hi, delta),
           pos_txid = pg_temp.shift_xid(pos_txid, delta);
    UPDATE outbox.batches
       SET snap_lo = pg_temp.shift_snapshot(snap_lo, delta),
           snap_hi = pg_temp.shift_snapshot(snap_hi, delta),
           from_txid = pg_temp.shift_xid(from_txid, delta),
           to_txid = pg_temp.shift_xid(to_txid, delta);
$$;
