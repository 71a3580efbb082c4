#!/usr/bin/env bash
# bench/peers/steady.sh - what delivery costs at a steady rate, against the
# drain, and what an idle or slow relay costs; ours only, relay and consumer
# at their default flags (PEERS_OURS=tuned: run.sh's knobs), on one private
# PostgreSQL 15 (or users.sh's) with commit timestamps, track_functions and
# pg_stat_statements.
#
#   bench/peers/steady.sh [ROUNDS] [SECONDS]     defaults 5 rounds, 30 s at the rate
#
# Once:
#   idle    the server alone for PEERS_IDLE_SECONDS (20), then outbox-relay
#           --workers PEERS_IDLE_WORKERS (4) and a consumer, nothing to deliver,
#           as long: the CPU of the relay's processes (supervisor, workers,
#           metrics process) plus what the server used over its idle baseline,
#           in % of one core.
# Per round, each phase on a fresh database, relay + consumer started before
# the load (pgbench -R, PEERS_STEADY_CLIENTS (8) sessions, one outbox.enqueue
# a transaction, the key carrying the producer's txid):
#   low     PEERS_LOW_RATE (200)/s for PEERS_LOW_SECONDS (20): outbox.claim
#           calls (pg_stat_statements, the relay's claim statement, empty
#           claims included) per delivered message;
#   steady  PEERS_STEADY_RATE (1000)/s for SECONDS: the CPU of the delivery
#           backends (the database sessions of the relay and the consumer:
#           every client backend of the database but pgbench's and psql's,
#           utime + stime from /proc/PID/stat) per delivered message, and the
#           latency producer commit -> consumer commit (commit timestamps,
#           lib.sh commit_latency) p50/p99/p99.9;
#   drain   PEERS_STEADY_N (50000) messages enqueued first, then relay started:
#           the same delivery-backend CPU per message.
# Figures (medians over the rounds): steady_cpu_vs_drain, p99_ms_at_rate,
# claims_per_msg_low, idle_pct_core. Where the server's time went in each
# phase (pg_stat_statements, pg_stat_user_functions self time) is in
# WORK/<db>.statements.csv and .functions.csv; the numbers in WORK/steady.csv.
#
# Knobs (env; validated): PEERS_STEADY_ROUNDS (5) PEERS_STEADY_SECONDS (30)
# PEERS_STEADY_RATE (1000) PEERS_LOW_RATE (200) PEERS_LOW_SECONDS (20)
# PEERS_IDLE_SECONDS (20) PEERS_IDLE_WORKERS (4) PEERS_STEADY_N (50000)
# PEERS_STEADY_CLIENTS (8) PEERS_STEADY_THREADS (2) PEERS_STEADY_GRACE (30 s
# for the last effects) PEERS_STEADY_WINDOW (10 s: the worst window's p99)
# PEERS_POLL_MS (10) PEERS_DRAIN_TIMEOUT (900) PEERS_OURS (default) and
# lib.sh ours_knobs; OUTBOX_BIN_DIR (build/bin).
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/peers/lib.sh

OURS_MODE=${PEERS_OURS:-default}
BIN=${OUTBOX_BIN_DIR:-build/bin}
PEERS_STEADY_ROUNDS=${1:-${PEERS_STEADY_ROUNDS:-}}
PEERS_STEADY_SECONDS=${2:-${PEERS_STEADY_SECONDS:-}}
knobs PEERS_STEADY_ROUNDS PEERS_STEADY_SECONDS PEERS_STEADY_RATE PEERS_STEADY_N PEERS_STEADY_CLIENTS \
	PEERS_STEADY_THREADS PEERS_STEADY_GRACE PEERS_STEADY_WINDOW PEERS_LOW_RATE PEERS_LOW_SECONDS \
	PEERS_IDLE_SECONDS PEERS_IDLE_WORKERS PEERS_POLL_MS PEERS_DRAIN_TIMEOUT
