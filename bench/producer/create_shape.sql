-- create_shape.sql - pgbench script: the SQL writes of one create, without
-- the producer (no HTTP, no JSON parsing, no outbox.enqueue validation): the
-- key claim committed on its own, then the report, its outbox record and
-- the key marked done in one statement. bench/producer/run.sh runs it with
-- the same 16 clients as wrk, so "creates/s over bare SQL creates/s" is a
-- ratio measured in one run on one machine.
\set k random(1, 2000000000)
INSERT INTO app.idempotency_keys (idempotency_key, fingerprint, state, fence, lease_until) SELECT 'shape-' || :client_id || '-' || :k, 'fp', 'started', 1, now() + interval '30 s' WHERE set_config('synchronous_commit', 'off', true) = 'off' ON CONFLICT DO NOTHING;
WITH r AS (INSERT INTO app.bug_reports (title, module, steps, severity, idempotency_key) VALUES ('Crash on save', 'editor', '1. open a file 2. press save', 'high', 'shape-' || :client_id || '-' || :k) RETURNING id), m AS (INSERT INTO outbox.messages (topic, idempotency_key, payload) SELECT 'report.created', 'shape-' || :client_id || '-' || :k, json_build_object('report_id', r.id)::jsonb FROM r ON CONFLICT DO NOTHING RETURNING id) UPDATE app.idempotency_keys SET state = 'done', response_status = 201, response_body = (SELECT id FROM m)::text, completed_at = now() WHERE idempotency_key = 'shape-' || :client_id || '-' || :k;
