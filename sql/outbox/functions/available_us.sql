-- outbox.available_us (function), its current definition: outboxctl migrate re-applies
-- this file after the numbered migrations (sql/README.md). History: 022.
--
-- A message's time for delivery, in microseconds since the epoch, as a
-- claim returns it (outbox.claimed's created_us): when it was enqueued, or
-- its not_before when that is later. Its age (the relay's --max-age, the
-- consumer's --dedup-retention) counts from then: a message delayed past
-- them is not old when it becomes due.
-- STABLE, as extract from a timestamptz is: declared IMMUTABLE it was not
-- inlined, and cost a function call per claimed message (1.3 us of a
-- drain's 23).
CREATE OR REPLACE FUNCTION outbox.available_us(created_at timestamptz, not_before timestamptz)
    RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$SELECT (extract(epoch FROM GREATEST(created_at, not_before)) * 1000000)::bigint$$;
