#!/usr/bin/env bash
# bench/soak/run.sh - the flat-table soak: live durable enqueues at a fixed
# rate for a long while, relay and consumer running, the outbox schema's
# on-disk size sampled all along, on one private PostgreSQL 15 (fsync on).
#
#   bench/soak/run.sh [RATE] [SECONDS]     (defaults SOAK_RATE 2000, SOAK_SECONDS 600)
#
# The target (the issue): over a 10-minute soak at half the sustained rate,
# the outbox (outbox.messages, its indexes and any partitions) at the end
# <= SOAK_MAX_RATIO (1.2) x its size at 2 min; the backlog stays bounded;
# every enqueued message is applied once. With SOAK_HOLD_XACT=snapshot|xid
# a psql session of the same database holds a transaction open for the
# whole run (nothing can be vacuumed): the relay must keep delivering and
# name the session (log line relay.db.long_transaction pid=..., metric
# outbox_relay_oldest_xact_pid).
#
# One run:
#   1. a private server (scripts/pg-tmp.sh, OUTBOX_PG_FSYNC=on), database
#      soak, migrated (new model: outboxctl migrate --schema all; old model:
#      the old outboxctl --schema outbox, the new one --schema inbox);
#      SOAK_AUTOVACUUM=tuned sets per-table autovacuum on outbox.messages
#      (old model only: in the new one it is a view);
#   2. the holder (SOAK_HOLD_XACT), one outbox-consumer (ipc), one
#      outbox-relay --workers 2 --retention --purge-interval --metrics
#      127.0.0.1:0 (the port read back from relay.metrics.listening);
#   3. pgbench -R RATE -T SECONDS, each transaction one outbox.enqueue of a
#      ~200-byte payload; every SOAK_SAMPLE_INTERVAL s a line and a CSV row:
#      outbox schema size, outbox.events partitions (old: outbox.messages),
#      the rest (new: of which outbox.batches + outbox.streams), enqueued,
#      delivered, backlog, dead tuples, autovacuums, slots, the relay's
#      oldest-transaction gauges, pgbench's enqueue latency (-P);
#   4. the drain (within SOAK_DRAIN_TIMEOUT), then the summary and the
#      verdicts. Exit 0 every target met, 1 one missed, 2 bad configuration,
#      3 could not run. The work dir /tmp/outbox-soak.XXXXXX keeps the logs
#      and soak.csv; the server's data dir is removed.
#
# Binaries: OUTBOX_BIN_DIR (build/bin) has outbox-relay and outboxctl (the
# model under test: the previous version's with SOAK_MODEL=old);
# SOAK_CONSUMER_BIN_DIR (build/bin) has outbox-consumer and the outboxctl
# that migrates the inbox in the old model. See bench/soak/README.md.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 3
export LC_ALL=C        # '.' decimal point in $EPOCHREALTIME, awk and printf

say() { echo "soak: $*"; }
die() { echo "soak: FAIL: $*" >&2; exit 3; }
bad() { echo "soak: $*" >&2; exit 2; }

# ---- limits ------------------------------------------------------------------
RATE=${1:-${SOAK_RATE:-2000}}
DURATION=${2:-${SOAK_SECONDS:-600}}
CLIENTS=${SOAK_CLIENTS:-8}
THREADS=${SOAK_THREADS:-2}
WORKERS=${SOAK_WORKERS:-2}
CONSUMER_THREADS=${SOAK_CONSUMER_THREADS:-4}
RETENTION=${SOAK_RETENTION:-60s}
PURGE_INTERVAL=${SOAK_PURGE_INTERVAL:-5s}
DEAD_RETENTION=${SOAK_DEAD_RETENTION:-7d}
LONG_XACT_WARN=${SOAK_LONG_XACT_WARN:-30s}
SAMPLE_INTERVAL=${SOAK_SAMPLE_INTERVAL:-30}
REF_SECONDS=${SOAK_REF_SECONDS:-}          # default DURATION / 5: 2 min of 10
MAX_RATIO=${SOAK_MAX_RATIO:-1.2}
BACKLOG_SECONDS=${SOAK_BACKLOG_SECONDS:-10}  # bounded: <= this many seconds of enqueues
MIN_ACHIEVED=${SOAK_MIN_ACHIEVED:-97}      # % of RATE pgbench must reach
DRAIN_TIMEOUT=${SOAK_DRAIN_TIMEOUT:-300}
START_TIMEOUT=${SOAK_START_TIMEOUT:-30}
PROGRESS=${SOAK_PROGRESS:-5}               # pgbench -P: the enqueue latency in each sample line
HOLD=${SOAK_HOLD_XACT:-none}
AUTOVACUUM=${SOAK_AUTOVACUUM:-default}
MODEL=${SOAK_MODEL:-auto}
RELAY_ARGS=${SOAK_RELAY_ARGS:-}
BIN=${OUTBOX_BIN_DIR:-build/bin}
CBIN=${SOAK_CONSUMER_BIN_DIR:-build/bin}

