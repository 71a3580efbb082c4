-- outbox.slot_find (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 019.
--
-- The id of the message stored under (topic, idempotency_key) in the first
-- of slots that holds one; NULL when none does. Each slot is read through
-- its own table (outbox.events_N) with its own plan, so a call locks only
-- the slots it reads: a query over outbox.events from a plpgsql function
-- runs a generic plan, and PostgreSQL 15 locks every partition of a
-- generic plan (and each one's indexes) before it prunes, 40 relations
-- for one key. The body is written out here once, as a template, and made
-- for each slot of outbox.event_slots() when the file is applied
-- (outbox.slot_branches).
DO $gen$
BEGIN
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION outbox.slot_find(slots smallint[], topic text, idempotency_key text)
    RETURNS bigint
    LANGUAGE plpgsql STABLE
AS $body$
#variable_conflict use_variable
DECLARE
    s     smallint;
    found bigint;
BEGIN
    FOREACH s IN ARRAY slots LOOP
        CASE s %s
        END CASE;
        IF found IS NOT NULL THEN
            RETURN found;
        END IF;
    END LOOP;
    RETURN NULL;
END
$body$$f$, outbox.slot_branches($b$
            WHEN %1$s THEN
                SELECT e.id INTO found FROM outbox.events_%1$s e
                 WHERE e.topic = slot_find.topic
                   AND e.idempotency_key = slot_find.idempotency_key;$b$));
END
$gen$;
