-- outbox.housekeep (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012, 017, 018, 024.
--
-- housekeep: one pass of the retention work, safe to run from any number
-- of relays (an advisory lock lets one through) and from outboxctl purge.
--  0. an outbox restored from another cluster (outbox.restored) is adopted
--     first (outbox.adopt_restore; read_again: how many messages it will
--     read again); while it cannot be (lock timeout), nothing else runs;
--  1. done batches older than done_retention_ms, dead letters older than
--     dead_retention_ms (0 = kept): deleted. A dead letter that blocks its
--     ordering key (--on-dead-head block) is kept until it is requeued: it
--     is what an operator acts on. A dead block left without its dead
--     letter (deleted by a version before 018) is lifted: nothing could
--     ever lift it;
--  2. the oldest closed slot, once closed for longer than retention_ms and
--     every message in it done: TRUNCATE. It is locked first (lock_timeout
--     lock_ms: a transaction still reading it makes this pass skip it) and
--     checked again under the lock;
--  3. the current slot, once current for longer than retention_ms /
--     (event_slots() - 2) (017: retention / 8; or at once with
--     force_switch) and an empty slot exists: closed, the
--     empty one made current. The switch locks outbox.events against
--     writers (SHARE ROW EXCLUSIVE, lock_timeout lock_ms): it waits for
--     every transaction that inserted into the old slot, so enqueue can
--     never store one key in two slots (outbox.enqueue).
-- retention_ms 0 = never truncate. Returns what it did, and why a slot
-- could not go, and the session whose open transaction holds vacuum back
-- the longest (pid, application, age; NULL when none).
CREATE OR REPLACE FUNCTION outbox.housekeep(retention_ms bigint, dead_retention_ms bigint,
                                 done_retention_ms bigint, lock_ms integer,
                                 force_switch boolean DEFAULT false,
                                 OUT ran boolean, OUT batches_deleted bigint,
                                 OUT dead_deleted bigint, OUT truncated_slot smallint,
                                 OUT truncated_rows bigint, OUT switched_to smallint,
                                 OUT waiting text, OUT oldest_xact_pid integer,
                                 OUT oldest_xact_application text,
                                 OUT oldest_xact_age_s double precision,
                                 OUT read_again bigint)
    LANGUAGE plpgsql AS $$
DECLARE
    s      outbox.slots;
    nxt    smallint;
    holder record;
BEGIN
    ran := pg_try_advisory_xact_lock(7310315559249883000);
    batches_deleted := 0;
    dead_deleted := 0;
    IF NOT ran THEN
        RETURN;
    END IF;
    -- What vacuum waits for in this database: the bookkeeping's dead rows
    -- (batches, streams) stay until it ends.
    SELECT h.pid, h.application_name, h.xact_age_s
      INTO oldest_xact_pid, oldest_xact_application, oldest_xact_age_s
      FROM outbox.oldest_xmin_holder() h;
    PERFORM set_config('lock_timeout', lock_ms || 'ms', true);
    IF outbox.restored() THEN
        BEGIN
            read_again := outbox.adopt_restore();
        EXCEPTION WHEN lock_not_available THEN
            waiting := format('the outbox was restored from another cluster: adopting it waits'
                              ' for the claims under way (lock timeout %sms)', lock_ms);
            RETURN;
        END;
    END IF;
    DELETE FROM outbox.batches b WHERE b.state = 'done'
       AND b.done_at < now() - done_retention_ms * interval '1 millisecond';
    GET DIAGNOSTICS batches_deleted = ROW_COUNT;
    IF dead_retention_ms > 0 THEN
        DELETE FROM outbox.dead d
         WHERE d.died_at < now() - dead_retention_ms * interval '1 millisecond'
           AND NOT EXISTS (SELECT 1 FROM outbox.ordering_blocks k
                            WHERE k.topic = d.topic AND k.ordering_key = d.ordering_key
                              AND k.state = 'dead');
        GET DIAGNOSTICS dead_deleted = ROW_COUNT;
    END IF;
    -- (its key's parked messages, if any, still go first: the block
    -- becomes theirs)
    UPDATE outbox.ordering_blocks k SET state = 'retry'
     WHERE k.state = 'dead'
       AND NOT EXISTS (SELECT 1 FROM outbox.dead d
                        WHERE d.topic = k.topic AND d.ordering_key = k.ordering_key)
       AND EXISTS (SELECT 1 FROM outbox.retries r
                    WHERE r.topic = k.topic AND r.ordering_key = k.ordering_key);
    DELETE FROM outbox.ordering_blocks k
     WHERE k.state = 'dead'
       AND NOT EXISTS (SELECT 1 FROM outbox.dead d
                        WHERE d.topic = k.topic AND d.ordering_key = k.ordering_key);
    IF retention_ms <= 0 THEN
        RETURN;
    END IF;

    SELECT * INTO s FROM outbox.slots x
     WHERE x.state = 'closed' AND x.since < now() - retention_ms * interval '1 millisecond'
     ORDER BY x.since, x.slot LIMIT 1;
    IF FOUND THEN
        BEGIN
            EXECUTE format('LOCK TABLE outbox.events_%s IN ACCESS EXCLUSIVE MODE', s.slot);
            -- slot_done judges the streams it knows: every stream of a
            -- closed slot has its row (made at the switch that closed it,
            -- below), so a topic or lane no relay has read yet counts as
            -- not done.
            IF outbox.slot_done(s.slot) THEN
                EXECUTE format('SELECT count(*) FROM outbox.events_%s', s.slot)
                   INTO truncated_rows;
                EXECUTE format('TRUNCATE outbox.events_%s', s.slot);
                UPDATE outbox.slots x SET state = 'empty', since = now() WHERE x.slot = s.slot;
                truncated_slot := s.slot;
            ELSE
                SELECT * INTO holder FROM outbox.oldest_xmin_holder();
                waiting := format('slot %s has messages not yet done', s.slot)
                    || CASE WHEN holder.pid IS NOT NULL AND holder.has_xid
                            THEN format('; oldest transaction: pid %s (%s, %s) open %ss',
                                        holder.pid, holder.application_name, holder.state,
                                        round(holder.xact_age_s::numeric, 1))
                            ELSE '' END;
            END IF;
        EXCEPTION WHEN lock_not_available THEN
            waiting := format('slot %s is in use by another transaction (lock timeout %sms)%s',
                              s.slot, lock_ms, outbox.lock_holders(format('outbox.events_%s', s.slot)));
        END;
    END IF;

    SELECT * INTO s FROM outbox.slots x WHERE x.state = 'current';
    IF force_switch OR s.since < now() - retention_ms / (outbox.event_slots() - 2)
                                         * interval '1 millisecond' THEN
        SELECT x.slot INTO nxt FROM outbox.slots x WHERE x.state = 'empty'
         ORDER BY (x.slot - s.slot + outbox.event_slots()) % outbox.event_slots() LIMIT 1;
        IF nxt IS NOT NULL THEN
            BEGIN
                LOCK TABLE outbox.events IN SHARE ROW EXCLUSIVE MODE;
                -- no enqueue writes the slot now: its streams get their rows
                -- before it closes (outbox.discover_streams reads the current
                -- slot only)
                PERFORM outbox.discover_streams();
                UPDATE outbox.slots x SET state = 'closed', since = now() WHERE x.slot = s.slot;
                UPDATE outbox.slots x SET state = 'current', since = now() WHERE x.slot = nxt;
                switched_to := nxt;
            EXCEPTION WHEN lock_not_available THEN
                waiting := concat_ws('; ', waiting, format(
                    'slot switch waits for a transaction writing outbox.events (lock timeout %sms)%s',
                    lock_ms, outbox.lock_holders(format('outbox.events_%s', s.slot))));
            END;
        ELSE
            waiting := concat_ws('; ', waiting, 'no empty slot to switch to');
        END IF;
    END IF;
END
$$;