# need_int NAME MIN MAX LABEL: $NAME an integer in MIN..MAX, else exit 2.
need_int() {
	local name=$1 min=$2 max=$3 label=$4 v=${!1-}
	[[ $v =~ ^[0-9]{1,12}$ ]] || bad "$label must be an integer in $min..$max, got '$v'"
	v=$((10#$v))
	((v >= min && v <= max)) || bad "$label must be an integer in $min..$max, got '${!1}'"
	printf -v "$name" '%d' "$v"
}
# need_duration NAME LABEL MIN_MS: the relay's syntax (digits, unit ms|s|m|h|d,
# none = ms); sets NAME_MS too.
need_duration() {
	local name=$1 label=$2 min=$3 v=${!1-} n u mul
	[[ $v =~ ^([0-9]{1,9})(ms|s|m|h|d)?$ ]] || bad "$label must be a duration (250ms, 5s, 2m, 24h, 7d), got '$v'"
	n=$((10#${BASH_REMATCH[1]})) u=${BASH_REMATCH[2]}
	case $u in '' | ms) mul=1 ;; s) mul=1000 ;; m) mul=60000 ;; h) mul=3600000 ;; d) mul=86400000 ;; esac
	((n * mul >= min)) || bad "$label must be at least ${min}ms, got '$v'"
	printf -v "${name}_MS" '%d' $((n * mul))
}
need_int RATE 1 1000000 "RATE (SOAK_RATE)"
need_int DURATION 10 86400 "SECONDS (SOAK_SECONDS)"
need_int CLIENTS 1 256 SOAK_CLIENTS
need_int THREADS 1 64 SOAK_THREADS
need_int WORKERS 1 64 SOAK_WORKERS
need_int CONSUMER_THREADS 1 256 SOAK_CONSUMER_THREADS
need_int SAMPLE_INTERVAL 1 3600 SOAK_SAMPLE_INTERVAL
[ -n "$REF_SECONDS" ] || REF_SECONDS=$((DURATION / 5))
need_int REF_SECONDS 0 "$DURATION" SOAK_REF_SECONDS
need_int BACKLOG_SECONDS 1 86400 SOAK_BACKLOG_SECONDS
need_int MIN_ACHIEVED 1 100 SOAK_MIN_ACHIEVED
need_int DRAIN_TIMEOUT 1 86400 SOAK_DRAIN_TIMEOUT
need_int START_TIMEOUT 1 3600 SOAK_START_TIMEOUT
need_int PROGRESS 1 3600 SOAK_PROGRESS
need_duration RETENTION SOAK_RETENTION 1
need_duration PURGE_INTERVAL SOAK_PURGE_INTERVAL 10
need_duration DEAD_RETENTION SOAK_DEAD_RETENTION 0
need_duration LONG_XACT_WARN SOAK_LONG_XACT_WARN 1000
if ! [[ $MAX_RATIO =~ ^[0-9]{1,3}(\.[0-9]{1,3})?$ ]] || ! awk -v r="$MAX_RATIO" 'BEGIN { exit !(r >= 1) }'; then
	bad "SOAK_MAX_RATIO must be a number >= 1 (like 1.2), got '$MAX_RATIO'"
fi
case $HOLD in none | snapshot | xid) ;; *) bad "SOAK_HOLD_XACT must be none, snapshot or xid, got '$HOLD'" ;; esac
case $AUTOVACUUM in default | tuned) ;; *) bad "SOAK_AUTOVACUUM must be default or tuned, got '$AUTOVACUUM'" ;; esac
case $MODEL in auto | new | old) ;; *) bad "SOAK_MODEL must be auto, new or old, got '$MODEL'" ;; esac
((THREADS <= CLIENTS)) || THREADS=$CLIENTS
BACKLOG_LIMIT=$((RATE * BACKLOG_SECONDS))

for p in "$BIN/outbox-relay" "$BIN/outboxctl" "$CBIN/outbox-consumer" "$CBIN/outboxctl"; do
	[ -x "$p" ] || bad "$p missing (build first: cmake -S . -B build && cmake --build build -j2; or set OUTBOX_BIN_DIR / SOAK_CONSUMER_BIN_DIR)"
done
command -v curl >/dev/null || bad "curl not found (apt-get install curl): it reads the relay's /metrics"
pgbin=$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)
PGBENCH=$pgbin/pgbench; [ -x "$PGBENCH" ] || PGBENCH=$(command -v pgbench) ||
	bad "pgbench not found (apt-get install postgresql-15)"

# Which model the relay under test speaks: the new one has --long-xact-warn
# (and outbox.topic_stats, checked after the migration).
relay_help=$("$BIN/outbox-relay" --help 2>&1)
if [[ $relay_help == *--long-xact-warn* ]]; then bin_model=new; else bin_model=old; fi
[ "$MODEL" = auto ] && MODEL=$bin_model
[ "$MODEL" = "$bin_model" ] ||
	bad "SOAK_MODEL=$MODEL but $BIN/outbox-relay is the $bin_model model (--long-xact-warn $([ $bin_model = new ] && echo present || echo absent))"
[ "$MODEL" = old ] || [ "$AUTOVACUUM" = default ] ||
	bad "SOAK_AUTOVACUUM=tuned is for the old model (SOAK_MODEL=old): in the new one outbox.messages is a view"

