#!/usr/bin/env bash
# bench/peers/view.sh - what looking costs: the drain with a 1 Hz poll of
# the outbox beside it, against the drain alone, and how long each such
# look takes at a large outbox. Ours at default flags (PEERS_OURS), one
# private PostgreSQL 15 (or users.sh's).
#
#   bench/peers/view.sh [N] [ROUNDS]     defaults 50000 per drain, 5 rounds
#
# The drain (as run.sh's: N messages enqueued first, settled, consumer
# started, timed from the relay's start until inbox.notifications holds N)
# under each of, in an order that rotates by round, each on a fresh
# database:
#   none     nothing else;
#   count    one psql session running SELECT count(*) FROM outbox.messages
#            WHERE status = 'pending', then pg_sleep(1), over and over;
#   status   `outboxctl status` (a process, a connection) every second, as
#            `watch -n 1` would;
#   web      `outboxctl web` (its one poller, every --poll-interval: 1 s),
#            serving on 127.0.0.1 port 0 (the kernel's pick, read back from
#            --ready-file).
# Figures: view_cost_<case>_pct = 100 x (1 - median rate with it / median
# rate with none).
#
# Then the query times at PEERS_VIEW_BIG (250000) messages, on one database,
# in each state of PEERS_VIEW_STATES ("backlog retained"): backlog = all
# enqueued, none delivered; retained = all delivered (kept by the relay's
# default --retention 24h). Per state, PEERS_VIEW_REPEAT (3) times each:
#   count    the statement above, its server time (psql \timing, one session);
#   status   `outboxctl status`, wall time of the process (connect included);
#   web      one poll of `outboxctl web`: the server time of its statements
#            (pg_stat_statements) over PEERS_VIEW_REPEAT polls, per poll.
# Figures: view_query_ms_<case>_<state> (medians; web: the mean per poll).
# CSV: WORK/view.csv (drains), WORK/view_queries.csv.
#
# Knobs (env; validated): PEERS_VIEW_N, PEERS_VIEW_ROUNDS, PEERS_VIEW_BIG,
# PEERS_VIEW_REPEAT, PEERS_VIEW_STATES, PEERS_VIEW_CASES ("none count status
# web"), PEERS_POLL_MS (10) PEERS_DRAIN_TIMEOUT (900) PEERS_OURS (default),
# lib.sh ours_knobs; OUTBOX_BIN_DIR (build/bin).
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/peers/lib.sh

STATES=${PEERS_VIEW_STATES:-backlog retained}
CASES=${PEERS_VIEW_CASES:-none count status web}
OURS_MODE=${PEERS_OURS:-default}
BIN=${OUTBOX_BIN_DIR:-build/bin}
PEERS_VIEW_N=${1:-${PEERS_VIEW_N:-}}
PEERS_VIEW_ROUNDS=${2:-${PEERS_VIEW_ROUNDS:-}}
knobs PEERS_VIEW_N PEERS_VIEW_ROUNDS PEERS_VIEW_BIG PEERS_VIEW_REPEAT PEERS_POLL_MS PEERS_DRAIN_TIMEOUT
need_mode OURS_MODE PEERS_OURS
ours_knobs
read -r -a CASE_LIST <<<"$CASES"
read -r -a STATE_LIST <<<"$STATES"
[[ " ${CASE_LIST[*]} " == *" none "* ]] || { echo "peers: PEERS_VIEW_CASES must include none (the reference)" >&2; exit 2; }
for c in "${CASE_LIST[@]}"; do
	case $c in none | count | status | web) ;; *) echo "peers: PEERS_VIEW_CASES: '$c' is not one of: none count status web" >&2; exit 2 ;; esac
done
for s in "${STATE_LIST[@]}"; do
	case $s in backlog | retained) ;; *) echo "peers: PEERS_VIEW_STATES: '$s' is not one of: backlog retained" >&2; exit 2 ;; esac
done
# shellcheck disable=SC2153 # POLL_MS: set by knobs
POLL_S=$(awk -v m="$POLL_MS" 'BEGIN { printf "%.3f", m / 1000 }')
ours_check_bins

peers_workdir view
peers_traps
peers_server_start "${PEERS_MEASURE_CONF[@]}"
CSV=$PEERS_WORK/view.csv
QCSV=$PEERS_WORK/view_queries.csv
echo "round,position,case,n,seconds,rate_per_s" >"$CSV"
echo "state,messages,query,repeat,median_ms,min_ms,max_ms" >"$QCSV"
COUNT_SQL="SELECT count(*) FROM outbox.messages WHERE status = 'pending'"
echo "peers: view: drains of $VIEW_N at ours' $OURS_MODE flags, $VIEW_ROUNDS rounds, cases: ${CASE_LIST[*]}; queries at $VIEW_BIG messages (${STATE_LIST[*]})"

