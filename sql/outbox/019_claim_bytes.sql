-- 019_claim_bytes.sql: relay protocol 4, the claim takes a byte budget.
--
-- outbox.claim(..., max_bytes) ends a batch before the message whose
-- payload would take the batch's payloads past max_bytes (a message larger
-- than the budget goes alone; outbox.within_bytes), so that a relay's
-- memory is bounded by its --batch-bytes, not by --batch x the largest
-- payload. Relays of protocol 2 and 3 keep working: their claim call takes
-- the default (no budget), as before.
UPDATE outbox.protocols SET max_version = 4 WHERE component = 'relay';
