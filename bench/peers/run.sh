#!/usr/bin/env bash
# bench/peers/run.sh - our outbox relay side by side with graphile-worker
# 0.17.3 and PgQ 3.5, on ONE private PostgreSQL 15 with fsync on.
#
#   bench/peers/run.sh [N] [ROUNDS]      defaults N=50000, ROUNDS=7
#
# Every system does the same work per message: a dedup record
# INSERT ... ON CONFLICT DO NOTHING on a text key and, when the key is new,
# one effect row with the ~200-byte payload, committed durably
# (synchronous_commit on). N messages are queued before the drain starts, on
# a fresh database per system per round; the rounds are interleaved, in an
# order that rotates each round (round 1: ours, graphile-worker, pgq; round
# 2: graphile-worker, pgq, ours; ...). The drain is timed until the effect
# table holds N rows; then every system's effect rows, distinct keys and
# dedup records are counted, and anything but N fails the run.
#
#   ours              outboxctl migrate; outbox.enqueue() in chunks; outbox-consumer
#                     (record handler: inbox.processed + inbox.notifications) and
#                     outbox-relay over ipc://; timed from the relay's start.
#   ours-default      the same, relay and consumer started with no tuning flag at
#                     all (--db, --route / --listen only): what a user meets.
#   graphile-worker   runMigrations; graphile_worker.add_jobs() in chunks; a
#                     worker pool (node/gw.js); timed from just before run().
#   pgq               CREATE EXTENSION pgq; a queue + consumer; pgq.insert_event()
#                     in batches of PEERS_PGQ_BATCH, a tick after each batch;
#                     a server-side consumer (sql/pgq_drain.sql); timed from
#                     the consumer's start.
#
# Output: a table per round, a summary (medians, ratios), and the raw
# numbers in WORKDIR/peers.csv. See bench/peers/README.md.
#
# Knobs (env; each validated, a non-number exits 2):
#   PEERS_WORKERS (2) PEERS_BATCH (100) PEERS_INFLIGHT (4) PEERS_CONSUMER_THREADS (4)
#   PEERS_GW_CONCURRENCY (24) PEERS_GW_LOCAL_QUEUE (500) PEERS_GW_COMPLETE_DELAY (0)
#   PEERS_PGQ_BATCH (500) PEERS_CHUNK (10000: enqueue statement size)
#   PEERS_POLL_MS (10) PEERS_DRAIN_TIMEOUT (900 s) PEERS_START_TIMEOUT (30 s)
#   PEERS_SYSTEMS ("ours ours-default graphile-worker pgq": a subset for debugging; "ours4"
#                 is ours on the 4-slot layout before outbox 017, for an A/B
#                 of what the slots cost the drain: bench/sql/four_slots.sql)
#   PEERS_RELAY_ARGS, PEERS_CONSUMER_ARGS (extra outbox-relay / outbox-consumer flags, word-split) OUTBOX_BIN_DIR (build/bin)
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/peers/lib.sh

# ---- limits ------------------------------------------------------------------
N=${1:-${PEERS_N:-50000}}
ROUNDS=${2:-${PEERS_ROUNDS:-7}}
GW_CONCURRENCY=${PEERS_GW_CONCURRENCY:-24}
GW_LOCAL_QUEUE=${PEERS_GW_LOCAL_QUEUE:-500}
GW_COMPLETE_DELAY=${PEERS_GW_COMPLETE_DELAY:-0}
PGQ_BATCH=${PEERS_PGQ_BATCH:-500}
POLL_MS=${PEERS_POLL_MS:-10}
DRAIN_TIMEOUT=${PEERS_DRAIN_TIMEOUT:-900}
SYSTEMS=${PEERS_SYSTEMS:-ours ours-default graphile-worker pgq}
BIN=${OUTBOX_BIN_DIR:-build/bin}

