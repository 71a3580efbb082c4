#!/usr/bin/env bash
# bench/relay/run.sh - end-to-end relay benchmark on a private PostgreSQL with
# fsync ON (scripts/pg-tmp.sh, OUTBOX_PG_FSYNC=on).
#
#   bench/relay/run.sh [N]     N pre-enqueued messages (default 100000)
#
# Phases, in one run on one server:
#   1. baseline  pgbench: transactions of 100 single-row inserts (~200-byte
#                rows), 4 clients, -T 10 -> rows/s. Before schema 012 each
#                delivered message cost at least four row writes (claim,
#                outcome, dedup record, effect), so the yardstick is a
#                quarter of that rate; it is kept to compare versions (since
#                012 the relay writes per batch, so a message costs the dedup
#                record and the effect, plus the producer's insert).
#   2. drain     N messages (payload ~200 bytes) enqueued before the relay
#                starts; consumer and relay started; time until all are
#                delivered -> msgs/s. Relay CPU (utime+stime of the relay and
#                its workers, /proc) per message; relay RSS at start, middle,
#                end.
#   3. latency   a fixed offered rate (pgbench --rate, default 1000/s) of
#                live single-message enqueue transactions for LAT_SECONDS;
#                latency = consumer COMMIT time (track_commit_timestamp:
#                pg_xact_commit_timestamp(xmin) of the effect row, which is
#                never updated) - producer COMMIT time (the key is 'l-' ||
#                txid_current() of the enqueue transaction, so its commit
#                timestamp is known; before 012 the outbox row's own xmin
#                was the relay's last outcome write). Same server clock. Also printed: the
#                same from the producer's created_at (statement start), which
#                adds the producer's own COMMIT (fsync) time.
# Producer and consumer schemas share one database here (same server either
# way); see bench/relay/README.md for the numbers and the tuning.
#
# BENCH_STANDBY_GATE=flush|replay adds a streaming standby of the server
# (scripts/pg-tmp.sh standby, fsync on like the primary) and runs the relay
# with --standby-gate on it (bench/relay/standby.sh compares the modes).
#
# Knobs (env): BENCH_WORKERS (2) BENCH_BATCH (100) BENCH_INFLIGHT (4)
# BENCH_CONSUMER_THREADS (4) BENCH_RATE (1000) BENCH_LAT_SECONDS (20)
# BENCH_PGBENCH_SECONDS (10) OUTBOX_BIN_DIR (build/bin) BENCH_KEEP=1 keeps
# the work dir.
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${1:-${BENCH_N:-100000}}
case "$N" in ''|*[!0-9]*) echo "bench: N must be a positive integer" >&2; exit 2 ;; esac
WORKERS=${BENCH_WORKERS:-2}
BATCH=${BENCH_BATCH:-100}
INFLIGHT=${BENCH_INFLIGHT:-4}
CTHREADS=${BENCH_CONSUMER_THREADS:-4}
RATE=${BENCH_RATE:-1000}
LAT_SECONDS=${BENCH_LAT_SECONDS:-20}
PGB_SECONDS=${BENCH_PGBENCH_SECONDS:-10}
bin=${OUTBOX_BIN_DIR:-build/bin}
for p in outbox-relay outbox-consumer outboxctl; do
	[ -x "$bin/$p" ] || { echo "bench: $bin/$p missing (build first, or set OUTBOX_BIN_DIR)" >&2; exit 2; }
done
pgbin=$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)
pgbench=$pgbin/pgbench; [ -x "$pgbench" ] || pgbench=$(command -v pgbench)

. bench/relay/lib.sh
bench_workdir outbox-bench

echo "bench: PostgreSQL with fsync=on, synchronous_commit=on in $work/pg"
OUTBOX_PG_FSYNC=on scripts/pg-tmp.sh start "$work/pg" >/dev/null
# Commit timestamps for the latency phase (a restart applies it).
echo "track_commit_timestamp = on" >>"$work/pg/data/postgresql.conf"
scripts/pg-tmp.sh restart "$work/pg"
set -a; . "$work/pg/env"; set +a
psql -qXc "CREATE DATABASE bench" -c "CREATE DATABASE pgb"
GATE=${BENCH_STANDBY_GATE:-none}
gate_flags=()
case "$GATE" in
none) ;;
flush|replay)
	echo "bench: a streaming standby (application_name bench1), relay --standby-gate $GATE"
	scripts/pg-tmp.sh standby "$work/pg" "$work/standby" bench1 >/dev/null
	gate_flags=(--standby-gate "$GATE" --standby-names bench1)
	for _ in $(seq 100); do
		[ "$(psql -d postgres -AtqXc "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")" = 1 ] && break
		sleep 0.1
	done ;;
*) echo "bench: BENCH_STANDBY_GATE must be none, flush or replay" >&2; exit 2 ;;
esac
db="$OUTBOX_PG_CONNINFO dbname=bench"
"$bin/outboxctl" migrate --db "$db" --schema all >/dev/null
q() { psql -d bench -AtqXc "$1"; }
ticks=$(getconf CLK_TCK)

