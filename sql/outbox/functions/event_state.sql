-- outbox.event_state (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012, 022.
--
-- Where message e stands. Not for hot paths: each call looks at its
-- stream row and at the stream's open batches (few); for a delivered
-- message, the attempt and fence of the batch that delivered it when it is
-- among the stream's last done batches still kept (NULL otherwise).
CREATE OR REPLACE FUNCTION outbox.event_state(e outbox.events,
                                   OUT status text, OUT attempts integer, OUT fence bigint,
                                   OUT lease_owner text, OUT lease_until timestamptz,
                                   OUT available_at timestamptz, OUT batch_id bigint,
                                   OUT last_error text)
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    st outbox.streams;
    b  outbox.batches;
BEGIN
    status := 'delivered';
    available_at := GREATEST(e.created_at, e.not_before);
    IF e.lane < 0 THEN
        RETURN;
    END IF;
    SELECT * INTO st FROM outbox.streams x WHERE x.topic = e.topic AND x.lane = e.lane;
    IF NOT FOUND OR ((st.snap_lo IS NULL OR NOT pg_visible_in_snapshot(e.txid, st.snap_lo))
        AND NOT (st.snap_hi IS NOT NULL AND pg_visible_in_snapshot(e.txid, st.snap_hi)
                 AND (e.txid, e.id) <= (st.pos_txid, st.pos_id))) THEN
        status := 'pending';
        attempts := 0;
        fence := 0;
        RETURN;
    END IF;
    -- in a batch still open? (batches_open: only the leased ones)
    SELECT * INTO b FROM outbox.batches x
     WHERE x.state = 'leased' AND x.kind = 's' AND x.topic = e.topic AND x.lane = e.lane
       AND outbox.batch_holds(x, e)
     LIMIT 1;
    IF FOUND THEN
        status := 'pending';
        lease_owner := b.owner;
        lease_until := CASE WHEN b.owner IS NOT NULL THEN b.lease_until END;
        available_at := CASE WHEN b.owner IS NULL THEN b.lease_until ELSE b.created_at END;
    ELSE
        SELECT * INTO b FROM (
            SELECT * FROM outbox.batches x
             WHERE x.kind = 's' AND x.topic = e.topic AND x.lane = e.lane
             ORDER BY x.id DESC LIMIT 50) x
         WHERE x.state = 'done' AND outbox.batch_holds(x, e)
         LIMIT 1;
    END IF;
    IF b.id IS NOT NULL THEN
        attempts := b.attempts;
        fence := b.fence;
        batch_id := b.id;
        last_error := b.last_error;
    END IF;
END
$$;
