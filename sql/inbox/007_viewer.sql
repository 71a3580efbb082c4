-- 007_viewer.sql: the web view's read-only group role outbox_viewer
-- (sql/outbox/017_viewer.sql says what it is; created here too when the
-- inbox lives on a server of its own), and its protocol in the inbox,
-- viewer 1: it reads inbox.processed (the dedup records). Its privileges
-- are granted by functions/grants.sql.
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

INSERT INTO inbox.protocols VALUES ('viewer', 1, 1);
