-- 008_dedup_source.sql: the dedup record's identity is (source, topic,
-- idempotency_key). source is the producer database a message came from,
-- named by its relay in every request frame (wire version 3, relay
-- --source; docs/protocol.md). Until now two producer databases that both
-- enqueued 'order-42' on one topic collided in one consumer: the second was
-- answered duplicate (same payload: never applied) or rejected (another
-- payload: dead-lettered). Consumer protocol 3 looks records up, and
-- inserts them, by (source, topic, key).
--
-- Rows already there get source '' (the column's default, stored in the
-- catalog: no rewrite), and so does every version 1 or 2 request (an old
-- relay): a redelivery of an old message by an old relay finds its record
-- under the same ('', topic, key). A new relay names a source, so stop the
-- old relays cleanly (SIGTERM; they record every outcome before they exit)
-- before the new ones start: a message whose outcome an old relay never
-- recorded is sent again under the new source and applied again.
-- inbox.notifications (the record effect) gets the column too.
--
-- The new primary key is (idempotency_key, topic, source): with the key
-- first an operator's lookup by the key alone is an index probe as before.
-- What it locks, for how long, and how to build the index CONCURRENTLY
-- beforehand: exactly as 005 (read it); here the index to build by hand,
-- outside any transaction, while consumers keep running, is
--
--   ALTER TABLE inbox.processed ADD COLUMN IF NOT EXISTS source text NOT NULL DEFAULT '';
--   CREATE UNIQUE INDEX CONCURRENTLY processed_key_topic_source
--       ON inbox.processed (idempotency_key, topic, source);
--
-- (the ALTER is instant: a catalog default; protocol 2 consumers ignore the
-- column). outboxctl migrate then finds that index (exactly that
-- definition, valid) and makes it the primary key without a rebuild; an
-- invalid or different one is dropped and the key built in place.
--
-- Upgrade order: consumers (this migration and the new build) first, then
-- relays. A consumer of protocol 2 is refused at start (check_protocol);
-- one still running from before names ON CONFLICT (idempotency_key, topic),
-- which no longer exists: it answers every message retry and applies
-- nothing until it is restarted on the new build.
ALTER TABLE inbox.processed ADD COLUMN IF NOT EXISTS source text NOT NULL DEFAULT '';
ALTER TABLE inbox.notifications ADD COLUMN IF NOT EXISTS source text NOT NULL DEFAULT '';
COMMENT ON COLUMN inbox.processed.source IS
    'the producer database the message came from (the relay''s --source); '''' = a wire'
    ' version 1/2 request, or a record from before 008';
DO $$
DECLARE
    prebuilt regclass := to_regclass('inbox.processed_key_topic_source');
BEGIN
    IF prebuilt IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_index i
         WHERE i.indexrelid = prebuilt AND i.indrelid = 'inbox.processed'::regclass
           AND i.indisvalid AND i.indisready
           AND regexp_replace(pg_catalog.pg_get_indexdef(i.indexrelid),
                   ' ON (inbox\.)?processed ', ' ON processed ') =
               'CREATE UNIQUE INDEX processed_key_topic_source ON processed'
               ' USING btree (idempotency_key, topic, source)') THEN
        DROP INDEX inbox.processed_key_topic_source; -- not the one we want, or invalid
        prebuilt := NULL;
    END IF;
    ALTER TABLE inbox.processed DROP CONSTRAINT processed_pkey;
    IF prebuilt IS NULL THEN
        ALTER TABLE inbox.processed
            ADD CONSTRAINT processed_pkey PRIMARY KEY (idempotency_key, topic, source);
    ELSE
        ALTER TABLE inbox.processed
            ADD CONSTRAINT processed_pkey PRIMARY KEY USING INDEX processed_key_topic_source;
    END IF;
END
$$;

-- consumer 3: the dedup record's identity is (source, topic, key).
UPDATE inbox.protocols SET min_version = 3, max_version = 3 WHERE component = 'consumer';
