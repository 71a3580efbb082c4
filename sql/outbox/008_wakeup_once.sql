-- 008_wakeup_once.sql: one notification per waiting relay, not one per
-- enqueue.
--
-- With 006, every enqueue committed while a relay waited sent a NOTIFY, and
-- PostgreSQL serialises the commits of notifying transactions: at a steady
-- 1,000 enqueues/s the relays are idle between messages, so nearly every
-- enqueue notified and producers were capped at a few hundred commits/s.
-- Now the first enqueue that finds waiting relays takes their announcements
-- (SKIP LOCKED: concurrent enqueues never wait on each other here) and
-- notifies once; the others commit without notifying. A woken worker that
-- runs out of work announces itself again, then claims once more before it
-- waits (relay/worker.c), so nothing committed before that claim is missed;
-- what commits in between is picked up by the poll.
CREATE OR REPLACE FUNCTION outbox.notify_enqueued() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    taken integer;
BEGIN
    WITH t AS (
        DELETE FROM outbox.relay_waiters w
         WHERE w.owner IN (SELECT x.owner FROM outbox.relay_waiters x
                            WHERE x.until > now() FOR UPDATE SKIP LOCKED)
        RETURNING 1)
    SELECT count(*) INTO taken FROM t;
    IF taken > 0 THEN
        PERFORM pg_notify('outbox_enqueued', '');
    END IF;
    RETURN NULL;
END
$$;