need_int N 1 100000000 "N (argument 1 or PEERS_N)"
need_int ROUNDS 1 1000 "ROUNDS (argument 2 or PEERS_ROUNDS)"
ours_knobs
need_int GW_CONCURRENCY 1 1000 PEERS_GW_CONCURRENCY
need_int GW_LOCAL_QUEUE -1 100000 PEERS_GW_LOCAL_QUEUE
need_int GW_COMPLETE_DELAY -1 60000 PEERS_GW_COMPLETE_DELAY
need_int PGQ_BATCH 1 1000000 PEERS_PGQ_BATCH
need_int POLL_MS 1 10000 PEERS_POLL_MS
need_int DRAIN_TIMEOUT 1 86400 PEERS_DRAIN_TIMEOUT
((GW_LOCAL_QUEUE != 0)) || { echo "peers: PEERS_GW_LOCAL_QUEUE must be -1 (off) or >= 1" >&2; exit 2; }
read -r -a SYS <<<"$SYSTEMS"
((${#SYS[@]} > 0)) || { echo "peers: PEERS_SYSTEMS is empty" >&2; exit 2; }
for s in "${SYS[@]}"; do
	case $s in ours | ours-default | ours4 | graphile-worker | pgq) ;; *) echo "peers: unknown system '$s' in PEERS_SYSTEMS (ours ours-default ours4 graphile-worker pgq)" >&2; exit 2 ;; esac
done
POLL_S=$(awk -v m="$POLL_MS" 'BEGIN { printf "%.3f", m / 1000 }')
has() { [[ " ${SYS[*]} " == *" $1 "* ]]; }

# ---- prerequisites (installed only when missing) ----------------------------
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
if has ours || has ours-default || has ours4; then ours_check_bins; fi
if has graphile-worker; then
	if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		echo "peers: node and npm are needed for graphile-worker (apt-get install nodejs npm)" >&2; exit 2
	fi
	gwv=$(node -p 'require("./bench/peers/node/node_modules/graphile-worker/package.json").version' 2>/dev/null || true)
	if [ "$gwv" != 0.17.3 ]; then
		echo "peers: npm ci in bench/peers/node (graphile-worker 0.17.3 from the lock file)"
		(cd bench/peers/node && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
	fi
fi
if has pgq; then
	sharedir=$(pg_config --sharedir 2>/dev/null || echo /usr/share/postgresql/15)
	if [ ! -f "$sharedir/extension/pgq.control" ] && [ ! -f /usr/share/postgresql/15/extension/pgq.control ]; then
		echo "peers: installing postgresql-15-pgq3 (PgQ 3.5)"
		as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y \
			--no-install-recommends postgresql-15-pgq3 >/dev/null
	fi
fi

peers_workdir drain
peers_traps
CSV=$PEERS_WORK/peers.csv
echo "round,position,system,n,seconds,rate_per_s,effects" >"$CSV"

peers_server_start
echo "peers: PostgreSQL 15 with fsync=on, synchronous_commit=on, full_page_writes=on in $PEERS_PGDIR"
echo "peers: N=$N per drain, $ROUNDS rounds, systems: ${SYS[*]}"
echo "peers: ours: relay --workers $WORKERS --batch $BATCH --max-inflight $INFLIGHT, consumer --threads $CONSUMER_THREADS"
echo "peers: ours-default: relay and consumer with no tuning flag (relay --workers 1 --batch 500 --batch-bytes 1m --max-inflight 4, consumer --threads 4, log level info)"
echo "peers: graphile-worker: concurrency $GW_CONCURRENCY, localQueue.size $GW_LOCAL_QUEUE, completeJobBatchDelay/failJobBatchDelay $GW_COMPLETE_DELAY ms"
echo "peers: pgq: a tick after every $PGQ_BATCH events enqueued (batches of $PGQ_BATCH), one transaction per batch"

# check_effects SYSTEM DB EFFECTS KEYCOL DEDUP: exactly N effect rows, N
# distinct keys, N dedup records; sets EFFECTS and PAYLOAD_B.
check_effects() {
	local sys=$1 db=$2 tbl=$3 col=$4 dedup=$5 r n d p
	r=$(q "$db" "SELECT count(*), count(DISTINCT $col), (SELECT count(*) FROM $dedup),
	             coalesce(round(avg(octet_length(payload::text))), 0) FROM $tbl")
	IFS='|' read -r n d p PAYLOAD_B <<<"$r"
	EFFECTS=$n
	if [ "$n" != "$N" ] || [ "$d" != "$N" ] || [ "$p" != "$N" ]; then
		echo "peers: FAIL: $sys round $ROUND: $n effect rows, $d distinct keys, $p dedup records for $N messages" >&2
		exit 1
	fi
}

# ---- ours --------------------------------------------------------------------
# run_ours DB [four|default]: "four" drops the slots outbox 017 added
# first; "default" starts the relay and consumer with no tuning flag.
run_ours() {
	local db=$1 mode=tuned
	ours_migrate "$db"
	if [ "${2:-}" = four ]; then qf "$db" bench/sql/four_slots.sql; fi
	[ "${2:-}" != default ] || mode=default
	ours_fill "$db" "$N"
	settle "$db"
	ours_consumer "$db" "$db" "$mode"
	T0=$EPOCHREALTIME
	ours_relay "$db" "$db" "$mode"
	wait_rows "$db" inbox.notifications idempotency_key "$N" "$DRAIN_TIMEOUT" "k-$N" "$OURS_CPID" "$OURS_RPID"
	T1=$WAIT_T1
	stop_tracked "$OURS_RPID"
	stop_tracked "$OURS_CPID"
	check_effects ours "$db" inbox.notifications idempotency_key inbox.processed
}

# ---- graphile-worker ---------------------------------------------------------
run_gw() {
	local db=$1 s e pid
	# A plain command, not a function, in the background: $! is node itself.
	local env=(env PEERS_DB="$db" PEERS_GW_CONCURRENCY="$GW_CONCURRENCY" PEERS_GW_LOCAL_QUEUE="$GW_LOCAL_QUEUE"
		PEERS_GW_COMPLETE_DELAY="$GW_COMPLETE_DELAY" PEERS_GW_T0_FILE="$PEERS_WORK/$db.t0")
	qf "$db" bench/peers/sql/peer_tables.sql
	"${env[@]}" node bench/peers/node/gw.js migrate >>"$PEERS_WORK/$db.gw.log" 2>&1 ||
		peers_die "graphile-worker migrations failed: see $PEERS_WORK/$db.gw.log"
	while read -r s e; do
		q "$db" "SELECT count(*) FROM graphile_worker.add_jobs(ARRAY(
		           SELECT ROW('bench', json_build_object('key', 'k-' || g, 'payload', $PAYLOAD),
		                      NULL, NULL, NULL, NULL, NULL, NULL)::graphile_worker.job_spec
		             FROM generate_series($s, $e) g ORDER BY g))" >/dev/null
	done < <(chunks 1 "$N" "$CHUNK")
	settle "$db"
	rm -f "$PEERS_WORK/$db.t0"
	"${env[@]}" node bench/peers/node/gw.js work >>"$PEERS_WORK/$db.gw.log" 2>&1 &
	pid=$!; track "$pid"
	wait_rows "$db" effects key "$N" "$DRAIN_TIMEOUT" "k-$N" "$pid"
	T1=$WAIT_T1
	T0=$(cat "$PEERS_WORK/$db.t0")
	stop_tracked "$pid"
	check_effects graphile-worker "$db" effects key dedup
}

# ---- PgQ -----------------------------------------------------------------------
run_pgq() {
	local db=$1 s e pid ticks want
	qf "$db" bench/peers/sql/peer_tables.sql
	q "$db" "CREATE EXTENSION pgq" >/dev/null
	q "$db" "SELECT pgq.create_queue('peers')" >/dev/null
	# ticker() declines to tick until ticker_max_count events (or
	# ticker_max_lag) have come in; 1 makes it tick whenever we call it, so
	# the enqueue below alone decides where each batch ends.
	q "$db" "SELECT pgq.set_queue_config('peers', 'ticker_max_count', '1')" >/dev/null
	# Registered before the first event: a consumer sees what follows its tick.
	q "$db" "SELECT pgq.register_consumer('peers', 'peers_c')" >/dev/null
	qf "$db" bench/peers/sql/pgq_drain.sql
	# Each batch of PGQ_BATCH events commits in its own transaction, then a
	# tick in the next one: the tick's snapshot closes the batch.
	while read -r s e; do
		echo "SELECT count(pgq.insert_event('peers', 'bench.topic', ($PAYLOAD)::text, 'k-' || g, NULL, NULL, NULL))
		      FROM generate_series($s, $e) g;"
		echo "SELECT pgq.ticker('peers');"
	done < <(chunks 1 "$N" "$PGQ_BATCH") >"$PEERS_WORK/$db.enqueue.sql"
	qf "$db" "$PEERS_WORK/$db.enqueue.sql"
	ticks=$(q "$db" "SELECT count(*) FROM pgq.tick")
	want=$(((N + PGQ_BATCH - 1) / PGQ_BATCH + 1))
	[ "$ticks" = "$want" ] || peers_die "pgq: $ticks ticks after the enqueue, expected $want"
	settle "$db"
	T0=$EPOCHREALTIME
	psql -d "$db" -qX -v ON_ERROR_STOP=1 \
		-c "CALL peers_pgq_drain('peers', 'peers_c', $N, $DRAIN_TIMEOUT)" >>"$PEERS_WORK/$db.pgq.log" 2>&1 &
	pid=$!; track "$pid"
	wait_rows "$db" effects key "$N" "$DRAIN_TIMEOUT" "k-$N" "$pid"
	T1=$WAIT_T1
	wait "$pid" || peers_die "the PgQ consumer failed: see $PEERS_WORK/$db.pgq.log"
	untrack "$pid"
	check_effects pgq "$db" effects key dedup
}

# ---- rounds --------------------------------------------------------------------
declare -A RATES=()
label() { case $1 in ours) echo ours ;; ours-default) echo "ours (defaults)" ;; ours4) echo "ours (4 slots)" ;; graphile-worker) echo graphile-worker ;; pgq) echo PgQ ;; esac; }
for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
	order=()
	for ((i = 0; i < ${#SYS[@]}; i++)); do order+=("${SYS[(i + ROUND - 1) % ${#SYS[@]}]}"); done
	echo
	echo "peers: round $ROUND/$ROUNDS (order: ${order[*]})"
	printf '  %-16s %10s %12s %9s %10s\n' system "drain s" "rate/s" effects "payload B"
	pos=0
	for sys in "${order[@]}"; do
		pos=$((pos + 1))
		db="p${ROUND}_${sys//-/_}"
		fresh_db "$db"
		case $sys in ours) run_ours "$db" ;; ours-default) run_ours "$db" default ;; ours4) run_ours "$db" four ;; graphile-worker) run_gw "$db" ;; pgq) run_pgq "$db" ;; esac
		secs=$(awk -v a="$T0" -v b="$T1" 'BEGIN { printf "%.3f", b - a }')
		rate=$(awk -v n="$N" -v s="$secs" 'BEGIN { printf "%.0f", (s > 0) ? n / s : 0 }')
		RATES[$sys]+=" $rate"
		echo "$ROUND,$pos,$sys,$N,$secs,$rate,$EFFECTS" >>"$CSV"
		printf '  %-16s %10s %12s %9s %10s\n' "$(label "$sys")" "$secs" "$(fmt_int "$rate")" "$EFFECTS" "$PAYLOAD_B"
		# Out of shared_buffers' way before the next system's round.
		drop_db "$db"
	done
