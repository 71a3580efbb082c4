-- outbox.adopt_restore (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 018.
--
-- Make a restored outbox (outbox.restored) read as this cluster's: every
-- message the relays had assigned to a batch before the dump stays
-- assigned, and every other one is read again, in its stream's order.
-- Called by housekeeping (outbox.housekeep), which runs one at a time.
-- Returns how many messages will be read again; NULL when nothing was
-- restored.
--
-- * A message read again: one not yet assigned by its stream's state
--   (snapshots and position, compared with the message's own id), one held
--   by a batch still open (its outcome is unknown: the consumer answers a
--   second delivery duplicate), and, in a stream whose state is of the old
--   cluster, one whose id is below this cluster's counter: enqueued after
--   the restore, or restored from a counter that overlaps this one (then it
--   may be delivered twice; the consumer deduplicates). A stream first cut
--   after the restore (a topic or lane new since the dump) has a state of
--   this cluster and is judged by it.
-- * Its transaction id becomes this transaction's, and every stream's
--   floor a snapshot of now in which this transaction is in progress:
--   everything else in the log is below the floor (assigned; assigned
--   messages get id 3, below every snapshot), these are read once this
--   commits, and a transaction that had not yet enqueued when this ran is
--   in progress in the floor too, so its message is read after it commits.
-- * Open stream batches are closed (a late outcome write is fenced out);
--   retries and dead letters carry their own copies and stay as they are.
--
-- Locks the streams (EXCLUSIVE: waits for every claim cutting one, stops
-- new ones) and the open stream batches; the caller's lock_timeout
-- applies. SECURITY DEFINER: it rewrites the log (outbox.events), which
-- only enqueue and housekeeping write; it takes no argument, every name is
-- schema-qualified, the search_path pinned (as outbox.enqueue).
CREATE OR REPLACE FUNCTION outbox.adopt_restore() RETURNS bigint
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    t      xid8;
    s      pg_snapshot;
    cur    xid8;
    floor  pg_snapshot;
    open_ids bigint[];
    again  bigint;
BEGIN
    LOCK TABLE outbox.streams IN EXCLUSIVE MODE;
    PERFORM 1 FROM outbox.batches b WHERE b.state = 'leased' AND b.kind = 's' FOR UPDATE;
    IF NOT outbox.restored() THEN
        RETURN NULL;
    END IF;
    t := pg_current_xact_id();
    s := pg_current_snapshot();
    cur := pg_snapshot_xmax(s);
    IF t < cur THEN
        floor := format('%s:%s:%s', LEAST(pg_snapshot_xmin(s), t), cur,
                        (SELECT string_agg(x::text, ',' ORDER BY x)
                           FROM (SELECT pg_snapshot_xip(s) AS x UNION SELECT t) q))::pg_snapshot;
    ELSE
        floor := s;
    END IF;

    -- An open batch's messages by its range. A range of the old cluster
    -- holds restored messages only: a message enqueued after the restore
    -- (a lower id) falls inside any old range too, so outbox.batch_events
    -- would read it in their place.
    open_ids := ARRAY(SELECT e.id FROM outbox.batches b
                        JOIN outbox.events e ON e.topic = b.topic AND e.lane = b.lane
                       WHERE b.state = 'leased' AND b.kind = 's'
                         AND (e.txid >= cur OR NOT pg_snapshot_xmax(b.snap_hi) > cur)
                         AND outbox.batch_holds(b, e));
    -- Assigned: what its stream's state says is, except a message below
    -- this cluster's counter in a stream whose state is of the old cluster
    -- (there the comparison means nothing). A stream first cut after the
    -- restore has a state of this cluster: its messages are judged by it.
    UPDATE outbox.events e
       SET txid = CASE
               WHEN NOT (e.id = ANY(open_ids)) AND EXISTS (
                        SELECT 1 FROM outbox.streams st
                         WHERE st.topic = e.topic AND st.lane = e.lane
                           AND NOT (e.txid < cur
                                    AND COALESCE(pg_snapshot_xmax(st.snap_lo) > cur
                                                 OR pg_snapshot_xmax(st.snap_hi) > cur, false))
                           AND ((st.snap_lo IS NOT NULL
                                 AND pg_visible_in_snapshot(e.txid, st.snap_lo))
                                OR (st.snap_hi IS NOT NULL
                                    AND pg_visible_in_snapshot(e.txid, st.snap_hi)
                                    AND (e.txid, e.id) <= (st.pos_txid, st.pos_id))))
                   THEN '3'::xid8
               ELSE t END
     WHERE e.lane >= 0 AND e.txid <> '3'::xid8; -- 3: assigned at an earlier adoption
    SELECT count(*) INTO again FROM outbox.events e WHERE e.lane >= 0 AND e.txid = t;
    -- A key's messages read again had left its stream once: the key takes
    -- the lowest of them next, so that a later message, enqueued by a
    -- transaction whose id came before this one's, waits behind them.
    UPDATE outbox.ordering_next x SET next_seq = m.seq
      FROM (SELECT e.topic, e.ordering_key, min(e.ordering_seq) AS seq FROM outbox.events e
             WHERE e.txid = t AND e.ordering_key IS NOT NULL
             GROUP BY e.topic, e.ordering_key) m
     WHERE x.topic = m.topic AND x.ordering_key = m.ordering_key AND x.next_seq > m.seq;

    UPDATE outbox.batches b
       SET state = 'done', done_at = now(),
           last_error = 'closed when the outbox was restored into another cluster: read again'
     WHERE b.state = 'leased' AND b.kind = 's';
    UPDATE outbox.streams st
       SET snap_lo = floor, snap_hi = NULL, pos_txid = NULL, pos_id = NULL, inflight = NULL;
    RETURN again;
END
$$;
