-- one_insert.sql - pgbench script: one single-row INSERT in autocommit, the
-- machine's plain commit rate (bench/producer/run.sh).
INSERT INTO bench_commits (v) VALUES (1);
