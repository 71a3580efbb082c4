-- outbox.relays_waiting (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 010.
--
-- 010_wakeup_when.sql: an enqueue fires the wakeup trigger only when a relay
-- is waiting.
--
-- Under load no relay waits (the workers always find work), yet every
-- enqueue still ran the plpgsql trigger of 008: the after-trigger queue, a
-- function call and a DELETE on an empty table. That cost a quarter of the
-- throughput of a bare outbox insert (pgbench, 16 clients, fsync on: 4,347
-- inserts/s with it, 6,037 without). The trigger's WHEN condition is now one
-- cheap read; the trigger itself (008) runs only when it finds a waiter.
-- VOLATILE, so the read takes a fresh snapshot at the end of the insert, as
-- the trigger's own DELETE does; the announce-claim-wait protocol of 006 is
-- unchanged. plpgsql rather than sql: plpgsql keeps the read's plan for the
-- session, a sql function called from WHEN is planned on every call.
CREATE OR REPLACE FUNCTION outbox.relays_waiting() RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    AS 'BEGIN RETURN EXISTS (SELECT 1 FROM outbox.relay_waiters); END';
