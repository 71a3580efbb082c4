-- outbox.lock_holders (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012.
--
-- ": held by pid P (application, state, open Ns), ..." for the sessions
-- holding a lock on table rel, oldest transaction first ('' when none).
CREATE OR REPLACE FUNCTION outbox.lock_holders(rel text) RETURNS text
    LANGUAGE sql STABLE AS $$
    SELECT COALESCE(': held by ' || string_agg(format('pid %s (%s, %s, open %ss)', a.pid,
                        COALESCE(NULLIF(a.application_name, ''), '?'), a.state,
                        round(extract(epoch FROM now() - a.xact_start)::numeric, 1)),
                    ', ' ORDER BY a.xact_start), '')
      FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
     WHERE l.relation = rel::regclass AND l.granted AND l.pid <> pg_backend_pid()
$$;
