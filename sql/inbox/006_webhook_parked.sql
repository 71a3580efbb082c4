-- 006_webhook_parked.sql: the webhook handler's at-most-once mode
-- (--webhook-at-most-once, docs/guarantees.md). A call whose outcome is
-- unknown (timed out, or the connection lost, after the request may have
-- reached the downstream) is PARKED: its claim in inbox.webhook_calls gets
-- the state 'unknown' and is never sent again by a consumer, until an
-- operator resolves it (outboxctl webhook resolve --as sent|not-sent).
--
-- topic: the message's topic, written when the call is parked (the claim
-- is keyed by the key; the operator names both). parked_at, parked_error:
-- when it was parked and why (the consumer's detail). A parked row's
-- lease_until is 'infinity': the key-claim GC (--dedup-retention) deletes
-- only done rows and expired leases, so a parked call waits for its
-- operator however old it is.
--
-- Locks: the constraint swap takes ACCESS EXCLUSIVE on the table for the
-- time it takes to check the new constraint over the existing rows (a
-- scan); the columns are added without a rewrite (nullable, no default).
-- Consumers of protocol 2 work with or without it. One with
-- --webhook-at-most-once on a schema without it cannot park: it answers
-- retry (consumer.webhook.park_failed) and its next attempt of the key
-- tries to park again; it never sends the key again.
ALTER TABLE inbox.webhook_calls DROP CONSTRAINT webhook_calls_state_check;
ALTER TABLE inbox.webhook_calls ADD CONSTRAINT webhook_calls_state_check
    CHECK (state IN ('started', 'done', 'unknown'));
ALTER TABLE inbox.webhook_calls ADD COLUMN topic text;
ALTER TABLE inbox.webhook_calls ADD COLUMN parked_at timestamptz;
ALTER TABLE inbox.webhook_calls ADD COLUMN parked_error text;
COMMENT ON COLUMN inbox.webhook_calls.state IS
    'started (claimed, under a lease), done (the downstream answered; final), or unknown'
    ' (parked by the at-most-once mode: the outcome is not known; an operator resolves it)';
-- outboxctl webhook list: the parked calls, oldest first, without a scan
-- of the finished ones.
CREATE INDEX webhook_calls_parked ON inbox.webhook_calls (parked_at)
    WHERE state = 'unknown';
