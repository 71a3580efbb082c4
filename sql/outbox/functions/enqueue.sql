-- outbox.enqueue (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 001, 005, 012, 018, 019, 022.
--
-- enqueue: call inside the caller's business transaction. Idempotent per
-- (topic, idempotency_key): a second call with the same payload (as jsonb:
-- key order and whitespace do not count) returns the first id and adds
-- nothing; with another payload it raises SQLSTATE OB002
-- (outbox.check_same_payload), which aborts the caller's transaction. The
-- payload alone makes a message the same: headers and not_before of a
-- repeated call are not compared (a retried producer carries a new trace
-- context), the first call's are kept.
-- headers (named, optional): a JSON object of string values, at most
-- outbox.max_headers_bytes() as text, kept with the message. not_before
-- (named, optional): no claim takes the message earlier (it waits in
-- outbox.retries, due then, and a key's later messages behind it); a finite
-- time at most outbox.max_delay() from now. NULL for either: none. The
-- message goes to the current slot; a key already stored in a slot that is
-- not empty is found first. The lock on outbox.events (the parent alone)
-- keeps the current slot from switching until commit; the slots are read
-- and written through their own tables (outbox.slot_find, slot_insert):
-- the relations of the slots used are locked, not every slot's (docs/
-- relay.md, "Enqueue: into one slot's table").
--
-- SECURITY DEFINER (docs/security.md, "Database roles"): a producer's role
-- may call this and nothing else of the outbox. It runs as its owner, who
-- writes the message log, the key's ordering_seqs row and
-- (outbox.wake_one) takes a waiting relay's announcement: none of
-- which a producer may write itself. Safe to run so because it takes no
-- switch from its caller (only the message, checked above all else), every
-- name in it is schema-qualified, and the search_path is pinned: a caller's
-- schema or temporary table can never stand in for one of ours.
CREATE OR REPLACE FUNCTION outbox.enqueue(topic text, idempotency_key text, payload jsonb,
                                          ordering_key text DEFAULT NULL,
                                          headers jsonb DEFAULT NULL,
                                          not_before timestamptz DEFAULT NULL)
    RETURNS bigint
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    new_id     bigint;
    seq        bigint;
    into_slot  smallint;
    kept       smallint[];
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
    -- (CASE: jsonb_each only of an object)
    IF (CASE WHEN headers IS NULL THEN false
             WHEN jsonb_typeof(headers) <> 'object' THEN true
             ELSE octet_length(headers::text) > outbox.max_headers_bytes()
                  OR EXISTS (SELECT 1 FROM jsonb_each(headers) h
                              WHERE jsonb_typeof(h.value) <> 'string') END) THEN
        RAISE EXCEPTION 'outbox.enqueue: headers must be NULL or a JSON object of string values, at most % bytes',
            outbox.max_headers_bytes() USING ERRCODE = '22023';
    END IF;
    IF not_before IS NOT NULL AND (not isfinite(not_before)
                                   OR not_before > now() + outbox.max_delay()) THEN
        RAISE EXCEPTION 'outbox.enqueue: not_before must be NULL or a time at most % from now',
            outbox.max_delay() USING ERRCODE = '22023';
    END IF;
    IF octet_length(payload::text) > outbox.max_payload_bytes() THEN
        RAISE EXCEPTION 'outbox.enqueue: payload is % bytes, the maximum is %',
            octet_length(payload::text), outbox.max_payload_bytes()
            USING ERRCODE = '54000';
    END IF;

    -- Until commit the current slot cannot switch: outbox.housekeep's
    -- switch takes SHARE ROW EXCLUSIVE on outbox.events (this lock, on the
    -- parent only, conflicts with it), and waits. So the slot read next is
    -- where this message goes, and the slots read are all that may hold
    -- the key (an empty one holds nothing; only the current one fills).
    LOCK TABLE ONLY outbox.events IN ROW EXCLUSIVE MODE;
    SELECT (SELECT s.slot FROM outbox.slots s WHERE s.state = 'current'),
           ARRAY(SELECT s.slot FROM outbox.slots s WHERE s.state <> 'empty'
                  ORDER BY s.state = 'current' DESC, s.slot)
      INTO into_slot, kept;
    -- A retry or a dead letter outlives its slot: the key is still taken.
    new_id := COALESCE(
        outbox.slot_find(kept, topic, idempotency_key),
        (SELECT r.id FROM outbox.retries r
          WHERE r.topic = enqueue.topic AND r.idempotency_key = enqueue.idempotency_key),
        (SELECT d.id FROM outbox.dead d
          WHERE d.topic = enqueue.topic AND d.idempotency_key = enqueue.idempotency_key));
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

    new_id := outbox.slot_insert(into_slot, outbox.lane_of(ordering_key), topic,
                                 idempotency_key, payload, ordering_key, seq, headers,
                                 not_before);
    IF new_id IS NULL THEN
        -- A concurrent transaction stored the key in this slot and
        -- committed first (ON CONFLICT waited for it). Our sequence number
        -- goes back (we hold the key's row): the relays take a key's
        -- numbers one after another (outbox.ordering_next), a gap would
        -- stop them.
        UPDATE outbox.ordering_seqs k SET last_seq = k.last_seq - 1
         WHERE seq IS NOT NULL AND k.topic = enqueue.topic AND k.ordering_key = enqueue.ordering_key;
        new_id := outbox.slot_find(ARRAY[into_slot], topic, idempotency_key);
        PERFORM outbox.check_same_payload(topic, idempotency_key, payload);
        RETURN new_id;
    END IF;
    -- Wake a waiting relay worker (outbox.wake_one): what the trigger on
    -- outbox.events does for an insert through it, and with its condition
    -- (outbox.relays_waiting) read here, not called.
    IF EXISTS (SELECT 1 FROM outbox.relay_waiters) THEN
        PERFORM outbox.wake_one();
    END IF;
    RETURN new_id;
END
$$;
