-- outbox.oldest_xmin_holder (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012, 013.
--
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
