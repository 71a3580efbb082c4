-- inbox.apply_notifications (function), its current definition: outboxctl
-- migrate re-applies this file after the numbered migrations
-- (sql/README.md). Part of the inbox's SQL contract (docs/inbox-sql.md).
-- History: consumer/inbox.c's set statement (sql_set_dedup,
-- sql_set_nodedup) until issue 31, unchanged but for the calls.
--
-- The set path of the built-in `record` handler: a whole frame of one
-- source deduplicated, and its effect rows written, in one statement.
-- The arrays hold one element per message, in the frame's order
-- (ordering_keys and ordering_seqs NULL for an unordered one). Returns one
-- row per message, in that order:
--   verdict 'applied'    new: its dedup record and its effect row written;
--           'duplicate'  applied before with the same payload: outcome,
--                        detail and processed_at are the first time's;
--           'mismatch'   applied before with another payload;
--           'undecided'  not decidable in one statement (its (topic, key)
--                        twice in the frame, or committed by another
--                        transaction after this statement's snapshot): the
--                        caller rolls back and applies the frame message
--                        by message (inbox.dedup_lookup, inbox.dedup_insert).
-- dedup false is the BROKEN --no-dedup mode: effect rows only, every
-- message 'applied'. Take the source gate first (inbox.take_source_gate).
--
-- Rows that already exist are not locked: a committed record never
-- changes. A record of the other kind (inbox.dedup_record, the legacy
-- identity) keeps a message from being inserted and answers it. Whether a
-- message was inserted now is asked of d as an IN (a hashed subplan), not
-- by joining d: the generic plan expects 10 rows of the unnest and 1 of d,
-- and joined them by a nested loop that compared every pair (249,500
-- comparisons for a 500-message frame, 33 ms of its 45). The record that
-- answers is looked up by a LATERAL probe, which can only run per message
-- (by the primary key), never as a hash of the whole table as an
-- anti-join may.
--
-- Plans: kept per session (PL/pgSQL), always generic (plan_cache_mode: a
-- custom plan, the arrays' lengths known, is priced below the generic one,
-- so the plan cache made one on every call; the generic plan probes the
-- same primary key), and made with enable_seqscan off: the plan is often
-- made while inbox.processed is empty (a fresh inbox, or one analysed when
-- it was), where a scan is the cheapest lookup by key, and a kept plan that
-- scans read the whole table for every message (a 50,000-message drain
-- took 5-9 s instead of 1.2; test_scans).
CREATE OR REPLACE FUNCTION inbox.apply_notifications(source text, idempotency_keys text[],
                                                     topics text[], payloads bytea[],
                                                     message_ids bigint[], fences bigint[],
                                                     created_ats timestamptz[],
                                                     ordering_keys text[],
                                                     ordering_seqs bigint[], dedup boolean)
    RETURNS TABLE (verdict text, outcome text, detail text, processed_at timestamptz)
    LANGUAGE plpgsql
    SET enable_seqscan = off
    SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
BEGIN
    IF NOT apply_notifications.dedup THEN
        RETURN QUERY
        WITH e AS (
            INSERT INTO inbox.notifications (idempotency_key, topic, payload, message_id,
                                             ordering_key, ordering_seq, source)
            SELECT u.k, u.t, convert_from(u.p, 'UTF8')::jsonb, u.i, u.o, u.s,
                   apply_notifications.source
              FROM unnest(idempotency_keys, topics, payloads, message_ids, ordering_keys,
                          ordering_seqs) AS u(k, t, p, i, o, s)
            RETURNING 1)
        SELECT 'applied'::text, NULL::text, NULL::text, NULL::timestamptz FROM e;
        RETURN;
    END IF;
    RETURN QUERY
    WITH m AS MATERIALIZED (
        SELECT u.n, u.k AS key, u.t AS topic, u.p, u.i, u.f, u.c, u.o, u.s,
               inbox.fingerprint(u.t, u.p) AS fp, apply_notifications.source AS src
          FROM unnest(idempotency_keys, topics, payloads, message_ids, fences, created_ats,
                      ordering_keys, ordering_seqs) WITH ORDINALITY AS u(k, t, p, i, f, c, o, s, n)),
    fst AS (SELECT DISTINCT ON (m.key, m.topic) m.key, m.topic, m.n FROM m
             ORDER BY m.key, m.topic, m.n),
    d AS (
        INSERT INTO inbox.processed AS r (idempotency_key, topic, message_id, fence, fingerprint,
                                          created_at, source)
        SELECT m.key, m.topic, m.i, m.f, m.fp, m.c, m.src
          FROM m JOIN fst USING (key, topic, n)
          LEFT JOIN LATERAL (SELECT true AS hit FROM inbox.dedup_record(m.src, m.topic, m.key)
                             LIMIT 1) other ON true
         WHERE other.hit IS NULL
         ORDER BY m.key, m.topic
        ON CONFLICT (idempotency_key, topic, source) DO NOTHING
        RETURNING r.idempotency_key, r.topic),
    e AS (
        INSERT INTO inbox.notifications (idempotency_key, topic, payload, message_id,
                                         ordering_key, ordering_seq, source)
        SELECT m.key, m.topic, convert_from(m.p, 'UTF8')::jsonb, m.i, m.o, m.s, m.src
          FROM m JOIN fst USING (key, topic, n)
          JOIN d ON d.idempotency_key = m.key AND d.topic = m.topic
        RETURNING 1)
    SELECT CASE WHEN di.ins AND fst.n = m.n THEN 'applied'
                WHEN di.ins OR x.idempotency_key IS NULL THEN 'undecided'
                WHEN x.fingerprint IS NULL OR x.fingerprint = m.fp THEN 'duplicate'
                ELSE 'mismatch' END,
           x.outcome, coalesce(x.detail, ''), x.processed_at
      FROM m JOIN fst USING (key, topic)
     CROSS JOIN LATERAL (SELECT (m.key, m.topic) IN (SELECT d.idempotency_key, d.topic FROM d)
                         AS ins) di
      LEFT JOIN LATERAL (SELECT * FROM inbox.dedup_record(m.src, m.topic, m.key)
                          WHERE NOT di.ins) x ON true
     ORDER BY m.n;
END
$$;
