-- outbox.slot_insert (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 019, 022.
--
-- Insert a message into slot's table (outbox.events_N) straight, not
-- through outbox.events: one table and its indexes locked, not every
-- slot's (see outbox.slot_find). Returns its id, or NULL when the slot
-- already holds the key (a concurrent enqueue of the same key committed
-- first: ON CONFLICT waited for it). Only outbox.enqueue calls it, holding
-- outbox.events' lock that keeps the current slot from switching. Made
-- per slot from one template when the file is applied (outbox.slot_branches).
DO $gen$
BEGIN
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION outbox.slot_insert(slot smallint, lane smallint, topic text,
                                              idempotency_key text, payload jsonb,
                                              ordering_key text, ordering_seq bigint,
                                              headers jsonb, not_before timestamptz)
    RETURNS bigint
    LANGUAGE plpgsql
AS $body$
#variable_conflict use_column
DECLARE
    new_id bigint;
BEGIN
    CASE slot_insert.slot %s
    END CASE;
    RETURN new_id;
END
$body$$f$, outbox.slot_branches($b$
            WHEN %1$s THEN
                INSERT INTO outbox.events_%1$s AS e (slot, id, txid, lane, topic,
                                                  idempotency_key, payload, ordering_key,
                                                  ordering_seq, headers, not_before)
                VALUES (%1$s, pg_catalog.nextval('outbox.event_ids'), pg_catalog.pg_current_xact_id(),
                        slot_insert.lane,
                        slot_insert.topic, slot_insert.idempotency_key, slot_insert.payload,
                        slot_insert.ordering_key, slot_insert.ordering_seq,
                        slot_insert.headers, slot_insert.not_before)
                ON CONFLICT (topic, idempotency_key, slot) DO NOTHING
                RETURNING e.id INTO new_id;$b$));
END
$gen$;
