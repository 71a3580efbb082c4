-- outbox.wake_one (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 001, 006, 008, 013 (as outbox.notify_enqueued), 019.
--
-- 013_wake_one.sql: an enqueue wakes one waiting relay worker, not all of
-- them; the claim's search for a stream keeps one plan; the oldest xmin
-- holder is never an autovacuum worker.
--
-- Measured at a steady 200 enqueues/s (2 workers, pg_stat_statements with
-- track = all): 3.0 to 3.2 claims per message, of which all but one found
-- nothing. 008 took every waiting worker's announcement and notified them
-- all; each woken worker claimed, one got the message, and every other
-- claim was empty, then announced and claimed once more before waiting.
-- Now the trigger takes the announcement of one worker, the one that
-- announced last (a worker that died stops announcing, so its row is the
-- oldest and is the last one taken), and names it in the payload; the
-- others keep theirs and stay asleep (relay/worker.c ignores a notification
-- for another worker). The announce-claim-wait protocol of 006 holds per
-- worker: a worker whose announcement an enqueue took is woken after that
-- enqueue committed, and its claim sees it. An empty payload still wakes
-- every worker (outboxctl dead requeue); a relay of before 013 wakes on any
-- notification, as it did. Under load the workers do not wait and nothing
-- notifies, as before.
--
-- Since 019 outbox.enqueue writes into the slots' tables directly and calls
-- this itself; the trigger outbox.notify_enqueued (an insert through
-- outbox.events) calls it too.
CREATE OR REPLACE FUNCTION outbox.wake_one() RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE
    woken text;
BEGIN
    -- SKIP LOCKED: concurrent enqueues never wait on each other here; each
    -- takes another waiter, or none.
    DELETE FROM outbox.relay_waiters w
     WHERE w.owner = (SELECT x.owner FROM outbox.relay_waiters x
                       WHERE x.until > now()
                       ORDER BY x.until DESC LIMIT 1 FOR UPDATE SKIP LOCKED)
    RETURNING w.owner INTO woken;
    IF woken IS NOT NULL THEN
        PERFORM pg_notify('outbox_enqueued', woken);
    END IF;
END
$$;