# ---- the lookers ---------------------------------------------------------------------
# looker_start CASE DB: starts the 1 Hz look of CASE (none: nothing); sets
# LOOK_PID (empty for none).
looker_start() {
	local kind=$1 db=$2 i
	LOOK_PID=
	case $kind in
	count)
		# One session; its pauses are the server's. Enough repeats for the
		# drain timeout; stopped by id at the end of the drain.
		for ((i = 0; i < DRAIN_TIMEOUT + 10; i++)); do
			printf '%s;\n\\o /dev/null\nSELECT pg_sleep(1);\n\\o\n' "$COUNT_SQL"
		done >"$PEERS_WORK/$db.look.sql"
		psql -d "$db" -AtqX -f "$PEERS_WORK/$db.look.sql" >"$PEERS_WORK/$db.look.log" 2>&1 &
		;;
	status)
		(while :; do "$BIN/outboxctl" status --db "$(conninfo "$db")" >/dev/null; sleep 1; done) \
			>"$PEERS_WORK/$db.look.log" 2>&1 &
		;;
	web)
		rm -f "$PEERS_WORK/$db.web.url"
		"$BIN/outboxctl" web --db "$(conninfo "$db")" --http http://127.0.0.1:0 \
			--ready-file "$PEERS_WORK/$db.web.url" >"$PEERS_WORK/$db.look.log" 2>&1 &
		;;
	none) return 0 ;;
	esac
	LOOK_PID=$!; track "$LOOK_PID"
	[ "$kind" != web ] || await_start "$LOOK_PID" "outboxctl web (its URL in $PEERS_WORK/$db.web.url)" \
		"$PEERS_WORK/$db.look.log" test -s "$PEERS_WORK/$db.web.url"
}
looker_stop() { [ -z "$LOOK_PID" ] || stop_tracked "$LOOK_PID"; }

# ---- the drains --------------------------------------------------------------------------
# view_drain CASE ROUND POSITION: sets RATE.
view_drain() {
	local kind=$1 round=$2 db="v_$1_$2" t0 secs
	fresh_db "$db"
	ours_migrate "$db"
	ours_fill "$db" "$VIEW_N"
	settle "$db"
	ours_consumer "$db" "$db"
	looker_start "$kind" "$db"
	t0=$EPOCHREALTIME
	ours_relay "$db" "$db"
	wait_rows "$db" inbox.notifications idempotency_key "$VIEW_N" "$DRAIN_TIMEOUT" "k-$VIEW_N" "$OURS_CPID" "$OURS_RPID"
	looker_stop
	stop_tracked "$OURS_RPID"
	stop_tracked "$OURS_CPID"
	secs=$(awk -v a="$t0" -v b="$WAIT_T1" 'BEGIN { printf "%.3f", b - a }')
	RATE=$(awk -v n="$VIEW_N" -v s="$secs" 'BEGIN { printf "%.0f", n / s }')
	echo "$round,$3,$kind,$VIEW_N,$secs,$RATE" >>"$CSV"
	printf '  %-8s %8s s %10s msgs/s\n' "$kind" "$secs" "$(fmt_int "$RATE")"
	drop_db "$db"
}

declare -A RATES=()
for ((round = 1; round <= VIEW_ROUNDS; round++)); do
	order=()
	for ((i = 0; i < ${#CASE_LIST[@]}; i++)); do order+=("${CASE_LIST[(i + round - 1) % ${#CASE_LIST[@]}]}"); done
	echo "peers: view round $round/$VIEW_ROUNDS (order: ${order[*]})"
	pos=0
	for k in "${order[@]}"; do
		pos=$((pos + 1))
		view_drain "$k" "$round" "$pos"
		RATES[$k]+=" $RATE"
	done
done
declare -A MED=()
for k in "${CASE_LIST[@]}"; do
	# shellcheck disable=SC2086 # a list of numbers
	MED[$k]=$(median ${RATES[$k]})
done
echo "peers: view: median drain rates: $(for k in "${CASE_LIST[@]}"; do printf '%s %s/s; ' "$k" "$(fmt_int "${MED[$k]}")"; done)"
for k in "${CASE_LIST[@]}"; do
	[ "$k" != none ] || continue
	what="the drain with a 1 Hz poll of"
	case $k in
	count) what+=" $COUNT_SQL" ;;
	status) what+=" outboxctl status" ;;
	web) what+=" outboxctl web" ;;
	esac
	figure "view_cost_${k}_pct" "$(awk -v a="${MED[$k]}" -v b="${MED[none]}" 'BEGIN { printf "%.1f", 100 * (1 - a / b) }')" \
		'<=' "$T_VIEW_COST_PCT" % "$what: rate lost against the drain alone (N=$VIEW_N, $VIEW_ROUNDS rounds, medians)"
