-- grants.sql: who may use what in the outbox database. Not an object: the
-- privileges of the group roles of 014_roles.sql (docs/security.md,
-- "Database roles"). outboxctl migrate applies it after the other files of
-- this set and after the drop of what no file defines any more (a GRANT
-- rewrites the catalog row of each function it names, and a name with a
-- stale overload beside it would be ambiguous), on every run that applies
-- the files. It starts from nothing, so what it does not grant here is
-- taken away on the next run: a privilege is added or removed in this
-- file, nowhere else.
--
-- The rules it keeps:
-- * PUBLIC (every role) has nothing here: no schema usage, no table, and
--   EXECUTE on no function (PostgreSQL gives it on every new function).
-- * outbox_producer enqueues inside its business transaction and runs the
--   HTTP API's key claims: outbox.enqueue, the key table of POST
--   /v1/messages, and nothing of the relays' state (the demo's tables in
--   schema app are granted by sql/demo/functions/grants.sql).
--   outbox.enqueue is SECURITY DEFINER
--   (functions/enqueue.sql): it writes what a producer may not (the
--   message log, the ordering-key sequence rows, the waiting relay's
--   announcement that it takes), as its owner, with a pinned
--   search_path, and takes no switch from its caller.
-- * outbox_relay claims, records and keeps house: the functions it calls,
--   and the tables and sequences they read and write with the relay's own
--   privileges (they run as the caller: outbox.claim's ordering and
--   outbox.record's fencing are caller-supplied switches, so they must
--   never run as a more privileged owner). No schema app, no inbox.
-- * outbox_admin is outboxctl's: read everything, requeue dead letters,
--   purge. Not migrate, which stays with the database owner.
-- * outbox_viewer is the web view's (outboxctl web): SELECT on what it
--   shows and EXECUTE on the read-only functions that reads, nothing that
--   writes (its requeue uses a second connection, --requeue-db, of an
--   outbox_admin role: docs/web.md).
-- Every function a granted function calls is granted too: a function that
-- is not SECURITY DEFINER checks each call it makes against its caller.

REVOKE ALL ON SCHEMA outbox FROM PUBLIC, outbox_producer, outbox_relay, outbox_admin, outbox_viewer;
REVOKE ALL ON ALL TABLES IN SCHEMA outbox
    FROM PUBLIC, outbox_producer, outbox_relay, outbox_admin, outbox_viewer;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA outbox
    FROM PUBLIC, outbox_producer, outbox_relay, outbox_admin, outbox_viewer;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA outbox
    FROM PUBLIC, outbox_producer, outbox_relay, outbox_admin, outbox_viewer;

-- ---------------------------------------------------------------------------
-- outbox_producer
-- ---------------------------------------------------------------------------
GRANT USAGE ON SCHEMA outbox TO outbox_producer;
GRANT EXECUTE ON FUNCTION outbox.enqueue, outbox.max_payload_bytes, outbox.max_headers_bytes,
    outbox.max_delay, outbox.check_protocol
    TO outbox_producer;
GRANT SELECT ON outbox.protocols TO outbox_producer;
-- POST /v1/messages' key claims (common/keyclaim.c) and their retention
GRANT SELECT, INSERT, UPDATE, DELETE ON outbox.message_keys TO outbox_producer;

-- ---------------------------------------------------------------------------
-- outbox_relay
-- ---------------------------------------------------------------------------
GRANT USAGE ON SCHEMA outbox TO outbox_relay;
GRANT EXECUTE ON FUNCTION
    -- called by relay/ (claim.c, record.c, worker.c, stats.c) and
    -- common/housekeep.c; record_outcomes*: relays of protocol 1
    outbox.check_protocol, outbox.claim, outbox.record, outbox.discover_streams,
    outbox.relay_waiting, outbox.housekeep, outbox.topic_stats,
    outbox.record_outcomes, outbox.record_outcomes_chain,
    -- what those call
    outbox.batch_events, outbox.batch_split_after, outbox.lock_next_stream,
    outbox.retry_claimable, outbox.split_batch, outbox.stream_read,
    outbox.topic_claimable, outbox.event_streams, outbox.stream_has_work,
    outbox.event_slots, outbox.lock_holders, outbox.oldest_xmin_holder,
    outbox.slot_done, outbox.slot_has_after, outbox.all_streams, outbox.stream_backlog,
    outbox.restored, outbox.adopt_restore, outbox.lane_of, outbox.ordering_lanes,
    outbox.within_bytes, outbox.more_claimable, outbox.available_us, outbox.slot_streams
    TO outbox_relay;
