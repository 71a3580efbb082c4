#!/usr/bin/env bash
# bench/peers/enqueue.sh - what outbox.enqueue costs the server, against the
# floor: one INSERT of the same message into a plain table with a unique
# (topic, key). On one private PostgreSQL 15 (or users.sh's).
#
#   bench/peers/enqueue.sh [ROUNDS] [SECONDS]      defaults 5 rounds of 10 s
#
# Per round, both cases in an order that alternates by round, each on a
# fresh database: pgbench -n -M prepared -c ENQ_CLIENTS (4) -j 2 -T SECONDS,
# synchronous_commit = off for pgbench's sessions (so the server's CPU is
# measured, not the WAL flush), one statement per transaction:
#
#   enqueue  SELECT outbox.enqueue('bench.topic', 'e-' || txid_current(), PAYLOAD)
#   plain    INSERT INTO plain_rows (topic, key, payload) VALUES ('bench.topic', 'e-' || txid_current(), PAYLOAD)
#            (plain_rows: id bigserial PK, topic, key, payload jsonb, created_at, UNIQUE (topic, key))
#
# No relay runs (nothing waits, so enqueue's wakeup trigger does not fire:
# the case of a loaded system). Per run: the average latency (pgbench --log,
# every transaction), the throughput, and the server's CPU per transaction:
# the postmaster's process tree from /proc (utime + stime of the postmaster
# and its live children, plus cutime + cstime: the backends that came and
# went), so pgbench's 4 backends, the WAL writer, the checkpointer and
# autovacuum alike. Figures: enqueue_latency_vs_plain (median average
# latency ratio) and enqueue_cpu_vs_plain (median server CPU per
# transaction ratio); pg_stat_statements' mean time of each statement is in
# the CSV. CSV: WORK/enqueue.csv.
#
# Knobs (env; validated): PEERS_ENQ_ROUNDS (5) PEERS_ENQ_SECONDS (10)
# PEERS_ENQ_CLIENTS (4) PEERS_ENQ_THREADS (2) OUTBOX_BIN_DIR (build/bin).
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/peers/lib.sh

BIN=${OUTBOX_BIN_DIR:-build/bin}
PEERS_ENQ_ROUNDS=${1:-${PEERS_ENQ_ROUNDS:-}}
PEERS_ENQ_SECONDS=${2:-${PEERS_ENQ_SECONDS:-}}
knobs PEERS_ENQ_ROUNDS PEERS_ENQ_SECONDS PEERS_ENQ_CLIENTS PEERS_ENQ_THREADS
((ENQ_THREADS <= ENQ_CLIENTS)) || ENQ_THREADS=$ENQ_CLIENTS
ours_check_bins
pgbench_find

peers_workdir enqueue
peers_traps
peers_server_start "${PEERS_MEASURE_CONF[@]}"
CSV=$PEERS_WORK/enqueue.csv
echo "round,case,transactions,tps,avg_ms,p50_ms,p99_ms,server_cpu_ms,server_cpu_us_per_tx,stmt_mean_ms" >"$CSV"
echo "peers: enqueue: pgbench -M prepared -c $ENQ_CLIENTS -j $ENQ_THREADS -T $ENQ_SECONDS, synchronous_commit=off, $ENQ_ROUNDS rounds"

