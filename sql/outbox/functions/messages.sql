-- outbox.messages (view), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012; by set, not per message, since migration 020; headers and not_before since 022.
--
-- The contract view: one row per message still known (delivered ones until
-- their slot is truncated, dead ones until --dead-retention), with the
-- columns the old table had, and enqueue's headers and not_before (022).
-- status is pending, delivered or dead; available_at of a message not
-- claimed yet is its not_before when that is later than created_at.
--
-- Each row says what outbox.event_state(e) says of its message (the same
-- columns, the same values: tests/integration/test_messages_view.c), worked
-- out by set instead of one plpgsql call per message (issue 32 item 5: the
-- count of the pending messages took 11.9 s at 250,000 delivered ones).
-- Every branch carries a constant status, so that a query asking for one
-- (WHERE status = 'pending') has the planner drop the others before it
-- plans them, and reads only what it asks for:
--   unread      per stream, by index range over events_stream: the rest of
--               the open window (from the later of the position and
--               snap_lo's xmin, up to snap_hi's xmax) and what came after it
--               (from snap_hi's xmin, or snap_lo's when no window is open;
--               every message of a stream with snap_lo NULL or no row yet,
--               outbox.new_streams): everything older is visible in those
--               snapshots. The ranges cover the transactions that were in
--               progress at the snapshots, so a long transaction holding
--               back the xmin widens them (outbox.stream_read splits by xip
--               instead; for the planner a join over the xip list was a
--               worse bet than a few rows more);
--   in a batch  per leased stream batch (few), its range by index, as
--               outbox.batch_events reads it;
--   retries and dead letters: their tables, as before;
--   delivered   every other message of a stream, and the history (lane < 0,
--               by events_history, 020): read only by a query that asks for
--               delivered messages or for a key (by events_key per stream);
--               the attempts, fence, error and batch of the done batch among
--               the stream's last 50 that holds it are scalar subqueries,
--               evaluated only for the columns a query asks for.
-- Streams and batches are joined to their messages with "= ANY(ARRAY[..])":
-- the same index scan as "=", but no hash join (a scan of every slot) for
-- the planner to prefer when it cannot know that a range holds few rows.
-- No plpgsql on the per-row path. A message in outbox.retries or
-- outbox.dead is left out of the events branches (the copy is its row):
-- one anti-join with both, a hash of the few ids rather than two probes
-- per message (half the time of a backlog's count).
CREATE OR REPLACE VIEW outbox.messages AS
-- unread, the rest of the open window: what snap_hi adds to snap_lo after
-- the position, from the later of the position and snap_lo's xmin (one row
-- bound, as outbox.stream_read: with two the scan would start at one of
-- them; the scalar one repeats it for the planner, see below) up to
-- snap_hi's xmax
SELECT e.id, e.topic, e.idempotency_key, e.payload, e.ordering_key, e.ordering_seq,
       'pending'::text AS status, 0::integer AS attempts, 0::bigint AS fence,
       NULL::text AS lease_owner, NULL::timestamptz AS lease_until,
       GREATEST(e.created_at, e.not_before) AS available_at, e.created_at,
       NULL::text AS last_error, NULL::bigint AS batch_id, e.headers, e.not_before
  FROM outbox.streams st
  JOIN outbox.events e ON e.topic = ANY(ARRAY[st.topic]) AND e.lane = ANY(ARRAY[st.lane])
   AND (e.txid, e.id) > (CASE WHEN (st.pos_txid, st.pos_id) < (COALESCE(pg_snapshot_xmin(st.snap_lo), '0'::xid8), 0::bigint)
                              THEN COALESCE(pg_snapshot_xmin(st.snap_lo), '0'::xid8) ELSE st.pos_txid END,
                         CASE WHEN (st.pos_txid, st.pos_id) < (COALESCE(pg_snapshot_xmin(st.snap_lo), '0'::xid8), 0::bigint)
                              THEN 0::bigint ELSE st.pos_id END)
   AND e.txid >= CASE WHEN (st.pos_txid, st.pos_id) < (COALESCE(pg_snapshot_xmin(st.snap_lo), '0'::xid8), 0::bigint)
                              THEN COALESCE(pg_snapshot_xmin(st.snap_lo), '0'::xid8) ELSE st.pos_txid END
   AND e.txid < pg_snapshot_xmax(st.snap_hi)
 WHERE st.lane >= 0 AND st.snap_hi IS NOT NULL
   AND (st.snap_lo IS NULL OR NOT pg_visible_in_snapshot(e.txid, st.snap_lo))
   AND pg_visible_in_snapshot(e.txid, st.snap_hi)
   AND NOT EXISTS (SELECT 1 FROM (SELECT r.id FROM outbox.retries r
                                  UNION ALL SELECT d.id FROM outbox.dead d) c WHERE c.id = e.id)
