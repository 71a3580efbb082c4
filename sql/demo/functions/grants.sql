-- grants.sql: who may use what of the demo business (schema app, installed
-- by `outboxctl migrate --demo` only). Not an object: applied by migrate
-- after sql/outbox/functions/grants.sql on every run that applies the demo's
-- files, and starting from nothing, as that file does (docs/security.md).
--
-- outbox_producer (sql/outbox/014_roles.sql) writes the bug reports
-- (producer/enqueue.c, producer/api.c) and runs POST /v1/reports' key
-- claims (common/keyclaim.c) and their retention. An application grants
-- its own tables to its producer role the same way.
-- Only the demo's own objects are named: a schema app of the user's, with
-- tables of its own, keeps its privileges.
REVOKE ALL ON SCHEMA app FROM outbox_producer, outbox_relay, outbox_admin, outbox_viewer;
REVOKE ALL ON app.bug_reports, app.idempotency_keys
    FROM PUBLIC, outbox_producer, outbox_relay, outbox_admin, outbox_viewer;

GRANT USAGE ON SCHEMA app TO outbox_producer;
GRANT SELECT, INSERT ON app.bug_reports TO outbox_producer;
GRANT SELECT, INSERT, UPDATE, DELETE ON app.idempotency_keys TO outbox_producer;
