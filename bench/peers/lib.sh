# bench/peers/lib.sh - sourced by every script of bench/peers (from the
# repository root). Validation, process bookkeeping with a cleanup that
# always stops everything, the private PostgreSQL (or the one users.sh
# shares), our relay + consumer, the effect-row poller, the live producer
# (pgbench), the CPU counters (/proc), latencies, and the figure lines.
# shellcheck shell=bash

export LC_ALL=C        # '.' decimal point in $EPOCHREALTIME, awk and printf

peers_die() { echo "peers: FAIL: $*" >&2; exit 1; }

# The targets of issue 32 ("bench/peers/ measures what users meet"), one
# place; each figure line prints its own beside it.
# shellcheck disable=SC2034 # read by the scripts that source this file
{
T_DRAIN_VS_PGQ=0.8        # drain at default flags / PgQ's, at least
T_ENQUEUE_VS_PLAIN=1.5    # enqueue / one plain unique-key row, at most
T_APP_VS_PLAIN=2          # app p99 at 1,000/s, relay + consumer running / plain row
T_APP_VS_UNRELAYED=1.2    # the same / enqueue with the relay stopped
T_STEADY_VS_DRAIN=3       # DB CPU per delivered message at 1,000/s / in the drain
T_P99_MS=8                # producer commit -> consumer commit p99 at 1,000/s
T_VIEW_COST_PCT=10        # what a 1 Hz poll costs the drain
T_VIEW_QUERY_MS=50        # each such query at a 250,000-message outbox
T_IDLE_PCT_CORE=1         # 4 idle relay workers, % of one core
T_CLAIMS_PER_MSG=1.1      # outbox.claim calls per delivered message at 200/s
}

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

