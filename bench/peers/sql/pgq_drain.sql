-- bench/peers/sql/pgq_drain.sql: the PgQ consumer of the peer benchmark, run
-- inside the server (CALL peers_pgq_drain(...)): one transaction per batch.
--
--   next_batch -> one set-based statement over get_batch_events(batch):
--   dedup INSERT ... ON CONFLICT DO NOTHING RETURNING key, and an effect row
--   for each key that was new -> finish_batch -> COMMIT (synchronous_commit
--   is the server's: on). Until i_n effects have been written.
--
-- The batches were cut by ticks during the pre-enqueue (run.sh): a
-- NULL next_batch with fewer than i_n effects means a tick is still missing,
-- so it ticks itself and waits 10 ms, up to i_timeout_s, then raises.
CREATE PROCEDURE peers_pgq_drain(i_queue text, i_consumer text, i_n bigint, i_timeout_s int)
LANGUAGE plpgsql AS $$
DECLARE
    b       bigint;
    k       bigint;
    done    bigint := 0;
    waited  int := 0;
BEGIN
    LOOP
        b := pgq.next_batch(i_queue, i_consumer);
        IF b IS NULL THEN
            EXIT WHEN done >= i_n;
            COMMIT;
            PERFORM pgq.ticker(i_queue);
            COMMIT;
            PERFORM pg_sleep(0.01);
            waited := waited + 1;
            IF waited > i_timeout_s * 100 THEN
                RAISE EXCEPTION 'peers_pgq_drain: % of % effects after %s with no batch left',
                    done, i_n, i_timeout_s;
            END IF;
            CONTINUE;
        END IF;
        WITH ev AS (
            SELECT DISTINCT ON (ev_extra1) ev_extra1 AS key, ev_data
              FROM pgq.get_batch_events(b)
             ORDER BY ev_extra1, ev_id
        ), fresh AS (
            INSERT INTO dedup (key) SELECT key FROM ev
            ON CONFLICT DO NOTHING
            RETURNING key
        )
        INSERT INTO effects (key, payload)
        SELECT ev.key, ev.ev_data::jsonb FROM ev JOIN fresh USING (key);
        GET DIAGNOSTICS k = ROW_COUNT;
        done := done + k;
        PERFORM pgq.finish_batch(b);
        COMMIT;
    END LOOP;
END
$$;
