-- inbox.dedup_lookup (function), its current definition: outboxctl migrate
-- re-applies this file after the numbered migrations (sql/README.md).
-- Part of the inbox's SQL contract (docs/inbox-sql.md). History: the
-- lookup half of consumer/inbox.c's dedup upsert until issue 31.
--
-- Before a message's effect: what the inbox knows of it. One row:
--   verdict 'new'        no record answers for it: apply the effect, then
--                        inbox.dedup_insert in the same transaction;
--           'duplicate'  applied before with the same payload (or a record
--                        from before fingerprints): apply nothing, answer
--                        with outcome, detail and processed_at (the first
--                        time's);
--           'mismatch'   the key was applied with another payload: apply
--                        nothing, refuse it (idempotency key reused).
-- outcome, detail ('' when none) and processed_at are NULL for 'new'.
-- Reads only (the record of inbox.dedup_record), locks nothing: a record
-- another transaction is writing is not seen; inbox.dedup_insert then
-- waits for that transaction. Plans are kept per session (PL/pgSQL);
-- enable_seqscan off while they are made, so that one made on an empty
-- table still probes the primary key when the table has grown.
CREATE OR REPLACE FUNCTION inbox.dedup_lookup(source text, topic text, idempotency_key text,
                                              payload bytea)
    RETURNS TABLE (verdict text, outcome text, detail text, processed_at timestamptz)
    LANGUAGE plpgsql STABLE
    SET enable_seqscan = off AS $$
DECLARE
    r inbox.processed;
BEGIN
    SELECT * INTO r FROM inbox.dedup_record(dedup_lookup.source, dedup_lookup.topic,
                                            dedup_lookup.idempotency_key);
    IF NOT FOUND THEN
        verdict := 'new';
    ELSE
        verdict := CASE WHEN r.fingerprint IS NULL
                          OR r.fingerprint = inbox.fingerprint(dedup_lookup.topic, payload)
                        THEN 'duplicate' ELSE 'mismatch' END;
        outcome := r.outcome;
        detail := coalesce(r.detail, '');
        processed_at := r.processed_at;
    END IF;
    RETURN NEXT;
END
$$;