done

# ---- the queries at VIEW_BIG messages ------------------------------------------------------------
# q_stats STATE QUERY MS...: a CSV row and the median (Q_MED).
q_stats() {
	local state=$1 name=$2
	shift 2
	Q_MED=$(median "$@" | awk '{ printf "%.1f", $1 }')
	echo "$state,$VIEW_BIG,$name,$#,$Q_MED,$(printf '%s\n' "$@" | sort -g | head -1),$(printf '%s\n' "$@" | sort -g | tail -1)" >>"$QCSV"
	printf '  %-8s %-7s median %8s ms  (%s)\n' "$state" "$name" "$Q_MED" "$*"
}
time_queries() {
	local state=$1 db=$2 i t0 ms=() polls total
	# count: the server's time, psql's \timing, one session.
	mapfile -t ms < <({ printf '%s\n' '\timing on'; for ((i = 0; i < VIEW_REPEAT; i++)); do echo "$COUNT_SQL;"; done; } |
		psql -d "$db" -AtqX -v ON_ERROR_STOP=1 | awk '/^Time: / { print $2 }')
	((${#ms[@]} == VIEW_REPEAT)) || peers_die "count: ${#ms[@]} timings of $VIEW_REPEAT"
	q_stats "$state" count "${ms[@]}"
	figure "view_query_ms_count_$state" "$Q_MED" '<=' "$T_VIEW_QUERY_MS" ms "$COUNT_SQL at $VIEW_BIG messages ($state)"
	# status: the whole process, as a user waits for it.
	ms=()
	for ((i = 0; i < VIEW_REPEAT; i++)); do
		t0=$EPOCHREALTIME
		"$BIN/outboxctl" status --db "$(conninfo "$db")" >"$PEERS_WORK/$db.status.txt" || peers_die "outboxctl status failed"
		ms+=("$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", (b - a) * 1000 }')")
	done
	q_stats "$state" status "${ms[@]}"
	figure "view_query_ms_status_$state" "$Q_MED" '<=' "$T_VIEW_QUERY_MS" ms "outboxctl status at $VIEW_BIG messages ($state), wall time"
	# web: its statements' server time over VIEW_REPEAT polls, per poll.
	stats_reset "$db"
	looker_start web "$db"
	for ((i = 0; i < VIEW_REPEAT * 10 + 100; i++)); do
		polls=$(q postgres "SELECT coalesce(max(calls), 0) FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
		                    WHERE d.datname = '$db' AND query LIKE '%outbox.topic_stats(%'")
		((polls < VIEW_REPEAT)) || break
		nap 0.5
	done
	looker_stop
	((polls >= VIEW_REPEAT)) || peers_die "outboxctl web polled $polls times, not $VIEW_REPEAT: see $PEERS_WORK/$db.look.log"
	total=$(q postgres "SELECT round(sum(total_exec_time)::numeric, 1) FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
	                    WHERE d.datname = '$db' AND query NOT LIKE '%pg_stat%'")
	stats_dump "$db" "$PEERS_WORK/$db.$state.web"
	Q_MED=$(awk -v t="$total" -v p="$polls" 'BEGIN { printf "%.1f", t / p }')
	echo "$state,$VIEW_BIG,web,$polls,$Q_MED,," >>"$QCSV"
	printf '  %-8s %-7s %8s ms per poll (%s ms over %s polls)\n' "$state" web "$Q_MED" "$total" "$polls"
	figure "view_query_ms_web_$state" "$Q_MED" '<=' "$T_VIEW_QUERY_MS" ms "one poll of outboxctl web at $VIEW_BIG messages ($state), server time of its statements"
}
if ((VIEW_BIG > 0)); then
	db=v_big
	fresh_db "$db"
	ours_migrate "$db"
	echo "peers: view: filling $db with $(fmt_int "$VIEW_BIG") messages"
	ours_fill "$db" "$VIEW_BIG"
	settle "$db"
	for state in "${STATE_LIST[@]}"; do
		if [ "$state" = retained ]; then
			ours_consumer "$db" "$db"
			ours_relay "$db" "$db"
			wait_rows "$db" inbox.notifications idempotency_key "$VIEW_BIG" "$DRAIN_TIMEOUT" "k-$VIEW_BIG" "$OURS_CPID" "$OURS_RPID"
			stop_tracked "$OURS_RPID"
			stop_tracked "$OURS_CPID"
			settle "$db"
		fi
		time_queries "$state" "$db"
	done
	drop_db "$db"
fi
echo "peers: view per-run numbers: $CSV, $QCSV"
