-- outbox.events_notify (trigger), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012.
--
-- Relays LISTEN on outbox_enqueued; the trigger of 006/008/010 moves over.
CREATE OR REPLACE TRIGGER events_notify AFTER INSERT ON outbox.events
    FOR EACH STATEMENT WHEN (outbox.relays_waiting())
    EXECUTE FUNCTION outbox.notify_enqueued();
