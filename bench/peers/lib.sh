# bench/peers/lib.sh - sourced by bench/peers/run.sh and bench/peers/sustained.sh
# (from the repository root). Validation, process bookkeeping with a cleanup
# that always stops everything, the private PostgreSQL, our relay +
# consumer, and the effect-row poller.
# shellcheck shell=bash

export LC_ALL=C        # '.' decimal point in $EPOCHREALTIME, awk and printf

peers_die() { echo "peers: FAIL: $*" >&2; exit 1; }

# need_int NAME MIN MAX [LABEL]: $NAME must be an integer (optionally
# negative when MIN < 0) in MIN..MAX, else exit 2 with one line naming LABEL
# (the environment variable it came from; default NAME).
need_int() {
	local name=$1 min=$2 max=$3 label=${4:-$1} v=${!1-}
	if ! [[ $v =~ ^-?[0-9]{1,12}$ ]]; then
		echo "peers: $label must be an integer in $min..$max, got '$v'" >&2; exit 2
	fi
	local n=$((10#${v#-}))
	[[ $v != -* ]] || n=$((-n))
	if ((n < min || n > max)); then
		echo "peers: $label must be an integer in $min..$max, got '$v'" >&2; exit 2
	fi
	printf -v "$name" '%d' "$n"
}

# ---- processes -------------------------------------------------------------
# Every background process we start goes into PIDS; cleanup stops each of
# them by id (TERM, then KILL of it and its children after a grace).
PIDS=()
track() { PIDS+=("$1"); }
# stop_pid PID [GRACE_S]: TERM, wait up to GRACE_S (default 15), then KILL
# it and the children it left (the relay's workers).
stop_pid() {
	local p=$1 grace=${2:-15} kids i
	kill -0 "$p" 2>/dev/null || { wait "$p" 2>/dev/null || true; return 0; }
	kids=$(pgrep -P "$p" 2>/dev/null || true)
	kill -TERM "$p" 2>/dev/null || true
	for ((i = 0; i < grace * 10; i++)); do
		kill -0 "$p" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$p" 2>/dev/null; then
		echo "peers: pid $p ignored SIGTERM for ${grace}s: SIGKILL" >&2
		# shellcheck disable=SC2086
		kill -KILL "$p" $kids 2>/dev/null || true
	fi
	wait "$p" 2>/dev/null || true
}
untrack() {
	local p keep=()
	for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	PIDS=("${keep[@]}")
}
stop_tracked() { stop_pid "$1"; untrack "$1"; }
# fg CMD...: runs CMD in the background and waits for it, so that a signal
# to this script runs the cleanup at once, not after CMD ends (bash defers
# traps while a foreground command runs). Returns CMD's status.
fg() {
	local p rc=0
	"$@" &
	p=$!; track "$p"
	wait "$p" || rc=$?
	untrack "$p"
	return "$rc"
}
stop_all() {
	local p
	for p in "${PIDS[@]}"; do stop_pid "$p" 10; done
	PIDS=()
}

# The work dir keeps the logs and the CSV; the server's data dir inside it
# is always removed at exit.
peers_cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM
	stop_all
	if [ -n "${PEERS_WORK:-}" ]; then
		scripts/pg-tmp.sh stop "$PEERS_WORK/pg" >/dev/null 2>&1
		rm -f "$PEERS_WORK"/*.ipc
		echo "peers: logs in $PEERS_WORK" >&2
	fi
	exit "$rc"
}
peers_traps() {
	trap peers_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
}

# Short waits only (a trap runs once the sleep is over). No `read -t` as a
# sleep: bash 5.2 corrupts its memory when a trapped signal lands in one.
nap() { sleep "$1"; }

# ---- PostgreSQL -------------------------------------------------------------
# peers_server_start [CONF_LINE...]: one private server, fsync=on,
# synchronous_commit=on, full_page_writes=on, unix socket only (pg-tmp.sh);
# extra postgresql.conf lines are applied with a restart.
peers_server_start() {
	OUTBOX_PG_FSYNC=on scripts/pg-tmp.sh start "$PEERS_WORK/pg" >/dev/null
	if (($# > 0)); then
		printf '%s\n' "$@" >>"$PEERS_WORK/pg/data/postgresql.conf"
		scripts/pg-tmp.sh restart "$PEERS_WORK/pg"
	fi
	set -a; . "$PEERS_WORK/pg/env"; set +a
	export PGDATABASE=postgres
}
q() { psql -d "$1" -AtqX -v ON_ERROR_STOP=1 -c "$2"; }
qf() { psql -d "$1" -qX -v ON_ERROR_STOP=1 -f "$2" >/dev/null; }
qa() { PGOPTIONS='-c client_min_messages=warning' q postgres "$1"; }
fresh_db() { qa "DROP DATABASE IF EXISTS $1 WITH (FORCE)" && qa "CREATE DATABASE $1"; }
drop_db() { qa "DROP DATABASE IF EXISTS $1 WITH (FORCE)"; }
conninfo() { echo "$OUTBOX_PG_CONNINFO dbname=$1"; }
# Every drain starts from the same state: statistics fresh, and the backlog
# written out by a checkpoint, so neither autovacuum's first ANALYZE nor a
# checkpoint lands inside one system's drain and not another's.
settle() { q "$1" "VACUUM (ANALYZE)" >/dev/null; q "$1" "CHECKPOINT" >/dev/null; }

# ---- ours -------------------------------------------------------------------
ours_check_bins() {
	local p
	for p in outbox-relay outbox-consumer outboxctl; do
		[ -x "$BIN/$p" ] || { echo "peers: $BIN/$p missing (build first: cmake -S . -B build && cmake --build build -j2; or set OUTBOX_BIN_DIR)" >&2; exit 2; }
	done
}
ours_migrate() { "$BIN/outboxctl" migrate --db "$(conninfo "$1")" --schema all >/dev/null; }
# ours_consumer DB NAME: starts outbox-consumer on ipc://WORK/NAME.ipc; waits
# for the socket. Sets OURS_CPID, OURS_URL.
ours_consumer() {
	local db=$1 name=$2 sock="$PEERS_WORK/$2.ipc" i
	rm -f "$sock"
	OURS_URL="ipc://$sock"
	# shellcheck disable=SC2086
	"$BIN/outbox-consumer" --db "$(conninfo "$db")" --listen "$OURS_URL" \
		--threads "$CONSUMER_THREADS" --log-level warn ${PEERS_CONSUMER_ARGS:-} >>"$PEERS_WORK/$name.consumer.log" 2>&1 &
	OURS_CPID=$!; track "$OURS_CPID"
	for ((i = 0; i < START_TIMEOUT * 20; i++)); do
		[ -S "$sock" ] && return 0
		kill -0 "$OURS_CPID" 2>/dev/null || peers_die "outbox-consumer exited at start: see $PEERS_WORK/$name.consumer.log"
		nap 0.05
	done
	peers_die "outbox-consumer did not listen on $sock within ${START_TIMEOUT}s"
}
# ours_relay DB NAME: starts outbox-relay routing every topic to OURS_URL.
ours_relay() {
	local db=$1 name=$2
	# shellcheck disable=SC2086
	"$BIN/outbox-relay" --db "$(conninfo "$db")" --route "*=$OURS_URL" --workers "$WORKERS" \
		--batch "$BATCH" --max-inflight "$INFLIGHT" --log-level warn ${PEERS_RELAY_ARGS:-} \
		>>"$PEERS_WORK/$name.relay.log" 2>&1 &
	OURS_RPID=$!; track "$OURS_RPID"
}

# ---- the poller ---------------------------------------------------------------
# wait_rows DB TABLE KEYCOL N TIMEOUT_S LAST_KEY PID...: returns once TABLE holds
# >= N rows; WAIT_T1 = $EPOCHREALTIME of the poll that saw it. One psql
# session (a coprocess, autocommit: it holds no snapshot between polls) asks
# every POLL_S (a pg_sleep in the same session) for the last key by index,
# and counts the rows only once that key is there (LAST_KEY - : counts at
# every poll). Fails if the time runs out, or if a PID has exited and
# the count is still short.
# shellcheck disable=SC2034  # WAIT_T1, WAIT_COUNT: read by the callers
wait_rows() {
	local db=$1 tbl=$2 col=$3 n=$4 timeout=$5 last=$6 c p dead=0 deadline
	shift 6
	deadline=$((SECONDS + timeout))
	local probe="SELECT CASE WHEN EXISTS (SELECT 1 FROM $tbl WHERE $col = '$last')
	             THEN (SELECT count(*) FROM $tbl) ELSE 0 END;"
	[ "$last" != - ] || probe="SELECT count(*) FROM $tbl;"
	probe=${probe//$'\n'/ }
	coproc PEERS_POLL { exec psql -d "$db" -AtqX 2>&1; }
	local ppid=$PEERS_POLL_PID out=${PEERS_POLL[1]} in=${PEERS_POLL[0]}
	track "$ppid"
	while :; do
		printf '%s\n' "$probe" >&"$out"
		IFS= read -r c <&"$in" || peers_die "the poller's psql died"
		[[ $c =~ ^[0-9]+$ ]] || peers_die "poller: $c"
		if ((c >= n)); then WAIT_T1=$EPOCHREALTIME; break; fi
		((dead)) && peers_die "$tbl has $c of $n rows and a process it needs has exited"
		for p in "$@"; do kill -0 "$p" 2>/dev/null || dead=1; done
		((SECONDS < deadline)) || peers_die "$tbl has $c of $n rows after ${timeout}s"
		if ((!dead)); then
			# The pause is the server's (no process forked per poll); its
			# answer is one empty line.
			printf 'SELECT pg_sleep(%s);\n' "$POLL_S" >&"$out"
			IFS= read -r c <&"$in" || peers_die "the poller's psql died"
			[ -z "$c" ] || peers_die "poller: $c"
		fi
	done
	printf '\\q\n' >&"$out"
	wait "$ppid" 2>/dev/null || true
	untrack "$ppid"
	WAIT_COUNT=$c
}

# ---- numbers ---------------------------------------------------------------
# fmt_int 12345.6 -> 12,346
fmt_int() {
	awk -v x="$1" 'BEGIN { x = sprintf("%.0f", x); s = "";
		while (length(x) > 3) { s = "," substr(x, length(x) - 2) s; x = substr(x, 1, length(x) - 3) }
		print x s }'
}
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END {
	if (NR == 0) exit 1; print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
