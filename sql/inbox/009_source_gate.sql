-- 009_source_gate.sql: the empty source and a named one of one (topic, key)
-- are the same message (docs/consumer.md, "The legacy identity"), but they
-- are two primary keys, so two transactions inserting them did not meet:
-- an old relay's frame (source '') still uncommitted in a slow consumer and
-- an upgraded relay's redelivery of it (a named source) were both applied
-- (upgrade_mixed_relays saw 20 of 6,000). A primary key cannot say "'' and
-- S conflict, S1 and S2 do not"; a lock can.
--
-- inbox.source_gate holds no row and never will: it exists to be locked.
-- Every dedup transaction of consumer protocol 4 locks it first, a named
-- source's IN ROW EXCLUSIVE MODE, the empty source's IN SHARE MODE. The
-- two modes conflict with each other and not with themselves, so named
-- frames never wait for each other (a weak lock: the backend's fast path,
-- no shared lock table), '' frames never wait for each other, and a frame
-- of one kind waits for the other kind's open transactions to commit
-- before it looks for their records. Outside an upgrade no relay sends ''
-- and nobody takes the strong lock. One lock per transaction, whatever
-- the batch size (a lock per key would fill max_locks_per_transaction).
-- LOCK needs UPDATE on the table (functions/grants.sql).
--
-- Consumer protocol 4 (consumer/inbox.c) takes the gate; a consumer of
-- protocol 3 still runs (it does not take it), so upgrade every consumer
-- before an upgraded relay of a named source starts.
CREATE TABLE IF NOT EXISTS inbox.source_gate ();
COMMENT ON TABLE inbox.source_gate IS
    'never holds a row: locked by every dedup transaction (named source ROW EXCLUSIVE,'
    ' the empty source SHARE) so that the two identities of one key never apply at once';

UPDATE inbox.protocols SET min_version = 3, max_version = 4 WHERE component = 'consumer';
