-- 017_viewer.sql: the group role of the web view (outboxctl web,
-- docs/web.md), outbox_viewer, NOLOGIN: it reads what the view shows and
-- writes nothing (docs/security.md, "Database roles"). A login role for the
-- view is made a member of it (GRANT outbox_viewer TO web_1); its
-- privileges are granted by functions/grants.sql. And the view's protocol,
-- viewer 1: what it reads (outbox.topic_stats, outbox.messages,
-- outbox.message_state, outbox.dead, outbox.ordering_blocks).
--
-- Roles belong to the server, not to one database: a second database (or
-- the inbox set, sql/inbox/007_viewer.sql) finds the role and creates
-- nothing; one created meanwhile by a concurrent migration elsewhere is
-- taken as found. Creating it needs CREATEROLE: a database owner without
-- it has it created first, and this migration then only finds it.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles x WHERE x.rolname = 'outbox_viewer') THEN
        BEGIN
            CREATE ROLE outbox_viewer NOLOGIN;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL; -- another database's migration created it first
        END;
    END IF;
END
$$;

INSERT INTO outbox.protocols VALUES ('viewer', 1, 1);
