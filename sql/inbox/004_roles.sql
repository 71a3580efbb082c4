-- 004_roles.sql: the group role of the consumer, outbox_consumer, NOLOGIN
-- (docs/security.md, "Database roles"). A consumer's login role is made a
-- member of it (GRANT outbox_consumer TO consumer_1); what it may do is
-- granted by functions/grants.sql, which migrate applies after every run
-- that changed something.
--
-- Roles belong to the server, not to one database: a second database (or
-- the outbox and inbox sets in one) finds the role and creates nothing; one
-- created meanwhile by a concurrent migration elsewhere is taken as found.
-- Creating it needs CREATEROLE: a database owner without it has it created
-- first, and this migration then only finds it.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles x WHERE x.rolname = 'outbox_consumer') THEN
        BEGIN
            CREATE ROLE outbox_consumer NOLOGIN;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL; -- another database's migration created it first
        END;
    END IF;
END
$$;

-- Until issue 33 this also revoked CREATE on schema public from PUBLIC, a
-- change to the user's database outside the outbox's schemas: now only
-- `outboxctl migrate --harden-public` does that (common/migrate.c).
