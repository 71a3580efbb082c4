-- 023_lock_next_stream_dry.sql: outbox.lock_next_stream also returns the
-- streams its probe found without new messages (OUT dry), and the claim's
-- `more` (outbox.more_claimable) does not probe them again: at a steady
-- rate every claim that reads its window to the end asked again of each
-- stream what the same claim had just learnt. Another OUT column is
-- another return type, which CREATE OR REPLACE cannot make: the old
-- definition (migrations 012, 013) goes here, its file makes the new one.
DROP FUNCTION outbox.lock_next_stream(text[], text[], boolean, boolean, text[]);