done

# ---- summary ---------------------------------------------------------------------
echo
echo "peers: summary, N=$N per drain, $ROUNDS rounds, every effect count checked (= N)"
printf '  %-16s %12s %12s %12s   %s\n' system "median/s" "min/s" "max/s" "per round"
declare -A MED=()
for sys in "${SYS[@]}"; do
	# shellcheck disable=SC2086
	set -- ${RATES[$sys]}
	MED[$sys]=$(median "$@")
	mn=$(printf '%s\n' "$@" | sort -g | head -1)
	mx=$(printf '%s\n' "$@" | sort -g | tail -1)
	printf '  %-16s %12s %12s %12s   %s\n' "$(label "$sys")" "$(fmt_int "${MED[$sys]}")" \
		"$(fmt_int "$mn")" "$(fmt_int "$mx")" "$*"
done
line="peers:"
sep=" "
unit() { case $1 in ours | ours-default | ours4) echo msgs/s ;; graphile-worker) echo jobs/s ;; pgq) echo events/s ;; esac; }
for sys in "${SYS[@]}"; do
	if [ "$sys" = ours ]; then w="ours median"; else w=$(label "$sys"); fi
	line+="$sep$w $(fmt_int "${MED[$sys]}") $(unit "$sys")"; sep="; "
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { r = a / b; printf (r < 1 ? "%.2f" : "%.1f"), r }'; }
if has ours && has pgq; then line+="; ours/PgQ $(ratio "${MED[ours]}" "${MED[pgq]}")"; fi
if has ours && has graphile-worker; then line+="; ours/graphile-worker $(ratio "${MED[ours]}" "${MED[graphile-worker]}")"; fi
if has ours && has ours4; then line+="; ours/ours (4 slots) $(ratio "${MED[ours]}" "${MED[ours4]}")"; fi
if has ours-default && has pgq; then line+="; ours (defaults)/PgQ $(ratio "${MED[ours-default]}" "${MED[pgq]}")"; fi
echo "$line"
if has ours-default && has pgq; then
	figure drain_default_vs_pgq "$(div2 "${MED[ours-default]}" "${MED[pgq]}")" '>=' "$T_DRAIN_VS_PGQ" x \
		"drain of N=$N, relay and consumer at default flags, median msgs/s / PgQ's median events/s ($ROUNDS rounds)"
fi
if has ours && has pgq; then
	figure drain_tuned_vs_pgq "$(div2 "${MED[ours]}" "${MED[pgq]}")" - - x \
		"the same, tuned (--workers $WORKERS --batch $BATCH --max-inflight $INFLIGHT)"
fi
if has ours-default && has graphile-worker; then
	figure drain_default_vs_graphile_worker "$(div2 "${MED[ours-default]}" "${MED[graphile-worker]}")" - - x \
		"drain at default flags / graphile-worker's median jobs/s"
fi
echo "peers: raw per-round numbers: $CSV"
