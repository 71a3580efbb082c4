#!/usr/bin/env bash
# bench/peers/sustained.sh - two more figures for ours, on one private
# PostgreSQL 15 with fsync on and track_commit_timestamp on:
#
#   bench/peers/sustained.sh [all|sustain|cost]      (default all)
#
# sustain  The highest offered rate of live durable enqueues at which the
#          producer-commit -> consumer-commit p99 stays under PEERS_SUSTAIN_P99_MS
#          (100 ms) for PEERS_SUSTAIN_SECONDS (300 s). Each step: a fresh
#          database, consumer + relay running, pgbench -R RATE with
#          PEERS_SUSTAIN_CLIENTS clients, each transaction one
#          outbox.enqueue() whose key carries txid_current(). Latency per
#          message = pg_xact_commit_timestamp(xmin) of its effect row in
#          inbox.notifications - the commit timestamp of the producer's
#          transaction (its xid is in the key). A step passes when pgbench
#          achieved >= PEERS_SUSTAIN_MIN_ACHIEVED (97) % of the rate (less
#          3 sigma of pgbench's Poisson arrivals), every
#          message's effect arrived (exactly once) within PEERS_SUSTAIN_GRACE
#          s of the end, and the p99 of the whole step and of every
#          PEERS_SUSTAIN_WINDOW-second window is under the limit. Rates:
#          PEERS_SUSTAIN_START (2000), doubled while passing, then bisected
#          down to PEERS_SUSTAIN_RESOLUTION (250/s); or the explicit list
#          PEERS_SUSTAIN_RATES ("2000 4000"). The total size of the outbox
#          schema's tables (indexes and TOAST included) is printed every
#          PEERS_SIZE_INTERVAL (30 s) of each step.
# cost     What the outbox costs the application's own transaction: pgbench,
#          PEERS_COST_CLIENTS (32) clients, -T PEERS_COST_SECONDS (60), a
#          business transaction of one INSERT into a plain table, without and
#          with outbox.enqueue() in the same transaction (relay and consumer
#          running in the "with" case). p50/p99/p99.9 from pgbench --log
#          (every transaction's latency, not a per-interval average), and the
#          ratio with/without. PEERS_COST_PAIRS (1) pairs, order alternating.
#          PEERS_COST_EXTRA="plain unrelayed" adds, per pair: the same message
#          INSERTed into a plain table instead (the floor), and enqueue with no
#          relay or consumer running.
#
# Knobs (env; each validated, a non-number exits 2): the PEERS_SUSTAIN_*,
# PEERS_COST_* and PEERS_SIZE_INTERVAL above; PEERS_WORKERS (2) PEERS_BATCH
# (100) PEERS_INFLIGHT (4) PEERS_CONSUMER_THREADS (4) PEERS_SUSTAIN_THREADS and
# PEERS_COST_THREADS (pgbench -j, 2) PEERS_START_TIMEOUT (30)
# PEERS_RELAY_ARGS (extra relay flags) OUTBOX_BIN_DIR (build/bin)
# PEERS_OURS (tuned: the knobs above; default: relay and consumer with no
# tuning flag at all). With both extras, two figure lines (lib.sh figure):
# app_p99_vs_plain and app_p99_vs_unrelayed, the issue's targets beside them.
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/peers/lib.sh