# CPU ticks (utime+stime) of a process and its live children; summed RSS kB.
tree_pids() { echo "$1"; pgrep -P "$1" || true; }
cpu_ticks() {
	local t=0 p f
	for p in $(tree_pids "$1"); do
		[ -r "/proc/$p/stat" ] || continue
		f=$(sed 's/.*) //' "/proc/$p/stat")
		# after "comm) ": state=1 ... utime=12 stime=13 cutime=14 cstime=15
		t=$(( t + $(echo "$f" | awk '{print $12 + $13 + $14 + $15}') ))
	done
	echo "$t"
}
rss_kb() {
	local t=0 p
	for p in $(tree_pids "$1"); do
		[ -r "/proc/$p/status" ] || continue
		t=$(( t + $(awk '/^VmRSS/ {print $2}' "/proc/$p/status") ))
	done
	echo "$t"
}

# ---- 1. baseline ----------------------------------------------------------
psql -d pgb -qXc "CREATE TABLE rows (id bigserial PRIMARY KEY, payload text NOT NULL)"
cat >"$work/insert100.sql" <<'SQL'
INSERT INTO rows (payload) SELECT repeat('x', 200) FROM generate_series(1, 100);
SQL
echo "bench: pgbench baseline (100-row insert transactions, 4 clients, ${PGB_SECONDS}s)"
"$pgbench" -n -c 4 -j 4 -T "$PGB_SECONDS" -f "$work/insert100.sql" pgb >"$work/pgbench.txt" 2>&1
tps=$(awk '/^tps = / {print $3; exit}' "$work/pgbench.txt")
rows_s=$(awk -v t="$tps" 'BEGIN {printf "%.0f", t * 100}')
quarter=$(awk -v r="$rows_s" 'BEGIN {printf "%.0f", r / 4}')
echo "bench: baseline ${rows_s} rows/s -> a quarter: ${quarter} msgs/s"

# ---- 2. drain -------------------------------------------------------------
echo "bench: enqueueing $N messages (~200-byte payloads)"
chunk=10000
for (( s = 0; s < N; s += chunk )); do
	e=$(( s + chunk - 1 < N - 1 ? s + chunk - 1 : N - 1 ))
	q "SELECT count(outbox.enqueue('report.created', 'b-' || g,
	    jsonb_build_object('title', 'benchmark report ' || g, 'module', 'editor',
	        'severity', 'high', 'steps', repeat('s', 120))))
	   FROM generate_series($s, $e) g" >/dev/null
done
psql -d bench -qXc "VACUUM ANALYZE outbox.events"
q "SELECT 'bench: payload bytes avg ' || round(avg(octet_length(payload::text))) FROM outbox.events"

url="ipc://$work/consumer.ipc"
"$bin/outbox-consumer" --db "$db" --listen "$url" --threads "$CTHREADS" --log-level warn \
	2>"$work/consumer.log" &
cpid=$!; pids+=("$cpid")
for _ in $(seq 100); do [ -S "$work/consumer.ipc" ] && break; sleep 0.05; done
t0=$(date +%s.%N)
"$bin/outbox-relay" --db "$db" --route "*=$url" --workers "$WORKERS" --batch "$BATCH" \
	--max-inflight "$INFLIGHT" --poll-ms 100 --log-level ${BENCH_RELAY_LOG_LEVEL:-warn} \
	"${gate_flags[@]}" 2>"$work/relay.log" &
rpid=$!; pids+=("$rpid")
sleep 0.5
rss_start=$(rss_kb "$rpid")
# Done = nothing left to deliver (outbox.backlog_empty: a few index probes;
# a count over the table would scan it ten times a second and tax the run).
# RSS is sampled at every poll; the one nearest half-time is kept.
rss_samples=()
while :; do
	rss_samples+=("$(rss_kb "$rpid")")
	[ "$(q "SELECT outbox.backlog_empty()")" = t ] && break
	sleep 0.1
