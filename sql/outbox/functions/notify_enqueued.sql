-- outbox.notify_enqueued (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 001, 006, 008, 013, 019.
--
-- The wakeup trigger's function (events_notify.sql): an insert through
-- outbox.events wakes one waiting relay worker (outbox.wake_one, which
-- holds the rule and its history). outbox.enqueue inserts into the slots'
-- tables directly (019) and calls outbox.wake_one itself.
CREATE OR REPLACE FUNCTION outbox.notify_enqueued() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM outbox.wake_one();
    RETURN NULL;
END
$$;
