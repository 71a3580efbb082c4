-- 018_ordering_next.sql: a key's messages leave its stream in sequence
-- order, whatever order their transactions took their ids in; relay
-- protocol 3 (the claim dead-letters a poison message itself); housekeeping
-- reports a restore it adopted.
--
-- A lane is read in commit order, and within one window (one pair of
-- snapshots) by (txid, id). A transaction's id is given at its first
-- write, not at its commit: a transaction A that wrote anything before
-- another one, B, enqueued the key's first message, waits for B's lock on
-- the key (outbox.ordering_seqs), takes sequence number 2 and commits with
-- the lower txid. Both visible in one window, the cut read A's message
-- (seq 2) first and sent it before B's (seq 1).
--
-- outbox.ordering_next says, per (topic, ordering key), which sequence
-- number the relays take next from the stream. A cut takes a key's message
-- only when it is that one; a message that comes early (its predecessor is
-- further on in the same window: it committed first, so it is visible
-- wherever its successor is) is parked as a retry behind its key, and its
-- predecessor, when the cut reaches it, is parked too and goes first
-- (outbox.claim, outbox.retry_claimable). Written by the claim only; one
-- row per key, kept as long as the key's outbox.ordering_seqs row (neither
-- is deleted: a few dozen bytes per ordering key ever used).
--
-- Keys that exist now start at their last number + 1: their messages
-- already enqueued go as before (in the stream's order), every later one
-- in sequence order. A key with no row starts at 1.
CREATE TABLE outbox.ordering_next (
    topic        text   NOT NULL,
    ordering_key text   NOT NULL,
    next_seq     bigint NOT NULL,
    PRIMARY KEY (topic, ordering_key)
);
INSERT INTO outbox.ordering_next (topic, ordering_key, next_seq)
SELECT s.topic, s.ordering_key, s.last_seq + 1 FROM outbox.ordering_seqs s;

-- relay 3: outbox.claim takes skip_dead_heads (a message whose batch lost
-- its holder too often is dead-lettered by the claim itself, and blocks its
-- key only under --on-dead-head block). Relays of protocol 2 keep working:
-- their claim call takes the default (block).
UPDATE outbox.protocols SET max_version = 3 WHERE component = 'relay';

-- outbox.housekeep returns read_again too (a restore adopted,
-- functions/adopt_restore.sql): a new result type, so the old definition
-- goes first (functions/housekeep.sql brings the new one).
DROP FUNCTION outbox.housekeep(bigint, bigint, bigint, integer, boolean);
-- outbox.claim takes skip_dead_heads and outbox.split_batch the protocol
-- and skip_dead_heads: new argument lists, so the old definitions go too
-- (a file's CREATE OR REPLACE would add an overload beside them).
DROP FUNCTION outbox.claim(integer, text, bigint, integer, text[], text[], boolean, boolean,
                           boolean);
DROP FUNCTION outbox.split_batch(outbox.batches);
