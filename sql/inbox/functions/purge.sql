-- inbox.purge (function), its current definition: outboxctl migrate
-- re-applies this file after the numbered migrations (sql/README.md).
-- Part of the inbox's SQL contract (docs/inbox-sql.md). History:
-- consumer/inbox_purge.c's DELETE until issue 31.
--
-- Retention: deletes at most max_rows dedup records whose message is older
-- than retention_ms + margin_ms by this database's clock (created_at) and
-- which were applied more than retention_ms ago (processed_at; a record
-- without created_at, from before inbox 002, goes by that alone), oldest
-- first, skipping rows another transaction holds. Returns how many it
-- deleted; call it again while that is max_rows, each call in its own
-- short transaction. Safe only with a retention check before every apply
-- that refuses a message older than retention_ms by the same clock
-- (docs/consumer.md, "Retention"): margin_ms covers the time between that
-- check and the record's insert (the consumer passes 1 h).
--
-- = ANY(ARRAY(...)), not IN (...): planned for LIMIT rows, the IN form
-- hash-joined a scan of the whole table for every batch. By the row's
-- ctid, not its key: a record is (source, topic, key), and the same key of
-- another topic may be younger. The rows are locked (FOR UPDATE) by the
-- subquery, so none moves before the DELETE reads it; a TID scan fetches
-- exactly them. A custom plan per call (its values known), as the
-- one-shot statement this was.
--
-- Bad arguments are refused (22023) before anything is deleted: a
-- retention under a minute (the consumer's --dedup-retention minimum; a
-- negative one would purge every record), a negative margin, a max_rows
-- below 1, or any of them NULL.
CREATE OR REPLACE FUNCTION inbox.purge(retention_ms bigint, margin_ms bigint, max_rows integer)
    RETURNS bigint
    LANGUAGE plpgsql
    SET plan_cache_mode = force_custom_plan AS $$
DECLARE
    n bigint;
BEGIN
    IF retention_ms IS NULL OR retention_ms < 60000 THEN
        RAISE EXCEPTION 'inbox.purge: retention_ms must be at least 60000 (one minute), got %',
            coalesce(retention_ms::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF margin_ms IS NULL OR margin_ms < 0 THEN
        RAISE EXCEPTION 'inbox.purge: margin_ms must be 0 or more, got %',
            coalesce(margin_ms::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_rows IS NULL OR max_rows < 1 THEN
        RAISE EXCEPTION 'inbox.purge: max_rows must be 1 or more, got %',
            coalesce(max_rows::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    DELETE FROM inbox.processed WHERE ctid = ANY(ARRAY(
        SELECT p.ctid FROM inbox.processed p
         WHERE p.processed_at < now() - retention_ms * interval '1 millisecond'
           AND (p.created_at IS NULL
                OR p.created_at < now() - (retention_ms + margin_ms) * interval '1 millisecond')
         ORDER BY p.processed_at LIMIT max_rows FOR UPDATE SKIP LOCKED));
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;
