-- 022_headers_not_before.sql: enqueue's final signature stores two more
-- things about a message, both optional.
--
-- headers: a JSON object of string values (trace context such as
-- traceparent, a tenant, a content type), kept with the message; NULL: none.
-- not_before: the message is not claimed before this time. A cut that
-- reaches it earlier parks it in outbox.retries, due then (as a key's
-- later messages are parked behind it); NULL: at once. Its age for
-- delivery (the relay's --max-age, the consumer's --dedup-retention)
-- counts from then. Both are copied with the message into outbox.retries
-- and outbox.dead.
--
-- The columns are nullable without a default: adding them rewrites no
-- table (the slot tables get them through outbox.events). The new
-- outbox.enqueue (its file) is another overload: the old one goes here, or
-- a fresh database, whose migrations made it in this same run, would keep
-- both (migrate drops only what an earlier run wrote). A caller's code
-- does not change: the new arguments are named and optional.
ALTER TABLE outbox.events ADD COLUMN headers jsonb, ADD COLUMN not_before timestamptz;
ALTER TABLE outbox.retries ADD COLUMN headers jsonb, ADD COLUMN not_before timestamptz;
ALTER TABLE outbox.dead ADD COLUMN headers jsonb, ADD COLUMN not_before timestamptz;
DROP FUNCTION outbox.enqueue(text, text, jsonb, text);