# Every integer knob of ours_knobs, enqueue.sh, steady.sh, view.sh and
# users.sh, one row each: ENV DEFAULT MIN MAX. The script's variable is ENV
# without PEERS_ (PEERS_STEADY_RATE -> STEADY_RATE). Each script's header
# says what its knobs mean.
PEERS_KNOB_TABLE='
PEERS_WORKERS 2 1 64
PEERS_BATCH 100 1 1000
PEERS_INFLIGHT 4 1 256
PEERS_CONSUMER_THREADS 4 1 256
PEERS_START_TIMEOUT 30 1 3600
PEERS_CHUNK 10000 1 1000000
PEERS_POLL_MS 10 1 10000
PEERS_DRAIN_TIMEOUT 900 1 86400
PEERS_ENQ_ROUNDS 5 1 1000
PEERS_ENQ_SECONDS 10 1 86400
PEERS_ENQ_CLIENTS 4 1 256
PEERS_ENQ_THREADS 2 1 64
PEERS_STEADY_ROUNDS 5 1 1000
PEERS_STEADY_SECONDS 30 1 86400
PEERS_STEADY_RATE 1000 1 1000000
PEERS_STEADY_N 50000 1 100000000
PEERS_STEADY_CLIENTS 8 1 256
PEERS_STEADY_THREADS 2 1 64
PEERS_STEADY_GRACE 30 1 3600
PEERS_STEADY_WINDOW 10 1 86400
PEERS_LOW_RATE 200 1 1000000
PEERS_LOW_SECONDS 20 1 86400
PEERS_IDLE_SECONDS 20 1 86400
PEERS_IDLE_WORKERS 4 1 64
PEERS_VIEW_N 50000 1 100000000
PEERS_VIEW_ROUNDS 5 1 1000
PEERS_VIEW_BIG 250000 0 100000000
PEERS_VIEW_REPEAT 3 1 1000
PEERS_USERS_ROUNDS 5 1 1000
PEERS_USERS_N 50000 1 100000000
PEERS_USERS_ENQ_SECONDS 10 1 86400
PEERS_USERS_COST_SECONDS 30 1 86400
PEERS_USERS_STEADY_SECONDS 30 1 86400
PEERS_USERS_COST_RATE 1000 1 10000000
'
# knobs ENV...: each ENV's variable = $ENV, or its DEFAULT when ENV is unset
# or empty, validated as need_int does (the message names ENV). A script's
# positional argument overrides by setting ENV first.
knobs() {
	local env row def min max
	for env in "$@"; do
		row=$(awk -v e="$env" '$1 == e { print $2, $3, $4 }' <<<"$PEERS_KNOB_TABLE")
		[ -n "$row" ] || peers_die "knobs: $env is not in PEERS_KNOB_TABLE"
		read -r def min max <<<"$row"
		printf -v "${env#PEERS_}" '%s' "${!env:-$def}"
		need_int "${env#PEERS_}" "$min" "$max" "$env"
	done
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
		# Only the server this script started (not users.sh's PEERS_PG).
		[ "${PEERS_OWN_PG:-0}" != 1 ] || scripts/pg-tmp.sh stop "$PEERS_PGDIR" >/dev/null 2>&1
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
# peers_workdir NAME: a new work dir for the logs and CSVs, under
# PEERS_WORK_ROOT (users.sh's) or /tmp; sets PEERS_WORK.
peers_workdir() {
	PEERS_WORK=$(mktemp -d "${PEERS_WORK_ROOT:-/tmp}/outbox-peers-$1.XXXXXX")
	chmod 755 "$PEERS_WORK"
}
# The settings every figure of users.sh needs: commit timestamps (latency),
# per-function call counts and times (claims, where the time goes) and
# pg_stat_statements (per-statement times). One server has them all.
# shellcheck disable=SC2034 # used by the scripts
PEERS_MEASURE_CONF=("track_commit_timestamp = on" "track_functions = all"
	"shared_preload_libraries = 'pg_stat_statements'")
# peers_server_start [CONF_LINE...]: one private server, fsync=on,
# synchronous_commit=on, full_page_writes=on, unix socket only (pg-tmp.sh);
# extra postgresql.conf lines are applied with a restart. With PEERS_PG (the
# pg-tmp.sh dir of a server already running: users.sh) that server is used
# as it is, once each CONF_LINE is checked to be in effect there; it is
# neither started nor stopped here. Sets PEERS_PGDIR (and PEERS_OWN_PG=1
# when it started the server: the cleanup stops it).
peers_server_start() {
	local line name want have
	if [ -n "${PEERS_PG:-}" ]; then
		[ -f "$PEERS_PG/env" ] || peers_die "PEERS_PG=$PEERS_PG: no server there (no env file)"
		PEERS_PGDIR=$PEERS_PG
	else
		PEERS_PGDIR=$PEERS_WORK/pg
		PEERS_OWN_PG=1
		OUTBOX_PG_FSYNC=on scripts/pg-tmp.sh start "$PEERS_PGDIR" >/dev/null
		if (($# > 0)); then
			printf '%s\n' "$@" >>"$PEERS_PGDIR/data/postgresql.conf"
			scripts/pg-tmp.sh restart "$PEERS_PGDIR"
		fi
	fi
	set -a; . "$PEERS_PGDIR/env"; set +a
	export PGDATABASE=postgres
	for line in "$@"; do
		name=${line%% *}; want=${line#*= }; want=${want//\'/}
		have=$(q postgres "SHOW $name")
		[ "$have" = "$want" ] || peers_die "the server has $name = '$have', this script needs '$want'"
	done
	if [[ " $* " == *pg_stat_statements* ]]; then
		qa "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null
	fi
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
# ours_knobs: the tuned variant's knobs, each validated: PEERS_WORKERS (2)
# PEERS_BATCH (100) PEERS_INFLIGHT (4) PEERS_CONSUMER_THREADS (4), and
# PEERS_START_TIMEOUT (30 s) and PEERS_CHUNK (10000: enqueue statement size).
ours_knobs() {
	knobs PEERS_WORKERS PEERS_BATCH PEERS_INFLIGHT PEERS_CONSUMER_THREADS PEERS_START_TIMEOUT PEERS_CHUNK
}
# The ~200-byte payload of the pre-enqueued backlogs (208 bytes as JSON text
# for 5-digit g), as in bench/relay.
PAYLOAD="jsonb_build_object('title', 'benchmark report ' || g, 'module', 'editor',
	'severity', 'high', 'steps', repeat('s', 120))"
# chunks FROM TO SIZE: "s e" lines covering FROM..TO.
chunks() { local s; for ((s = $1; s <= $2; s += $3)); do echo "$s $((s + $3 - 1 < $2 ? s + $3 - 1 : $2))"; done; }
# ours_fill DB N: N messages k-1..k-N enqueued with outbox.enqueue, CHUNK a
# statement (the backlog a drain starts from).
ours_fill() {
	local s e
	while read -r s e; do
		q "$1" "SELECT count(outbox.enqueue('bench.topic', 'k-' || g, $PAYLOAD))
		         FROM generate_series($s, $e) g" >/dev/null
	done < <(chunks 1 "$2" "$CHUNK")
}

# How ours is started: "tuned" (the knobs below: --workers WORKERS,
# --threads CONSUMER_THREADS, ..., --log-level warn, PEERS_*_ARGS) or
# "default" (no flag but the required ones: what a user who reads no
# tuning advice runs). OURS_MODE (default tuned) unless the call names one.
# ours_consumer DB NAME [MODE]: starts outbox-consumer on ipc://WORK/NAME.ipc;
# waits for the socket. Sets OURS_CPID, OURS_URL.
ours_consumer() {
	local db=$1 name=$2 mode=${3:-${OURS_MODE:-tuned}} sock="$PEERS_WORK/$2.ipc" flags=()
	rm -f "$sock"
	OURS_URL="ipc://$sock"
	# shellcheck disable=SC2206 # word-split on purpose
	[ "$mode" = default ] || flags=(--threads "$CONSUMER_THREADS" --log-level warn ${PEERS_CONSUMER_ARGS:-})
	"$BIN/outbox-consumer" --db "$(conninfo "$db")" --listen "$OURS_URL" "${flags[@]}" \
		>>"$PEERS_WORK/$name.consumer.log" 2>&1 &
	OURS_CPID=$!; track "$OURS_CPID"
	await_start "$OURS_CPID" "outbox-consumer (listening on $sock)" "$PEERS_WORK/$name.consumer.log" test -S "$sock"
}
# await_start PID WHAT LOG TEST...: returns once TEST... succeeds, polled
# every 50 ms for START_TIMEOUT s; fails if PID exits first (see LOG).
await_start() {
	local pid=$1 what=$2 log=$3 i
	shift 3
	for ((i = 0; i < START_TIMEOUT * 20; i++)); do
		"$@" && return 0
		kill -0 "$pid" 2>/dev/null || peers_die "$what exited at start: see $log"
		nap 0.05
	done
	peers_die "$what: not started within ${START_TIMEOUT}s"
}
# ours_relay DB NAME [MODE [FLAG...]]: starts outbox-relay routing every
# topic to OURS_URL; FLAGs are added in either mode.
ours_relay() {
	local db=$1 name=$2 mode=${3:-${OURS_MODE:-tuned}} flags=()
	shift $(($# < 3 ? $# : 3))
	# shellcheck disable=SC2206 # word-split on purpose
	[ "$mode" = default ] || flags=(--workers "$WORKERS" --batch "$BATCH" --max-inflight "$INFLIGHT" \
		--log-level warn ${PEERS_RELAY_ARGS:-})
	"$BIN/outbox-relay" --db "$(conninfo "$db")" --route "*=$OURS_URL" "${flags[@]}" "$@" \
		>>"$PEERS_WORK/$name.relay.log" 2>&1 &
	OURS_RPID=$!; track "$OURS_RPID"
}
# need_mode VAR ENVNAME: VAR must be tuned or default.
need_mode() {
	case ${!1} in tuned | default) ;; *) echo "peers: $2 must be tuned or default, got '${!1}'" >&2; exit 2 ;; esac
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
div2() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) { print "nan"; exit } printf "%.2f", a / b }'; }

# ---- the live producer: pgbench ---------------------------------------------
# pgbench_find: sets PGBENCH (PostgreSQL 15's).
pgbench_find() {
	local pgbin
	pgbin=$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)
	PGBENCH=$pgbin/pgbench; [ -x "$PGBENCH" ] || PGBENCH=$(command -v pgbench) ||
		{ echo "peers: pgbench not found (apt-get install postgresql-15)" >&2; exit 2; }
}
# A ~200-byte JSON payload, as a literal.
PAYLOAD_LIT="'{\"title\": \"sustained probe\", \"module\": \"editor\", \"severity\": \"high\", \"steps\": \"$(printf 's%.0s' {1..120})\"}'::jsonb"
# live_script FILE: one outbox.enqueue per transaction, its key carrying the
# producer's txid_current() (its low 32 bits are the xid whose commit
# timestamp commit_latency reads).
live_script() {
	echo "SELECT outbox.enqueue('bench.topic', 'l-' || txid_current()::text || '-' || :client_id || '-' || random(), $PAYLOAD_LIT);" >"$1"
}
# pgb_processed FILE: "number of transactions actually processed: N[/M]".
pgb_processed() { awk -F': ' '/^number of transactions actually processed/ { split($2, a, "/"); print a[1] + 0; exit }' "$1"; }
pgb_failed() { awk -F': ' '/^number of failed transactions/ { print $2 + 0; exit }' "$1"; }
# pgb_latency LOG_PREFIX SECONDS: "p50 p99 p99.9 tps n avg" (ms, ms, ms, /s,
# count, ms) from pgbench --log files (client_id transaction_no time
# script_no epoch epoch_us [schedule_lag], us); removes them. Under -R,
# pgbench measures `time` from the scheduled start: minus schedule_lag it is
# the transaction's own BEGIN..COMMIT time. Order statistics of every
# transaction: a true p99, not a per-interval average.
pgb_latency() {
	local r
	r=$(cat "$1".* | awk '{ print (NF >= 7) ? $3 - $7 : $3 }' | sort -n | awk -v secs="$2" '
		{ a[NR] = $1; s += $1 }
		END {
			if (NR == 0) exit 1
			i50 = int(NR * 0.50); if (i50 < 1) i50 = 1
			i99 = int(NR * 0.99); if (i99 < 1) i99 = 1
			i999 = int(NR * 0.999); if (i999 < 1) i999 = 1
			printf "%.2f %.2f %.2f %.0f %d %.4f\n", a[i50] / 1000, a[i99] / 1000, a[i999] / 1000, NR / secs, NR, s / NR / 1000
		}') || return 1
	rm -f "$1".*
	echo "$r"
}

# ---- latency: producer commit -> consumer commit ---------------------------
# commit_latency DB WINDOW_S: "n distinct p50 p99 p99.9 max worst_window_p99
# windows" (ms) over the effect rows of live_script's messages:
# pg_xact_commit_timestamp(xmin) of the row in inbox.notifications (the
# consumer's COMMIT) minus that of the producer's transaction (its xid is in
# the key). Same server clock; no outbox.messages column involved. Windows:
# WINDOW_S seconds by producer commit time, of >= 100 messages.
commit_latency() {
	q "$1" "
	  WITH m AS (
	    SELECT pg_xact_commit_timestamp(((split_part(idempotency_key, '-', 2))::bigint % 4294967296)::text::xid) AS pc,
	           extract(epoch FROM pg_xact_commit_timestamp(xmin)
	                   - pg_xact_commit_timestamp(((split_part(idempotency_key, '-', 2))::bigint % 4294967296)::text::xid)) * 1000 AS ms
	      FROM inbox.notifications WHERE idempotency_key LIKE 'l-%'),
	  w AS (
	    SELECT floor(extract(epoch FROM pc - (SELECT min(pc) FROM m)) / $2) AS win,
	           percentile_cont(0.99) WITHIN GROUP (ORDER BY ms) AS p99
	      FROM m GROUP BY 1 HAVING count(*) >= 100)
	  SELECT count(*),
	         (SELECT count(DISTINCT idempotency_key) FROM inbox.notifications WHERE idempotency_key LIKE 'l-%'),
	         round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 2),
	         round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 2),
	         round(percentile_cont(0.999) WITHIN GROUP (ORDER BY ms)::numeric, 2),
	         round(max(ms)::numeric, 2),
	         coalesce((SELECT round(max(p99)::numeric, 2) FROM w), 0),
	         (SELECT count(*) FROM w)
	    FROM m" | tr '|' ' '
}

# ---- CPU, from /proc -----------------------------------------------------------
CLK_TCK=$(getconf CLK_TCK)
# tree_ticks PID: CPU clock ticks of PID so far, its own (utime + stime),
# its reaped children's (cutime + cstime: a child that exited and was
# waited for) and those of its live children. For the postmaster that is
# the whole server, backends that have come and gone included.
tree_ticks() {
	local p=$1
	{ echo "$p"; pgrep -P "$p" 2>/dev/null || true; } | while read -r c; do cat "/proc/$c/stat" 2>/dev/null || true; done |
		awk '{ sub(/^.*\) /, ""); t += $12 + $13 + $14 + $15 } END { print t + 0 }'
}
server_pid() { head -1 "$PEERS_PGDIR/data/postmaster.pid"; }
server_ticks() { tree_ticks "$(server_pid)"; }
# deliver_pids DB: the client backends of DB that are neither pgbench's nor
# psql's (ours: the relay's and the consumer's sessions).
deliver_pids() {
	q "$1" "SELECT pid FROM pg_stat_activity WHERE datname = '$1' AND backend_type = 'client backend'
	        AND application_name NOT IN ('pgbench', 'psql') AND pid <> pg_backend_pid()"
}
# pid_ticks PID...: "pid ticks" (utime + stime) per live PID.
pid_ticks() {
	local p
	for p in "$@"; do
		[ -r "/proc/$p/stat" ] || continue
		awk -v p="$p" '{ sub(/^.*\) /, ""); print p, $12 + $13 }' "/proc/$p/stat" 2>/dev/null || true
	done
}
# deliver_mark DB FILE: the delivery backends' ticks now, into FILE.
deliver_mark() {
	# shellcheck disable=SC2046
	pid_ticks $(deliver_pids "$1") >"$2"
}
# deliver_ticks DB FILE: ticks the delivery backends used since deliver_mark
# wrote FILE (a backend started since counts from 0).
deliver_ticks() {
	# shellcheck disable=SC2046
	pid_ticks $(deliver_pids "$1") | awk 'NR == FNR { s[$1] = $2; next } { t += $2 - ($1 in s ? s[$1] : 0) } END { print t + 0 }' "$2" -
}
ticks_ms() { awk -v t="$1" -v h="$CLK_TCK" 'BEGIN { printf "%.1f", t * 1000 / h }'; }

# ---- where the time goes: pg_stat_statements, pg_stat_user_functions ----------
stats_reset() {
	q postgres "SELECT pg_stat_statements_reset()" >/dev/null
	q "$1" "SELECT pg_stat_reset()" >/dev/null
}
# stats_dump DB FILE_PREFIX: the top statements (pg_stat_statements, this
# DB) and functions (self time) since stats_reset, as CSV; a short
# statement text.
stats_dump() {
	q postgres "COPY (SELECT calls, round(total_exec_time::numeric, 1) AS total_ms, round(mean_exec_time::numeric, 3) AS mean_ms, rows,
	                   left(regexp_replace(query, '\s+', ' ', 'g'), 100) AS query
	              FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
	             WHERE d.datname = '$1' ORDER BY total_exec_time DESC LIMIT 15) TO STDOUT WITH CSV HEADER" >"$2.statements.csv"
	q "$1" "COPY (SELECT schemaname || '.' || funcname AS function, calls, round(total_time::numeric, 1) AS total_ms,
	                round(self_time::numeric, 1) AS self_ms FROM pg_stat_user_functions
	             ORDER BY self_time DESC LIMIT 15) TO STDOUT WITH CSV HEADER" >"$2.functions.csv"
}

