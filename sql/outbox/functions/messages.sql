-- outbox.messages (view), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012.
--
-- The contract view: one row per message still known (delivered ones until
-- their slot is truncated, dead ones until --dead-retention), with the
-- columns the old table had. status is pending, delivered or dead.
CREATE OR REPLACE VIEW outbox.messages AS
SELECT e.id, e.topic, e.idempotency_key, e.payload, e.ordering_key, e.ordering_seq,
       s.status, s.attempts, s.fence, s.lease_owner, s.lease_until, s.available_at,
       e.created_at, s.last_error, s.batch_id
  FROM outbox.events e, LATERAL outbox.event_state(e) s
 WHERE NOT EXISTS (SELECT 1 FROM outbox.retries r WHERE r.id = e.id)
   AND NOT EXISTS (SELECT 1 FROM outbox.dead d WHERE d.id = e.id)
UNION ALL
SELECT r.id, r.topic, r.idempotency_key, r.payload, r.ordering_key, r.ordering_seq,
       'pending', r.attempts, r.fence, b.owner, CASE WHEN b.owner IS NOT NULL THEN b.lease_until END,
       CASE WHEN b.id IS NULL THEN r.due_at ELSE b.created_at END, r.created_at,
       r.last_error, r.batch_id
  FROM outbox.retries r LEFT JOIN outbox.batches b ON b.id = r.batch_id AND b.state = 'leased'
UNION ALL
SELECT d.id, d.topic, d.idempotency_key, d.payload, d.ordering_key, d.ordering_seq,
       'dead', d.attempts, d.fence, NULL, NULL, d.died_at, d.created_at, d.last_error, NULL
  FROM outbox.dead d;