need_mode OURS_MODE PEERS_OURS
ours_knobs
((STEADY_THREADS <= STEADY_CLIENTS)) || STEADY_THREADS=$STEADY_CLIENTS
# shellcheck disable=SC2153 # POLL_MS: set by knobs
POLL_S=$(awk -v m="$POLL_MS" 'BEGIN { printf "%.3f", m / 1000 }')
ours_check_bins
pgbench_find

peers_workdir steady
peers_traps
peers_server_start "${PEERS_MEASURE_CONF[@]}"
CSV=$PEERS_WORK/steady.csv
echo "round,phase,rate,seconds,messages,deliver_cpu_ms,deliver_cpu_us_per_msg,server_cpu_us_per_msg,claims,claims_per_msg,p50_ms,p99_ms,p999_ms,max_ms,worst_window_p99_ms" >"$CSV"
echo "peers: steady: ours ($OURS_MODE flags), $STEADY_ROUNDS rounds: ${LOW_RATE}/s x ${LOW_SECONDS}s, ${STEADY_RATE}/s x ${STEADY_SECONDS}s ($STEADY_CLIENTS pgbench sessions), a drain of $STEADY_N"

# start_ours DB [FLAG...]: migrated database, consumer and relay running.
start_ours() {
	local db=$1
	shift
	fresh_db "$db"
	ours_migrate "$db"
	ours_consumer "$db" "$db"
	ours_relay "$db" "$db" "$OURS_MODE" "$@"
}
stop_ours() { stop_tracked "$OURS_RPID"; stop_tracked "$OURS_CPID"; }
claims() {
	q postgres "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
	            WHERE d.datname = '$1' AND query LIKE '%FROM outbox.claim(%'"
}

# ---- idle (once) --------------------------------------------------------------
idle_phase() {
	local db=st_idle b0 b1 s0 s1 r0 r1 relay_pct server_pct base_pct
	fresh_db "$db"
	ours_migrate "$db"
	ours_consumer "$db" "$db"
	b0=$(server_ticks); fg sleep "$IDLE_SECONDS"; b1=$(server_ticks)
	ours_relay "$db" "$db" "$OURS_MODE" --workers "$IDLE_WORKERS"
	nap 3   # start-up: connections, migrations check, first claims
	s0=$(server_ticks); r0=$(tree_ticks "$OURS_RPID")
	fg sleep "$IDLE_SECONDS"
	s1=$(server_ticks); r1=$(tree_ticks "$OURS_RPID")
	stop_ours
	pct() { awk -v t="$1" -v h="$CLK_TCK" -v s="$IDLE_SECONDS" 'BEGIN { printf "%.2f", t * 100 / h / s }'; }
	relay_pct=$(pct $((r1 - r0))); server_pct=$(pct $((s1 - s0))); base_pct=$(pct $((b1 - b0)))
	echo "peers: idle: $IDLE_WORKERS relay workers, ${IDLE_SECONDS}s: relay processes $relay_pct %, server $server_pct % (alone: $base_pct %) of one core"
	echo "0,idle,0,$IDLE_SECONDS,0,$(ticks_ms $((r1 - r0 + s1 - s0 - (b1 - b0)))),,,,,,,,," >>"$CSV"
	IDLE_PCT=$(awk -v r="$relay_pct" -v s="$server_pct" -v b="$base_pct" 'BEGIN { v = r + s - b; printf "%.2f", v < 0 ? 0 : v }')
	drop_db "$db"
}