UNION ALL
-- unread, after the window (after snap_lo when none is open; every message
-- of a stream read from the first on, or without a row yet): from that
-- snapshot's xmin on, what it does not see. The bound is said twice: the
-- planner judges each to keep a third of the rows, and a third of a large
-- outbox is worth a scan to it (and JIT compilation).
SELECT e.id, e.topic, e.idempotency_key, e.payload, e.ordering_key, e.ordering_seq,
       'pending'::text, 0::integer, 0::bigint, NULL::text, NULL::timestamptz,
       GREATEST(e.created_at, e.not_before), e.created_at, NULL::text, NULL::bigint, e.headers,
       e.not_before
  FROM (SELECT * FROM outbox.streams UNION ALL SELECT * FROM outbox.new_streams()) st
  JOIN outbox.events e ON e.topic = ANY(ARRAY[st.topic]) AND e.lane = ANY(ARRAY[st.lane])
   AND e.txid >= COALESCE(pg_snapshot_xmin(COALESCE(st.snap_hi, st.snap_lo)), '0'::xid8)
   AND (e.txid, e.id) >= (COALESCE(pg_snapshot_xmin(COALESCE(st.snap_hi, st.snap_lo)), '0'::xid8),
                          0::bigint)
 WHERE st.lane >= 0
   AND (COALESCE(st.snap_hi, st.snap_lo) IS NULL
        OR NOT pg_visible_in_snapshot(e.txid, COALESCE(st.snap_hi, st.snap_lo)))
   AND NOT EXISTS (SELECT 1 FROM (SELECT r.id FROM outbox.retries r
                                  UNION ALL SELECT d.id FROM outbox.dead d) c WHERE c.id = e.id)
UNION ALL
-- in a leased stream batch (under a lease, released until later, or its
-- lease run out) and read by its stream (outbox.event_state looks for a
-- batch only then): the batch's range, from the later of its start and
-- its snap_lo's xmin to its end
SELECT e.id, e.topic, e.idempotency_key, e.payload, e.ordering_key, e.ordering_seq,
       'pending'::text, b.attempts, b.fence, b.owner,
       CASE WHEN b.owner IS NOT NULL THEN b.lease_until END,
       CASE WHEN b.owner IS NULL THEN b.lease_until ELSE b.created_at END,
       e.created_at, b.last_error, b.id, e.headers, e.not_before
  FROM outbox.batches b
  JOIN outbox.streams st ON st.topic = b.topic AND st.lane = b.lane
  JOIN outbox.events e ON e.topic = ANY(ARRAY[b.topic]) AND e.lane = ANY(ARRAY[b.lane])
   AND (e.txid, e.id) > (CASE WHEN (COALESCE(b.from_txid, '0'::xid8), COALESCE(b.from_id, 0)) < (COALESCE(pg_snapshot_xmin(b.snap_lo), '0'::xid8), 0::bigint)
                              THEN COALESCE(pg_snapshot_xmin(b.snap_lo), '0'::xid8) ELSE COALESCE(b.from_txid, '0'::xid8) END,
                         CASE WHEN (COALESCE(b.from_txid, '0'::xid8), COALESCE(b.from_id, 0)) < (COALESCE(pg_snapshot_xmin(b.snap_lo), '0'::xid8), 0::bigint)
                              THEN 0::bigint ELSE COALESCE(b.from_id, 0) END)
   AND e.txid >= CASE WHEN (COALESCE(b.from_txid, '0'::xid8), COALESCE(b.from_id, 0)) < (COALESCE(pg_snapshot_xmin(b.snap_lo), '0'::xid8), 0::bigint)
                              THEN COALESCE(pg_snapshot_xmin(b.snap_lo), '0'::xid8) ELSE COALESCE(b.from_txid, '0'::xid8) END
   AND (e.txid, e.id) <= (b.to_txid, b.to_id)
 WHERE b.state = 'leased' AND b.kind = 's' AND b.lane >= 0
   AND outbox.batch_holds(b, e)
   AND ((st.snap_lo IS NULL OR NOT pg_visible_in_snapshot(e.txid, st.snap_lo))
        AND NOT (st.snap_hi IS NOT NULL AND pg_visible_in_snapshot(e.txid, st.snap_hi)
                 AND (e.txid, e.id) <= (st.pos_txid, st.pos_id))) IS NOT TRUE
   AND NOT EXISTS (SELECT 1 FROM (SELECT r.id FROM outbox.retries r
                                  UNION ALL SELECT d.id FROM outbox.dead d) c WHERE c.id = e.id)
