-- grants.sql: who may use what in the inbox database. Not an object: the
-- privileges of the group role of 004_roles.sql (docs/security.md,
-- "Database roles"), applied by outboxctl migrate after the other files of
-- this set and the drop of what no file defines (sql/README.md), on every
-- run that applies the files. It starts from nothing: a privilege is added
-- or removed here, nowhere else.
--
-- PUBLIC has nothing here. outbox_consumer calls the inbox's functions
-- (docs/inbox-sql.md: the dedup record and the built-in effect, the source
-- gate, the purge, the clock), which are not SECURITY DEFINER: it needs
-- the table privileges they use too: the dedup records (insert, delete),
-- the built-in effect (insert), the source gate's lock (UPDATE is what
-- LOCK TABLE needs; the table never holds a row: 009). It also writes the
-- webhook handler's key claims (common/keyclaim.c) and deletes expired
-- ones; nothing outside schema inbox.
-- outbox_viewer (outboxctl web, docs/web.md) reads the dedup records and
-- writes nothing.

REVOKE ALL ON SCHEMA inbox FROM PUBLIC, outbox_consumer, outbox_viewer;
REVOKE ALL ON ALL TABLES IN SCHEMA inbox FROM PUBLIC, outbox_consumer, outbox_viewer;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA inbox FROM PUBLIC, outbox_consumer, outbox_viewer;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA inbox FROM PUBLIC, outbox_consumer, outbox_viewer;

GRANT USAGE ON SCHEMA inbox TO outbox_consumer;
GRANT EXECUTE ON FUNCTION inbox.check_protocol, inbox.clock_us, inbox.fingerprint,
    inbox.dedup_record, inbox.take_source_gate, inbox.dedup_lookup, inbox.dedup_insert,
    inbox.add_notification, inbox.apply_notifications, inbox.purge TO outbox_consumer;
GRANT SELECT ON inbox.protocols TO outbox_consumer;
GRANT SELECT, INSERT, UPDATE, DELETE ON inbox.processed, inbox.webhook_calls TO outbox_consumer;
GRANT SELECT, INSERT ON inbox.notifications TO outbox_consumer;
GRANT UPDATE ON inbox.source_gate TO outbox_consumer;

GRANT USAGE ON SCHEMA inbox TO outbox_viewer;
GRANT EXECUTE ON FUNCTION inbox.check_protocol TO outbox_viewer;
GRANT SELECT ON inbox.protocols, inbox.processed TO outbox_viewer;
