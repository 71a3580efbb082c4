#!/usr/bin/env bash
# bench/peers/users.sh - "what users meet" (issue 32 item 1): every figure of
# bench/peers in ONE run on ONE private PostgreSQL 15, each a ratio to
# something measured in the same run, then one table with the issue's target
# beside each figure.
#
#   bench/peers/users.sh [ROUNDS]        default 5 rounds for every part
#
# The server: fsync=on, synchronous_commit=on, full_page_writes=on
# (scripts/pg-tmp.sh), plus lib.sh PEERS_MEASURE_CONF (track_commit_timestamp,
# track_functions = all, pg_stat_statements), started here and handed to
# each part through PEERS_PG; the parts run one after the other, each on
# databases of its own, and write their work dirs under this run's.
#
#   drain    run.sh N ROUNDS, systems ours (tuned), ours-default, graphile-worker, PgQ
#   enqueue  enqueue.sh ROUNDS SECONDS
#   cost     sustained.sh cost: 32 sessions at 1,000/s, cases without, with
#            (relay + consumer at default flags), plain, unrelayed; ROUNDS pairs
#   steady   steady.sh ROUNDS SECONDS: idle, 200/s, 1,000/s, the drain
#   view     view.sh N ROUNDS, and the queries at 250,000 messages
#
# Every part prints `peers: figure NAME VALUE UNIT target OP LIMIT VERDICT:
# WHAT` lines (lib.sh figure); they are collected in WORK/figures.csv and
# printed as the summary table at the end. A part that fails is reported
# and the others still run; the exit status is then 1.
#
# Knobs (env; validated): PEERS_USERS_PARTS ("drain enqueue cost steady
# view"), PEERS_USERS_N (50000: run.sh's and view.sh's N),
# PEERS_USERS_ENQ_SECONDS (10), PEERS_USERS_COST_SECONDS (30),
# PEERS_USERS_STEADY_SECONDS (30), PEERS_USERS_COST_RATE (1000); each
# part's own knobs (see its header) pass through; OUTBOX_BIN_DIR (build/bin).
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/peers/lib.sh

PARTS=${PEERS_USERS_PARTS:-drain enqueue cost steady view}
BIN=${OUTBOX_BIN_DIR:-build/bin}
PEERS_USERS_ROUNDS=${1:-${PEERS_USERS_ROUNDS:-}}
knobs PEERS_USERS_ROUNDS PEERS_USERS_N PEERS_USERS_ENQ_SECONDS PEERS_USERS_COST_SECONDS PEERS_USERS_STEADY_SECONDS PEERS_USERS_COST_RATE
read -r -a PART_LIST <<<"$PARTS"
((${#PART_LIST[@]} > 0)) || { echo "peers: PEERS_USERS_PARTS is empty" >&2; exit 2; }
for p in "${PART_LIST[@]}"; do
	case $p in drain | enqueue | cost | steady | view) ;; *)
		echo "peers: PEERS_USERS_PARTS: '$p' is not one of: drain enqueue cost steady view" >&2; exit 2 ;; esac
done
ours_check_bins

unset PEERS_PG
peers_workdir users
peers_traps
echo "peers: users: one PostgreSQL 15 (fsync on; ${PEERS_MEASURE_CONF[*]}) in $PEERS_WORK/pg"
peers_server_start "${PEERS_MEASURE_CONF[@]}"
export PEERS_PG=$PEERS_PGDIR PEERS_WORK_ROOT=$PEERS_WORK PEERS_FIGURES=$PEERS_WORK/figures.csv
export OUTBOX_BIN_DIR=$BIN
echo "figure,value,unit,op,target,verdict,what,script" >"$PEERS_FIGURES"
echo "peers: users: parts ${PART_LIST[*]}, $USERS_ROUNDS rounds each; started $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"

FAILED=()
# part NAME CMD...: runs one part (a child script) to its end; a failure is
# noted, not fatal.
part() {
	local name=$1 rc=0 t0=$SECONDS
	shift
	echo
	echo "peers: users: part $name: $*"
	fg "$@" || rc=$?
	echo "peers: users: part $name ended (exit $rc, $((SECONDS - t0)) s)"
	((rc == 0)) || FAILED+=("$name (exit $rc)")
}
for p in "${PART_LIST[@]}"; do
	case $p in
	drain) part drain env PEERS_SYSTEMS="ours ours-default graphile-worker pgq" bench/peers/run.sh "$USERS_N" "$USERS_ROUNDS" ;;
	enqueue) part enqueue bench/peers/enqueue.sh "$USERS_ROUNDS" "$USERS_ENQ_SECONDS" ;;
	cost) part cost env PEERS_OURS=default PEERS_COST_RATE="$USERS_COST_RATE" PEERS_COST_EXTRA="plain unrelayed" \
		PEERS_COST_PAIRS="$USERS_ROUNDS" PEERS_COST_SECONDS="$USERS_COST_SECONDS" bench/peers/sustained.sh cost ;;
	steady) part steady bench/peers/steady.sh "$USERS_ROUNDS" "$USERS_STEADY_SECONDS" ;;
	view) part view bench/peers/view.sh "$USERS_N" "$USERS_ROUNDS" ;;
	esac
done

echo
echo "peers: users: summary ($USERS_ROUNDS rounds; ended $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg))"
awk -F, 'NR > 1 {
	t = ($4 == "-") ? "(none)" : $4 " " $5
	printf "  %-34s %12s %-6s %-10s %s\n", $1, $2, $3, t, $6
}' "$PEERS_FIGURES" | { printf '  %-34s %12s %-6s %-10s %s\n' figure value unit target verdict; cat; }
echo "peers: users: $(grep -c ',met,' "$PEERS_FIGURES" || true) targets met, $(grep -c ',MISSED,' "$PEERS_FIGURES" || true) missed; figures: $PEERS_FIGURES"
if ((${#FAILED[@]} > 0)); then
	echo "peers: users: FAILED parts: ${FAILED[*]}" >&2
	exit 1
fi