# ---- limits ------------------------------------------------------------------
MODE=${1:-all}
SUSTAIN_SECONDS=${PEERS_SUSTAIN_SECONDS:-300}
SUSTAIN_CLIENTS=${PEERS_SUSTAIN_CLIENTS:-8}
SUSTAIN_THREADS=${PEERS_SUSTAIN_THREADS:-2}
P99_MS=${PEERS_SUSTAIN_P99_MS:-100}
RATE_START=${PEERS_SUSTAIN_START:-2000}
RATE_MAX=${PEERS_SUSTAIN_MAX:-256000}
RESOLUTION=${PEERS_SUSTAIN_RESOLUTION:-250}
MAX_STEPS=${PEERS_SUSTAIN_MAX_STEPS:-12}
MIN_ACHIEVED=${PEERS_SUSTAIN_MIN_ACHIEVED:-97}
WINDOW_S=${PEERS_SUSTAIN_WINDOW:-30}
GRACE=${PEERS_SUSTAIN_GRACE:-30}
SIZE_INTERVAL=${PEERS_SIZE_INTERVAL:-30}
RATES=${PEERS_SUSTAIN_RATES:-}
COST_SECONDS=${PEERS_COST_SECONDS:-60}
COST_CLIENTS=${PEERS_COST_CLIENTS:-32}
COST_THREADS=${PEERS_COST_THREADS:-2}
COST_PAIRS=${PEERS_COST_PAIRS:-1}
COST_RATE=${PEERS_COST_RATE:-0}
COST_EXTRA=${PEERS_COST_EXTRA:-}
BIN=${OUTBOX_BIN_DIR:-build/bin}
OURS_MODE=${PEERS_OURS:-tuned}

case $MODE in all | sustain | cost) ;; *) echo "usage: $0 [all|sustain|cost]" >&2; exit 2 ;; esac
need_int SUSTAIN_SECONDS 1 86400 PEERS_SUSTAIN_SECONDS
need_int SUSTAIN_CLIENTS 1 256 PEERS_SUSTAIN_CLIENTS
need_int SUSTAIN_THREADS 1 64 PEERS_SUSTAIN_THREADS
need_int P99_MS 1 600000 PEERS_SUSTAIN_P99_MS
need_int RATE_START 1 10000000 PEERS_SUSTAIN_START
need_int RATE_MAX 1 10000000 PEERS_SUSTAIN_MAX
need_int RESOLUTION 1 10000000 PEERS_SUSTAIN_RESOLUTION
need_int MAX_STEPS 1 100 PEERS_SUSTAIN_MAX_STEPS
need_int MIN_ACHIEVED 1 100 PEERS_SUSTAIN_MIN_ACHIEVED
need_int WINDOW_S 1 86400 PEERS_SUSTAIN_WINDOW
need_int GRACE 1 3600 PEERS_SUSTAIN_GRACE
need_int SIZE_INTERVAL 1 86400 PEERS_SIZE_INTERVAL
need_int COST_SECONDS 1 86400 PEERS_COST_SECONDS
need_int COST_CLIENTS 1 256 PEERS_COST_CLIENTS
need_int COST_THREADS 1 64 PEERS_COST_THREADS
need_int COST_PAIRS 1 100 PEERS_COST_PAIRS
need_int COST_RATE 0 10000000 PEERS_COST_RATE
ours_knobs
need_mode OURS_MODE PEERS_OURS
read -r -a RATE_LIST <<<"$RATES"
for ((i = 0; i < ${#RATE_LIST[@]}; i++)); do
	PEERS_RATE=${RATE_LIST[i]}
	need_int PEERS_RATE 1 10000000 "PEERS_SUSTAIN_RATES (each)"
	RATE_LIST[i]=$PEERS_RATE
done
for extra in $COST_EXTRA; do
	case $extra in plain | unrelayed) ;; *)
		echo "peers: PEERS_COST_EXTRA: '$extra' is not one of: plain unrelayed" >&2; exit 2 ;; esac
done
((SUSTAIN_THREADS <= SUSTAIN_CLIENTS)) || SUSTAIN_THREADS=$SUSTAIN_CLIENTS
((COST_THREADS <= COST_CLIENTS)) || COST_THREADS=$COST_CLIENTS
POLL_S=0.1
ours_check_bins
pgbench_find

peers_workdir sustained
peers_traps

peers_server_start "track_commit_timestamp = on"
echo "peers: PostgreSQL 15 with fsync=on, synchronous_commit=on, track_commit_timestamp=on in $PEERS_PGDIR"
if [ "$OURS_MODE" = default ]; then
	echo "peers: ours: relay and consumer at their default flags (PEERS_OURS=default)"
else
	echo "peers: ours: relay --workers $WORKERS --batch $BATCH --max-inflight $INFLIGHT, consumer --threads $CONSUMER_THREADS"
fi

# The outbox schema's size: pg_total_relation_size of each table counts its
# indexes and TOAST; partitions are tables ('r') of their own; a partitioned
# parent ('p') has no storage of its own, so nothing is counted twice. TOAST
# tables live in pg_toast, not here.
OUTBOX_SIZE_SQL="SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'outbox' AND c.relkind IN ('r', 'p', 'm')"
mb() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1048576 }'; }
# size_sampler DB LABEL COUNT: one psql in the background that prints the
# size now and then every SIZE_INTERVAL s, COUNT times (its pauses are
# pg_sleep: one process, stopped by id at the end of the step).
size_sampler() {
	local db=$1 label=$2 count=$3 i
	for ((i = 0; i < count; i++)); do
		echo "SELECT format('peers:   [%s] t=%ss outbox tables %s MB', '$label', $((i * SIZE_INTERVAL)),
		        round(b / 1048576.0, 1)) FROM ($OUTBOX_SIZE_SQL) AS s(b);"
		printf '%s\n' '\o /dev/null' "SELECT pg_sleep($SIZE_INTERVAL);" '\o'
	done >"$PEERS_WORK/$db.sizes.sql"
	psql -d "$db" -AtqX -f "$PEERS_WORK/$db.sizes.sql" &
	SAMPLER_PID=$!; track "$SAMPLER_PID"
}

