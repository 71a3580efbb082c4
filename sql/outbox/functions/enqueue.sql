-- outbox.enqueue (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 001, 005, 012, 018.
--
-- enqueue: call inside the caller's business transaction. Idempotent per
-- (topic, idempotency_key): a second call with the same payload (as jsonb:
-- key order and whitespace do not count) returns the first id and adds
-- nothing; with another payload it raises SQLSTATE OB002
-- (outbox.check_same_payload), which aborts the caller's transaction. The message goes to the current slot; a key already stored in
-- another slot is found first. If the slot switched between that look and
-- the insert, the other slots are looked at again (a new snapshot, taken
-- after the switch, which waited for every transaction inserting into the
-- old slot): a copy found there wins and this one is removed again.
--
-- SECURITY DEFINER (docs/security.md, "Database roles"): a producer's role
-- may call this and nothing else of the outbox. It runs as its owner, who
-- writes the message log, the key's ordering_seqs row and (its trigger,
-- outbox.notify_enqueued) takes a waiting relay's announcement: none of
-- which a producer may write itself. Safe to run so because it takes no
-- switch from its caller (only the message, checked above all else), every
-- name in it is schema-qualified, and the search_path is pinned: a caller's
-- schema or temporary table can never stand in for one of ours.
CREATE OR REPLACE FUNCTION outbox.enqueue(topic text, idempotency_key text, payload jsonb,
                                          ordering_key text DEFAULT NULL)
    RETURNS bigint
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    new_id     bigint;
    other_id   bigint;
    seq        bigint;
    seen_slot  smallint;
    into_slot  smallint;
BEGIN
    IF topic IS NULL OR octet_length(topic) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'outbox.enqueue: topic must be 1..255 bytes'
            USING ERRCODE = '22023';
    END IF;
    IF idempotency_key IS NULL OR octet_length(idempotency_key) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'outbox.enqueue: idempotency_key must be 1..255 bytes'
            USING ERRCODE = '22023';
    END IF;
    IF ordering_key IS NOT NULL AND octet_length(ordering_key) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'outbox.enqueue: ordering_key must be NULL or 1..255 bytes'
            USING ERRCODE = '22023';
    END IF;
    IF payload IS NULL THEN
        RAISE EXCEPTION 'outbox.enqueue: payload must not be NULL'
            USING ERRCODE = '22023';
    END IF;
    IF octet_length(payload::text) > outbox.max_payload_bytes() THEN
        RAISE EXCEPTION 'outbox.enqueue: payload is % bytes, the maximum is %',
            octet_length(payload::text), outbox.max_payload_bytes()
            USING ERRCODE = '54000';
    END IF;

    -- A retry or a dead letter outlives its slot: the key is still taken.
    SELECT COALESCE(
               (SELECT e.id FROM outbox.events e
                 WHERE e.topic = enqueue.topic AND e.idempotency_key = enqueue.idempotency_key
                 LIMIT 1),
               (SELECT r.id FROM outbox.retries r
                 WHERE r.topic = enqueue.topic AND r.idempotency_key = enqueue.idempotency_key),
               (SELECT d.id FROM outbox.dead d
                 WHERE d.topic = enqueue.topic AND d.idempotency_key = enqueue.idempotency_key)),
           (SELECT s.slot FROM outbox.slots s WHERE s.state = 'current')
      INTO new_id, seen_slot;
    IF new_id IS NOT NULL THEN
        PERFORM outbox.check_same_payload(topic, idempotency_key, payload);
        RETURN new_id;
    END IF;

    IF ordering_key IS NOT NULL THEN
        -- Takes the key's row lock until commit (see outbox.ordering_seqs).
        INSERT INTO outbox.ordering_seqs AS k (topic, ordering_key, last_seq)
        VALUES (topic, ordering_key, 1)
        ON CONFLICT ON CONSTRAINT ordering_seqs_pkey DO UPDATE SET last_seq = k.last_seq + 1
        RETURNING k.last_seq INTO seq;
    END IF;

    INSERT INTO outbox.events AS e (slot, id, txid, lane, topic, idempotency_key, payload,
                                    ordering_key, ordering_seq)
    VALUES ((SELECT s.slot FROM outbox.slots s WHERE s.state = 'current'),
            nextval('outbox.event_ids'), pg_current_xact_id(), outbox.lane_of(ordering_key),
            topic, idempotency_key, payload, ordering_key, seq)
    ON CONFLICT ON CONSTRAINT events_key DO NOTHING
    RETURNING e.id, e.slot INTO new_id, into_slot;

    IF new_id IS NULL THEN
        -- A concurrent transaction stored the key in this slot and
        -- committed first (ON CONFLICT waited for it). Our sequence number
        -- goes back (we hold the key's row): the relays take a key's
        -- numbers one after another (outbox.ordering_next), a gap would
        -- stop them.
        UPDATE outbox.ordering_seqs k SET last_seq = k.last_seq - 1
         WHERE seq IS NOT NULL AND k.topic = enqueue.topic AND k.ordering_key = enqueue.ordering_key;
        SELECT e.id INTO new_id FROM outbox.events e
         WHERE e.topic = enqueue.topic AND e.idempotency_key = enqueue.idempotency_key
         LIMIT 1;
        PERFORM outbox.check_same_payload(topic, idempotency_key, payload);
        RETURN new_id;
    END IF;
    IF into_slot IS DISTINCT FROM seen_slot THEN
        SELECT e.id INTO other_id FROM outbox.events e
         WHERE e.topic = enqueue.topic AND e.idempotency_key = enqueue.idempotency_key
           AND e.slot <> into_slot
         LIMIT 1;
        IF other_id IS NOT NULL THEN
            DELETE FROM outbox.events e WHERE e.slot = into_slot AND e.id = new_id;
            UPDATE outbox.ordering_seqs k SET last_seq = k.last_seq - 1 -- as above
             WHERE seq IS NOT NULL AND k.topic = enqueue.topic
               AND k.ordering_key = enqueue.ordering_key;
            PERFORM outbox.check_same_payload(topic, idempotency_key, payload);
            RETURN other_id;
        END IF;
    END IF;
    RETURN new_id;
END
$$;
