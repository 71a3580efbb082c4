-- 012_streams.sql: the outbox as an append-only log read in commit order;
-- leases, fences and outcomes per batch, not per message.
--
-- Until 011 every message cost a new row version at every step: the claim
-- (lease, fence), the outcome (status) and the purge (DELETE), each with
-- its index entries. From here on a delivered message costs one INSERT (the
-- producer's) and nothing else:
--
-- * outbox.events is append-only, LIST-partitioned by slot into
--   outbox.event_slots() tables. A slot is emptied with TRUNCATE once every
--   message in it is done and older than the retention (outbox.housekeep):
--   no DELETE, no dead tuples, no vacuum debt, whatever transaction is held
--   open elsewhere.
-- * Relays read each (topic, lane) stream in COMMIT order, PgQ's way: a cut
--   takes the messages visible in a new snapshot and not in the previous
--   one (outbox.streams), so a transaction that commits late with a low id
--   is read when it commits, never skipped. A cut of up to N messages is a
--   batch (outbox.batches): one row with its lease, its fence (from the one
--   sequence outbox.fences, so a fence never goes backwards) and its
--   range. Recording a delivered batch is one UPDATE of that row.
-- * Per-message state exists only for exceptions: a message the consumer
--   answered `retry` (outbox.retries, with its own Full Jitter backoff),
--   a dead letter (outbox.dead), and an ordering key blocked behind one of
--   them (outbox.ordering_blocks).
-- * Ordering keys hash to lanes 1..outbox.ordering_lanes() of their topic
--   (lane 0 is unordered). A lane has one batch in flight at a time and a
--   batch holds at most one message of a key, so a key's messages go one
--   at a time in commit order, which for one key is enqueue (id) order:
--   enqueue serialises a key on its outbox.ordering_seqs row.
-- * One topic's stream never waits for another's: a relay does not cut the
--   streams of a topic whose destination is down (the claim's topic
--   filter), so a dead destination costs no row writes at all.
--
-- outbox.messages stays, as a VIEW with the columns of the contract (id,
-- topic, idempotency_key, payload, status, ...) derived from the above, for
-- people and tools; relays never read it. The rows of the old table are
-- carried over: delivered ones as history (lane -1, never read by a relay),
-- pending ones as new events (or, when a relay built before this version
-- holds a live lease on one, as retries due when that lease ends), dead
-- ones as dead letters. Old relays keep working for what they hold: their
-- outcome writes are accepted (and the carried-over copy redelivered after
-- their lease: the consumer answers duplicate); their claims fail against
-- the view, so they take nothing new. docs/relay.md, "Upgrading".

-- ---------------------------------------------------------------------------
-- Constants and versions
-- ---------------------------------------------------------------------------

-- Lanes per topic for ordered messages. Fixed: a key's lane must never
-- change while it has messages in flight.
CREATE FUNCTION outbox.ordering_lanes() RETURNS integer
    LANGUAGE sql IMMUTABLE AS 'SELECT 16';

-- Partitions of outbox.events. One takes inserts, the others hold the
-- retention window, one is kept empty to switch into.
CREATE FUNCTION outbox.event_slots() RETURNS integer
    LANGUAGE sql IMMUTABLE AS 'SELECT 4';

-- A stream batch taken over this many times is split into retries, one per
-- message, so that a message that kills relays cannot take its batch with it.
CREATE FUNCTION outbox.batch_split_after() RETURNS integer
    LANGUAGE sql IMMUTABLE AS 'SELECT 3';

-- Which protocol versions of each program this schema serves. A program
-- checks its own at start and after every reconnect (outbox.check_protocol)
-- and refuses, with one line, a schema that does not serve it.
CREATE TABLE outbox.protocols (
    component   text    PRIMARY KEY,
    min_version integer NOT NULL,
    max_version integer NOT NULL,
    CHECK (min_version <= max_version)
);
-- relay 2: streams and batches (this migration); relay 1 was the per-row
-- claim of 001-011. producer 1: outbox.enqueue. admin 2: outboxctl on this
-- data model.
INSERT INTO outbox.protocols VALUES ('relay', 2, 2), ('producer', 1, 1), ('admin', 2, 2);

-- Raises SQLSTATE OB001 when this schema does not serve component at
-- version; the message says which side to upgrade.
CREATE FUNCTION outbox.check_protocol(component text, version integer) RETURNS void
    LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_variable
DECLARE
    p outbox.protocols;
BEGIN
    SELECT * INTO p FROM outbox.protocols x WHERE x.component = component;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'outbox schema does not know component "%"', component
            USING ERRCODE = 'OB001';
    ELSIF version < p.min_version THEN
        RAISE EXCEPTION 'outbox schema serves % protocol %..%, this program speaks %: upgrade the program',
            component, p.min_version, p.max_version, version USING ERRCODE = 'OB001';
    ELSIF version > p.max_version THEN
        RAISE EXCEPTION 'outbox schema serves % protocol %..%, this program speaks %: run outboxctl migrate',
            component, p.min_version, p.max_version, version USING ERRCODE = 'OB001';
    END IF;
END
$$;

-- ---------------------------------------------------------------------------
-- The log
-- ---------------------------------------------------------------------------

-- Message ids continue where the old table's identity left off.
CREATE SEQUENCE outbox.event_ids;
SELECT setval('outbox.event_ids', COALESCE((SELECT max(id) FROM outbox.messages), 0) + 1, false);
-- Every fence of every batch and retry: one sequence, so a takeover can
-- never hand out a fence lower than one already used. It starts above the
-- old table's fences.
CREATE SEQUENCE outbox.fences;
SELECT setval('outbox.fences', COALESCE((SELECT max(fence) FROM outbox.messages), 0) + 1, false);
CREATE SEQUENCE outbox.batch_ids;

CREATE TABLE outbox.events (
    slot            smallint    NOT NULL,
    id              bigint      NOT NULL,
    txid            xid8        NOT NULL,   -- the inserting transaction
    lane            smallint    NOT NULL,   -- 0 unordered, 1.. ordered, -1 history
    topic           text        NOT NULL,
    idempotency_key text        NOT NULL,
    payload         jsonb       NOT NULL,
    ordering_key    text,
    ordering_seq    bigint,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT events_topic_check CHECK (octet_length(topic) BETWEEN 1 AND 255),
    CONSTRAINT events_key_check CHECK (octet_length(idempotency_key) BETWEEN 1 AND 255),
    CONSTRAINT events_ordering_key_check
        CHECK (ordering_key IS NULL OR octet_length(ordering_key) BETWEEN 1 AND 255)
) PARTITION BY LIST (slot);

DO $$
BEGIN
    FOR s IN 0 .. outbox.event_slots() - 1 LOOP
        EXECUTE format('CREATE TABLE outbox.events_%s PARTITION OF outbox.events'
                       ' FOR VALUES IN (%s)', s, s);
    END LOOP;
END
$$;

-- A stream in commit order: (topic, lane) then the inserting transaction.
CREATE INDEX events_stream ON outbox.events (topic, lane, txid, id);
-- Lookups by id (retries and dead letters copy the message, outboxctl).
CREATE INDEX events_id ON outbox.events (id);
-- enqueue's idempotency. Unique within a slot (a unique index on a
-- partitioned table must contain the partition key); across slots enqueue
-- looks before it inserts, and a slot switch waits for every inserting
-- transaction to finish (outbox.housekeep), so a key is never stored twice.
ALTER TABLE outbox.events ADD CONSTRAINT events_key UNIQUE (topic, idempotency_key, slot);

