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
--                        nothing, refuse it (idempotency key reused);
--           'stale'      fence given, and the record was written under a
--                        higher fence: a later holder of the message's
--                        lease applied it, and this call comes from one
--                        that lost it (a stalled webhook call woken after
--                        its lease ran out): apply nothing and refuse it,
--                        so that its sender learns it was fenced out
--                        (issue 33; the fence is the batch's, from one
--                        sequence, so a later holder's is always higher).
-- outcome, detail ('' when none) and processed_at are NULL for 'new'.
-- Without a fence (NULL: the consumer's own per-message path) no call is
-- 'stale'. A record of before fences (fence 0) never makes one stale.
-- Reads only (the record of inbox.dedup_record), locks nothing: a record
-- another transaction is writing is not seen; inbox.dedup_insert then
-- waits for that transaction. Plans are kept per session (PL/pgSQL);
-- enable_seqscan off while they are made, so that one made on an empty
-- table still probes the primary key when the table has grown.
CREATE OR REPLACE FUNCTION inbox.dedup_lookup(source text, topic text, idempotency_key text,
                                              payload bytea, fence bigint DEFAULT NULL)
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
        verdict := CASE WHEN r.fingerprint IS NOT NULL
                          AND r.fingerprint <> inbox.fingerprint(dedup_lookup.topic, payload)
                        THEN 'mismatch'
                        WHEN dedup_lookup.fence < r.fence THEN 'stale'
                        ELSE 'duplicate' END;
        outcome := r.outcome;
        detail := coalesce(r.detail, '');
        processed_at := r.processed_at;
    END IF;
    RETURN NEXT;
END
$$;
