-- 006_wakeup.sql: notify relays only while one is waiting.
--
-- PostgreSQL serialises the commits of transactions that NOTIFY (a lock
-- held until commit), which defeats group commit: an enqueue that always
-- notifies caps producers at a few hundred commits per second with fsync
-- on. A relay worker that runs out of work announces itself here before it
-- waits; enqueue notifies only while such an announcement is live. Under
-- load the workers never wait, the announcements expire, and enqueues
-- commit without notifying.
--
-- The worker announces, then claims once more, then waits: an enqueue that
-- committed before the claim is claimed; one whose trigger saw the
-- announcement notifies. An enqueue in between is picked up by the poll.
CREATE TABLE outbox.relay_waiters (
    owner text        PRIMARY KEY,   -- host:pid:worker
    until timestamptz NOT NULL       -- the announcement expires then
);

-- Called by a relay worker about to wait up to wait_ms for work.
CREATE FUNCTION outbox.relay_waiting(owner text, wait_ms bigint) RETURNS void
    LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    -- Losing this row in a crash costs one poll interval, not a message.
    SET LOCAL synchronous_commit = off;
    INSERT INTO outbox.relay_waiters AS w (owner, until)
    VALUES (relay_waiting.owner, now() + (2 * wait_ms + 1000) * interval '1 millisecond')
    ON CONFLICT (owner) DO UPDATE SET until = EXCLUDED.until;
    -- Announcements of workers long gone.
    DELETE FROM outbox.relay_waiters w WHERE w.until < now() - interval '1 hour';
END
$$;

CREATE OR REPLACE FUNCTION outbox.notify_enqueued() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM outbox.relay_waiters WHERE until > now()) THEN
        PERFORM pg_notify('outbox_enqueued', '');
    END IF;
    RETURN NULL;
END
$$;