# ---- processes -----------------------------------------------------------------
# Every background process goes into PIDS; the cleanup stops each by id, the
# last started first (pgbench, relay, consumer, holder), TERM then KILL.
PIDS=()
track() { PIDS+=("$1"); }
untrack() {
	local p keep=()
	for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	PIDS=("${keep[@]}")
}
# stop_pid PID [GRACE_S]: TERM, wait up to GRACE_S (15), then KILL it and
# the children it had (the relay's workers and metrics process).
stop_pid() {
	local p=$1 grace=${2:-15} kids i
	kill -0 "$p" 2>/dev/null || { wait "$p" 2>/dev/null; return 0; }
	kids=$(pgrep -P "$p" 2>/dev/null)
	kill -TERM "$p" 2>/dev/null
	for ((i = 0; i < grace * 10; i++)); do
		kill -0 "$p" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$p" 2>/dev/null; then
		echo "soak: pid $p ignored SIGTERM for ${grace}s: SIGKILL" >&2
		# shellcheck disable=SC2086
		kill -KILL "$p" $kids 2>/dev/null
	fi
	wait "$p" 2>/dev/null
	return 0
}
stop_tracked() { stop_pid "$1" "${2:-15}"; untrack "$1"; }
WORK=
cleanup() {
	local rc=$? i
	set +e
	trap - EXIT INT TERM
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do stop_pid "${PIDS[i]}" 10; done
	PIDS=()
	if [ -n "$WORK" ]; then
		[ -f "$WORK/pg/server.log" ] && cp "$WORK/pg/server.log" "$WORK/server.log"
		scripts/pg-tmp.sh stop "$WORK/pg" >/dev/null 2>&1
		rm -f "$WORK"/*.ipc
		echo "soak: logs and soak.csv in $WORK" >&2
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# Short sleeps only: a trapped signal runs once the sleep is over.
nap() { sleep "$1"; }
now_ms() { local t=${EPOCHREALTIME/./}; NOW_MS=$((10#$t / 1000)); }

WORK=$(mktemp -d /tmp/outbox-soak.XXXXXX) || die "mktemp failed"
chmod 755 "$WORK"

# ---- the server and the schema ------------------------------------------------
say "PostgreSQL 15 with fsync=on, synchronous_commit=on in $WORK/pg"
OUTBOX_PG_FSYNC=on scripts/pg-tmp.sh start "$WORK/pg" >/dev/null || die "PostgreSQL did not start"
set -a
# shellcheck disable=SC1091
. "$WORK/pg/env"
set +a
export PGDATABASE=soak
q() { psql -d soak -AtqX -v ON_ERROR_STOP=1 -c "$1"; }
psql -d postgres -qX -v ON_ERROR_STOP=1 -c "CREATE DATABASE soak" || die "CREATE DATABASE failed"
# Every autovacuum run in the server log (how often it got to the table,
# and what it could not remove): a reload, no restart.
psql -d postgres -qX -c "ALTER SYSTEM SET log_autovacuum_min_duration = 0" -c "SELECT pg_reload_conf()" >/dev/null
DB="$OUTBOX_PG_CONNINFO dbname=soak"
if [ "$MODEL" = new ]; then
	"$BIN/outboxctl" migrate --db "$DB" --schema all >"$WORK/migrate.log" 2>&1 ||
		{ cat "$WORK/migrate.log" >&2; die "migrate failed"; }
else
	"$BIN/outboxctl" migrate --db "$DB" --schema outbox >"$WORK/migrate.log" 2>&1 &&
		"$CBIN/outboxctl" migrate --db "$DB" --schema inbox >>"$WORK/migrate.log" 2>&1 ||
		{ cat "$WORK/migrate.log" >&2; die "migrate failed"; }
fi
kind=$(q "SELECT relkind FROM pg_class WHERE oid = 'outbox.messages'::regclass")
has_stats=$(q "SELECT to_regprocedure('outbox.topic_stats(text)') IS NOT NULL")
case "$MODEL:$kind:$has_stats" in
new:v:t | old:r:f) ;;
*) die "the $MODEL model expected, but outbox.messages has relkind '$kind' and outbox.topic_stats exists: $has_stats" ;;
esac
say "model: $MODEL (outbox.messages is a $([ "$kind" = v ] && echo view || echo table)); schema $(q "SELECT string_agg(version::text, ',' ORDER BY version) FROM public.outbox_schema_migrations WHERE schema_set = 'outbox'")"
if [ "$AUTOVACUUM" = tuned ]; then
	q "ALTER TABLE outbox.messages SET (autovacuum_vacuum_scale_factor = 0,
	     autovacuum_vacuum_threshold = 5000, autovacuum_vacuum_cost_delay = 0,
	     autovacuum_vacuum_insert_threshold = 5000, autovacuum_analyze_scale_factor = 0.02)" ||
		die "ALTER TABLE outbox.messages SET (...) failed"
fi
if [ "$MODEL" = old ]; then
	say "autovacuum on outbox.messages: $AUTOVACUUM ($(q "SELECT coalesce(array_to_string(reloptions, ', '), 'server defaults') FROM pg_class WHERE oid = 'outbox.messages'::regclass"))"
fi

# The sample: one psql, one line. Sizes: every plain table and partition of
# the outbox schema with its indexes and TOAST (pg_total_relation_size); a
# partitioned parent has no storage of its own and is not counted.
SIZE_SQL="SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'outbox' AND c.relkind IN ('r', 'm')"
if [ "$MODEL" = new ]; then
	TABLE_SQL="SELECT coalesce(sum(pg_total_relation_size(i.inhrelid)), 0) FROM pg_inherits i
	            WHERE i.inhparent = 'outbox.events'::regclass"
	SEQ_SQL="SELECT coalesce(pg_sequence_last_value('outbox.event_ids'), 0)"
	BACKLOG_SQL="SELECT coalesce(sum(pending), 0) FROM outbox.topic_stats()"
	SLOTS_SQL="SELECT string_agg(CASE state WHEN 'current' THEN 'c' WHEN 'closed' THEN 'x' ELSE 'e' END, '' ORDER BY slot) FROM outbox.slots"
	DEAD_SQL="SELECT count(*) FROM outbox.dead"
	BOOK_SQL="SELECT pg_total_relation_size('outbox.batches') + pg_total_relation_size('outbox.streams')"
	TABLE_NAME="outbox.events"
	MAIN_TABLES="outbox.batches outbox.streams"
else
	TABLE_SQL="SELECT pg_total_relation_size('outbox.messages')"
	SEQ_SQL="SELECT coalesce(pg_sequence_last_value(pg_get_serial_sequence('outbox.messages', 'id')::regclass), 0)"
	BACKLOG_SQL="SELECT count(*) FROM outbox.messages WHERE status = 'pending'"
	SLOTS_SQL="SELECT '-'"
	DEAD_SQL="SELECT count(*) FROM outbox.messages WHERE status = 'dead'"
	BOOK_SQL="SELECT 0"
	TABLE_NAME="outbox.messages"
	MAIN_TABLES="outbox.messages"
fi
SAMPLE_SQL="SELECT ($SIZE_SQL), ($TABLE_SQL), ($SEQ_SQL), (SELECT count(*) FROM inbox.notifications),
  ($BACKLOG_SQL),
  (SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables WHERE schemaname = 'outbox'),
  (SELECT coalesce(sum(autovacuum_count), 0) FROM pg_stat_user_tables WHERE schemaname = 'outbox'),
  ($SLOTS_SQL), ($BOOK_SQL),
  (SELECT coalesce(max(a.pid), 0) FROM (SELECT pid FROM pg_stat_activity
     WHERE datname = current_database() AND pid <> pg_backend_pid()
       AND (backend_xid IS NOT NULL OR backend_xmin IS NOT NULL)
     ORDER BY xact_start NULLS LAST LIMIT 1) a)"
SAMPLE_SQL=${SAMPLE_SQL//$'\n'/ }

# ---- the holder ------------------------------------------------------------------
# One psql session (a coprocess) in the soak database, idle in a transaction
# from before the relay starts until after the drain.
HOLD_BACKEND=0 HOLD_SINCE=
if [ "$HOLD" != none ]; then
	coproc HOLDER { PGAPPNAME=soak-holder exec psql -d soak -AtqX -v ON_ERROR_STOP=1 2>>"$WORK/holder.log"; }
	HOLD_PPID=$HOLDER_PID
	track "$HOLD_PPID"
	exec {HOLD_IN}<&"${HOLDER[0]}" {HOLD_OUT}>&"${HOLDER[1]}"
	printf 'SELECT pg_backend_pid();\n' >&"$HOLD_OUT"
	IFS= read -r HOLD_BACKEND <&"$HOLD_IN" || die "the holder's psql died: $(cat "$WORK/holder.log")"
	if [ "$HOLD" = snapshot ]; then
		printf 'BEGIN ISOLATION LEVEL REPEATABLE READ;\nSELECT count(*) FROM pg_class;\n' >&"$HOLD_OUT"
	else
		printf 'BEGIN;\nSELECT txid_current();\n' >&"$HOLD_OUT"
	fi
	IFS= read -r hold_out <&"$HOLD_IN" || die "the holder's psql died: $(cat "$WORK/holder.log")"
	IFS='|' read -r hold_xmin hold_xid hold_state HOLD_SINCE <<<"$(q "SELECT backend_xmin, backend_xid, state, xact_start FROM pg_stat_activity WHERE pid = $HOLD_BACKEND")"
	[ -n "$hold_xmin$hold_xid" ] || die "the holder (pid $HOLD_BACKEND) holds neither an xmin nor an xid"
	say "holder: pid $HOLD_BACKEND ($HOLD: $([ "$HOLD" = snapshot ] && echo "count $hold_out" || echo "txid $hold_out")), $hold_state, backend_xmin ${hold_xmin:--} backend_xid ${hold_xid:--}, since $HOLD_SINCE"
fi

# ---- consumer and relay -----------------------------------------------------------
SOCK=$WORK/consumer.ipc
URL="ipc://$SOCK"
"$CBIN/outbox-consumer" --db "$DB" --listen "$URL" --threads "$CONSUMER_THREADS" --log-level warn \
	>>"$WORK/consumer.log" 2>&1 &
CPID=$!; track "$CPID"
for ((i = 0; i < START_TIMEOUT * 20; i++)); do
	[ -S "$SOCK" ] && break
	kill -0 "$CPID" 2>/dev/null || die "outbox-consumer exited at start: see $WORK/consumer.log"
	nap 0.05
done
[ -S "$SOCK" ] || die "outbox-consumer did not listen on $SOCK within ${START_TIMEOUT}s"

relay_args=(--db "$DB" --route "*=$URL" --workers "$WORKERS" --retention "$RETENTION"
	--purge-interval "$PURGE_INTERVAL" --metrics 127.0.0.1:0 --log-level info)
[ "$MODEL" = new ] && relay_args+=(--long-xact-warn "$LONG_XACT_WARN" --dead-retention "$DEAD_RETENTION")
# shellcheck disable=SC2206
[ -n "$RELAY_ARGS" ] && relay_args+=($RELAY_ARGS)
: >>"$WORK/relay.log"
"$BIN/outbox-relay" "${relay_args[@]}" >>"$WORK/relay.log" 2>&1 &
RPID=$!; track "$RPID"
MPORT=
for ((i = 0; i < START_TIMEOUT * 20; i++)); do
	MPORT=$(sed -n 's/.*relay\.metrics\.listening.* port=\([0-9][0-9]*\).*/\1/p' "$WORK/relay.log" | tail -1)
	[ -n "$MPORT" ] && break
	kill -0 "$RPID" 2>/dev/null || die "outbox-relay exited at start: see $WORK/relay.log"
	nap 0.05
done
[ -n "$MPORT" ] || die "outbox-relay logged no relay.metrics.listening within ${START_TIMEOUT}s"
say "relay: ${relay_args[*]:2} (metrics on 127.0.0.1:$MPORT)"

# ---- sampling ----------------------------------------------------------------------
mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
CSV=$WORK/soak.csv
echo "t_s,phase,outbox_bytes,table_bytes,other_bytes,bookkeeping_bytes,enqueued,delivered,backlog,outbox_dead_tuples,outbox_autovacuums,slots,oldest_xact_age_s,oldest_xact_pid,db_oldest_xmin_pid,enqueue_lat_ms,enqueue_lag_ms" >"$CSV"
S_T=() S_PHASE=() S_SIZE=() S_TABLE=() S_BACKLOG=() S_DELIV=() S_PID=()
T0_MS=0
# sample PHASE: one line, one CSV row, and the arrays above.
sample() {
	local phase=$1 r size table enq deliv backlog dead av slots book dbpid m lat lag age pid t book_txt=
	r=$(q "$SAMPLE_SQL") || { say "sample failed: $r"; return 0; }
	IFS='|' read -r size table enq deliv backlog dead av slots book dbpid <<<"$r"
	m=$(curl -fsS --max-time 2 "http://127.0.0.1:$MPORT/metrics" 2>/dev/null |
		awk '$1 == "outbox_relay_oldest_xact_age_seconds" { a = $2 } $1 == "outbox_relay_oldest_xact_pid" { p = $2 }
		     END { print (a == "" ? "-" : a), (p == "" ? "-" : p) }')
	read -r age pid <<<"${m:-- -}"
	# pgbench's last progress line: latency and schedule lag of the
	# enqueue transactions over the last SOAK_PROGRESS seconds.
	lat=- lag=-
	if [ "$phase" = load ] && [ -f "$WORK/pgbench.txt" ]; then
		read -r lat lag <<<"$(awk '/^progress: / { l = "-"; g = "-"
			for (i = 1; i < NF; i++) { if ($i == "lat") l = $(i + 1); if ($i == "lag") g = $(i + 1) } }
			END { print (l == "" ? "-" : l), (g == "" ? "-" : g) }' "$WORK/pgbench.txt")"
	fi
	now_ms
	t=$(((NOW_MS - T0_MS) / 1000))
	((T0_MS)) || t=0
	S_T+=("$t") S_PHASE+=("$phase") S_SIZE+=("$size") S_TABLE+=("$table") S_BACKLOG+=("$backlog")
	S_DELIV+=("$deliv") S_PID+=("$pid")
	echo "$t,$phase,$size,$table,$((size - table)),$book,$enq,$deliv,$backlog,$dead,$av,$slots,$age,$pid,$dbpid,$lat,$lag" >>"$CSV"
	[ "$MODEL" = old ] || book_txt=", batches+streams $(mb "$book")"
	[ "$age" = - ] || age=$(awk -v a="$age" 'BEGIN { printf "%.1f", a }')
	printf 'soak: t=%5ss %-9s outbox %7s MB (%s %s + other %s%s) enqueued %9s delivered %9s backlog %7s dead_tup %8s autovac %3s slots %-4s oldest_xact %ss pid %s enqueue %s ms\n' \
		"$t" "[$phase]" "$(mb "$size")" "$TABLE_NAME" "$(mb "$table")" "$(mb $((size - table)))" "$book_txt" \
		"$enq" "$deliv" "$backlog" "$dead" "$av" "$slots" "$age" "$pid" "$lat"
}

STEPS=$(printf 's%.0s' $(seq 120))
cat >"$WORK/enqueue.sql" <<SQL
SELECT outbox.enqueue('soak', 'k-' || :client_id || '-' || random()::text || '-' || txid_current(),
    '{"title": "soak probe", "module": "editor", "severity": "high", "steps": "$STEPS"}'::jsonb);
SQL
q "CHECKPOINT" >/dev/null
say "load: pgbench -R $RATE -T $DURATION ($CLIENTS clients, -j $THREADS), sample every ${SAMPLE_INTERVAL}s, reference at ${REF_SECONDS}s"
# Before its steady state the outbox still fills: new model, until the
# first slot is truncated (retention + one switch interval, retention /
# (slots - 2), + a purge pass); old model, until delivered rows are deleted
# and autovacuum (autovacuum_naptime 60s) has made their space reusable
# (about retention + 60s).
SWITCH_MS=0
if [ "$MODEL" = new ]; then
	slots=$(q "SELECT outbox.event_slots()")
	SWITCH_MS=$((RETENTION_MS / (slots - 2)))
	steady_s=$(((RETENTION_MS + SWITCH_MS + PURGE_INTERVAL_MS + 999) / 1000))
	steady_why="retention + retention/$((slots - 2)) + a purge interval"
else steady_s=$((RETENTION_MS / 1000 + 60)) steady_why="retention + autovacuum_naptime"; fi
REF_NOTE=
if ((REF_SECONDS < steady_s)); then
	REF_NOTE=" (the reference is before the steady state, about $steady_why = ${steady_s}s: the ratio reads high)"
	say "note: reference sample at ${REF_SECONDS}s$REF_NOTE"
fi
sample start
now_ms; T0_MS=$NOW_MS
"$PGBENCH" -n -c "$CLIENTS" -j "$THREADS" -R "$RATE" -T "$DURATION" -P "$PROGRESS" -f "$WORK/enqueue.sql" soak \
	>"$WORK/pgbench.txt" 2>&1 &
PGB=$!; track "$PGB"
next=$SAMPLE_INTERVAL
while kill -0 "$PGB" 2>/dev/null; do
	kill -0 "$RPID" 2>/dev/null || die "outbox-relay exited during the load: see $WORK/relay.log"
	kill -0 "$CPID" 2>/dev/null || die "outbox-consumer exited during the load: see $WORK/consumer.log"
	now_ms
	if (((NOW_MS - T0_MS) >= next * 1000)) && ((next < DURATION)); then
		sample load
		next=$((next + SAMPLE_INTERVAL))
	fi
	nap 0.2
done
wait "$PGB"; pgb_rc=$?
untrack "$PGB"
sample end
((pgb_rc == 0)) || die "pgbench exited $pgb_rc: see $WORK/pgbench.txt"
processed=$(awk -F': ' '/^number of transactions actually processed/ { split($2, a, "/"); print a[1] + 0; exit }' "$WORK/pgbench.txt")
failed=$(awk -F': ' '/^number of failed transactions/ { print $2 + 0; exit }' "$WORK/pgbench.txt")
lag=$(awk '/^rate limit schedule lag/ { gsub(/[()]/, ""); print $6 " ms, max " $8 " ms"; exit }' "$WORK/pgbench.txt")
[ -n "$processed" ] || die "no transaction count in $WORK/pgbench.txt"
failed=${failed:-0}

# ---- the drain ---------------------------------------------------------------------------
now_ms; drain_t0=$NOW_MS
deadline=$((SECONDS + DRAIN_TIMEOUT))
delivered=0 drained=0
while :; do
	delivered=$(q "SELECT count(*) FROM inbox.notifications WHERE idempotency_key LIKE 'k-%'") || delivered=0
	((delivered >= processed)) && { drained=1; break; }
	((SECONDS < deadline)) || break
	kill -0 "$RPID" 2>/dev/null || { say "the relay has exited"; break; }
	kill -0 "$CPID" 2>/dev/null || { say "the consumer has exited"; break; }
	nap 1
done
now_ms; drain_s=$(((NOW_MS - drain_t0) / 1000))
sample drained
# The largest outbox tables now, while the holder (if any) still pins.
tables=$(q "SELECT string_agg(format('%s %s MB (live %s, dead %s)', c.relname,
                round(pg_total_relation_size(c.oid) / 1048576.0, 1), coalesce(s.n_live_tup, 0),
                coalesce(s.n_dead_tup, 0)), '; ' ORDER BY pg_total_relation_size(c.oid) DESC)
              FROM (SELECT c.oid, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                     WHERE n.nspname = 'outbox' AND c.relkind IN ('r', 'm')
                     ORDER BY pg_total_relation_size(c.oid) DESC LIMIT 6) c
              LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid")

