-- 005_dedup_topic_key.sql: the dedup record's identity is (topic,
-- idempotency_key), as outbox.enqueue's uniqueness is (docs/consumer.md,
-- "The idempotency contract"). Until now inbox.processed was keyed by the
-- key alone: enqueue('topic.a', 'k') then enqueue('topic.b', 'k') made two
-- messages, and the consumer answered the second "idempotency key reused
-- with a different payload" (the fingerprint covers the topic), so the
-- relay dead-lettered it. Consumer protocol 2 looks records up, and
-- inserts them, by (topic, key).
--
-- Rows already there keep their topic (NOT NULL since 001) and go on
-- deduplicating: a key was unique on its own, so it is unique with its
-- topic too, and a redelivery of an old message finds its record under the
-- same (topic, key). The fingerprint is unchanged (sha256 over topic, 0x00,
-- payload), so old records still match their own redeliveries.
--
-- The new primary key is (idempotency_key, topic): the pair is the
-- identity, in either column order (ON CONFLICT (topic, idempotency_key)
-- infers it), and with the key first an operator's lookup by the key
-- alone is an index probe as before. inbox.notifications keeps its index
-- on the key alone (notifications_key): a lookup by (topic, key) probes it
-- and filters the topic, and it has no unique constraint on purpose (001).
--
-- What it locks, and for how long: ALTER TABLE takes ACCESS EXCLUSIVE on
-- inbox.processed, held until outboxctl migrate commits (every migration
-- and file of a run is one transaction, under an advisory lock: common/
-- migrate.c). While it is held every consumer's apply and the purge wait
-- on the table: a batch waits at most --lock-timeout (1 s), then is
-- answered retry; nothing is applied without its record. Building the new
-- unique index reads the whole table and sorts it (maintenance_work_mem):
-- 1,000,000 records (255 MB) took 1.3 s on a 2-core test machine (fsync
-- off, maintenance_work_mem 64MB; the index is WAL-logged, so allow more
-- on a real disk), i.e. about a second and a half per million. The old
-- index is dropped with the constraint (no scan); the NOT NULL of both
-- columns is already there, so no scan checks it.
--
-- CREATE INDEX CONCURRENTLY cannot run inside outboxctl migrate (not in a
-- transaction block). For a large table build the index by hand first,
-- outside any transaction, while consumers keep running:
--
--   CREATE UNIQUE INDEX CONCURRENTLY processed_key_topic
--       ON inbox.processed (idempotency_key, topic);
--
-- then run outboxctl migrate: it finds that index (exactly that
-- definition, valid) and makes it the primary key without a rebuild
-- (ADD CONSTRAINT ... USING INDEX, which renames it processed_pkey), so the
-- ACCESS EXCLUSIVE lock lasts milliseconds (12 ms for the million above,
-- whose CONCURRENTLY build took 2.4 s without blocking anyone; the lock
-- still waits for, and queues others behind, transactions on the table). A build that was interrupted
-- leaves an invalid index: the migration drops it and builds in place.
--
-- Upgrade order: stop the consumers, migrate, start the new build. A
-- consumer of protocol 1 is refused at start and after every reconnect
-- (inbox.check_protocol); one still running from before is not, and its
-- statements (ON CONFLICT (idempotency_key)) now fail: it answers every
-- message retry and applies nothing, until it is restarted on the new build.
-- Its purge still runs and deletes expired records by key, which would
-- take a younger record of the same key on another topic with them: do not
-- leave one running.
DO $$
DECLARE
    prebuilt regclass := to_regclass('inbox.processed_key_topic');
BEGIN
    IF prebuilt IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_index i
         WHERE i.indexrelid = prebuilt AND i.indrelid = 'inbox.processed'::regclass
           AND i.indisvalid AND i.indisready
           -- the definition names any collation, operator class or
           -- ordering that is not the default; the table is qualified
           -- unless the search_path shows it
           AND regexp_replace(pg_catalog.pg_get_indexdef(i.indexrelid),
                   ' ON (inbox\.)?processed ', ' ON processed ') =
               'CREATE UNIQUE INDEX processed_key_topic ON processed'
               ' USING btree (idempotency_key, topic)') THEN
        DROP INDEX inbox.processed_key_topic; -- not the one we want, or invalid
        prebuilt := NULL;
    END IF;
    ALTER TABLE inbox.processed DROP CONSTRAINT processed_pkey;
    IF prebuilt IS NULL THEN
        ALTER TABLE inbox.processed
            ADD CONSTRAINT processed_pkey PRIMARY KEY (idempotency_key, topic);
    ELSE
        ALTER TABLE inbox.processed
            ADD CONSTRAINT processed_pkey PRIMARY KEY USING INDEX processed_key_topic;
    END IF;
END
$$;

-- consumer 2: the dedup record's identity is (topic, idempotency_key).
-- Consumer 1 (identity: the key) cannot work with this table: its upsert
-- names a unique key that no longer exists.
UPDATE inbox.protocols SET min_version = 2, max_version = 2 WHERE component = 'consumer';