UNION ALL
-- retries (answered retry, parked behind a key, a split batch's halves)
SELECT r.id, r.topic, r.idempotency_key, r.payload, r.ordering_key, r.ordering_seq,
       'pending'::text, r.attempts, r.fence, b.owner,
       CASE WHEN b.owner IS NOT NULL THEN b.lease_until END,
       CASE WHEN b.id IS NULL THEN r.due_at ELSE b.created_at END, r.created_at,
       r.last_error, r.batch_id, r.headers, r.not_before
  FROM outbox.retries r LEFT JOIN outbox.batches b ON b.id = r.batch_id AND b.state = 'leased'
UNION ALL
SELECT d.id, d.topic, d.idempotency_key, d.payload, d.ordering_key, d.ordering_seq,
       'dead'::text, d.attempts, d.fence, NULL::text, NULL::timestamptz, d.died_at, d.created_at,
       d.last_error, NULL::bigint, d.headers, d.not_before
  FROM outbox.dead d
UNION ALL
-- delivered: read by its stream and in no leased batch; attempts, fence,
-- error and batch of the done batch that holds it among the stream's last
-- 50 (NULL when none does), only for the columns a query asks for
SELECT e.id, e.topic, e.idempotency_key, e.payload, e.ordering_key, e.ordering_seq,
       'delivered'::text,
       (SELECT x.attempts FROM (SELECT * FROM outbox.batches x
                         WHERE x.kind = 's' AND x.topic = e.topic AND x.lane = e.lane
                         ORDER BY x.id DESC LIMIT 50) x
         WHERE x.state = 'done' AND outbox.batch_holds(x, e) LIMIT 1),
       (SELECT x.fence FROM (SELECT * FROM outbox.batches x
                         WHERE x.kind = 's' AND x.topic = e.topic AND x.lane = e.lane
                         ORDER BY x.id DESC LIMIT 50) x
         WHERE x.state = 'done' AND outbox.batch_holds(x, e) LIMIT 1),
       NULL::text, NULL::timestamptz, GREATEST(e.created_at, e.not_before), e.created_at,
       (SELECT x.last_error FROM (SELECT * FROM outbox.batches x
                         WHERE x.kind = 's' AND x.topic = e.topic AND x.lane = e.lane
                         ORDER BY x.id DESC LIMIT 50) x
         WHERE x.state = 'done' AND outbox.batch_holds(x, e) LIMIT 1),
       (SELECT x.id FROM (SELECT * FROM outbox.batches x
                         WHERE x.kind = 's' AND x.topic = e.topic AND x.lane = e.lane
                         ORDER BY x.id DESC LIMIT 50) x
         WHERE x.state = 'done' AND outbox.batch_holds(x, e) LIMIT 1),
       e.headers, e.not_before
  FROM outbox.streams st
  JOIN outbox.events e ON e.topic = ANY(ARRAY[st.topic]) AND e.lane = ANY(ARRAY[st.lane])
 WHERE st.lane >= 0
   AND ((st.snap_lo IS NULL OR NOT pg_visible_in_snapshot(e.txid, st.snap_lo))
        AND NOT (st.snap_hi IS NOT NULL AND pg_visible_in_snapshot(e.txid, st.snap_hi)
                 AND (e.txid, e.id) <= (st.pos_txid, st.pos_id))) IS NOT TRUE
   AND NOT EXISTS (SELECT 1 FROM outbox.batches b
                    WHERE b.state = 'leased' AND b.kind = 's' AND b.topic = st.topic
                      AND b.lane = st.lane AND outbox.batch_holds(b, e))
   AND NOT EXISTS (SELECT 1 FROM (SELECT r.id FROM outbox.retries r
                                  UNION ALL SELECT d.id FROM outbox.dead d) c WHERE c.id = e.id)
UNION ALL
-- delivered: the history (lane < 0, from the table before 012)
SELECT e.id, e.topic, e.idempotency_key, e.payload, e.ordering_key, e.ordering_seq,
       'delivered'::text, NULL::integer, NULL::bigint, NULL::text, NULL::timestamptz,
       GREATEST(e.created_at, e.not_before), e.created_at, NULL::text, NULL::bigint, e.headers,
       e.not_before
  FROM outbox.events e
 WHERE e.lane < 0
   AND NOT EXISTS (SELECT 1 FROM (SELECT r.id FROM outbox.retries r
                                  UNION ALL SELECT d.id FROM outbox.dead d) c WHERE c.id = e.id);