# ---- the holder, the relay's own account ---------------------------------------------------
hold_ok=1 hold_msg="none held"
if [ "$HOLD" != none ]; then
	still=$(q "SELECT xact_start = '$HOLD_SINCE'::timestamptz FROM pg_stat_activity WHERE pid = $HOLD_BACKEND")
	[ "$still" = t ] || { hold_ok=0; say "the holder's transaction did not last the whole run"; }
	if kill -0 "$HOLD_PPID" 2>/dev/null; then
		printf 'COMMIT;\n\\q\n' >&"$HOLD_OUT"
		for ((i = 0; i < 50; i++)); do kill -0 "$HOLD_PPID" 2>/dev/null || break; nap 0.1; done
	fi
	stop_tracked "$HOLD_PPID" 5
fi
# The relay's totals are logged at its exit.
stop_tracked "$RPID"
stop_tracked "$CPID"

r=$(q "SELECT count(*), count(DISTINCT idempotency_key) FROM inbox.notifications WHERE idempotency_key LIKE 'k-%'")
IFS='|' read -r n_eff n_distinct <<<"$r"
dead_letters=$(q "$DEAD_SQL")

# ---- summary ----------------------------------------------------------------------------------
ns=${#S_T[@]}
ref_i=-1 end_i=-1
for ((i = 0; i < ns; i++)); do
	if ((ref_i < 0)) && [ "${S_PHASE[i]}" = load ] && ((S_T[i] >= REF_SECONDS)); then ref_i=$i; fi
	[ "${S_PHASE[i]}" = end ] && end_i=$i
done
((ref_i >= 0)) || ref_i=$end_i
ref_size=${S_SIZE[ref_i]} end_size=${S_SIZE[end_i]}
ratio=$(awk -v a="$end_size" -v b="$ref_size" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }')
size_ok=$(awk -v r="$ratio" -v m="$MAX_RATIO" 'BEGIN { print (r <= m) ? 1 : 0 }')
# After the reference, during the load: the size's range, the backlog's
# maximum and trend (least squares, msgs/s), and the delivery rate.
stats=$(for ((i = ref_i; i <= end_i; i++)); do
	echo "${S_T[i]} ${S_SIZE[i]} ${S_BACKLOG[i]} ${S_DELIV[i]} ${S_TABLE[i]}"
done | awk -v ref="$ref_size" '
	NR == 1 { t0 = $1; d0 = $4; mn = mx = $2; tmn = tmx = $5 }
	{ if ($2 < mn) mn = $2; if ($2 > mx) mx = $2; if ($5 < tmn) tmn = $5; if ($5 > tmx) tmx = $5
	  if ($3 > bmax) bmax = $3; n++; sx += $1; sy += $3; sxx += $1 * $1; sxy += $1 * $3; t1 = $1; d1 = $4 }
	END {
		slope = (n > 1 && n * sxx - sx * sx > 0) ? (n * sxy - sx * sy) / (n * sxx - sx * sx) : 0
		printf "%d %d %d %.1f %.0f %.2f %.2f %d %d\n", mn, mx, bmax, slope,
			(t1 > t0) ? (d1 - d0) / (t1 - t0) : 0, (ref > 0) ? mn / ref : 0, (ref > 0) ? mx / ref : 0, tmn, tmx }')
read -r size_min size_max backlog_max backlog_slope deliv_rate xmin_r xmax_r table_min table_max <<<"$stats"
backlog_ok=$((backlog_max <= BACKLOG_LIMIT))
applied_ok=$((drained && n_eff == processed && n_distinct == n_eff && failed == 0))
achieved=$(awk -v n="$processed" -v s="$DURATION" 'BEGIN { printf "%.0f", n / s }')
need=$(awk -v r="$RATE" -v s="$DURATION" -v p="$MIN_ACHIEVED" 'BEGIN { m = r * s; printf "%.0f", m * p / 100 - 3 * sqrt(m) }')
load_ok=$((processed >= need))

# The relay's log: housekeeping and, with a holder, the long transaction.
if [ "$MODEL" = new ]; then
	hk_trunc=$(grep -c 'relay\.housekeep\.done.*truncated_slot=[0-9]' "$WORK/relay.log")
	hk_switch=$(grep -c 'relay\.housekeep\.done.*switched_to=[0-9]' "$WORK/relay.log")
	hk_purged=$(sed -n 's/.*relay\.housekeep\.done.* purged=\([0-9]*\).*/\1/p' "$WORK/relay.log" | awk '{ s += $1 } END { print s + 0 }')
	hk_wait=$(grep -c 'relay\.housekeep\.waiting' "$WORK/relay.log")
	hk_line="housekeeping: $hk_switch slot switches, $hk_trunc slots truncated ($hk_purged messages), $hk_wait relay.housekeep.waiting lines"
	((hk_wait == 0)) || hk_line+="; the first: $(grep -m1 'relay\.housekeep\.waiting' "$WORK/relay.log" | sed 's/.*why=//')"
else
	hk_purged=$(sed -n 's/.*relay\.purge\.done purged=\([0-9]*\).*/\1/p' "$WORK/relay.log" | awk '{ s += $1 } END { print s + 0 }')
	hk_line="housekeeping: $(grep -c 'relay\.purge\.done' "$WORK/relay.log") relay.purge.done passes, $hk_purged rows deleted"
fi
# Autovacuum's own account (log_autovacuum_min_duration = 0), per table of
# MAIN_TABLES: runs, rows removed, and what it found dead but not yet
# removable (what an open transaction pins) at its last run and at most.
autovac_line=$(awk -v want="$MAIN_TABLES" '
	BEGIN { n = split(want, w, " "); for (i = 1; i <= n; i++) ok["soak." w[i]] = 1 }
	/automatic vacuum of table "soak\.outbox\./ { t = $0; sub(/.*of table "/, "", t); sub(/".*/, "", t); cur = (t in ok) ? t : ""; if (cur != "") runs[cur]++; next }
	cur != "" && /tuples: [0-9]+ removed/ { split($0, f, /[ ,]+/)
		for (i = 1; i in f; i++) { if (f[i] == "removed") rm[cur] += f[i - 1]; if (f[i] == "are" && f[i + 1] == "dead") { last[cur] = f[i - 1]; if (f[i - 1] > mx[cur]) mx[cur] = f[i - 1] } }
		cur = "" }
	END { for (i = 1; i <= n; i++) { t = "soak." w[i]
		printf "%s%s: %d runs, %d rows removed, dead but not yet removable %d at the last run (max %d)", (i > 1 ? "; " : ""), w[i], runs[t], rm[t], last[t], mx[t] } }' "$WORK/pg/server.log" 2>/dev/null)
# Peaks: the slots make the size a sawtooth (between about 1 and 1 + 1 /
# (slots - 2) x retention x rate of outbox.events, docs/relay.md), so two
# instants can differ by that much on a flat table; the largest sample in
# the window of retention + a switch interval + a purge interval before
# each point compares like with like (old model: 1.5 x retention).
if [ "$MODEL" = new ]; then PEAK_W=$(((RETENTION_MS + SWITCH_MS + PURGE_INTERVAL_MS + 999) / 1000))
else PEAK_W=$(((3 * RETENTION_MS / 2 + PURGE_INTERVAL_MS + 999) / 1000)); fi
peak() { # peak T_END: the largest load/end sample in [T_END - PEAK_W, T_END]
	local i m=0
	for ((i = 0; i < ns; i++)); do
		case ${S_PHASE[i]} in load | end) ;; *) continue ;; esac
		((S_T[i] <= $1 && S_T[i] >= $1 - PEAK_W && S_SIZE[i] > m)) && m=${S_SIZE[i]}
	done
	echo "$m"
}
peak_ref=$(peak "${S_T[ref_i]}") peak_end=$(peak "${S_T[end_i]}")
peak_ratio=$(awk -v a="$peak_end" -v b="$peak_ref" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }')
growth=$(awk -v a="$end_size" -v b="$ref_size" -v t=$((S_T[end_i] - S_T[ref_i])) \
	'BEGIN { printf "%+.1f MB (%+.2f MB/min)", (a - b) / 1048576, (t > 0) ? (a - b) / 1048576 * 60 / t : 0 }')
xact_line="skipped"
if [ "$HOLD" != none ]; then
	if [ "$MODEL" = new ]; then
		n_log=$(grep -c "relay\.db\.long_transaction pid=$HOLD_BACKEND " "$WORK/relay.log")
		n_other=$(grep 'relay\.db\.long_transaction' "$WORK/relay.log" | grep -vc "long_transaction pid=$HOLD_BACKEND ")
		# The gauge is set at every housekeeping pass: from the first one on
		# (a --purge-interval after the start at the latest) it must name
		# the holder, the oldest transaction of the database.
		n_metric=0 n_late=0
		for ((i = 0; i < ns; i++)); do
			case ${S_PHASE[i]} in load | end) ;; *) continue ;; esac
			((S_T[i] * 1000 >= PURGE_INTERVAL_MS)) || continue
			n_late=$((n_late + 1))
			[ "${S_PID[i]}" = "$HOLD_BACKEND" ] && n_metric=$((n_metric + 1))
		done
		xact_line="relay.db.long_transaction pid=$HOLD_BACKEND logged $n_log times ($n_other naming another pid); outbox_relay_oldest_xact_pid = $HOLD_BACKEND in $n_metric of $n_late load samples from t=${PURGE_INTERVAL}"
		((n_log > 0 && n_metric == n_late && n_late > 0)) || hold_ok=0
	else
		xact_line="skipped: the old relay has no --long-xact-warn and no oldest-transaction gauges"
	fi