# ---- a live load ------------------------------------------------------------------
# live_phase PHASE RATE SECONDS ROUND: sets P_N P_DCPU (us/msg) P_CLAIMS P_LAT.
live_phase() {
	local phase=$1 rate=$2 secs=$3 round=$4 db="st_$1_$4" processed failed s0 s1 dt n d lat claims_n
	start_ours "$db"
	nap 1
	live_script "$PEERS_WORK/$db.sql"
	q "$db" CHECKPOINT >/dev/null
	stats_reset "$db"
	deliver_mark "$db" "$PEERS_WORK/$db.ticks"
	s0=$(server_ticks)
	fg "$PGBENCH" -n -c "$STEADY_CLIENTS" -j "$STEADY_THREADS" -R "$rate" -T "$secs" \
		-f "$PEERS_WORK/$db.sql" "$db" >"$PEERS_WORK/$db.pgbench.txt" 2>&1 ||
		peers_die "pgbench failed: see $PEERS_WORK/$db.pgbench.txt"
	processed=$(pgb_processed "$PEERS_WORK/$db.pgbench.txt")
	failed=$(pgb_failed "$PEERS_WORK/$db.pgbench.txt")
	((${failed:-0} == 0)) || peers_die "$phase: $failed failed enqueues: see $PEERS_WORK/$db.pgbench.txt"
	wait_rows "$db" inbox.notifications idempotency_key "$processed" "$STEADY_GRACE" - "$OURS_CPID" "$OURS_RPID"
	dt=$(deliver_ticks "$db" "$PEERS_WORK/$db.ticks")
	s1=$(server_ticks)
	claims_n=$(claims "$db")
	stop_ours
	stats_dump "$db" "$PEERS_WORK/$db"
	read -r n d lat <<<"$(commit_latency "$db" "$STEADY_WINDOW")"
	((n == processed && d == processed)) || peers_die "$phase: $n effects ($d distinct) for $processed enqueues"
	P_DCPU=$(awk -v t="$dt" -v h="$CLK_TCK" -v n="$n" 'BEGIN { printf "%.1f", t * 1e6 / h / n }')
	P_SCPU=$(awk -v t="$((s1 - s0))" -v h="$CLK_TCK" -v n="$n" 'BEGIN { printf "%.1f", t * 1e6 / h / n }')
	P_CLAIMS=$(awk -v c="$claims_n" -v n="$n" 'BEGIN { printf "%.3f", c / n }')
	P_LAT=$lat
	local p50 p99 p999 pmax wp99
	read -r p50 p99 p999 pmax wp99 _ <<<"$lat"
	echo "$round,$phase,$rate,$secs,$n,$(ticks_ms "$dt"),$P_DCPU,$P_SCPU,$claims_n,$P_CLAIMS,$p50,$p99,$p999,$pmax,$wp99" >>"$CSV"
	printf '  %-7s %6s/s x %3ss: %7s msgs, delivery CPU %6s us/msg (server %6s), claims/msg %s, latency p50 %s p99 %s p99.9 %s max %s ms\n' \
		"$phase" "$(fmt_int "$rate")" "$secs" "$(fmt_int "$n")" "$P_DCPU" "$P_SCPU" "$P_CLAIMS" "$p50" "$p99" "$p999" "$pmax"
	drop_db "$db"
}

# ---- the drain ----------------------------------------------------------------------
# drain_phase ROUND: sets P_DCPU (us/msg).
drain_phase() {
	local round=$1 db="st_drain_$1" t0 s0 s1 dt claims_n
	fresh_db "$db"
	ours_migrate "$db"
	ours_fill "$db" "$STEADY_N"
	settle "$db"
	ours_consumer "$db" "$db"
	stats_reset "$db"
	deliver_mark "$db" "$PEERS_WORK/$db.ticks"
	s0=$(server_ticks)
	t0=$EPOCHREALTIME
	ours_relay "$db" "$db" "$OURS_MODE"
	wait_rows "$db" inbox.notifications idempotency_key "$STEADY_N" "$DRAIN_TIMEOUT" "k-$STEADY_N" "$OURS_CPID" "$OURS_RPID"
	dt=$(deliver_ticks "$db" "$PEERS_WORK/$db.ticks")
	s1=$(server_ticks)
	claims_n=$(claims "$db")
	stop_ours
	stats_dump "$db" "$PEERS_WORK/$db"
	P_DCPU=$(awk -v t="$dt" -v h="$CLK_TCK" -v n="$STEADY_N" 'BEGIN { printf "%.1f", t * 1e6 / h / n }')
	P_SCPU=$(awk -v t="$((s1 - s0))" -v h="$CLK_TCK" -v n="$STEADY_N" 'BEGIN { printf "%.1f", t * 1e6 / h / n }')
	local secs rate
	secs=$(awk -v a="$t0" -v b="$WAIT_T1" 'BEGIN { printf "%.3f", b - a }')
	rate=$(awk -v n="$STEADY_N" -v s="$secs" 'BEGIN { printf "%.0f", n / s }')
	echo "$round,drain,$rate,$secs,$STEADY_N,$(ticks_ms "$dt"),$P_DCPU,$P_SCPU,$claims_n,$(awk -v c="$claims_n" -v n="$STEADY_N" 'BEGIN { printf "%.3f", c / n }'),,,,," >>"$CSV"
	printf '  %-7s %6s/s x %3ss: %7s msgs, delivery CPU %6s us/msg (server %6s), %s claims\n' \
		drain "$(fmt_int "$rate")" "$secs" "$(fmt_int "$STEADY_N")" "$P_DCPU" "$P_SCPU" "$claims_n"
	drop_db "$db"
}

