-- inbox.dedup_record (function), its current definition: outboxctl migrate
-- re-applies this file after the numbered migrations (sql/README.md).
-- Part of the inbox's SQL contract (docs/inbox-sql.md). History: the rule
-- was written three times into consumer/inbox.c's statements until issue 31.
--
-- THE legacy identity rule, written here only: the dedup record that
-- answers for a message of (source, topic, idempotency_key). Its own
-- record first; else a record of the other kind: for a named source the
-- record of source '' (a message an old relay sent before the upgrade),
-- for the source '' a record of any named source (a late frame of an old
-- relay whose lease a new one took over) (docs/consumer.md, "The legacy
-- identity"). At most one row; none when the message is new.
--
-- Only committed records of other transactions are seen; the source gate
-- (inbox.take_source_gate, first in the transaction) makes the other
-- kind's open transactions finish before this is asked. A probe of the
-- primary key (idempotency_key, topic, source) by its first two columns.
-- A one-SELECT SQL function, STABLE, so that the queries calling it
-- (inbox.dedup_lookup, inbox.apply_notifications) have it inlined and
-- plan it as their own subquery.
CREATE OR REPLACE FUNCTION inbox.dedup_record(source text, topic text, idempotency_key text)
    RETURNS SETOF inbox.processed
    LANGUAGE sql STABLE ROWS 1 AS $$
    SELECT p.* FROM inbox.processed p
     WHERE p.idempotency_key = dedup_record.idempotency_key AND p.topic = dedup_record.topic
       AND (p.source = dedup_record.source OR (p.source = '') <> (dedup_record.source = ''))
     ORDER BY p.source = dedup_record.source DESC
     LIMIT 1
$$;