# enq_run CASE ROUND: one pgbench run; prints its line, appends to the CSV,
# sets R_AVG and R_CPU (us per transaction).
enq_run() {
	local kind=$1 round=$2 db="e_${1}_$2" logp t0 t1 n p50 p99 tps avg cpu mean failed
	fresh_db "$db"
	if [ "$kind" = enqueue ]; then
		ours_migrate "$db"
		echo "SELECT outbox.enqueue('bench.topic', 'e-' || txid_current()::text, $PAYLOAD_LIT);" >"$PEERS_WORK/$db.sql"
	else
		q "$db" "CREATE TABLE plain_rows (id bigserial PRIMARY KEY, topic text NOT NULL, key text NOT NULL,
		                                  payload jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now(),
		                                  UNIQUE (topic, key))" >/dev/null
		echo "INSERT INTO plain_rows (topic, key, payload) VALUES ('bench.topic', 'e-' || txid_current()::text, $PAYLOAD_LIT);" >"$PEERS_WORK/$db.sql"
	fi
	q "$db" CHECKPOINT >/dev/null
	stats_reset "$db"
	logp=$PEERS_WORK/$db.txlog
	t0=$(server_ticks)
	PGOPTIONS='-c synchronous_commit=off' fg "$PGBENCH" -n -M prepared -c "$ENQ_CLIENTS" -j "$ENQ_THREADS" -T "$ENQ_SECONDS" \
		--log --log-prefix="$logp" -f "$PEERS_WORK/$db.sql" "$db" >"$PEERS_WORK/$db.pgbench.txt" 2>&1 ||
		peers_die "pgbench failed: see $PEERS_WORK/$db.pgbench.txt"
	t1=$(server_ticks)
	failed=$(pgb_failed "$PEERS_WORK/$db.pgbench.txt")
	((${failed:-0} == 0)) || peers_die "$kind: $failed failed transactions: see $PEERS_WORK/$db.pgbench.txt"
	read -r p50 p99 _ tps n avg <<<"$(pgb_latency "$logp" "$ENQ_SECONDS")"
	mean=$(q postgres "SELECT round(max(mean_exec_time)::numeric, 4) FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
	                    WHERE d.datname = '$db' AND (query LIKE 'SELECT outbox.enqueue%' OR query LIKE 'INSERT INTO plain_rows%')")
	stats_dump "$db" "$PEERS_WORK/$db"
	cpu=$(awk -v t="$((t1 - t0))" -v h="$CLK_TCK" -v n="$n" 'BEGIN { printf "%.1f", t * 1e6 / h / n }')
	printf '  %-8s %9s tx %8s/s  avg %7s ms  p50 %6s  p99 %6s ms  server CPU %6s us/tx  statement mean %s ms\n' \
		"$kind" "$(fmt_int "$n")" "$(fmt_int "$tps")" "$avg" "$p50" "$p99" "$cpu" "$mean"
	echo "$round,$kind,$n,$tps,$avg,$p50,$p99,$(ticks_ms $((t1 - t0))),$cpu,$mean" >>"$CSV"
	R_AVG=$avg; R_CPU=$cpu
	drop_db "$db"
}

avg_e=() avg_p=() cpu_e=() cpu_p=()
for ((round = 1; round <= ENQ_ROUNDS; round++)); do
	order=(enqueue plain)
	((round % 2)) || order=(plain enqueue)
	echo "peers: enqueue round $round/$ENQ_ROUNDS (order: ${order[*]})"
	for k in "${order[@]}"; do
		enq_run "$k" "$round"
		if [ "$k" = enqueue ]; then avg_e+=("$R_AVG"); cpu_e+=("$R_CPU"); else avg_p+=("$R_AVG"); cpu_p+=("$R_CPU"); fi
	done
done
me=$(median "${avg_e[@]}"); mp=$(median "${avg_p[@]}")
ce=$(median "${cpu_e[@]}"); cp=$(median "${cpu_p[@]}")
echo "peers: enqueue: median average latency $me ms (enqueue) vs $mp ms (plain row); server CPU $ce vs $cp us per transaction"
figure enqueue_latency_vs_plain "$(div2 "$me" "$mp")" '<=' "$T_ENQUEUE_VS_PLAIN" x \
	"average latency of one outbox.enqueue per transaction / one plain unique-key INSERT (pgbench -M prepared, $ENQ_CLIENTS clients, synchronous_commit=off, $ENQ_ROUNDS x ${ENQ_SECONDS}s)"
figure enqueue_cpu_vs_plain "$(div2 "$ce" "$cp")" '<=' "$T_ENQUEUE_VS_PLAIN" x \
	"server CPU per transaction (postmaster's process tree, /proc), the same runs"
echo "peers: enqueue per-run numbers: $CSV"
