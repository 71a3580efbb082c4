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
CREATE OR REPLACE FUNCTION outbox.notify_enqueued() RETURNS trigger
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
    RETURN NULL;
END
$$;

-- The loop of outbox.lock_next_stream was planned anew on every call (6,958
-- plans for 6,956 calls, 0.12 ms each, eight times its run time): a custom
-- plan, with the claim's topics and ordering flag as constants, is priced
-- below the generic one on a table of a few rows, so the plan cache never
-- keeps one. The generic plan reads the same few rows.
ALTER FUNCTION outbox.lock_next_stream(text[], text[], boolean, boolean, text[])
    SET plan_cache_mode = force_generic_plan;

-- The oldest transaction holding back vacuum: not an autovacuum worker. A
-- vacuum's own snapshot holds back no other vacuum (PostgreSQL leaves it
-- out of the horizon), and naming one made housekeeping report "oldest
-- transaction: pid N (, active) open 0.0s" whenever autovacuum was busy
-- on the database (test_ctl's purge check failed so on a busy machine).
CREATE OR REPLACE FUNCTION outbox.oldest_xmin_holder(OUT pid integer, OUT application_name text,
                                                     OUT state text,
                                                     OUT xact_age_s double precision,
                                                     OUT has_xid boolean)
    LANGUAGE sql STABLE AS $$
    SELECT a.pid, a.application_name, a.state,
           extract(epoch FROM now() - a.xact_start)::float8, a.backend_xid IS NOT NULL
      FROM pg_stat_activity a
     WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
       AND a.backend_type <> 'autovacuum worker'
       AND (a.backend_xid IS NOT NULL OR a.backend_xmin IS NOT NULL)
     ORDER BY a.xact_start NULLS LAST LIMIT 1
$$;
