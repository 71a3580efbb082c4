-- 021_claim_more.sql: relay protocol 5, a claim says whether another would
-- find anything now.
--
-- outbox.claimed gets `more` (every row of a batch the same): true when the
-- claim left something claimable behind it (the rest of a window, another
-- stream with work, a due retry, a lease run out, a stream with no row
-- yet: outbox.more_claimable); false when a claim made now would find only
-- what commits after this one. A relay of protocol 5 that announced its
-- wait before the claim then waits for the notification instead of
-- claiming again to find nothing (at a steady rate, one empty claim per
-- wakeup). Relays of protocol 2 to 4 name the columns they read and keep
-- working.
ALTER TYPE outbox.claimed ADD ATTRIBUTE more boolean;
UPDATE outbox.protocols SET max_version = 5 WHERE component = 'relay';