# ---- sustain -------------------------------------------------------------------
# sustain_step RATE: sets STEP_PASS (0/1) and prints one line.
sustain_step() {
	local rate=$1 db="s_$1" sampler processed failed achieved need r
	local n d p50 p99 p999 pmax wp99 nwin size_end
	fresh_db "$db"
	ours_migrate "$db"
	ours_consumer "$db" "$db"
	ours_relay "$db" "$db"
	nap 1
	live_script "$PEERS_WORK/$db.sql"
	q "$db" CHECKPOINT >/dev/null
	echo "peers: sustain step: ${rate}/s offered for ${SUSTAIN_SECONDS}s ($SUSTAIN_CLIENTS clients)"
	size_sampler "$db" "${rate}/s" $(((SUSTAIN_SECONDS + GRACE) / SIZE_INTERVAL + 1))
	sampler=$SAMPLER_PID
	fg "$PGBENCH" -n -c "$SUSTAIN_CLIENTS" -j "$SUSTAIN_THREADS" -R "$rate" -T "$SUSTAIN_SECONDS" \
		-f "$PEERS_WORK/$db.sql" "$db" >"$PEERS_WORK/$db.pgbench.txt" 2>&1 ||
		peers_die "pgbench failed: see $PEERS_WORK/$db.pgbench.txt"
	processed=$(pgb_processed "$PEERS_WORK/$db.pgbench.txt")
	failed=$(pgb_failed "$PEERS_WORK/$db.pgbench.txt")
	local lag
	lag=$(awk '/^rate limit schedule lag/ { gsub(/[()]/, ""); print $6 " ms, max " $8 " ms"; exit }' "$PEERS_WORK/$db.pgbench.txt")
	[ -n "$processed" ] || peers_die "no transaction count in $PEERS_WORK/$db.pgbench.txt"
	# The last effects: up to GRACE seconds after the producers stopped.
	local delivered_in_grace=1
	( wait_rows "$db" inbox.notifications idempotency_key "$processed" "$GRACE" - "$OURS_CPID" "$OURS_RPID" ) \
		2>>"$PEERS_WORK/$db.wait.log" || delivered_in_grace=0
	stop_tracked "$sampler"
	size_end=$(q "$db" "$OUTBOX_SIZE_SQL")
	stop_tracked "$OURS_RPID"
	stop_tracked "$OURS_CPID"
	read -r n d p50 p99 p999 pmax wp99 nwin <<<"$(commit_latency "$db" "$WINDOW_S")"
	achieved=$(awk -v n="$processed" -v s="$SUSTAIN_SECONDS" 'BEGIN { printf "%.0f", n / s }')
	# pgbench -R draws exponential gaps: the count is Poisson, so allow 3
	# sigma (sqrt of the mean) below the percentage (it matters only in
	# short runs: 3 sigma is 0.4 % of 2,000/s x 300 s).
	need=$(awk -v r="$rate" -v s="$SUSTAIN_SECONDS" -v p="$MIN_ACHIEVED" \
		'BEGIN { m = r * s; printf "%.0f", m * p / 100 - 3 * sqrt(m) }')
	local why=()
	((processed >= need)) || why+=("pgbench achieved ${achieved}/s < ${MIN_ACHIEVED}% of ${rate}/s")
	((failed == 0)) || why+=("$failed failed enqueue transactions")
	((delivered_in_grace && n == processed)) || why+=("$n of $processed effects within ${GRACE}s")
	((n == d)) || why+=("$((n - d)) DUPLICATE effects")
	awk -v a="$p99" -v b="$wp99" -v l="$P99_MS" 'BEGIN { exit !(a < l && b < l) }' ||
		why+=("p99 ${p99} ms / worst ${WINDOW_S}s-window p99 ${wp99} ms >= ${P99_MS} ms")
	if ((${#why[@]} == 0)); then STEP_PASS=1; verdict=PASS; else STEP_PASS=0; verdict="FAIL (${why[*]})"; fi
	echo "peers: sustain $(fmt_int "$rate")/s x ${SUSTAIN_SECONDS}s: achieved $(fmt_int "$achieved")/s (pgbench schedule lag avg ${lag:-?})," \
		"$n effects; producer-commit -> consumer-commit p50 $p50, p99 $p99, p99.9 $p999, max $pmax ms;" \
		"worst ${WINDOW_S}s-window p99 $wp99 ms ($nwin windows); outbox tables at the end $(mb "$size_end"): $verdict"
	echo "$rate,$SUSTAIN_SECONDS,$achieved,$n,$p50,$p99,$p999,$pmax,$wp99,$size_end,$STEP_PASS" >>"$SUSTAIN_CSV"
	drop_db "$db"
}

run_sustain() {
	SUSTAIN_CSV=$PEERS_WORK/sustained.csv
	echo "rate,seconds,achieved,effects,p50_ms,p99_ms,p999_ms,max_ms,worst_window_p99_ms,outbox_bytes_end,pass" >"$SUSTAIN_CSV"
	local best=0 lo=0 hi=0 r steps=0
	if ((${#RATE_LIST[@]} > 0)); then
		for r in "${RATE_LIST[@]}"; do
			sustain_step "$r"
			if ((STEP_PASS && r > best)); then best=$r; fi
		done
	else
		r=$RATE_START
		while ((steps < MAX_STEPS)); do
			steps=$((steps + 1))
			sustain_step "$r"
			if ((STEP_PASS)); then lo=$r; else hi=$r; break; fi
			((r * 2 <= RATE_MAX)) || break
			r=$((r * 2))
		done
		# Bisect between the highest pass and the lowest failure.
		while ((hi > 0 && hi - lo > RESOLUTION && steps < MAX_STEPS)); do
			steps=$((steps + 1))
			r=$(((lo + hi) / 2))
			sustain_step "$r"
			if ((STEP_PASS)); then lo=$r; else hi=$r; fi
		done
		best=$lo
	fi
	if ((best > 0)); then
		SUSTAIN_LINE="peers: sustained: highest passing offered rate $(fmt_int "$best") enqueues/s (p99 < ${P99_MS} ms for ${SUSTAIN_SECONDS}s)"
	else
		SUSTAIN_LINE="peers: sustained: no rate tried passed (p99 < ${P99_MS} ms for ${SUSTAIN_SECONDS}s)"
	fi
	echo "$SUSTAIN_LINE"
	echo "peers: sustained per-step numbers: $SUSTAIN_CSV"
}

# ---- cost ----------------------------------------------------------------------
# cost_run with|without: sets C_P50 C_P99 C_P999 C_TPS (ms, ms, ms, /s).
cost_run() {
	local kind=$1 db="c_${1}_$2" logp r processed
	fresh_db "$db"
	q "$db" "CREATE TABLE app_rows (id bigserial PRIMARY KEY, payload text NOT NULL,
	                                created_at timestamptz NOT NULL DEFAULT now())" >/dev/null
	{
		echo "BEGIN;"
		echo "INSERT INTO app_rows (payload) VALUES (repeat('x', 200));"
		case $kind in
		with | unrelayed)
			echo "SELECT outbox.enqueue('bench.topic', 'c-' || txid_current()::text, $PAYLOAD_LIT);" ;;
		plain)
			echo "INSERT INTO app_outbox (topic, idempotency_key, payload) VALUES ('bench.topic', 'c-' || txid_current()::text, $PAYLOAD_LIT);" ;;
		esac
		echo "END;"
	} >"$PEERS_WORK/$db.sql"
	if [ "$kind" = plain ]; then
		q "$db" "CREATE TABLE app_outbox (id bigserial PRIMARY KEY, topic text NOT NULL,
		                                  idempotency_key text NOT NULL UNIQUE, payload jsonb NOT NULL,
		                                  created_at timestamptz NOT NULL DEFAULT now())" >/dev/null
	fi
	[ "$kind" != unrelayed ] || ours_migrate "$db"
	if [ "$kind" = with ]; then
		ours_migrate "$db"
		ours_consumer "$db" "$db"
		ours_relay "$db" "$db"
		nap 1
	fi
	q "$db" CHECKPOINT >/dev/null
	logp="$PEERS_WORK/$db.txlog"
	local rate_args=()
	((COST_RATE == 0)) || rate_args=(-R "$COST_RATE")
	fg "$PGBENCH" -n -c "$COST_CLIENTS" -j "$COST_THREADS" -T "$COST_SECONDS" "${rate_args[@]}" \
		--log --log-prefix="$logp" -f "$PEERS_WORK/$db.sql" "$db" >"$PEERS_WORK/$db.pgbench.txt" 2>&1 ||
		peers_die "pgbench failed: see $PEERS_WORK/$db.pgbench.txt"
	processed=$(pgb_processed "$PEERS_WORK/$db.pgbench.txt")
	if [ "$kind" = with ]; then
		wait_rows "$db" inbox.notifications idempotency_key "$processed" "$GRACE" - "$OURS_CPID" "$OURS_RPID"
		stop_tracked "$OURS_RPID"
		stop_tracked "$OURS_CPID"
		local n d
		IFS='|' read -r n d <<<"$(q "$db" "SELECT count(*), count(DISTINCT idempotency_key) FROM inbox.notifications")"
		if [ "$n" != "$processed" ] || [ "$d" != "$processed" ]; then
			peers_die "cost: $n effects ($d distinct) for $processed enqueues"
		fi
	fi
	read -r C_P50 C_P99 C_P999 C_TPS C_N _ <<<"$(pgb_latency "$logp" "$COST_SECONDS")"
	local label="$kind outbox.enqueue"
	case $kind in plain) label="plain second row" ;; unrelayed) label="outbox.enqueue, no relay or consumer" ;; esac
	echo "peers: cost [$label] $(fmt_int "$C_N") transactions, $(fmt_int "$C_TPS")/s:" \
		"latency p50 $C_P50 ms, p99 $C_P99 ms, p99.9 $C_P999 ms"
	echo "$kind,$2,$C_N,$C_TPS,$C_P50,$C_P99,$C_P999" >>"$COST_CSV"
	drop_db "$db"
}