GRANT SELECT ON outbox.protocols TO outbox_relay;
-- read in commit order; a done slot emptied by housekeeping (its
-- partitions below)
GRANT SELECT, TRUNCATE ON outbox.events TO outbox_relay;
GRANT SELECT, UPDATE ON outbox.slots TO outbox_relay;
GRANT SELECT, INSERT, UPDATE ON outbox.streams TO outbox_relay;
GRANT SELECT, INSERT, UPDATE, DELETE
    ON outbox.batches, outbox.retries, outbox.ordering_blocks, outbox.relay_waiters
    TO outbox_relay;
GRANT SELECT, INSERT, UPDATE ON outbox.ordering_next TO outbox_relay;
GRANT SELECT, INSERT, DELETE ON outbox.dead TO outbox_relay;
GRANT USAGE ON SEQUENCE outbox.fences, outbox.batch_ids TO outbox_relay;

-- ---------------------------------------------------------------------------
-- outbox_admin (outboxctl status, inspect, dead, purge)
-- ---------------------------------------------------------------------------
GRANT USAGE ON SCHEMA outbox TO outbox_admin;
GRANT EXECUTE ON FUNCTION
    outbox.check_protocol, outbox.topic_stats, outbox.message_state, outbox.requeue_dead,
    outbox.housekeep, outbox.slot_done, outbox.backlog_empty,
    -- what those and the view outbox.messages call
    outbox.all_streams, outbox.event_streams, outbox.new_streams, outbox.stream_backlog,
    outbox.batch_events, outbox.stream_read, outbox.retry_claimable, outbox.event_state,
    outbox.batch_holds, outbox.discover_streams, outbox.event_slots, outbox.lock_holders,
    outbox.oldest_xmin_holder, outbox.slot_has_after, outbox.stream_has_work,
    outbox.restored, outbox.adopt_restore, outbox.lane_of, outbox.ordering_lanes,
    outbox.slot_streams
    TO outbox_admin;
GRANT SELECT ON outbox.protocols, outbox.messages TO outbox_admin;
GRANT SELECT, TRUNCATE ON outbox.events TO outbox_admin;
GRANT SELECT, UPDATE ON outbox.slots TO outbox_admin;
GRANT SELECT, INSERT ON outbox.streams, outbox.retries TO outbox_admin;
GRANT SELECT, DELETE ON outbox.batches TO outbox_admin;
-- UPDATE: dead requeue locks the rows it requeues (SELECT ... FOR UPDATE)
GRANT SELECT, UPDATE, DELETE ON outbox.dead TO outbox_admin;
-- DELETE: housekeeping lifts a dead block whose dead letter is gone
GRANT SELECT, INSERT, UPDATE, DELETE ON outbox.ordering_blocks TO outbox_admin;
GRANT SELECT ON outbox.ordering_next TO outbox_admin;

-- ---------------------------------------------------------------------------
-- outbox_viewer (outboxctl web: the poller of ctl/web_poll.c)
-- ---------------------------------------------------------------------------
GRANT USAGE ON SCHEMA outbox TO outbox_viewer;
GRANT EXECUTE ON FUNCTION
    outbox.check_protocol, outbox.topic_stats, outbox.message_state,
    -- what those and the view outbox.messages call (none of them writes)
    outbox.all_streams, outbox.event_streams, outbox.new_streams, outbox.stream_backlog,
    outbox.batch_events, outbox.stream_read, outbox.retry_claimable, outbox.event_state,
    outbox.batch_holds, outbox.event_slots, outbox.lock_holders, outbox.oldest_xmin_holder,
    outbox.slot_has_after, outbox.stream_has_work, outbox.lane_of, outbox.ordering_lanes
    TO outbox_viewer;
GRANT SELECT ON outbox.protocols, outbox.messages, outbox.events, outbox.slots,
    outbox.streams, outbox.retries, outbox.batches, outbox.dead, outbox.ordering_blocks,
    outbox.ordering_next
    TO outbox_viewer;

-- The slots of outbox.events: housekeeping counts, locks and empties one
-- by its own name (outbox.events_N).
DO $$
DECLARE
    part regclass;
BEGIN
    FOR part IN SELECT i.inhrelid::regclass FROM pg_catalog.pg_inherits i
                 WHERE i.inhparent = 'outbox.events'::regclass ORDER BY i.inhrelid LOOP
        EXECUTE format('GRANT SELECT, TRUNCATE ON %s TO outbox_relay, outbox_admin', part);
        EXECUTE format('GRANT SELECT ON %s TO outbox_viewer', part);
    END LOOP;
END
$$;