-- The slots: exactly one is current (takes inserts); closed ones hold the
-- retention window (closed_at: when it stopped taking inserts); empty ones
-- were truncated and wait to become current.
CREATE TABLE outbox.slots (
    slot      smallint    PRIMARY KEY,
    state     text        NOT NULL CHECK (state IN ('current', 'closed', 'empty')),
    since     timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX slots_one_current ON outbox.slots (state) WHERE state = 'current';
INSERT INTO outbox.slots (slot, state)
SELECT s, CASE s WHEN 0 THEN 'current' ELSE 'empty' END
  FROM generate_series(0, outbox.event_slots() - 1) s;

-- The relays' read position in each (topic, lane) stream: everything
-- visible in snap_lo is assigned to a batch; of what snap_hi adds, the
-- messages up to (pos_txid, pos_id) in (txid, id) order are too.
-- inflight: lanes > 0 only, the one batch the lane has out.
CREATE TABLE outbox.streams (
    topic    text        NOT NULL,
    lane     smallint    NOT NULL,
    snap_lo  pg_snapshot,            -- NULL: from the first message on
    snap_hi  pg_snapshot,            -- NULL: no window open
    pos_txid xid8,
    pos_id   bigint,
    inflight bigint,
    cut_at   timestamptz,
    PRIMARY KEY (topic, lane)
);

-- A claimed batch. kind 's': a cut of a stream, the messages (from, to] of
-- the window (snap_lo, snap_hi]; kind 'r': retries (outbox.retries rows
-- with this batch_id). Claimed with a lease and a fence; recorded with one
-- write of this row, fenced. A batch whose lease ran out (its worker died
-- or stalled, or it was released with a delay) is taken over: new fence,
-- attempts + 1. Done rows are kept a while for the record, then deleted.
CREATE TABLE outbox.batches (
    id          bigint      PRIMARY KEY DEFAULT nextval('outbox.batch_ids'),
    kind        "char"      NOT NULL CHECK (kind IN ('s', 'r')),
    topic       text        NOT NULL,
    lane        smallint,
    snap_lo     pg_snapshot,
    snap_hi     pg_snapshot,
    from_txid   xid8,
    from_id     bigint,
    to_txid     xid8,
    to_id       bigint,
    size        integer     NOT NULL,   -- messages to deliver
    skip_ids    bigint[],               -- lanes: ids in the range parked in outbox.retries
    fence       bigint      NOT NULL,
    attempts    integer     NOT NULL,   -- deliveries that reached a consumer, + this one
    claims      integer     NOT NULL,   -- claims, takeovers and re-takes after a release
    takeovers   integer     NOT NULL DEFAULT 0, -- of those, over a holder's expired lease
    owner       text,
    lease_until timestamptz NOT NULL,
    last_error  text,                   -- why it was last released (a failed frame)
    state       text        NOT NULL CHECK (state IN ('leased', 'done')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    done_at     timestamptz
);
CREATE INDEX batches_open ON outbox.batches (lease_until) WHERE state = 'leased';
CREATE INDEX batches_done ON outbox.batches (done_at) WHERE state = 'done';
CREATE INDEX batches_stream ON outbox.batches (topic, lane, id);

-- A message the consumer asked to retry (or of a key blocked behind one),
-- with its own copy of the message, so its slot can be truncated.
CREATE TABLE outbox.retries (
    id              bigint      PRIMARY KEY,
    topic           text        NOT NULL,
    idempotency_key text        NOT NULL,
    payload         jsonb       NOT NULL,
    ordering_key    text,
    ordering_seq    bigint,
    created_at      timestamptz NOT NULL,
    attempts        integer     NOT NULL,
    claims          integer     NOT NULL,
    due_at          timestamptz NOT NULL,
    last_error      text,
    batch_id        bigint,                 -- the retry batch holding it
    fence           bigint      NOT NULL DEFAULT 0
);
CREATE INDEX retries_due ON outbox.retries (topic, due_at) WHERE batch_id IS NULL;
CREATE INDEX retries_batch ON outbox.retries (batch_id) WHERE batch_id IS NOT NULL;
CREATE INDEX retries_key ON outbox.retries (topic, ordering_key, ordering_seq)
    WHERE ordering_key IS NOT NULL;
CREATE UNIQUE INDEX retries_idempotency ON outbox.retries (topic, idempotency_key);

-- Dead letters, with their own copy of the message and their own retention.
CREATE TABLE outbox.dead (
    id              bigint      PRIMARY KEY,
    topic           text        NOT NULL,
    idempotency_key text        NOT NULL,
    payload         jsonb       NOT NULL,
    ordering_key    text,
    ordering_seq    bigint,
    created_at      timestamptz NOT NULL,
    attempts        integer     NOT NULL,
    claims          integer     NOT NULL,
    fence           bigint      NOT NULL,
    last_error      text,
    died_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dead_died_at ON outbox.dead (died_at);
CREATE UNIQUE INDEX dead_key ON outbox.dead (topic, idempotency_key);

-- A key whose messages wait behind a retry ('retry') or a dead letter kept
-- blocking it ('dead', --on-dead-head block). Its later messages are parked
-- in outbox.retries, in order, until the key is free again.
CREATE TABLE outbox.ordering_blocks (
    topic        text        NOT NULL,
    ordering_key text        NOT NULL,
    state        text        NOT NULL CHECK (state IN ('retry', 'dead')),
    since        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic, ordering_key)
);

-- The last ordering_seq handed out per (topic, ordering_key), and the row
-- lock that serialises a key's enqueues: a key's messages commit in the
-- order of their sequence numbers.
CREATE TABLE outbox.ordering_seqs (
    topic        text   NOT NULL,
    ordering_key text   NOT NULL,
    last_seq     bigint NOT NULL,
    PRIMARY KEY (topic, ordering_key)
);

-- The lane of an ordering key.
CREATE FUNCTION outbox.lane_of(ordering_key text) RETURNS smallint
    LANGUAGE sql IMMUTABLE AS
    'SELECT CASE WHEN ordering_key IS NULL THEN 0
            ELSE 1 + (hashtext(ordering_key) & 2147483647) % outbox.ordering_lanes() END::smallint';

-- ---------------------------------------------------------------------------
-- Carry the old table over
-- ---------------------------------------------------------------------------

-- Sequence numbers per (topic, key): above any the key had (keys were
-- global before).
INSERT INTO outbox.ordering_seqs (topic, ordering_key, last_seq)
SELECT t.topic, t.ordering_key, k.last_seq
  FROM (SELECT DISTINCT topic, ordering_key FROM outbox.messages
         WHERE ordering_key IS NOT NULL) t
  JOIN outbox.ordering_keys k ON k.ordering_key = t.ordering_key;

-- Dead letters.
INSERT INTO outbox.dead (id, topic, idempotency_key, payload, ordering_key, ordering_seq,
                         created_at, attempts, claims, fence, last_error, died_at)
SELECT id, topic, idempotency_key, payload, ordering_key, ordering_seq, created_at,
       attempts, fence, fence, last_error, COALESCE(delivered_at, now())
  FROM outbox.messages WHERE status = 'dead';
INSERT INTO outbox.ordering_blocks (topic, ordering_key, state)
SELECT DISTINCT topic, ordering_key, 'dead' FROM outbox.messages
 WHERE status = 'dead' AND is_head AND ordering_key IS NOT NULL;

-- Pending messages under a live lease of an old relay, and every pending
-- message of an ordering key that has one: retries, due when the lease
-- ends (the old relay may still deliver them; the consumer answers the
-- second delivery duplicate).
CREATE TEMPORARY TABLE held ON COMMIT DROP AS
SELECT m.id FROM outbox.messages m
 WHERE m.status = 'pending'
   AND (m.lease_until > now()
        OR (m.ordering_key IS NOT NULL AND EXISTS (
                SELECT 1 FROM outbox.messages h
                 WHERE h.ordering_key = m.ordering_key AND h.status = 'pending'
                   AND h.lease_until > now())));
INSERT INTO outbox.retries (id, topic, idempotency_key, payload, ordering_key, ordering_seq,
                            created_at, attempts, claims, due_at, last_error)
SELECT m.id, m.topic, m.idempotency_key, m.payload, m.ordering_key, m.ordering_seq,
       m.created_at, m.attempts, m.fence,
       GREATEST(m.available_at, COALESCE(m.lease_until, now()) + interval '1 second'),
       m.last_error
  FROM outbox.messages m JOIN held USING (id);
INSERT INTO outbox.ordering_blocks (topic, ordering_key, state)
SELECT DISTINCT r.topic, r.ordering_key, 'retry' FROM outbox.retries r
 WHERE r.ordering_key IS NOT NULL
ON CONFLICT DO NOTHING;

-- Pending messages due later keep their due time, as retries.
INSERT INTO outbox.retries (id, topic, idempotency_key, payload, ordering_key, ordering_seq,
                            created_at, attempts, claims, due_at, last_error)
SELECT m.id, m.topic, m.idempotency_key, m.payload, m.ordering_key, m.ordering_seq,
       m.created_at, m.attempts, m.fence, m.available_at, m.last_error
  FROM outbox.messages m
 WHERE m.status = 'pending' AND m.available_at > now()
   AND m.id NOT IN (SELECT id FROM held)
   AND (m.ordering_key IS NULL OR NOT EXISTS (
            SELECT 1 FROM outbox.ordering_blocks b
             WHERE b.topic = m.topic AND b.ordering_key = m.ordering_key));
-- Later messages of a key blocked above wait behind it.
INSERT INTO outbox.retries (id, topic, idempotency_key, payload, ordering_key, ordering_seq,
                            created_at, attempts, claims, due_at, last_error)
SELECT m.id, m.topic, m.idempotency_key, m.payload, m.ordering_key, m.ordering_seq,
       m.created_at, m.attempts, m.fence, now(), m.last_error
  FROM outbox.messages m
 WHERE m.status = 'pending' AND m.id NOT IN (SELECT id FROM outbox.retries)
   AND m.ordering_key IS NOT NULL AND EXISTS (
            SELECT 1 FROM outbox.ordering_blocks b
             WHERE b.topic = m.topic AND b.ordering_key = m.ordering_key);
-- Any other pending message: a new event, in id order.
INSERT INTO outbox.events (slot, id, txid, lane, topic, idempotency_key, payload,
                           ordering_key, ordering_seq, created_at)
SELECT 0, m.id, pg_current_xact_id(), outbox.lane_of(m.ordering_key), m.topic,
       m.idempotency_key, m.payload, m.ordering_key, m.ordering_seq, m.created_at
  FROM outbox.messages m
 WHERE m.status = 'pending' AND m.id NOT IN (SELECT id FROM outbox.retries)
 ORDER BY m.id;
-- Every other message is history in lane -1 (never read by a relay): the
-- delivered ones, and the dead ones and retries (those have their own
-- copies), so that a message has an event row until its slot goes, like
-- any other (idempotency of enqueue, outboxctl inspect, the view).
INSERT INTO outbox.events (slot, id, txid, lane, topic, idempotency_key, payload,
                           ordering_key, ordering_seq, created_at)
SELECT 0, m.id, pg_current_xact_id(), -1, m.topic, m.idempotency_key, m.payload,
       m.ordering_key, m.ordering_seq, m.created_at
  FROM outbox.messages m
 WHERE m.status IN ('delivered', 'dead') OR m.id IN (SELECT id FROM outbox.retries);

INSERT INTO outbox.streams (topic, lane)
SELECT DISTINCT topic, lane FROM outbox.events WHERE lane >= 0;

DROP TABLE outbox.messages;
DROP TABLE outbox.ordering_keys;

-- ---------------------------------------------------------------------------
-- Producers
-- ---------------------------------------------------------------------------

-- enqueue: call inside the caller's business transaction. Idempotent per
-- (topic, idempotency_key): a second call returns the first id, adds
-- nothing. The message goes to the current slot; a key already stored in
-- another slot is found first. If the slot switched between that look and
-- the insert, the other slots are looked at again (a new snapshot, taken
-- after the switch, which waited for every transaction inserting into the
-- old slot): a copy found there wins and this one is removed again.
CREATE OR REPLACE FUNCTION outbox.enqueue(topic text, idempotency_key text, payload jsonb,
                                          ordering_key text DEFAULT NULL)
    RETURNS bigint
    LANGUAGE plpgsql
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
        -- committed first (ON CONFLICT waited for it); our sequence number
        -- is a harmless gap.
        SELECT e.id INTO new_id FROM outbox.events e
         WHERE e.topic = enqueue.topic AND e.idempotency_key = enqueue.idempotency_key
         LIMIT 1;
        RETURN new_id;
    END IF;
    IF into_slot IS DISTINCT FROM seen_slot THEN
        SELECT e.id INTO other_id FROM outbox.events e
         WHERE e.topic = enqueue.topic AND e.idempotency_key = enqueue.idempotency_key
           AND e.slot <> into_slot
         LIMIT 1;
        IF other_id IS NOT NULL THEN
            DELETE FROM outbox.events e WHERE e.slot = into_slot AND e.id = new_id;
            RETURN other_id;
        END IF;
    END IF;
    RETURN new_id;
END
$$;

-- Relays LISTEN on outbox_enqueued; the trigger of 006/008/010 moves over.
CREATE TRIGGER events_notify AFTER INSERT ON outbox.events
    FOR EACH STATEMENT WHEN (outbox.relays_waiting())
    EXECUTE FUNCTION outbox.notify_enqueued();

-- ---------------------------------------------------------------------------
-- Reading a stream
-- ---------------------------------------------------------------------------

-- The messages of stream (topic, lane) that snapshot hi adds to snapshot lo
-- (lo NULL: from the beginning), after position (after_txid, after_id)
-- (NULL: from the first), in commit order, at most n. PgQ's split keeps it
-- index range scans however old lo's xmin is: the new messages are those
-- of transactions in progress at lo (lo's xip list) and those of
-- transactions that started after it (txid >= lo's xmax), of which the
-- ones that had committed by hi. Every xip transaction is older than lo's
-- xmax, so the first part, read one transaction at a time in txid order,
-- comes wholly before the second: no merge, and no read of the stream's
-- history (an ordered scan with "txid = ANY(xip)" cannot use the array in
-- its index bounds and filtered the whole retained stream on every read).
CREATE FUNCTION outbox.stream_read(topic text, lane smallint, lo pg_snapshot, hi pg_snapshot,
                                   after_txid xid8, after_id bigint, n integer)
    RETURNS SETOF outbox.events
    LANGUAGE plpgsql STABLE
    -- The planner judges "(txid, id) > (t, i)" by txid alone: in a stream
    -- enqueued by one transaction (a backfill) it expects no row past the
    -- position and would sort the whole rest of the stream for each batch
    -- (test_claim_reads_a_batch_of_a_backfill). Read in index order; and
    -- never by a scan (see outbox.stream_has_work). No JIT: a plan priced
    -- with the disabled-node cost passes jit_above_cost, and compiling it
    -- took ~130 ms of a read that runs in well under one.
    SET enable_sort = off SET enable_seqscan = off SET jit = off
    AS $$
#variable_conflict use_variable
-- plpgsql, not sql: its plans are kept for the session, a sql function's
-- are made anew on every call (1.5 ms each over the partitions).
DECLARE
    lo_xmax xid8 := COALESCE(pg_snapshot_xmax(lo), '0'::xid8);
    hi_xmax xid8 := pg_snapshot_xmax(hi);
    a_txid  xid8 := COALESCE(after_txid, '0'::xid8);
    a_id    bigint := COALESCE(after_id, 0);
    left_n  bigint := n;
    got     bigint;
    x       xid8;
BEGIN
    FOR x IN SELECT t FROM pg_snapshot_xip(lo) t
              WHERE t >= a_txid AND pg_visible_in_snapshot(t, hi) ORDER BY t LOOP
        RETURN QUERY
        SELECT e.* FROM outbox.events e
         WHERE e.topic = stream_read.topic AND e.lane = stream_read.lane
           AND e.txid = x AND (e.txid, e.id) > (a_txid, a_id)
         ORDER BY e.txid, e.id LIMIT left_n;
        GET DIAGNOSTICS got = ROW_COUNT;
        left_n := left_n - got;
        IF left_n <= 0 THEN
            RETURN;
        END IF;
    END LOOP;
    -- One lower bound for the index: the later of the position and lo's
    -- xmax ("txid >= lo_xmax" as a row, ids being positive). Given as two
    -- conditions, the generic plan bounds the scan by one of them and
    -- filters by the other: from the stream's first message on a new cut.
    IF (a_txid, a_id) < (lo_xmax, 0::bigint) THEN
        a_txid := lo_xmax;
        a_id := 0;
    END IF;
    RETURN QUERY
    SELECT e.* FROM outbox.events e
     WHERE e.topic = stream_read.topic AND e.lane = stream_read.lane
       AND (e.txid, e.id) > (a_txid, a_id) AND e.txid < hi_xmax
       AND pg_visible_in_snapshot(e.txid, hi)
     ORDER BY e.txid, e.id LIMIT left_n;
END
$$;

-- Whether stream (topic, lane) may have messages not yet assigned: any
-- message not visible in snap_lo. Two index probes; a window already cut
-- to its end still answers true once, until the next cut moves snap_lo.
CREATE FUNCTION outbox.stream_has_work(topic text, lane smallint, lo pg_snapshot)
    RETURNS boolean
    LANGUAGE plpgsql STABLE
    -- Index probes only. The session's generic plan, made for any topic,
    -- judges "some message of (topic, lane) with txid = ANY(xip)" by the
    -- biggest topic in the statistics and picks a scan that stops at the
    -- first match: over a big history of another topic it reads it all
    -- (test_drain_never_scans_a_big_table). No JIT (see stream_read).
    SET enable_seqscan = off SET jit = off
    AS $$
#variable_conflict use_variable
DECLARE
    newest xid8;
    x xid8;
BEGIN
    -- The stream's newest transaction: a backward walk of the index, one
    -- entry; the planner takes it whatever it guesses of the bounds (an
    -- EXISTS over "txid >= $1" it was seen to answer by a scan).
    SELECT e.txid INTO newest FROM outbox.events e
     WHERE e.topic = stream_has_work.topic AND e.lane = stream_has_work.lane
     ORDER BY e.txid DESC LIMIT 1;
    IF newest IS NULL THEN
        RETURN false;
    END IF;
    IF lo IS NULL OR newest >= pg_snapshot_xmax(lo) THEN
        RETURN true;
    END IF;
    -- one probe per transaction in progress at lo: "txid = ANY(xip)" in a
    -- generic plan was a filter over the stream's whole history
    FOR x IN SELECT pg_snapshot_xip(lo) LOOP
        IF EXISTS (SELECT 1 FROM outbox.events e
                    WHERE e.topic = stream_has_work.topic AND e.lane = stream_has_work.lane
                      AND e.txid = x) THEN
            RETURN true;
        END IF;
    END LOOP;
    RETURN false;
END
$$;

-- Give every (topic, lane) that has messages a stream row; returns how
-- many were new. The relays do it (each claim that finds no stream with
-- work, and every poll interval), not enqueue: a producer's transaction
-- must never wait on another's for the first message of a topic. A loose
-- index scan: one probe per stream and partition, however many messages.
-- The (topic, lane) pairs that have messages in outbox.events: a loose
-- index scan, one index probe per slot and (topic, lane), however many
-- messages (history, lane -1, is stepped over like a stream).
CREATE FUNCTION outbox.event_streams(OUT topic text, OUT lane smallint) RETURNS SETOF record
    LANGUAGE sql STABLE ROWS 20 AS $$
    WITH RECURSIVE s AS (
        (SELECT e.topic, e.lane FROM outbox.events e ORDER BY e.topic, e.lane LIMIT 1)
        UNION ALL
        SELECT n.topic, n.lane FROM s, LATERAL (
            SELECT e.topic, e.lane FROM outbox.events e
             WHERE (e.topic, e.lane) > (s.topic, s.lane)
             ORDER BY e.topic, e.lane LIMIT 1) n)
    SELECT s.topic, s.lane FROM s WHERE s.lane >= 0
$$;

-- Every stream: the rows of outbox.streams, and for a (topic, lane) no
-- relay has read yet, the row it will get (nothing assigned yet).
CREATE FUNCTION outbox.all_streams() RETURNS SETOF outbox.streams
    LANGUAGE sql STABLE ROWS 20 AS $$
    SELECT * FROM outbox.streams
    UNION ALL
    SELECT e.topic, e.lane, NULL, NULL, NULL, NULL, NULL, NULL
      FROM outbox.event_streams() e
     WHERE NOT EXISTS (SELECT 1 FROM outbox.streams x
                        WHERE x.topic = e.topic AND x.lane = e.lane)
$$;

CREATE FUNCTION outbox.discover_streams() RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    added integer;
BEGIN
    INSERT INTO outbox.streams (topic, lane)
    SELECT s.topic, s.lane FROM outbox.event_streams() s
     WHERE NOT EXISTS (SELECT 1 FROM outbox.streams x
                        WHERE x.topic = s.topic AND x.lane = s.lane)
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS added = ROW_COUNT;
    RETURN added;
END
$$;

-- Whether the claim may take topic: named in include, or, with others,
-- not named in exclude (the relay's routing and breakers, relay/claim.c).
CREATE FUNCTION outbox.topic_claimable(topic text, include text[], exclude text[],
                                       others boolean)
    RETURNS boolean
    LANGUAGE sql IMMUTABLE AS
    'SELECT topic = ANY(COALESCE(include, ''{}'')) OR (others AND NOT (topic = ANY(COALESCE(exclude, ''{}''))))';


-- ---------------------------------------------------------------------------
-- Claiming
-- ---------------------------------------------------------------------------

-- The rows a claim returns: one batch's messages.
CREATE TYPE outbox.claimed AS (
    batch_id        bigint,
    kind            "char",    -- 's' a stream batch, 'r' retries
    fence           bigint,
    attempt         integer,
    takeover        boolean,
    id              bigint,
    created_us      bigint,
    topic           text,
    idempotency_key text,
    payload         text,
    ordering_key    text,
    ordering_seq    bigint
);

-- The messages of stream batch b, in commit order (without the ones it
-- parked).
CREATE FUNCTION outbox.batch_events(b outbox.batches) RETURNS SETOF outbox.events
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT e.* FROM outbox.stream_read(b.topic, b.lane, b.snap_lo, b.snap_hi, b.from_txid,
                                       b.from_id, b.size + COALESCE(cardinality(b.skip_ids), 0)) e
     WHERE (e.txid, e.id) <= (b.to_txid, b.to_id)
       AND NOT (e.id = ANY(COALESCE(b.skip_ids, '{}')));
END
$$;

-- Whether stream batch b holds message e (its range, minus what it parked).
CREATE FUNCTION outbox.batch_holds(b outbox.batches, e outbox.events) RETURNS boolean
    LANGUAGE sql IMMUTABLE AS $$
    SELECT (b.snap_lo IS NULL OR NOT pg_visible_in_snapshot(e.txid, b.snap_lo))
       AND pg_visible_in_snapshot(e.txid, b.snap_hi)
       AND (b.from_txid IS NULL OR (e.txid, e.id) > (b.from_txid, b.from_id))
       AND (e.txid, e.id) <= (b.to_txid, b.to_id)
       AND NOT (e.id = ANY(COALESCE(b.skip_ids, '{}')))
$$;

-- A stream batch taken over too often goes to outbox.retries, one row per
-- message (its attempts carried over, due now); an ordered message there
-- blocks its key, as a retry would. The batch is done.
CREATE FUNCTION outbox.split_batch(b outbox.batches) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO outbox.retries (id, topic, idempotency_key, payload, ordering_key,
                                ordering_seq, created_at, attempts, claims, due_at, last_error,
                                fence)
    SELECT e.id, e.topic, e.idempotency_key, e.payload, e.ordering_key, e.ordering_seq,
           e.created_at, b.attempts - 1, b.claims, now(),
           format('batch %s taken over %s times: split into single messages', b.id,
                  b.takeovers), b.fence
      FROM outbox.batch_events(b) e
    ON CONFLICT DO NOTHING;
    INSERT INTO outbox.ordering_blocks (topic, ordering_key, state)
    SELECT DISTINCT b.topic, e.ordering_key, 'retry' FROM outbox.batch_events(b) e
     WHERE e.ordering_key IS NOT NULL
    ON CONFLICT DO NOTHING;
    UPDATE outbox.batches x SET state = 'done', done_at = now() WHERE x.id = b.id;
    IF b.lane > 0 THEN
        UPDATE outbox.streams s SET inflight = NULL
         WHERE s.topic = b.topic AND s.lane = b.lane AND s.inflight = b.id;
    END IF;
END
$$;

-- Whether a free, due retry r may go now: an unordered one always; of an
-- ordering key only the lowest waiting message, and not while the key
-- waits on a dead letter (ordering false: the BROKEN --no-ordering mode).
CREATE FUNCTION outbox.retry_claimable(r outbox.retries, ordering boolean) RETURNS boolean
    LANGUAGE sql STABLE AS $$
    SELECT r.ordering_key IS NULL OR NOT ordering OR (
        NOT EXISTS (SELECT 1 FROM outbox.retries p
                     WHERE p.topic = r.topic AND p.ordering_key = r.ordering_key
                       AND p.ordering_seq < r.ordering_seq)
        AND NOT EXISTS (SELECT 1 FROM outbox.ordering_blocks k
                         WHERE k.topic = r.topic AND k.ordering_key = r.ordering_key
                           AND k.state = 'dead'))
$$;

-- The stream a claim cuts next, its row locked (FOR UPDATE SKIP LOCKED: a
-- stream another claim is cutting is left to it), or NULL: of the streams
-- the claim may take (its topics; a lane only while it has no batch out;
-- not tried yet in this claim), the least recently cut that may have new
-- messages. The probe for new messages (two index probes) is made in that
-- order and stops at the first stream that has some, rather than for every
-- stream before sorting them. busy: a stream with work was skipped, locked.
CREATE FUNCTION outbox.lock_next_stream(include text[], exclude text[], others boolean,
                                        ordering boolean, tried text[],
                                        OUT st outbox.streams, OUT busy boolean)
    LANGUAGE plpgsql AS $$
DECLARE
    c  record;
BEGIN
    busy := false;
    FOR c IN SELECT s.topic, s.lane, s.snap_lo FROM outbox.streams s
              WHERE outbox.topic_claimable(s.topic, include, exclude, others)
                AND (s.lane = 0 OR s.inflight IS NULL OR NOT ordering)
                AND NOT ((s.topic || '/' || s.lane) = ANY(tried))
              ORDER BY s.cut_at NULLS FIRST
    LOOP
        -- snap_lo read unlocked can only be older than the row's: the probe
        -- may say yes once too often (the cut then finds nothing), never no
        CONTINUE WHEN NOT outbox.stream_has_work(c.topic, c.lane, c.snap_lo);
        SELECT * INTO st FROM outbox.streams s
         WHERE s.topic = c.topic AND s.lane = c.lane
           AND (s.lane = 0 OR s.inflight IS NULL OR NOT ordering)
           FOR UPDATE SKIP LOCKED;
        IF FOUND THEN
            RETURN;
        END IF;
        -- another relay is cutting it
        busy := true;
    END LOOP;
    st := NULL;
END
$$;

-- claim: up to max_n messages of ONE batch for owner, leased for lease_ms,
-- from the topics the relay may send now (outbox.topic_claimable), in this
-- order: a batch whose lease ran out (taken over: new fence from
-- outbox.fences, attempts + 1), then due retries and a cut of a stream,
-- retries first when retries_first. No rows: nothing to do. Every claimed
-- message of a batch carries the batch's id, fence and attempt.
-- ordering = false is the BROKEN --no-ordering mode: lanes are cut like
-- lane 0 (several batches out, several messages of a key in one, nothing
-- parked) and every retry of a key is claimable.
CREATE FUNCTION outbox.claim(protocol integer, owner text, lease_ms bigint, max_n integer,
                             include text[], exclude text[], others boolean,
                             retries_first boolean, ordering boolean DEFAULT true)
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
    lo      pg_snapshot;
    hi      pg_snapshot;
    ptxid   xid8;
    pid     bigint;
    cand    outbox.events[];
    keys    text[];
    blocked text[];
    stop_at bigint;
    taken   outbox.events[];
    parked  bigint[];
    last    outbox.events;
    rtopic  text;
    picked  bigint[];
    found_any  boolean;
    discovered boolean := false;
    locked  record;
    bid     bigint;
BEGIN
    PERFORM outbox.check_protocol('relay', protocol);
    IF max_n < 1 THEN
        RETURN;
    END IF;

    -- 1. A batch whose lease ran out: a holder that died or stalled, or a
    -- batch released until later. A takeover bumps the fence, so the old
    -- holder's outcome write is refused.
    SELECT * INTO b FROM outbox.batches x
     WHERE x.state = 'leased' AND x.lease_until < now()
       AND outbox.topic_claimable(x.topic, include, exclude, others)
     ORDER BY x.lease_until LIMIT 1 FOR UPDATE SKIP LOCKED;
    IF FOUND THEN
        was := b.owner;
        UPDATE outbox.batches x
           SET owner = claim.owner, lease_until = now() + lease,
               fence = nextval('outbox.fences'), attempts = x.attempts + 1,
               claims = x.claims + 1,
               takeovers = x.takeovers + CASE WHEN was IS NULL THEN 0 ELSE 1 END
         WHERE x.id = b.id RETURNING * INTO b;
        IF b.kind = 'r' THEN
            RETURN QUERY
            WITH r AS (
                UPDATE outbox.retries r SET fence = b.fence, attempts = r.attempts + 1,
                       claims = r.claims + 1
                 WHERE r.batch_id = b.id
                RETURNING r.*)
            SELECT b.id, b.kind, b.fence, r.attempts, was IS NOT NULL, r.id,
                   (extract(epoch FROM r.created_at) * 1000000)::bigint, r.topic,
                   r.idempotency_key, r.payload::text, r.ordering_key, r.ordering_seq
              FROM r ORDER BY r.ordering_seq NULLS FIRST, r.id;
            RETURN;
        ELSIF b.takeovers >= outbox.batch_split_after() THEN
            PERFORM outbox.split_batch(b);
        ELSE
            RETURN QUERY
            SELECT b.id, b.kind, b.fence, b.attempts, was IS NOT NULL, e.id,
                   (extract(epoch FROM e.created_at) * 1000000)::bigint, e.topic,
                   e.idempotency_key, e.payload::text, e.ordering_key, e.ordering_seq
              FROM outbox.batch_events(b) e;
            RETURN;
        END IF;
    END IF;

    FOR step IN 1 .. 2 LOOP
        IF (step = 1) = retries_first THEN
            -- 2. Due retries of one topic (a batch goes to one destination);
            -- of an ordering key only its head, and not while the key waits
            -- on a dead letter.
            SELECT r.topic INTO rtopic FROM outbox.retries r
             WHERE r.batch_id IS NULL AND r.due_at <= now()
               AND outbox.topic_claimable(r.topic, include, exclude, others)
               AND outbox.retry_claimable(r, ordering)
             ORDER BY r.due_at LIMIT 1;
            CONTINUE WHEN rtopic IS NULL;
            picked := ARRAY(
                SELECT r.id FROM outbox.retries r
                 WHERE r.topic = rtopic AND r.batch_id IS NULL AND r.due_at <= now()
                   AND outbox.retry_claimable(r, ordering)
                 ORDER BY r.due_at, r.id LIMIT max_n
                 FOR UPDATE SKIP LOCKED);
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
                   (extract(epoch FROM r.created_at) * 1000000)::bigint, r.topic,
                   r.idempotency_key, r.payload::text, r.ordering_key, r.ordering_seq
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
                IF cardinality(cand) = 0 THEN
                    -- Everything hi shows is assigned: it becomes the floor.
                    UPDATE outbox.streams s SET snap_lo = hi, snap_hi = NULL,
                           pos_txid = NULL, pos_id = NULL
                     WHERE s.topic = st.topic AND s.lane = st.lane;
                    CONTINUE;
                END IF;
            END IF;

            IF st.lane = 0 OR NOT ordering THEN
                taken := cand;
                parked := NULL;
                last := cand[cardinality(cand)];
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
                SELECT min(x.n) INTO stop_at FROM (
                    SELECT c.n, row_number() OVER (PARTITION BY c.ordering_key ORDER BY c.n) nth,
                           c.ordering_key = ANY(blocked) AS is_blocked
                      FROM unnest(cand) WITH ORDINALITY c(slot, id, txid, lane, topic,
                           idempotency_key, payload, ordering_key, ordering_seq, created_at, n)
                ) x WHERE x.nth > 1 AND NOT x.is_blocked;
                taken := ARRAY(SELECT ROW(c.slot, c.id, c.txid, c.lane, c.topic, c.idempotency_key,
                                          c.payload, c.ordering_key, c.ordering_seq,
                                          c.created_at)::outbox.events
                                 FROM unnest(cand) WITH ORDINALITY c(slot, id, txid, lane, topic,
                                      idempotency_key, payload, ordering_key, ordering_seq,
                                      created_at, n)
                                WHERE (stop_at IS NULL OR c.n < stop_at)
                                  AND NOT (c.ordering_key = ANY(blocked))
                                ORDER BY c.n);
                parked := ARRAY(SELECT c.id
                                  FROM unnest(cand) WITH ORDINALITY c(slot, id, txid, lane, topic,
                                       idempotency_key, payload, ordering_key, ordering_seq,
                                       created_at, n)
                                 WHERE (stop_at IS NULL OR c.n < stop_at)
                                   AND c.ordering_key = ANY(blocked)
                                 ORDER BY c.n);
                last := cand[COALESCE(stop_at - 1, cardinality(cand))];
                IF cardinality(parked) > 0 THEN
                    INSERT INTO outbox.retries (id, topic, idempotency_key, payload, ordering_key,
                                                ordering_seq, created_at, attempts, claims,
                                                due_at, last_error)
                    SELECT c.id, c.topic, c.idempotency_key, c.payload, c.ordering_key,
                           c.ordering_seq, c.created_at, 0, 0, now(),
                           'waits behind an earlier message of its ordering key'
                      FROM unnest(cand) c WHERE c.id = ANY(parked)
                    ON CONFLICT DO NOTHING;
                ELSE
                    parked := NULL;
                END IF;
            END IF;

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
               SET snap_lo = lo, snap_hi = hi, pos_txid = last.txid, pos_id = last.id,
                   cut_at = now(), inflight = CASE WHEN st.lane > 0 AND ordering THEN bid END
             WHERE s.topic = st.topic AND s.lane = st.lane;
            IF bid IS NOT NULL THEN
                RETURN QUERY
                SELECT b.id, b.kind, b.fence, 1, false, t.id,
                       (extract(epoch FROM t.created_at) * 1000000)::bigint, t.topic,
                       t.idempotency_key, t.payload::text, t.ordering_key, t.ordering_seq
                  FROM unnest(taken) t;
                RETURN;
            END IF;
        END LOOP;
    END LOOP;
END
$$;

-- ---------------------------------------------------------------------------
-- Recording
-- ---------------------------------------------------------------------------

-- record: the outcome of batch `batch`, written only while it is still
-- held with `fence` (fencing = false is the BROKEN --no-fencing mode).
-- outcome, for the whole batch:
--   'done'     every message delivered but those listed, whose kinds say
--              'retry' (a retry row, due after delays[i] ms) or 'dead';
--              for a retry batch ('r') every message is listed, and may
--              also say 'delivered';
--   'release'  not sent (breaker open, shutdown) or failed in transport:
--              the batch (or its retries) is due again after delay_ms,
--              its attempt given back when refund.
-- A retry or dead letter of an ordering key blocks the key (a dead one
-- only with skip_dead_heads false); a delivered head frees it once no
-- message of the key waits. Returns false when fenced out (nothing is
-- written).
CREATE FUNCTION outbox.record(protocol integer, batch bigint, fence bigint, fencing boolean,
                              outcome text, delay_ms bigint, refund boolean, ids bigint[],
                              kinds text[], delays bigint[], errors text[],
                              skip_dead_heads boolean)
    RETURNS boolean
    LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    b     outbox.batches;
    freed text[];
BEGIN
    PERFORM outbox.check_protocol('relay', protocol);
    SELECT * INTO b FROM outbox.batches x
     WHERE x.id = batch AND (NOT fencing OR (x.state = 'leased' AND x.fence = record.fence))
       FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF outcome NOT IN ('done', 'release') THEN
        RAISE EXCEPTION 'outbox.record: outcome must be done or release, not %', outcome
            USING ERRCODE = '22023';
    END IF;

    IF outcome = 'release' THEN
        IF b.kind = 's' THEN
            UPDATE outbox.batches x
               SET owner = NULL, lease_until = now() + delay_ms * interval '1 millisecond',
                   attempts = x.attempts - CASE WHEN refund THEN 1 ELSE 0 END, state = 'leased',
                   last_error = COALESCE(NULLIF(errors[1], ''), x.last_error)
             WHERE x.id = b.id;
        ELSE
            UPDATE outbox.retries r
               SET batch_id = NULL, due_at = now() + delay_ms * interval '1 millisecond',
                   attempts = r.attempts - CASE WHEN refund THEN 1 ELSE 0 END,
                   last_error = COALESCE(NULLIF(errors[1], ''), r.last_error)
             WHERE r.batch_id = b.id;
            UPDATE outbox.batches x SET state = 'done', done_at = now() WHERE x.id = b.id;
        END IF;
        RETURN true;
    END IF;

    IF b.kind = 's' THEN
        INSERT INTO outbox.retries (id, topic, idempotency_key, payload, ordering_key,
                                    ordering_seq, created_at, attempts, claims, due_at,
                                    last_error, fence)
        SELECT e.id, e.topic, e.idempotency_key, e.payload, e.ordering_key, e.ordering_seq,
               e.created_at, b.attempts, b.claims,
               now() + o.delay_ms * interval '1 millisecond', NULLIF(o.error, ''), b.fence
          FROM unnest(ids, kinds, delays, errors) o(id, kind, delay_ms, error)
          JOIN outbox.events e ON e.id = o.id
         WHERE o.kind = 'retry'
        ON CONFLICT DO NOTHING;
        INSERT INTO outbox.dead (id, topic, idempotency_key, payload, ordering_key,
                                 ordering_seq, created_at, attempts, claims, fence, last_error)
        SELECT e.id, e.topic, e.idempotency_key, e.payload, e.ordering_key, e.ordering_seq,
               e.created_at, b.attempts, b.claims, b.fence, NULLIF(o.error, '')
          FROM unnest(ids, kinds, errors) o(id, kind, error)
          JOIN outbox.events e ON e.id = o.id
         WHERE o.kind = 'dead'
        ON CONFLICT DO NOTHING;
        IF b.lane > 0 THEN
            INSERT INTO outbox.ordering_blocks (topic, ordering_key, state)
            SELECT DISTINCT e.topic, e.ordering_key,
                   CASE o.kind WHEN 'dead' THEN 'dead' ELSE 'retry' END
              FROM unnest(ids, kinds) o(id, kind)
              JOIN outbox.events e ON e.id = o.id
             WHERE e.ordering_key IS NOT NULL
               AND (o.kind = 'retry' OR (o.kind = 'dead' AND NOT skip_dead_heads))
            ON CONFLICT (topic, ordering_key) DO UPDATE SET state = EXCLUDED.state;
            UPDATE outbox.streams s SET inflight = NULL
             WHERE s.topic = b.topic AND s.lane = b.lane AND s.inflight = b.id;
        END IF;
    ELSE
        -- A retry batch: every message has its own outcome.
        WITH o AS (SELECT * FROM unnest(ids, kinds, delays, errors)
                                 o(id, kind, delay_ms, error)),
        d AS (
            INSERT INTO outbox.dead (id, topic, idempotency_key, payload, ordering_key,
                                     ordering_seq, created_at, attempts, claims, fence,
                                     last_error)
            SELECT r.id, r.topic, r.idempotency_key, r.payload, r.ordering_key, r.ordering_seq,
                   r.created_at, r.attempts, r.claims, r.fence,
                   COALESCE(NULLIF(o.error, ''), r.last_error)
              FROM o JOIN outbox.retries r ON r.id = o.id AND r.batch_id = b.id
             WHERE o.kind = 'dead'
            ON CONFLICT DO NOTHING
            RETURNING id)
        UPDATE outbox.retries r
           SET batch_id = NULL, due_at = now() + o.delay_ms * interval '1 millisecond',
               last_error = COALESCE(NULLIF(o.error, ''), r.last_error)
          FROM o WHERE r.id = o.id AND r.batch_id = b.id AND o.kind = 'retry';
        -- A dead head kept blocking its key (--on-dead-head block).
        UPDATE outbox.ordering_blocks k SET state = 'dead'
          FROM unnest(ids, kinds) o(id, kind)
          JOIN outbox.retries r ON r.id = o.id AND r.batch_id = b.id
         WHERE o.kind = 'dead' AND NOT skip_dead_heads
           AND k.topic = r.topic AND k.ordering_key = r.ordering_key;
        WITH gone AS (
            DELETE FROM outbox.retries r
             USING unnest(ids, kinds) o(id, kind)
             WHERE r.id = o.id AND r.batch_id = b.id AND o.kind IN ('delivered', 'dead')
            RETURNING r.ordering_key, o.kind)
        SELECT array_agg(DISTINCT g.ordering_key) INTO freed FROM gone g
         WHERE g.ordering_key IS NOT NULL AND (g.kind = 'delivered' OR skip_dead_heads);
        IF freed IS NOT NULL THEN
            -- Free a key whose last waiting message went: lock its block row
            -- first (a lane cut parking behind it holds FOR SHARE until it
            -- commits), then look again in a new snapshot.
            PERFORM 1 FROM outbox.ordering_blocks k
              WHERE k.topic = b.topic AND k.ordering_key = ANY(freed)
              ORDER BY k.ordering_key FOR UPDATE;
            DELETE FROM outbox.ordering_blocks k
             WHERE k.topic = b.topic AND k.ordering_key = ANY(freed) AND k.state = 'retry'
               AND NOT EXISTS (SELECT 1 FROM outbox.retries r
                                WHERE r.topic = k.topic AND r.ordering_key = k.ordering_key);
        END IF;
    END IF;
    UPDATE outbox.batches x SET state = 'done', done_at = now() WHERE x.id = b.id;
    RETURN true;
END
$$;

-- ---------------------------------------------------------------------------
-- Housekeeping
-- ---------------------------------------------------------------------------

-- Whether a message of stream (topic, lane) in slot s is NOT visible in
-- snapshot lo (NULL: none is): PgQ's split again, two index probes.
CREATE FUNCTION outbox.slot_has_after(s smallint, topic text, lane smallint, lo pg_snapshot)
    RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET enable_seqscan = off SET jit = off -- index probes only (see outbox.stream_has_work)
    AS $$
#variable_conflict use_variable
DECLARE
    x xid8;
BEGIN
    IF lo IS NULL THEN
        RETURN EXISTS (SELECT 1 FROM outbox.events e
                        WHERE e.slot = s AND e.topic = slot_has_after.topic
                          AND e.lane = slot_has_after.lane);
    END IF;
    IF EXISTS (SELECT 1 FROM outbox.events e
                WHERE e.slot = s AND e.topic = slot_has_after.topic
                  AND e.lane = slot_has_after.lane AND e.txid >= pg_snapshot_xmax(lo)) THEN
        RETURN true;
    END IF;
    FOR x IN SELECT pg_snapshot_xip(lo) LOOP -- one probe each (see stream_has_work)
        IF EXISTS (SELECT 1 FROM outbox.events e
                    WHERE e.slot = s AND e.topic = slot_has_after.topic
                      AND e.lane = slot_has_after.lane AND e.txid = x) THEN
            RETURN true;
        END IF;
    END LOOP;
    RETURN false;
END
$$;

-- Whether every message in slot s is done (of the streams that have a row:
-- housekeep discovers the others first): for each stream, all of its
-- messages there are visible in its floor (snap_lo: assigned to a batch)
-- and in the floor of each of its batches still open (so none of those
-- holds one). A transaction held open elsewhere does not hold a slot back
-- (only one still writing into it does: housekeep waits for its lock).
CREATE FUNCTION outbox.slot_done(s smallint) RETURNS boolean
    LANGUAGE sql STABLE AS $$
    SELECT NOT EXISTS (
        SELECT 1 FROM outbox.streams st
         WHERE outbox.slot_has_after(s, st.topic, st.lane, st.snap_lo)
            OR EXISTS (SELECT 1 FROM outbox.batches b
                        WHERE b.state = 'leased' AND b.kind = 's'
                          AND b.topic = st.topic AND b.lane = st.lane
                          AND outbox.slot_has_after(s, st.topic, st.lane, b.snap_lo)))
$$;

-- The oldest transaction holding back the xmin horizon of this database:
-- what every later slot waits for when one is held open.
CREATE FUNCTION outbox.oldest_xmin_holder(OUT pid integer, OUT application_name text,
                                          OUT state text, OUT xact_age_s double precision,
                                          OUT has_xid boolean)
    LANGUAGE sql STABLE AS $$
    SELECT a.pid, a.application_name, a.state,
           extract(epoch FROM now() - a.xact_start)::float8, a.backend_xid IS NOT NULL
      FROM pg_stat_activity a
     WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
       AND (a.backend_xid IS NOT NULL OR a.backend_xmin IS NOT NULL)
     ORDER BY a.xact_start NULLS LAST LIMIT 1
$$;

-- ": held by pid P (application, state, open Ns), ..." for the sessions
-- holding a lock on table rel, oldest transaction first ('' when none).
CREATE FUNCTION outbox.lock_holders(rel text) RETURNS text
    LANGUAGE sql STABLE AS $$
    SELECT COALESCE(': held by ' || string_agg(format('pid %s (%s, %s, open %ss)', a.pid,
                        COALESCE(NULLIF(a.application_name, ''), '?'), a.state,
                        round(extract(epoch FROM now() - a.xact_start)::numeric, 1)),
                    ', ' ORDER BY a.xact_start), '')
      FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
     WHERE l.relation = rel::regclass AND l.granted AND l.pid <> pg_backend_pid()
$$;

-- housekeep: one pass of the retention work, safe to run from any number
-- of relays (an advisory lock lets one through) and from outboxctl purge.
--  1. done batches older than done_retention_ms, dead letters older than
--     dead_retention_ms (0 = kept): deleted;
--  2. the oldest closed slot, once closed for longer than retention_ms and
--     every message in it done: TRUNCATE. It is locked first (lock_timeout
--     lock_ms: a transaction still reading it makes this pass skip it) and
--     checked again under the lock;
--  3. the current slot, once current for longer than retention_ms / 2
--     (or at once with force_switch) and an empty slot exists: closed, the
--     empty one made current. The switch locks outbox.events against
--     writers (SHARE ROW EXCLUSIVE, lock_timeout lock_ms): it waits for
--     every transaction that inserted into the old slot, so enqueue can
--     never store one key in two slots (outbox.enqueue).
-- retention_ms 0 = never truncate. Returns what it did, and why a slot
-- could not go, and the session whose open transaction holds vacuum back
-- the longest (pid, application, age; NULL when none).
CREATE FUNCTION outbox.housekeep(retention_ms bigint, dead_retention_ms bigint,
                                 done_retention_ms bigint, lock_ms integer,
                                 force_switch boolean DEFAULT false,
                                 OUT ran boolean, OUT batches_deleted bigint,
                                 OUT dead_deleted bigint, OUT truncated_slot smallint,
                                 OUT truncated_rows bigint, OUT switched_to smallint,
                                 OUT waiting text, OUT oldest_xact_pid integer,
                                 OUT oldest_xact_application text,
                                 OUT oldest_xact_age_s double precision)
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
    DELETE FROM outbox.batches b WHERE b.state = 'done'
       AND b.done_at < now() - done_retention_ms * interval '1 millisecond';
    GET DIAGNOSTICS batches_deleted = ROW_COUNT;
    IF dead_retention_ms > 0 THEN
        DELETE FROM outbox.dead d
         WHERE d.died_at < now() - dead_retention_ms * interval '1 millisecond';
        GET DIAGNOSTICS dead_deleted = ROW_COUNT;
    END IF;
    IF retention_ms <= 0 THEN
        RETURN;
    END IF;
    PERFORM set_config('lock_timeout', lock_ms || 'ms', true);

    SELECT * INTO s FROM outbox.slots x
     WHERE x.state = 'closed' AND x.since < now() - retention_ms * interval '1 millisecond'
     ORDER BY x.since LIMIT 1;
    IF FOUND THEN
        BEGIN
            EXECUTE format('LOCK TABLE outbox.events_%s IN ACCESS EXCLUSIVE MODE', s.slot);
            -- slot_done judges the streams it knows: a topic or lane no
            -- relay has read yet (none ran since it was enqueued) gets
            -- its row first, and its messages count as not done.
            PERFORM outbox.discover_streams();
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
    IF force_switch OR s.since < now() - retention_ms / 2 * interval '1 millisecond' THEN
        SELECT x.slot INTO nxt FROM outbox.slots x WHERE x.state = 'empty'
         ORDER BY (x.slot - s.slot + outbox.event_slots()) % outbox.event_slots() LIMIT 1;
        IF nxt IS NOT NULL THEN
            BEGIN
                LOCK TABLE outbox.events IN SHARE ROW EXCLUSIVE MODE;
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

-- ---------------------------------------------------------------------------
-- Reading the state, for people and tools
-- ---------------------------------------------------------------------------

-- Where message e stands. Not for hot paths: each call looks at its
-- stream row and at the stream's open batches (few); for a delivered
-- message, the attempt and fence of the batch that delivered it when it is
-- among the stream's last done batches still kept (NULL otherwise).
CREATE FUNCTION outbox.event_state(e outbox.events,
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
    available_at := e.created_at;
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

-- The contract view: one row per message still known (delivered ones until
-- their slot is truncated, dead ones until --dead-retention), with the
-- columns the old table had. status is pending, delivered or dead.
CREATE VIEW outbox.messages AS
SELECT e.id, e.topic, e.idempotency_key, e.payload, e.ordering_key, e.ordering_seq,
       s.status, s.attempts, s.fence, s.lease_owner, s.lease_until, s.available_at,
       e.created_at, s.last_error, s.batch_id
  FROM outbox.events e, LATERAL outbox.event_state(e) s
 WHERE NOT EXISTS (SELECT 1 FROM outbox.retries r WHERE r.id = e.id)
   AND NOT EXISTS (SELECT 1 FROM outbox.dead d WHERE d.id = e.id)
UNION ALL
SELECT r.id, r.topic, r.idempotency_key, r.payload, r.ordering_key, r.ordering_seq,
       'pending', r.attempts, r.fence, b.owner, CASE WHEN b.owner IS NOT NULL THEN b.lease_until END,
       CASE WHEN b.id IS NULL THEN r.due_at ELSE b.created_at END, r.created_at,
       r.last_error, r.batch_id
  FROM outbox.retries r LEFT JOIN outbox.batches b ON b.id = r.batch_id AND b.state = 'leased'
UNION ALL
SELECT d.id, d.topic, d.idempotency_key, d.payload, d.ordering_key, d.ordering_seq,
       'dead', d.attempts, d.fence, NULL, NULL, d.died_at, d.created_at, d.last_error, NULL
  FROM outbox.dead d;

-- The backlog of stream st: messages never assigned to a batch (waiting),
-- with the oldest of them, and the batches still open (in flight: held
-- under a live lease; held: released until later, or whose holder's lease
-- ran out), with the oldest message they hold. An index range scan over
-- the backlog, a read of each open batch: for status, not for a hot path.
CREATE FUNCTION outbox.stream_backlog(st outbox.streams, OUT waiting bigint,
                                      OUT oldest_waiting timestamptz, OUT in_flight bigint,
                                      OUT held bigint, OUT oldest_open timestamptz,
                                      OUT due_since timestamptz)
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    now_snap pg_snapshot := pg_current_snapshot();
    w1 bigint := 0;
    o1 timestamptz;
BEGIN
    -- the rest of the open window, then what came after it
    IF st.snap_hi IS NOT NULL THEN
        SELECT count(*), min(e.created_at) INTO w1, o1
          FROM outbox.stream_read(st.topic, st.lane, st.snap_lo, st.snap_hi, st.pos_txid,
                                  st.pos_id, 2147483647) e;
    END IF;
    SELECT w1 + count(*), LEAST(o1, min(e.created_at)) INTO waiting, oldest_waiting
      FROM outbox.stream_read(st.topic, st.lane, COALESCE(st.snap_hi, st.snap_lo), now_snap,
                              NULL, NULL, 2147483647) e;
    SELECT COALESCE(sum(b.size) FILTER (WHERE b.owner IS NOT NULL AND b.lease_until > now()), 0),
           COALESCE(sum(b.size) FILTER (WHERE b.owner IS NULL OR b.lease_until <= now()), 0),
           min(b.lease_until) FILTER (WHERE b.lease_until <= now())
      INTO in_flight, held, due_since
      FROM outbox.batches b
     WHERE b.state = 'leased' AND b.kind = 's' AND b.topic = st.topic AND b.lane = st.lane;
    SELECT min(e.created_at) INTO oldest_open
      FROM outbox.batches b, LATERAL outbox.batch_events(b) e
     WHERE b.state = 'leased' AND b.kind = 's' AND b.topic = st.topic AND b.lane = st.lane;
    -- a lane with a batch out cannot be cut: its waiting messages are not
    -- claimable yet
    IF st.lane > 0 AND st.inflight IS NOT NULL THEN
        oldest_waiting := CASE WHEN oldest_waiting IS NULL THEN NULL
                               ELSE 'infinity'::timestamptz END;
    END IF;
END
$$;

-- Whether nothing is left to deliver: no stream has a message not yet
-- assigned, no batch is open, no retry waits. A few index probes per
-- stream: cheap enough to poll (the benchmarks and the scenario do).
CREATE FUNCTION outbox.backlog_empty() RETURNS boolean
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN NOT EXISTS (SELECT 1 FROM outbox.retries)
       AND NOT EXISTS (SELECT 1 FROM outbox.batches b WHERE b.state = 'leased')
       AND NOT EXISTS (
            SELECT 1 FROM outbox.all_streams() st
             WHERE EXISTS (SELECT 1 FROM outbox.stream_read(st.topic, st.lane,
                                     COALESCE(st.snap_hi, st.snap_lo), pg_current_snapshot(),
                                     NULL, NULL, 1))
                OR (st.snap_hi IS NOT NULL AND EXISTS (
                        SELECT 1 FROM outbox.stream_read(st.topic, st.lane, st.snap_lo,
                                     st.snap_hi, st.pos_txid, st.pos_id, 1))));
END
$$;

-- Per topic: pending (waiting + in open batches + retrying), in flight
-- (under a live lease), retrying, delivered (still retained), dead, keys
-- blocked by a dead letter, and the ages of the oldest pending message and
-- of the oldest message a relay could claim now (NULL: none). The figures
-- of outboxctl status and of the relay's gauges. Counts the retained
-- messages of a topic (an index-only scan): cheap for status, not for a
-- hot path.
CREATE FUNCTION outbox.topic_stats(only_topic text DEFAULT NULL)
    RETURNS TABLE (topic text, pending bigint, in_flight bigint, retrying bigint,
                   delivered bigint, dead bigint, blocked_keys bigint,
                   oldest_pending_s double precision, oldest_claimable_s double precision)
    LANGUAGE sql STABLE AS $$
    WITH t AS (
        SELECT DISTINCT x.topic FROM (
            SELECT s.topic FROM outbox.all_streams() s UNION ALL
            SELECT r.topic FROM outbox.retries r UNION ALL
            SELECT d.topic FROM outbox.dead d) x
         WHERE only_topic IS NULL OR x.topic = only_topic),
    s AS (
        SELECT st.topic, sum(b.waiting) AS waiting, sum(b.in_flight) AS in_flight,
               sum(b.held) AS held, LEAST(min(b.oldest_waiting), min(b.oldest_open)) AS oldest,
               LEAST(min(b.oldest_waiting) FILTER (WHERE b.oldest_waiting < 'infinity'),
                     min(b.due_since)) AS claimable_since
          FROM outbox.all_streams() st, LATERAL outbox.stream_backlog(st) b
         WHERE only_topic IS NULL OR st.topic = only_topic
         GROUP BY st.topic),
    r AS (
        SELECT r.topic, count(*) AS n,
               count(*) FILTER (WHERE b.owner IS NOT NULL AND b.lease_until > now()) AS leased,
               count(*) FILTER (WHERE EXISTS (SELECT 1 FROM outbox.events e
                                               WHERE e.id = r.id)) AS with_event,
               min(r.created_at) AS oldest,
               LEAST(min(r.due_at) FILTER (WHERE b.id IS NULL AND r.due_at <= now()
                                             AND outbox.retry_claimable(r, true)),
                     min(b.lease_until) FILTER (WHERE b.lease_until <= now())) AS claimable_since
          FROM outbox.retries r
          LEFT JOIN outbox.batches b ON b.id = r.batch_id AND b.state = 'leased'
         GROUP BY r.topic),
    d AS (
        SELECT d.topic, count(*) AS n,
               count(*) FILTER (WHERE EXISTS (SELECT 1 FROM outbox.events e
                                               WHERE e.id = d.id)) AS with_event
          FROM outbox.dead d GROUP BY d.topic)
    SELECT t.topic,
           COALESCE(s.waiting, 0) + COALESCE(s.in_flight, 0) + COALESCE(s.held, 0)
               + COALESCE(r.n, 0),
           COALESCE(s.in_flight, 0) + COALESCE(r.leased, 0),
           COALESCE(r.n, 0),
           GREATEST((SELECT count(*) FROM outbox.events e WHERE e.topic = t.topic)
                    - COALESCE(s.waiting, 0) - COALESCE(s.in_flight, 0) - COALESCE(s.held, 0)
                    - COALESCE(r.with_event, 0) - COALESCE(d.with_event, 0), 0),
           COALESCE(d.n, 0),
           (SELECT count(*) FROM outbox.ordering_blocks k
             WHERE k.topic = t.topic AND k.state = 'dead'),
           extract(epoch FROM now() - LEAST(s.oldest, r.oldest))::float8,
           extract(epoch FROM now() - LEAST(s.claimable_since, r.claimable_since))::float8
      FROM t LEFT JOIN s ON s.topic = t.topic LEFT JOIN r ON r.topic = t.topic
      LEFT JOIN d ON d.topic = t.topic
     ORDER BY t.topic
$$;

-- requeue_dead: dead letters back to pending, as retries due now with
-- attempts 0 (the fence moves on at their next claim). An ordering key
-- such a message belongs to waits behind it again (a block 'retry'), so a
-- key's later messages are not delivered before it. Returns the ids
-- requeued (ids not dead are left alone).
CREATE FUNCTION outbox.requeue_dead(ids bigint[]) RETURNS SETOF bigint
    LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
    WITH d AS (
        DELETE FROM outbox.dead d WHERE d.id = ANY(ids) RETURNING d.*),
    r AS (
        INSERT INTO outbox.retries (id, topic, idempotency_key, payload, ordering_key,
                                    ordering_seq, created_at, attempts, claims, due_at,
                                    last_error, fence)
        SELECT d.id, d.topic, d.idempotency_key, d.payload, d.ordering_key, d.ordering_seq,
               d.created_at, 0, d.claims, now(), d.last_error, d.fence
          FROM d
        RETURNING outbox.retries.id, outbox.retries.topic, outbox.retries.ordering_key),
    k AS (
        INSERT INTO outbox.ordering_blocks (topic, ordering_key, state)
        SELECT DISTINCT r.topic, r.ordering_key, 'retry' FROM r WHERE r.ordering_key IS NOT NULL
        ON CONFLICT (topic, ordering_key) DO UPDATE SET state = 'retry')
    SELECT r.id FROM r ORDER BY r.id;
END
$$;

-- ---------------------------------------------------------------------------
-- Relays built before this version (relay protocol 1)
-- ---------------------------------------------------------------------------

-- Their outcome writes for what they held when this migration ran are
-- accepted and change nothing: those messages were carried over as
-- retries due after the lease, and are delivered again (the consumer
-- answers duplicate to what the old relay had delivered). Their claims
-- fail against the view: they take nothing new.
CREATE OR REPLACE FUNCTION outbox.record_outcomes_chain(ids bigint[], fences bigint[],
                                             kinds text[], delays bigint[], refunds int[],
                                             errors text[], fencing boolean,
                                             skip_dead_heads boolean, chain_owner text,
                                             chain_lease_ms bigint, chain_max integer)
    RETURNS TABLE (chained boolean, id bigint, fence bigint, attempts integer,
                   created_us bigint, topic text, idempotency_key text, payload text,
                   ordering_key text, ordering_seq bigint)
    LANGUAGE sql AS $$
    SELECT false, x.id, NULL::bigint, NULL::integer, NULL::bigint, NULL::text, NULL::text,
           NULL::text, NULL::text, NULL::bigint
      FROM unnest(ids) AS x(id)
$$;