run_cost() {
	COST_CSV=$PEERS_WORK/cost.csv
	echo "case,pair,transactions,tps,p50_ms,p99_ms,p999_ms" >"$COST_CSV"
	local load=unthrottled
	((COST_RATE == 0)) || load="-R $COST_RATE"
	echo "peers: cost: business transaction = one INSERT (pgbench, $COST_CLIENTS clients, -j $COST_THREADS, ${COST_SECONDS}s each, $load)"
	local pair w50=() w99=() o50=() o99=() wt=() ot=() extra
	declare -A x99=()
	for ((pair = 1; pair <= COST_PAIRS; pair++)); do
		# Pair p runs the cases rotated by p - 1: none always goes first.
		# shellcheck disable=SC2206 # a list of words
		local cases=(without with $COST_EXTRA) order=() i
		for ((i = 0; i < ${#cases[@]}; i++)); do order+=("${cases[(i + pair - 1) % ${#cases[@]}]}"); done
		for k in "${order[@]}"; do
			cost_run "$k" "$pair"
			case $k in
			with) w50+=("$C_P50"); w99+=("$C_P99"); wt+=("$C_TPS") ;;
			without) o50+=("$C_P50"); o99+=("$C_P99"); ot+=("$C_TPS") ;;
			*) x99[$k]="${x99[$k]:-} $C_P99" ;;
			esac
		done
	done
	local mo50 mo99 mw50 mw99 mot mwt
	mo50=$(median "${o50[@]}"); mo99=$(median "${o99[@]}"); mot=$(median "${ot[@]}")
	mw50=$(median "${w50[@]}"); mw99=$(median "${w99[@]}"); mwt=$(median "${wt[@]}")
	COST_LINE=$(awk -v a50="$mo50" -v a99="$mo99" -v b50="$mw50" -v b99="$mw99" -v at="$mot" -v bt="$mwt" 'BEGIN {
		printf "peers: cost to the application: p50 %.2f -> %.2f ms (x%.2f), p99 %.2f -> %.2f ms (x%.2f), throughput %d -> %d tx/s (x%.2f)",
			a50, b50, b50 / a50, a99, b99, b99 / a99, at, bt, bt / at }')
	echo "$COST_LINE (without -> with outbox.enqueue; relay + consumer running)"
	for extra in $COST_EXTRA; do
		# shellcheck disable=SC2086 # a list of numbers
		awk -v k="$extra" -v a="$mo99" -v b="$(median ${x99[$extra]})" 'BEGIN {
			printf "peers: cost [%s]: p99 %.2f -> %.2f ms (x%.2f) against without\n", k, a, b, b / a }'
	done
	# The issue's two figures: "with" against the floor and against enqueue
	# alone (every case's median p99 over the pairs).
	# shellcheck disable=SC2086 # lists of numbers
	if [ -n "${x99[plain]:-}" ]; then
		figure app_p99_vs_plain "$(div2 "$mw99" "$(median ${x99[plain]})")" '<=' "$T_APP_VS_PLAIN" x \
			"p99 commit of the business transaction + enqueue, relay and consumer running, / the same writing the message to a plain table ($(rate_label))"
	fi
	# shellcheck disable=SC2086
	if [ -n "${x99[unrelayed]:-}" ]; then
		figure app_p99_vs_unrelayed "$(div2 "$mw99" "$(median ${x99[unrelayed]})")" '<=' "$T_APP_VS_UNRELAYED" x \
			"p99 commit with relay and consumer running / enqueue with them stopped ($(rate_label))"
	fi
	echo "peers: cost per-run numbers: $COST_CSV"
}

rate_label() {
	if ((COST_RATE == 0)); then echo "$COST_CLIENTS clients, unthrottled"; else echo "$COST_CLIENTS clients at ${COST_RATE}/s"; fi
}

SUSTAIN_LINE=""; COST_LINE=""
case $MODE in
all) run_sustain; run_cost ;;
sustain) run_sustain ;;
cost) run_cost ;;
esac
echo
echo "peers: summary"
[ -z "$SUSTAIN_LINE" ] || echo "$SUSTAIN_LINE"
[ -z "$COST_LINE" ] || echo "$COST_LINE"
