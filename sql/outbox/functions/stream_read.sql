-- outbox.stream_read (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012.
--
-- The messages of stream (topic, lane) that snapshot hi adds to snapshot lo
-- (lo NULL: from the beginning), after position (after_txid, after_id)
-- (NULL: from the first), in commit order, at most n. PgQ's split keeps it
-- index range scans however old lo's xmin is: the new messages are those
-- of transactions in progress at lo (lo's xip list) and those of
-- transactions that started after it (txid >= lo's xmax), of which the
-- ones that had committed by hi. Every xip transaction is older than lo's
-- xmax, so the first part, read one transaction at a time in txid order,
-- comes wholly before the second: no merge, and no read of the stream's
-- history (an ordered scan with "txid = ANY(xip)" cannot use the array in
-- its index bounds and filtered the whole retained stream on every read).
CREATE OR REPLACE FUNCTION outbox.stream_read(topic text, lane smallint, lo pg_snapshot, hi pg_snapshot,
                                   after_txid xid8, after_id bigint, n integer)
    RETURNS SETOF outbox.events
    LANGUAGE plpgsql STABLE
    -- The planner judges "(txid, id) > (t, i)" by txid alone: in a stream
    -- enqueued by one transaction (a backfill) it expects no row past the
    -- position and would sort the whole rest of the stream for each batch
    -- (test_claim_reads_a_batch_of_a_backfill). Read in index order; and
    -- never by a scan (see outbox.stream_has_work). No JIT: a plan priced
    -- with the disabled-node cost passes jit_above_cost, and compiling it
    -- took ~130 ms of a read that runs in well under one.
    SET enable_sort = off SET enable_seqscan = off SET jit = off
    AS $$
#variable_conflict use_variable
-- plpgsql, not sql: its plans are kept for the session, a sql function's
-- are made anew on every call (1.5 ms each over the partitions).
DECLARE
    lo_xmax xid8 := COALESCE(pg_snapshot_xmax(lo), '0'::xid8);
    hi_xmax xid8 := pg_snapshot_xmax(hi);
    a_txid  xid8 := COALESCE(after_txid, '0'::xid8);
    a_id    bigint := COALESCE(after_id, 0);
    left_n  bigint := n;
    got     bigint;
    x       xid8;
BEGIN
    FOR x IN SELECT t FROM pg_snapshot_xip(lo) t
              WHERE t >= a_txid AND pg_visible_in_snapshot(t, hi) ORDER BY t LOOP
        RETURN QUERY
        SELECT e.* FROM outbox.events e
         WHERE e.topic = stream_read.topic AND e.lane = stream_read.lane
           AND e.txid = x AND (e.txid, e.id) > (a_txid, a_id)
         ORDER BY e.txid, e.id LIMIT left_n;
        GET DIAGNOSTICS got = ROW_COUNT;
        left_n := left_n - got;
        IF left_n <= 0 THEN
            RETURN;
        END IF;
    END LOOP;
    -- One lower bound for the index: the later of the position and lo's
    -- xmax ("txid >= lo_xmax" as a row, ids being positive). Given as two
    -- conditions, the generic plan bounds the scan by one of them and
    -- filters by the other: from the stream's first message on a new cut.
    IF (a_txid, a_id) < (lo_xmax, 0::bigint) THEN
        a_txid := lo_xmax;
        a_id := 0;
    END IF;
    RETURN QUERY
    SELECT e.* FROM outbox.events e
     WHERE e.topic = stream_read.topic AND e.lane = stream_read.lane
       AND (e.txid, e.id) > (a_txid, a_id) AND e.txid < hi_xmax
       AND pg_visible_in_snapshot(e.txid, hi)
     ORDER BY e.txid, e.id LIMIT left_n;
END
$$;
