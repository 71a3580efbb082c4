-- outbox.message_state (function), its current definition: outboxctl migrate
-- re-applies this file after the numbered migrations (sql/README.md). History: none
-- (it came with the schema files; outboxctl inspect had this CASE in C).
--
-- A message's state, for people (outboxctl inspect): its status when it is
-- not pending; else 'leased' (a relay holds it: a live lease), or
-- 'waiting_retry' (released or answered retry, due later), or 'claimable'
-- (due now: the next claim of its stream may take it, unless its ordering
-- key waits behind another message or its destination's breaker is open).
-- A batch released until later has no owner and a lease_until ahead: it
-- waits, nobody holds it.
CREATE OR REPLACE FUNCTION outbox.message_state(m outbox.messages) RETURNS text
    LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN m.status <> 'pending' THEN m.status
                WHEN m.lease_owner IS NOT NULL AND m.lease_until > now() THEN 'leased'
                WHEN m.available_at > now() THEN 'waiting_retry'
                ELSE 'claimable' END
$$;
