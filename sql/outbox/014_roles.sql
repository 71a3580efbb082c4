-- 014_roles.sql: the group roles of the programs that use the outbox
-- database (docs/security.md, "Database roles"): outbox_producer,
-- outbox_relay and outbox_admin, NOLOGIN. A login role of a program is
-- made a member of its group (GRANT outbox_relay TO relay_1); what each
-- group may do is granted by functions/grants.sql, which migrate applies
-- after every run that changed something, so a table or function added
-- later gets its grants there, not here.
--
-- Roles belong to the server (the cluster), not to one database: a second
-- database migrated on the same server finds them and creates nothing, and
-- one created meanwhile by a concurrent migration of another database is
-- taken as found. Creating a role needs CREATEROLE: a database owner
-- without it has them created first (the same names, NOLOGIN), and this
-- migration then only finds them.
DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['outbox_producer', 'outbox_relay', 'outbox_admin'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles x WHERE x.rolname = r) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', r);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL; -- another database's migration created it first
            END;
        END IF;
    END LOOP;
END
$$;

-- Until issue 33 this also revoked CREATE on schema public from PUBLIC, a
-- change to the user's database outside the outbox's schemas: now only
-- `outboxctl migrate --harden-public` does that (common/migrate.c).