# ---- figures -----------------------------------------------------------------------
# figure NAME VALUE OP LIMIT UNIT WHAT: the one grep-able line of a figure,
#   peers: figure NAME VALUE UNIT target OP LIMIT met|MISSED: WHAT
# (OP <= or >=; OP - for a figure with no target: "info"), and a row of
# WORK/figures.csv and, under users.sh, of its PEERS_FIGURES.
figure() {
	local name=$1 v=$2 op=$3 lim=$4 unit=$5 what=$6 verdict=info
	case $op in
	'<=') verdict=$(awk -v v="$v" -v l="$lim" 'BEGIN { print (v != "nan" && v + 0 <= l + 0) ? "met" : "MISSED" }') ;;
	'>=') verdict=$(awk -v v="$v" -v l="$lim" 'BEGIN { print (v != "nan" && v + 0 >= l + 0) ? "met" : "MISSED" }') ;;
	esac
	echo "peers: figure $name $v $unit target $op $lim $verdict: $what"
	[ -f "$PEERS_WORK/figures.csv" ] || echo "figure,value,unit,op,target,verdict,what,script" >"$PEERS_WORK/figures.csv"
	local row
	row="$name,$v,$unit,$op,$lim,$verdict,\"${what//\"/\'}\",$(basename "$0")"
	echo "$row" >>"$PEERS_WORK/figures.csv"
	[ -z "${PEERS_FIGURES:-}" ] || echo "$row" >>"$PEERS_FIGURES"
}