fi
hold_msg="SOAK_HOLD_XACT=$HOLD"
[ "$HOLD" = none ] || hold_msg+=" (pid $HOLD_BACKEND, open from before the relay started until after the drain)"

verdict() { if (($1)); then echo met; else echo MISSED; fi; }
echo
say "summary: model $MODEL, autovacuum $AUTOVACUUM, $hold_msg"
say "  load         $(printf '%s' "$processed") enqueues in ${DURATION}s = ${achieved}/s of ${RATE}/s offered ($failed failed; pgbench schedule lag avg ${lag:-?})   $(verdict "$load_ok")"
say "  size         outbox at t=${S_T[ref_i]}s $(mb "$ref_size") MB, at the end (t=${S_T[end_i]}s) $(mb "$end_size") MB: ratio $ratio (target <= $MAX_RATIO)   $(verdict "$size_ok")$REF_NOTE"
say "               after the reference: $(mb "$size_min")..$(mb "$size_max") MB (x${xmin_r}..x${xmax_r}); $TABLE_NAME $(mb "$table_min")..$(mb "$table_max") MB; growth ref->end $growth"
say "               peaks over the ${PEAK_W}s before each: $(mb "$peak_ref") MB at the reference, $(mb "$peak_end") MB at the end: ratio $peak_ratio (the sawtooth taken out; information)"
say "  backlog      max $backlog_max after the reference (limit $BACKLOG_LIMIT = ${BACKLOG_SECONDS}s of enqueues), trend ${backlog_slope} msgs/s; delivered ${deliv_rate}/s meanwhile   $(verdict "$backlog_ok")"
say "  applied      $n_eff effects ($n_distinct distinct keys) of $processed enqueued; drained $([ $drained = 1 ] && echo "in ${drain_s}s after the load" || echo "NOT within ${DRAIN_TIMEOUT}s"); $dead_letters dead letters   $(verdict "$applied_ok")"
say "  $hk_line"
say "  autovacuum   $autovac_line"
say "  tables       at the end of the drain: $tables"
if [ "$HOLD" != none ]; then
	say "  holder       $hold_msg; $xact_line   $(verdict "$hold_ok")"
fi
say "  relay        $(grep -m1 'relay\.totals' "$WORK/relay.log" | sed 's/.*relay\.totals //')"
ok=$((load_ok && size_ok && backlog_ok && applied_ok && hold_ok))
if ((ok)); then say "result: every target met"; exit 0; fi
say "result: a target was MISSED"
exit 1
