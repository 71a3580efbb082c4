-- outbox.slot_branches (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: (files only).
--
-- The branches of a CASE over the slots: template (a format() string whose
-- %1$s is the slot's number, the text of one `WHEN N THEN ...` branch)
-- made for each slot of outbox.event_slots(), in order. What the files of
-- the per-slot functions (outbox.slot_find, slot_insert, slot_streams)
-- build their one static statement per slot with, when they are applied;
-- nothing calls it at run time.
CREATE OR REPLACE FUNCTION outbox.slot_branches(template text) RETURNS text
    LANGUAGE sql STABLE
    AS $$SELECT string_agg(format(template, s), '' ORDER BY s)
            FROM generate_series(0, outbox.event_slots() - 1) s$$;