idle_phase
low_c=() st_c=() dr_c=() p50s=() p99s=() p999s=()
for ((round = 1; round <= STEADY_ROUNDS; round++)); do
	echo "peers: steady round $round/$STEADY_ROUNDS"
	live_phase low "$LOW_RATE" "$LOW_SECONDS" "$round"
	low_c+=("$P_CLAIMS")
	# The drain and the steady rate alternate which goes first.
	if ((round % 2)); then order=(steady drain); else order=(drain steady); fi
	for ph in "${order[@]}"; do
		if [ "$ph" = drain ]; then
			drain_phase "$round"; dr_c+=("$P_DCPU")
		else
			live_phase steady "$STEADY_RATE" "$STEADY_SECONDS" "$round"; st_c+=("$P_DCPU")
			read -r a b c _ <<<"$P_LAT"; p50s+=("$a"); p99s+=("$b"); p999s+=("$c")
		fi
	done
done

# med2 X...: the median, 2 decimals.
med2() { median "$@" | awk '{ printf "%.2f", $1 }'; }
mst=$(med2 "${st_c[@]}"); mdr=$(med2 "${dr_c[@]}")
echo "peers: steady: delivery CPU per message, median: $mst us at ${STEADY_RATE}/s, $mdr us in the drain;" \
	"latency at ${STEADY_RATE}/s p50 $(med2 "${p50s[@]}"), p99 $(med2 "${p99s[@]}"), p99.9 $(med2 "${p999s[@]}") ms (medians of the rounds)"
figure steady_cpu_vs_drain "$(div2 "$mst" "$mdr")" '<=' "$T_STEADY_VS_DRAIN" x \
	"database CPU of the relay's and consumer's sessions per delivered message at ${STEADY_RATE}/s / in a drain of $STEADY_N ($STEADY_ROUNDS rounds, medians)"
figure p50_ms_at_rate "$(med2 "${p50s[@]}")" - - ms "producer commit -> consumer commit p50 at ${STEADY_RATE}/s"
figure p99_ms_at_rate "$(med2 "${p99s[@]}")" '<=' "$T_P99_MS" ms "producer commit -> consumer commit p99 at ${STEADY_RATE}/s (median of $STEADY_ROUNDS rounds of ${STEADY_SECONDS}s)"
figure p999_ms_at_rate "$(med2 "${p999s[@]}")" - - ms "producer commit -> consumer commit p99.9 at ${STEADY_RATE}/s"
figure claims_per_msg_low "$(median "${low_c[@]}" | awk '{ printf "%.3f", $1 }')" '<=' "$T_CLAIMS_PER_MSG" x \
	"outbox.claim calls per delivered message at ${LOW_RATE}/s (pg_stat_statements, empty claims included)"
figure idle_pct_core "$IDLE_PCT" '<=' "$T_IDLE_PCT_CORE" "%core" \
	"$IDLE_WORKERS idle relay workers: relay processes + server over its idle baseline, ${IDLE_SECONDS}s"
echo "peers: steady per-phase numbers: $CSV"
