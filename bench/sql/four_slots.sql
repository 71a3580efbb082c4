-- bench/sql/four_slots.sql - turns a database at today's schema into the
-- slot layout before sql/outbox/017_finer_slots.sql: slots 4..9 of
-- outbox.events dropped and outbox.event_slots() saying 4. For A/B
-- measurements of what the number of slots costs (bench/producer/slots.sh,
-- the "ours4" system of bench/peers/run.sh); run on an empty or freshly
-- migrated outbox only.
DO $$
BEGIN
    FOR s IN 4 .. 9 LOOP
        EXECUTE format('DROP TABLE outbox.events_%s', s);
    END LOOP;
END
$$;
DELETE FROM outbox.slots WHERE slot >= 4;
CREATE OR REPLACE FUNCTION outbox.event_slots() RETURNS integer
    LANGUAGE sql IMMUTABLE AS 'SELECT 4';
