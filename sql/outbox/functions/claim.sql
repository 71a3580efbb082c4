-- outbox.claim (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 012, 018, 019, 021, 022, 023.
--
-- claim: up to max_n messages of ONE batch for owner, leased for lease_ms,
-- from the topics the relay may send now (outbox.topic_claimable), in this
-- order: a batch whose lease ran out (taken over: new fence from
-- outbox.fences, attempts + 1), then due retries and a cut of a stream,
-- retries first when retries_first. No rows: nothing to do. Every claimed
-- message of a batch carries the batch's id, fence and attempt, and `more`
-- (relay protocol 5): whether a claim made now would find anything
-- (outbox.more_claimable; always true after a takeover or retries, whose
-- neighbours are not looked at).
-- max_bytes (relay protocol 4, --batch-bytes) ends a new batch before the
-- message that would take its payloads past that many bytes; a message
-- larger than that goes alone (outbox.within_bytes). NULL: max_n only.
-- A batch that lost its holder batch_split_after() times is halved, and a
-- message left alone in one is dead-lettered (outbox.split_batch; its key
-- blocked unless skip_dead_heads, --on-dead-head skip).
-- Returns rows of type outbox.claimed (defined in 012_streams.sql: batch_id,
-- kind, fence, attempt, takeover, id, created_us, topic, idempotency_key,
-- payload, ordering_key, ordering_seq; `more` added by 021); relay/claim.c
-- names the columns and the arguments it passes.
-- ordering = false is the BROKEN --no-ordering mode: lanes are cut like
-- lane 0 (several batches out, several messages of a key in one, nothing
-- parked) and every retry of a key is claimable.
CREATE OR REPLACE FUNCTION outbox.claim(protocol integer, owner text, lease_ms bigint, max_n integer,
                             include text[], exclude text[], others boolean,
                             retries_first boolean, ordering boolean DEFAULT true,
                             skip_dead_heads boolean DEFAULT false,
                             max_bytes bigint DEFAULT NULL)
    RETURNS SETOF outbox.claimed
    LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    b       outbox.batches;
    st      outbox.streams;
    lease   interval := lease_ms * interval '1 millisecond';
    was     text;
    step    integer;
    tried   text[] := '{}';
    dry     text[] := '{}';
    lo      pg_snapshot;
    hi      pg_snapshot;
    ptxid   xid8;
    pid     bigint;
    cand    outbox.events[];
    nread   integer;
    ended   boolean;
    left_more boolean;
    keys    text[];
    blocked text[];
    stop_at bigint;
    taken   outbox.events[];
    parked  bigint[];
    last    outbox.events;
    rtopic  text;
    picked  bigint[];
    early   text[];
    found_any  boolean;
    discovered boolean := false;
    locked  record;
    bid     bigint;
BEGIN
    PERFORM outbox.check_protocol('relay', protocol);
    IF max_bytes < 1 THEN
        RAISE EXCEPTION 'outbox.claim: max_bytes must be at least 1 (or NULL: no byte budget), not %',
            max_bytes USING ERRCODE = '22023';
    END IF;
    IF max_n < 1 THEN
        RETURN;
    END IF;

    -- 1. A batch whose lease ran out: a holder that died or stalled, or a
    -- batch released until later. A takeover bumps the fence, so the old
    -- holder's outcome write is refused. One that lost its holder too
    -- often is split (or its lone message dead-lettered), and the next one
    -- is looked at.
    LOOP
        SELECT * INTO b FROM outbox.batches x
         WHERE x.state = 'leased' AND x.lease_until < now()
           AND outbox.topic_claimable(x.topic, include, exclude, others)
           -- a range of another cluster (a restore not adopted yet) reads
           -- the wrong messages: housekeeping closes it first
           AND NOT COALESCE(pg_snapshot_xmax(x.snap_hi)
                            > pg_snapshot_xmax(pg_current_snapshot()), false)
         ORDER BY x.lease_until, x.id LIMIT 1 FOR UPDATE SKIP LOCKED;
        EXIT WHEN NOT FOUND;
        was := b.owner;
        UPDATE outbox.batches x
           SET owner = claim.owner, lease_until = now() + lease,
               fence = nextval('outbox.fences'), attempts = x.attempts + 1,
               claims = x.claims + 1,
               takeovers = x.takeovers + CASE WHEN was IS NULL THEN 0 ELSE 1 END
         WHERE x.id = b.id RETURNING * INTO b;
        IF was IS NOT NULL AND b.takeovers >= outbox.batch_split_after() THEN
            PERFORM outbox.split_batch(protocol, b, skip_dead_heads);
            CONTINUE;
        END IF;
        IF b.kind = 'r' THEN
            RETURN QUERY
            WITH r AS (
                UPDATE outbox.retries r SET fence = b.fence, attempts = r.attempts + 1,
                       claims = r.claims + 1
                 WHERE r.batch_id = b.id
                RETURNING r.*)
            SELECT b.id, b.kind, b.fence, r.attempts, was IS NOT NULL, r.id,
                   outbox.available_us(r.created_at, r.not_before), r.topic,
                   r.idempotency_key, r.payload::text, r.ordering_key, r.ordering_seq, true
              FROM r ORDER BY r.ordering_seq NULLS FIRST, r.id;
        ELSE
            RETURN QUERY
            SELECT b.id, b.kind, b.fence, b.attempts, was IS NOT NULL, e.id,
                   outbox.available_us(e.created_at, e.not_before), e.topic,
                   e.idempotency_key, e.payload::text, e.ordering_key, e.ordering_seq, true
              FROM outbox.batch_events(b) e;
        END IF;
        RETURN;
    END LOOP;

    FOR step IN 1 .. 2 LOOP
        IF (step = 1) = retries_first THEN
            -- 2. Due retries of one topic (a batch goes to one destination);
            -- of an ordering key only its head, and not while the key waits
            -- on a dead letter.
            SELECT r.topic INTO rtopic FROM outbox.retries r
             WHERE r.batch_id IS NULL AND r.due_at <= now()
               AND outbox.topic_claimable(r.topic, include, exclude, others)
               AND outbox.retry_claimable(r, ordering)
             ORDER BY r.due_at, r.id LIMIT 1;
            CONTINUE WHEN rtopic IS NULL;
            -- the first max_n due, cut to the byte budget (at least one)
            picked := ARRAY(
                SELECT p.id FROM (
                    SELECT r.id, r.due_at, row_number() OVER w AS nth,
                           sum(octet_length(r.payload::text)) OVER w AS upto
                      FROM (SELECT r.id, r.due_at, r.payload FROM outbox.retries r
                             WHERE r.topic = rtopic AND r.batch_id IS NULL AND r.due_at <= now()
                               AND outbox.retry_claimable(r, ordering)
                             ORDER BY r.due_at, r.id LIMIT max_n
                             FOR UPDATE SKIP LOCKED) r
                    WINDOW w AS (ORDER BY r.due_at, r.id)) p
                 WHERE p.nth = 1 OR max_bytes IS NULL OR p.upto <= max_bytes
                 ORDER BY p.due_at, p.id);
            -- a fence only for a claim that takes something
            CONTINUE WHEN cardinality(picked) = 0;
            INSERT INTO outbox.batches (kind, topic, size, fence, attempts, claims, owner,
                                        lease_until, state)
            VALUES ('r', rtopic, cardinality(picked), nextval('outbox.fences'), 1, 1, owner,
                    now() + lease, 'leased')
            RETURNING * INTO b;
            RETURN QUERY
            WITH r AS (
                UPDATE outbox.retries r SET batch_id = b.id, fence = b.fence,
                       attempts = r.attempts + 1, claims = r.claims + 1
                 WHERE r.id = ANY(picked)
                RETURNING r.*)
            SELECT b.id, b.kind, b.fence, r.attempts, false, r.id,
                   outbox.available_us(r.created_at, r.not_before), r.topic,
                   r.idempotency_key, r.payload::text, r.ordering_key, r.ordering_seq, true
              FROM r ORDER BY r.id;
            RETURN;
        END IF;

        -- 3. A cut of a stream that may have new messages, least recently
        -- cut first; a lane only while it has no batch out. When none has
        -- any, look for streams that have no row yet (a new topic or lane),
        -- once.
        found_any := false;
        LOOP
            SELECT * INTO locked FROM outbox.lock_next_stream(include, exclude, others,
                                                              ordering, tried);
            st := locked.st;
            dry := dry || locked.dry;
            IF st.topic IS NULL THEN
                -- Discovery is for a stream with no row yet: not while
                -- another relay holds one with work (the two relays woken
                -- by one NOTIFY), so an empty claim stays cheap.
                EXIT WHEN found_any OR discovered OR locked.busy;
                discovered := true;
                CONTINUE WHEN outbox.discover_streams() > 0;
                EXIT;
            END IF;
            found_any := true;
            tried := tried || (st.topic || '/' || st.lane);
            -- Snapshots of another cluster (a dump restored into one whose
            -- transaction counter is behind): nothing here is comparable
            -- with them. Housekeeping adopts the restore first
            -- (outbox.adopt_restore); until then the stream is left alone.
            CONTINUE WHEN pg_snapshot_xmax(st.snap_lo) > pg_snapshot_xmax(pg_current_snapshot())
                       OR pg_snapshot_xmax(st.snap_hi) > pg_snapshot_xmax(pg_current_snapshot());

            -- New statements from here: their snapshots are taken after the
            -- stream's row lock, so after the previous cut committed, and
            -- a new snapshot sees everything the last one did.
            lo := st.snap_lo;
            hi := st.snap_hi;
            ptxid := st.pos_txid;
            pid := st.pos_id;
            cand := NULL;
            IF hi IS NOT NULL THEN
                cand := ARRAY(SELECT e FROM outbox.stream_read(st.topic, st.lane, lo, hi,
                                                               ptxid, pid, max_n) e);
                nread := cardinality(cand);
                cand := cand[1:outbox.within_bytes(cand, max_bytes)];
            END IF;
            IF COALESCE(cardinality(cand), 0) = 0 THEN
                -- the open window is used up: the next one
                IF hi IS NOT NULL THEN
                    lo := hi;
                END IF;
                hi := pg_current_snapshot();
                ptxid := NULL;
                pid := NULL;
                cand := ARRAY(SELECT e FROM outbox.stream_read(st.topic, st.lane, lo, hi,
                                                               NULL, NULL, max_n) e);
                nread := cardinality(cand);
                cand := cand[1:outbox.within_bytes(cand, max_bytes)];
                IF COALESCE(cardinality(cand), 0) = 0 THEN
                    -- Everything hi shows is assigned: it becomes the floor.
                    UPDATE outbox.streams s SET snap_lo = hi, snap_hi = NULL,
                           pos_txid = NULL, pos_id = NULL
                     WHERE s.topic = st.topic AND s.lane = st.lane;
                    CONTINUE;
                END IF;
            END IF;

            IF st.lane = 0 OR NOT ordering THEN
                -- what is not due yet (not_before) waits in outbox.retries;
                -- mostly nothing, and the cut is taken whole
                parked := ARRAY(SELECT c.id FROM unnest(cand) c WHERE c.not_before > now());
                taken := CASE WHEN cardinality(parked) = 0 THEN cand
                              ELSE ARRAY(SELECT c FROM unnest(cand) c
                                          WHERE NOT (c.id = ANY(parked))) END;
                last := cand[cardinality(cand)];
                stop_at := NULL;
            ELSE
                -- A lane: a key's messages wait behind a retry or dead letter
                -- of the key (parked, in order), and a batch holds at most
                -- one message of a key: it ends before a key's second one.
                -- FOR SHARE: an unblock of these keys (outbox.record) waits
                -- until this cut commits, then sees what it parked.
                keys := ARRAY(SELECT DISTINCT c.ordering_key FROM unnest(cand) c);
                blocked := ARRAY(SELECT k.ordering_key FROM outbox.ordering_blocks k
                                  WHERE k.topic = st.topic AND k.ordering_key = ANY(keys)
                                  ORDER BY k.ordering_key FOR SHARE);
                -- A key whose first message here is not its next number
                -- (outbox.ordering_next) came early: its predecessor is
                -- further on in this window (it committed first, in a
                -- transaction whose id is higher). It waits as a blocked
                -- key's do, and gets a block of its own. So does a key whose
                -- first message here is not due yet (not_before): it waits
                -- in outbox.retries until then, its later messages behind it.
                early := ARRAY(
                    SELECT f.ordering_key FROM (
                        SELECT DISTINCT ON (c.ordering_key) c.ordering_key, c.ordering_seq,
                               c.not_before
                          FROM unnest(cand) WITH ORDINALITY c(slot, id, txid, lane, topic,
                               idempotency_key, payload, ordering_key, ordering_seq,
                               created_at, headers, not_before, n)
                         WHERE NOT (c.ordering_key = ANY(blocked))
                         ORDER BY c.ordering_key, c.n) f
                      LEFT JOIN outbox.ordering_next x
                        ON x.topic = st.topic AND x.ordering_key = f.ordering_key
                     WHERE f.ordering_seq > COALESCE(x.next_seq, 1) OR f.not_before > now());
                blocked := blocked || early;
                SELECT min(x.n) INTO stop_at FROM (
                    SELECT c.n, row_number() OVER (PARTITION BY c.ordering_key ORDER BY c.n) nth,
                           c.ordering_key = ANY(blocked) AS is_blocked
                      FROM unnest(cand) WITH ORDINALITY c(slot, id, txid, lane, topic,
                           idempotency_key, payload, ordering_key, ordering_seq, created_at, headers, not_before, n)
                ) x WHERE x.nth > 1 AND NOT x.is_blocked;
                taken := ARRAY(SELECT ROW(c.slot, c.id, c.txid, c.lane, c.topic, c.idempotency_key,
                                          c.payload, c.ordering_key, c.ordering_seq,
                                          c.created_at, c.headers, c.not_before)::outbox.events
                                 FROM unnest(cand) WITH ORDINALITY c(slot, id, txid, lane, topic,
                                      idempotency_key, payload, ordering_key, ordering_seq,
                                      created_at, headers, not_before, n)
                                WHERE (stop_at IS NULL OR c.n < stop_at)
                                  AND NOT (c.ordering_key = ANY(blocked))
                                ORDER BY c.n);
                parked := ARRAY(SELECT c.id
                                  FROM unnest(cand) WITH ORDINALITY c(slot, id, txid, lane, topic,
                                       idempotency_key, payload, ordering_key, ordering_seq,
                                       created_at, headers, not_before, n)
                                 WHERE (stop_at IS NULL OR c.n < stop_at)
                                   AND c.ordering_key = ANY(blocked)
                                 ORDER BY c.n);
                last := cand[COALESCE(stop_at - 1, cardinality(cand))];
                INSERT INTO outbox.ordering_blocks (topic, ordering_key, state)
                SELECT DISTINCT st.topic, c.ordering_key, 'retry' FROM unnest(cand) c
                 WHERE c.id = ANY(parked) AND c.ordering_key = ANY(early)
                ON CONFLICT DO NOTHING;
            END IF;
            IF cardinality(parked) > 0 THEN
                -- parked: due at its not_before, or at once behind its key's
                -- earlier message (outbox.retry_claimable lets a key's head go)
                INSERT INTO outbox.retries (id, topic, idempotency_key, payload, ordering_key,
                                            ordering_seq, created_at, headers, not_before,
                                            attempts, claims, due_at, last_error)
                SELECT c.id, c.topic, c.idempotency_key, c.payload, c.ordering_key,
                       c.ordering_seq, c.created_at, c.headers, c.not_before, 0, 0,
                       GREATEST(now(), c.not_before),
                       CASE WHEN NOT COALESCE(c.not_before > now(), false)
                            THEN 'waits behind an earlier message of its ordering key' END
                  FROM unnest(cand) c WHERE c.id = ANY(parked)
                ON CONFLICT DO NOTHING;
            ELSE
                parked := NULL;
            END IF;
            IF st.lane > 0 THEN
                -- Each key taken or parked here moves on: past the message
                -- taken, or past the run of its numbers now in
                -- outbox.retries (what was parked, and what was parked
                -- early before).
                INSERT INTO outbox.ordering_next AS x (topic, ordering_key, next_seq)
                SELECT st.topic, k.ordering_key,
                       (SELECT min(q.s) FROM (
                            SELECT k.base AS s
                            UNION ALL
                            SELECT r.ordering_seq + 1 FROM outbox.retries r
                             WHERE r.topic = st.topic AND r.ordering_key = k.ordering_key
                               AND r.ordering_seq >= k.base) q
                         WHERE NOT EXISTS (
                            SELECT 1 FROM outbox.retries r
                             WHERE r.topic = st.topic AND r.ordering_key = k.ordering_key
                               AND r.ordering_seq = q.s))
                  FROM (SELECT t.ordering_key,
                               GREATEST(max(t.ordering_seq) + 1, max(n.next_seq), 1) AS base
                          FROM (SELECT c.ordering_key, c.ordering_seq FROM unnest(taken) c
                                UNION ALL
                                SELECT c.ordering_key, NULL FROM unnest(cand) c
                                 WHERE c.id = ANY(parked)) t
                          LEFT JOIN outbox.ordering_next n
                            ON n.topic = st.topic AND n.ordering_key = t.ordering_key
                         GROUP BY t.ordering_key) k
                ON CONFLICT (topic, ordering_key) DO UPDATE SET next_seq = EXCLUDED.next_seq;
            END IF;

            -- The window read to its end (fewer than max_n, none left behind
            -- by the byte budget or a key's second message): everything hi
            -- shows is assigned, and it becomes the floor now, as an empty
            -- read would make it. The next claim opens a new window at once
            -- instead of reading this one again to find it empty, and
            -- outbox.stream_has_work judges from hi: at a steady rate most
            -- cuts end so.
            ended := nread < max_n AND cardinality(cand) = nread AND stop_at IS NULL;
            bid := NULL;
            IF cardinality(taken) > 0 THEN
                INSERT INTO outbox.batches (kind, topic, lane, snap_lo, snap_hi, from_txid, from_id,
                                            to_txid, to_id, size, skip_ids, fence, attempts,
                                            claims, owner, lease_until, state)
                VALUES ('s', st.topic, st.lane, lo, hi, ptxid, pid, last.txid, last.id,
                        cardinality(taken), parked, nextval('outbox.fences'), 1, 1, owner,
                        now() + lease, 'leased')
                RETURNING * INTO b;
                bid := b.id;
            END IF;
            UPDATE outbox.streams s
               SET snap_lo = CASE WHEN ended THEN hi ELSE lo END,
                   snap_hi = CASE WHEN ended THEN NULL ELSE hi END,
                   pos_txid = CASE WHEN ended THEN NULL ELSE last.txid END,
                   pos_id = CASE WHEN ended THEN NULL ELSE last.id END,
                   cut_at = now(), inflight = CASE WHEN st.lane > 0 AND ordering THEN bid END
             WHERE s.topic = st.topic AND s.lane = st.lane;
            IF bid IS NOT NULL THEN
                -- more: what this window left, or what the others hold
                -- (what this claim found dry, or cut to its end, is not
                -- probed again)
                left_more := NOT ended OR outbox.more_claimable(include, exclude, others, ordering,
                                                                tried || dry);
                RETURN QUERY
                SELECT b.id, b.kind, b.fence, 1, false, t.id,
                       outbox.available_us(t.created_at, t.not_before), t.topic,
                       t.idempotency_key, t.payload::text, t.ordering_key, t.ordering_seq, left_more
                  FROM unnest(taken) t;
                RETURN;
            END IF;
        END LOOP;
    END LOOP;
END
$$;
