-- outbox.relay_waiting (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 006.
--
-- Called by a relay worker about to wait up to wait_ms for work.
CREATE OR REPLACE FUNCTION outbox.relay_waiting(owner text, wait_ms bigint) RETURNS void
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
