-- inbox.dedup_insert (function), its current definition: outboxctl migrate
-- re-applies this file after the numbered migrations (sql/README.md).
-- Part of the inbox's SQL contract (docs/inbox-sql.md). History: the
-- insert half of consumer/inbox.c's dedup upsert, and its later UPDATE of
-- the detail, until issue 31.
--
-- After a message's effect, in the same transaction (and savepoint): its
-- dedup record, written once, with the effect's detail (NULL or '' for
-- none). Call it only after inbox.dedup_lookup said 'new' in this
-- transaction, under the source gate. created_at is the message's enqueue
-- time as its relay sent it (the retention counts from it).
-- When another transaction is writing the same (source, topic, key), waits
-- for it (at most lock_timeout, then lock_not_available, 55P03: answer
-- retry); when that one committed, raises unique_violation (23505): roll
-- back this message's effect and ask inbox.dedup_lookup again for the
-- answer (a duplicate, or a mismatch).
CREATE OR REPLACE FUNCTION inbox.dedup_insert(source text, topic text, idempotency_key text,
                                              payload bytea, message_id bigint, fence bigint,
                                              created_at timestamptz, detail text)
    RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO inbox.processed (idempotency_key, topic, source, message_id, fence, fingerprint,
                                 created_at, detail)
    VALUES (dedup_insert.idempotency_key, dedup_insert.topic, dedup_insert.source,
            dedup_insert.message_id, dedup_insert.fence,
            inbox.fingerprint(dedup_insert.topic, dedup_insert.payload),
            dedup_insert.created_at, NULLIF(dedup_insert.detail, ''));
END
$$;