done
rss_mid=${rss_samples[$(( ${#rss_samples[@]} / 2 ))]}
t1=$(date +%s.%N)
cpu=$(cpu_ticks "$rpid")
rss_end=$(rss_kb "$rpid")
rss_mid=${rss_mid:-$rss_end}
elapsed=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')
rate=$(awk -v n="$N" -v e="$elapsed" 'BEGIN {printf "%.0f", n / e}')
us_per_msg=$(awk -v c="$cpu" -v t="$ticks" -v n="$N" 'BEGIN {printf "%.1f", c / t * 1e6 / n}')
ratio=$(awk -v r="$rate" -v q="$quarter" 'BEGIN {printf "%.2f", r / q}')
effects=$(q "SELECT count(*) FROM inbox.notifications WHERE idempotency_key LIKE 'b-%'")
[ "$effects" -eq "$N" ] || { echo "bench: $effects effects for $N messages!" >&2; exit 1; }
echo "bench: drained $N in ${elapsed}s = ${rate} msgs/s (${ratio} x a quarter of the baseline)"
echo "bench: relay CPU ${us_per_msg} us/msg; RSS kB start/middle/end ${rss_start}/${rss_mid}/${rss_end}"

# ---- 3. latency -----------------------------------------------------------
# Let VACUUM (of the inbox's and the bookkeeping's dead rows) and a
# checkpoint run now rather than during the latency phase (BENCH_SETTLE=0
# skips it, to measure latency while autovacuum cleans up after the drain).
if [ "${BENCH_SETTLE:-1}" = 1 ]; then
	echo "bench: settling after the drain (VACUUM ANALYZE, CHECKPOINT)"
	q "VACUUM (ANALYZE) outbox.events" >/dev/null
	q "VACUUM (ANALYZE) outbox.batches" >/dev/null
	q "VACUUM (ANALYZE) inbox.processed" >/dev/null
	q "VACUUM (ANALYZE) inbox.notifications" >/dev/null
	q "CHECKPOINT" >/dev/null
fi
cat >"$work/enqueue1.sql" <<'SQL'
SELECT outbox.enqueue('report.created', 'l-' || txid_current(),
    jsonb_build_object('title', 'latency probe', 'module', 'editor', 'severity', 'high',
        'steps', repeat('s', 120)));
SQL
echo "bench: latency at ${RATE}/s offered for ${LAT_SECONDS}s (live enqueues, 4 producer clients)"
"$pgbench" -n -c 4 -j 2 -R "$RATE" -T "$LAT_SECONDS" -f "$work/enqueue1.sql" bench \
	>"$work/pgbench-rate.txt" 2>&1
lat_n=$(q "SELECT count(*) FROM outbox.events WHERE idempotency_key LIKE 'l-%'")
for _ in $(seq 100); do
	[ "$(q "SELECT outbox.backlog_empty()")" = t ] && break
	sleep 0.1
done
rss_lat=$(rss_kb "$rpid")
lat=$(q "SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 2) || ' ' ||
                round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 2) || ' ' ||
                round(percentile_cont(0.999) WITHIN GROUP (ORDER BY ms)::numeric, 2) || ' ' ||
                round(max(ms)::numeric, 2)
         FROM (SELECT extract(epoch FROM pg_xact_commit_timestamp(n.xmin)
                                       - pg_xact_commit_timestamp(producer_xid)) * 1000 AS ms
                 FROM (SELECT idempotency_key,
                              -- the key is 'l-' || txid_current() of the producer's
                              -- transaction: its commit time, from the low 32 bits
                              (substr(idempotency_key, 3)::bigint % 4294967296)::text::xid
                                  AS producer_xid
                         FROM outbox.events WHERE idempotency_key LIKE 'l-%') m
                 JOIN inbox.notifications n ON n.idempotency_key = m.idempotency_key) s")
read -r p50 p99 p999 pmax <<<"$lat"
# The same from the producer's statement start (created_at): adds the
# producer's own COMMIT (its fsync) to the figure.
lat_start=$(q "SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 2) || ' ' ||
                round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 2)
         FROM (SELECT extract(epoch FROM pg_xact_commit_timestamp(n.xmin)
                                       - m.created_at) * 1000 AS ms
                 FROM outbox.events m
                 JOIN inbox.notifications n ON n.idempotency_key = m.idempotency_key
                WHERE m.idempotency_key LIKE 'l-%') s")
read -r s50 s99 <<<"$lat_start"
offered=$(awk -v n="$lat_n" -v s="$LAT_SECONDS" 'BEGIN {printf "%.0f", n / s}')
pgb_lat=$(awk '/^latency average/ {print $4; exit}' "$work/pgbench-rate.txt")
echo "bench: pgbench enqueue transaction latency average ${pgb_lat} ms (its own commit, fsync included)"
echo "bench: latency producer-commit -> consumer-commit over $lat_n messages (${offered}/s):" \
	"p50 ${p50} ms, p99 ${p99} ms, p99.9 ${p999} ms, max ${pmax} ms"
echo "bench: latency producer-statement-start -> consumer-commit: p50 ${s50} ms, p99 ${s99} ms"
echo "bench: relay RSS after the latency phase ${rss_lat} kB"

# ---- summary --------------------------------------------------------------
verdict() { awk -v v="$1" -v t="$2" -v op="$3" 'BEGIN { ok = (op == ">=") ? v >= t : v <= t; print ok ? "met" : "MISSED" }'; }
cat <<EOF

summary (N=$N, workers=$WORKERS, batch=$BATCH, max-inflight=$INFLIGHT, consumer threads=$CTHREADS, standby gate=$GATE)
  throughput      ${rate} msgs/s          target >= 10000     $(verdict "$rate" 10000 ">=")
  vs baseline     ${ratio} x (baseline ${rows_s} rows/s, quarter ${quarter})
  latency p50/p99/p99.9  ${p50}/${p99}/${p999} ms at ${offered}/s   target p99 < 20 ms   $(verdict "$p99" 20 "<=")
  relay CPU       ${us_per_msg} us/msg        target <= 50        $(verdict "$us_per_msg" 50 "<=")
  relay RSS kB    start ${rss_start}, middle ${rss_mid}, end ${rss_end}, after latency ${rss_lat}
EOF
