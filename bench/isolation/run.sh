#!/usr/bin/env bash
# bench/isolation/run.sh - outage isolation: topic A's destination is down;
# does topic B still go as fast, and does A cost the database anything?
#
#   bench/isolation/run.sh [PENDING]     PENDING = scenario 2's backlog on A (default 50000)
#
# One run, one private PostgreSQL 15 (scripts/pg-tmp.sh, OUTBOX_PG_FSYNC=on:
# fsync, synchronous_commit and full_page_writes on; track_commit_timestamp
# on). One relay (--workers ISO_WORKERS) with two routes:
#
#   --route b=ipc://WORK/b.ipc             an outbox-consumer (record handler) listens there
#   --route a.down=ipc://WORK/nobody.ipc   nobody listens: the destination is down
#
# Three scenarios, each on a fresh database (outboxctl migrate --schema all:
# producer and consumer schemas in one database) with a new consumer and relay:
#
#   0  baseline        nothing on a.down
#   1  1 pending       one message on a.down, enqueued before the relay starts
#   2  PENDING pending PENDING messages on a.down (outbox.enqueue in chunks of ISO_CHUNK)
#
# In 1 and 2 the measurement starts once EVERY worker has logged
# relay.breaker.open for nobody.ipc (each worker has its own breaker; one
# that is still closed keeps claiming A's batches and holding a frame slot
# for a whole delivery timeout per try), plus one delivery timeout and a
# second, so that the frames sent before the breakers opened have timed out
# and been released. Then, in every scenario, after a warm-up of ISO_WARMUP
# messages on b and a CHECKPOINT:
#
#   (a) delivery   ISO_BURST messages on b enqueued in ONE transaction;
#                  delivery time = commit time of the last effect row
#                  (pg_xact_commit_timestamp of its xmin) - commit time of
#                  the producer's transaction. Same server clock; a poller
#                  (one psql session, an index probe every ISO_POLL_MS) only
#                  says when to look.
#   (b) latency    pgbench -R ISO_RATE for ISO_LAT_SECONDS, ISO_PGBENCH_CLIENTS, one
#                  outbox.enqueue('b', 'l-' || txid_current(), ...) per
#                  transaction; latency = consumer COMMIT - producer COMMIT
#                  per message (as bench/relay/run.sh), p50/p99/p99.9/max.
#   (e) trickle    ISO_TRICKLE single-message transactions ISO_TRICKLE_GAP_MS
#                  apart: each reaches a relay gone quiet (the case the
#                  LISTEN/NOTIFY wakeup is for); p50/p90/max.
#   (c) writes     row writes to the outbox schema's tables over (a)+(b)+(e):
#                  delta of sum(n_tup_ins + n_tup_upd + n_tup_del) from
#                  pg_stat_user_tables, sampled once the counts have settled
#                  (two samples ISO_SETTLE_GAP s apart agree: backends flush
#                  their counts at most once a second, and when idle).
#                  Split into B's traffic (its events, its batches' claims
#                  and outcomes, the streams' cuts, the wakeup
#                  announcements in outbox.relay_waiters) and the rest; and A's
#                  writes counted from its own rows (batches and retries of
#                  topic a.down: new rows, claims; dead letters).
#   (d) idle       ISO_IDLE_SECONDS more with no traffic on b: every outbox
#                  row write then is A's (its probes), counted by
#                  pg_stat_user_tables exactly, but the idle workers'
#                  wakeup announcements (outbox.relay_waiters), shown apart.
#
# Then counts are checked (every b message applied exactly once: effect rows
# = distinct keys = dedup records = b's events; nothing of b pending or dead;
# every a.down message still pending, none dead, none applied) and the
# database dropped. The summary prints delivery time and p99 per scenario,
# the ratios (1)/(0) and (2)/(0) against the 1.5x target, and A's row
# writes per second while down. Exit 0 whatever the numbers (a benchmark);
# 1 if something could not run or a count check failed; 2 on bad settings.
#
# Knobs (env; each validated, a bad value exits 2):
#   ISO_WORKERS (2) ISO_BATCH (100) ISO_INFLIGHT (4) ISO_PROBE_MS (2000,
#   --breaker-probe-interval) ISO_BREAKER_THRESHOLD (5)
#   ISO_DELIVERY_TIMEOUT_MS (10000) - the relay's defaults, passed explicitly
#   ISO_CONSUMER_THREADS (4: the consumer's default) ISO_PGBENCH_CLIENTS (4)
#   ISO_PENDING (50000, or argument 1) ISO_BURST (2000) ISO_WARMUP (200)
#   ISO_RATE (1000) ISO_LAT_SECONDS (20) ISO_IDLE_SECONDS (30)
#   ISO_TRICKLE (40; 0 skips (e)) ISO_TRICKLE_GAP_MS (300)
#   ISO_CHUNK (10000) ISO_POLL_MS (20) ISO_SETTLE_GAP (2 s) ISO_SETTLE_TRIES (15)
#   ISO_OPEN_TIMEOUT (600 s) ISO_DRAIN_TIMEOUT (300 s) ISO_START_TIMEOUT (30 s)
#   ISO_SCENARIOS ("0 1 2") ISO_RELAY_ARGS (extra relay flags, word-split)
#   OUTBOX_BIN_DIR (build/bin)
# The work dir (logs, pgbench output, isolation.csv) is kept; the server and
# its data dir are always removed at exit, and every process stopped.
set -euo pipefail
cd "$(dirname "$0")/../.."
export LC_ALL=C        # '.' decimal point in $EPOCHREALTIME, awk and printf

iso_die() { echo "iso: FAIL: $*" >&2; exit 1; }

# need_int NAME MIN MAX LABEL: $NAME must be an integer in MIN..MAX, else
# exit 2 with one line naming LABEL (where the value came from).
need_int() {
	local name=$1 min=$2 max=$3 label=$4 v=${!1-}
	if ! [[ $v =~ ^[0-9]{1,12}$ ]] || ((10#$v < min || 10#$v > max)); then
		echo "iso: $label must be an integer in $min..$max, got '$v'" >&2; exit 2
	fi
	printf -v "$name" '%d' "$((10#$v))"
}

# ---- limits ------------------------------------------------------------------
PENDING=${1:-${ISO_PENDING:-50000}}
WORKERS=${ISO_WORKERS:-2}
BATCH=${ISO_BATCH:-100}
INFLIGHT=${ISO_INFLIGHT:-4}
PROBE_MS=${ISO_PROBE_MS:-2000}
THRESHOLD=${ISO_BREAKER_THRESHOLD:-5}
TIMEOUT_MS=${ISO_DELIVERY_TIMEOUT_MS:-10000}
CONSUMER_THREADS=${ISO_CONSUMER_THREADS:-4}
CLIENTS=${ISO_PGBENCH_CLIENTS:-4}
BURST=${ISO_BURST:-2000}
WARMUP=${ISO_WARMUP:-200}
RATE=${ISO_RATE:-1000}
LAT_SECONDS=${ISO_LAT_SECONDS:-20}
IDLE_SECONDS=${ISO_IDLE_SECONDS:-30}
TRICKLE=${ISO_TRICKLE:-40}
TRICKLE_GAP_MS=${ISO_TRICKLE_GAP_MS:-300}
CHUNK=${ISO_CHUNK:-10000}
POLL_MS=${ISO_POLL_MS:-20}
SETTLE_GAP=${ISO_SETTLE_GAP:-2}
SETTLE_TRIES=${ISO_SETTLE_TRIES:-15}
OPEN_TIMEOUT=${ISO_OPEN_TIMEOUT:-600}
DRAIN_TIMEOUT=${ISO_DRAIN_TIMEOUT:-300}
START_TIMEOUT=${ISO_START_TIMEOUT:-30}
SCENARIOS=${ISO_SCENARIOS:-0 1 2}
BIN=${OUTBOX_BIN_DIR:-build/bin}

need_int PENDING 1 10000000 "PENDING (argument 1 or ISO_PENDING)"
need_int WORKERS 1 64 ISO_WORKERS
need_int BATCH 1 1000 ISO_BATCH
need_int INFLIGHT 1 256 ISO_INFLIGHT
need_int PROBE_MS 10 3600000 ISO_PROBE_MS
need_int THRESHOLD 1 1000000 ISO_BREAKER_THRESHOLD
# The relay's lease stays at its default (30 s); it must exceed the timeout + 1 s.
need_int TIMEOUT_MS 10 28999 ISO_DELIVERY_TIMEOUT_MS
need_int CONSUMER_THREADS 1 256 ISO_CONSUMER_THREADS
need_int CLIENTS 1 256 ISO_PGBENCH_CLIENTS
need_int BURST 1 1000000 ISO_BURST
need_int WARMUP 1 100000 ISO_WARMUP
need_int RATE 1 100000 ISO_RATE
need_int LAT_SECONDS 1 86400 ISO_LAT_SECONDS
need_int IDLE_SECONDS 0 86400 ISO_IDLE_SECONDS
need_int TRICKLE 0 100000 ISO_TRICKLE
need_int TRICKLE_GAP_MS 0 600000 ISO_TRICKLE_GAP_MS
need_int CHUNK 1 1000000 ISO_CHUNK
need_int POLL_MS 1 10000 ISO_POLL_MS
need_int SETTLE_GAP 1 60 ISO_SETTLE_GAP
need_int SETTLE_TRIES 2 1000 ISO_SETTLE_TRIES
need_int OPEN_TIMEOUT 1 86400 ISO_OPEN_TIMEOUT
need_int DRAIN_TIMEOUT 1 86400 ISO_DRAIN_TIMEOUT
need_int START_TIMEOUT 1 3600 ISO_START_TIMEOUT
read -r -a SCEN <<<"$SCENARIOS"
((${#SCEN[@]} > 0)) || { echo "iso: ISO_SCENARIOS is empty" >&2; exit 2; }
for s in "${SCEN[@]}"; do
	case $s in 0 | 1 | 2) ;; *) echo "iso: unknown scenario '$s' in ISO_SCENARIOS (0 1 2)" >&2; exit 2 ;; esac
done
POLL_S=$(awk -v m="$POLL_MS" 'BEGIN { printf "%.3f", m / 1000 }')
for p in outbox-relay outbox-consumer outboxctl; do
	[ -x "$BIN/$p" ] || { echo "iso: $BIN/$p missing (build first: cmake -S . -B build && cmake --build build -j2; or set OUTBOX_BIN_DIR)" >&2; exit 2; }
done
pgbin=$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)
PGBENCH=$pgbin/pgbench
[ -x "$PGBENCH" ] || PGBENCH=$(command -v pgbench || true)
[ -n "$PGBENCH" ] || { echo "iso: pgbench not found (apt-get install postgresql-contrib or postgresql-15)" >&2; exit 2; }

# ---- processes -----------------------------------------------------------------
# Every background process goes into PIDS; the cleanup stops each of them by
# id: TERM, then after a grace KILL of it and the children it left (the
# relay's workers).
PIDS=()
track() { PIDS+=("$1"); }
untrack() {
	local p keep=()
	for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	PIDS=("${keep[@]}")
}
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
		echo "iso: pid $p ignored SIGTERM for ${grace}s: SIGKILL" >&2
		# shellcheck disable=SC2086
		kill -KILL "$p" $kids 2>/dev/null || true
	fi
	wait "$p" 2>/dev/null || true
}
stop_tracked() { stop_pid "$1" "${2:-15}"; untrack "$1"; }
# fg CMD...: CMD in the background, waited for, so that a signal to this
# script runs the cleanup at once (bash defers traps while a foreground
# command runs). Returns CMD's status.
fg() {
	local p rc=0
	"$@" &
	p=$!; track "$p"
	wait "$p" || rc=$?
	untrack "$p"
	return "$rc"
}
iso_cleanup() {
	local rc=$? p
	set +e
	trap - EXIT INT TERM
	# An interrupted run: a second TERM makes a relay supervisor SIGKILL its
	# workers at once instead of waiting out the shutdown grace.
	if ((rc != 0)); then
		for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
		sleep 0.2
	fi
	for p in "${PIDS[@]}"; do stop_pid "$p" 10; done
	PIDS=()
	if [ -n "${WORK:-}" ]; then
		scripts/pg-tmp.sh stop "$WORK/pg" >/dev/null 2>&1
		rm -f "$WORK"/*.ipc
		echo "iso: logs in $WORK" >&2
	fi
	exit "$rc"
}
# Short waits only: a trap runs once the sleep is over.
nap() { sleep "$1"; }

WORK=$(mktemp -d /tmp/outbox-iso.XXXXXX)
chmod 755 "$WORK"
trap iso_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- PostgreSQL -------------------------------------------------------------------
echo "iso: PostgreSQL 15 with fsync=on, synchronous_commit=on, full_page_writes=on, track_commit_timestamp=on in $WORK/pg"
OUTBOX_PG_FSYNC=on scripts/pg-tmp.sh start "$WORK/pg" >/dev/null
echo "track_commit_timestamp = on" >>"$WORK/pg/data/postgresql.conf"
scripts/pg-tmp.sh restart "$WORK/pg"
set -a
# shellcheck disable=SC1091
. "$WORK/pg/env"
set +a
export PGDATABASE=postgres
q() { psql -d "$1" -AtqX -v ON_ERROR_STOP=1 -c "$2"; }
qa() { PGOPTIONS='-c client_min_messages=warning' q postgres "$1"; }
conninfo() { echo "$OUTBOX_PG_CONNINFO dbname=$1"; }

PAYLOAD="jsonb_build_object('title', 'benchmark report ' || g, 'module', 'editor',
	'severity', 'high', 'steps', repeat('s', 120))"
# enqueue DB TOPIC PREFIX FROM TO: keys PREFIX || g, in statements of CHUNK.
enqueue() {
	local db=$1 topic=$2 prefix=$3 from=$4 to=$5 s e
	for ((s = from; s <= to; s += CHUNK)); do
		e=$((s + CHUNK - 1 < to ? s + CHUNK - 1 : to))
		fg q "$db" "SELECT count(outbox.enqueue('$topic', '$prefix' || g, $PAYLOAD))
		            FROM generate_series($s, $e) g" >/dev/null
	done
}

# ---- the relay's log ---------------------------------------------------------------
# current_workers LOG: "index pid" of each worker's latest fork.
current_workers() {
	awk '/event=relay\.worker\.forked/ {
		w = ""; p = ""
		for (i = 1; i <= NF; i++) {
			if ($i ~ /^worker=/) w = substr($i, 8)
			if ($i ~ /^pid=/) p = substr($i, 5)   # the last pid= is the worker
		}
		last[w] = p
	} END { for (w in last) print w, last[w] }' "$1"
}
# workers_with LOG PATTERN: how many current workers logged a line matching
# PATTERN (their own pid= is the line's first pid= field).
workers_with() {
	local log=$1 pat=$2 n=0 p
	while read -r _ p; do
		if grep -E "pid=$p event=$pat" "$log" >/dev/null 2>&1; then n=$((n + 1)); fi
	done < <(current_workers "$log")
	echo "$n"
}
# wait_workers LOG PATTERN TIMEOUT WHAT: until every worker logged PATTERN.
wait_workers() {
	local log=$1 pat=$2 timeout=$3 what=$4 deadline=$((SECONDS + $3)) n
	while :; do
		n=$(workers_with "$log" "$pat")
		((n >= WORKERS)) && return 0
		kill -0 "$RPID" 2>/dev/null || iso_die "the relay exited while waiting for $what: see $log"
		kill -0 "$CPID" 2>/dev/null || iso_die "the consumer exited while waiting for $what"
		((SECONDS < deadline)) || iso_die "$what: $n of $WORKERS workers after ${timeout}s (see $log)"
		nap 0.2
	done
}
count_in_log_since() { tail -c +"$(($2 + 1))" "$1" | grep -c -E "$3" || true; }
# count_in_log_between LOG FROM TO ERE: lines matching ERE between two byte offsets.
count_in_log_between() { tail -c +"$(($2 + 1))" "$1" | head -c "$(($3 - $2))" | grep -c -E "$4" || true; }

# ---- the poller --------------------------------------------------------------------
# wait_probe DB SQL WANT TIMEOUT POLL_S: one psql session (a coprocess,
# autocommit: no snapshot held between polls) runs SQL, which answers a
# number, every POLL_S (a pg_sleep in the same session: no fork per poll)
# until it is >= WANT. WAIT_T1: $EPOCHREALTIME of the poll that saw it.
wait_probe() {
	local db=$1 sql=${2//$'\n'/ } want=$3 timeout=$4 poll=$5 c deadline dead=0
	deadline=$((SECONDS + timeout))
	coproc ISO_POLL { exec psql -d "$db" -AtqX 2>&1; }
	local ppid=$ISO_POLL_PID out=${ISO_POLL[1]} in=${ISO_POLL[0]}
	track "$ppid"
	while :; do
		printf '%s;\n' "$sql" >&"$out"
		IFS= read -r c <&"$in" || iso_die "the poller's psql died"
		[[ $c =~ ^[0-9]+$ ]] || iso_die "poller: $c"
		if ((c >= want)); then WAIT_T1=$EPOCHREALTIME; break; fi
		((dead)) && iso_die "$c of $want after a process it needs exited ($sql)"
		kill -0 "$RPID" 2>/dev/null || dead=1
		kill -0 "$CPID" 2>/dev/null || dead=1
		((SECONDS < deadline)) || iso_die "$c of $want after ${timeout}s ($sql)"
		if ((!dead)); then
			printf 'SELECT pg_sleep(%s);\n' "$poll" >&"$out"
			IFS= read -r c <&"$in" || iso_die "the poller's psql died"
			[ -z "$c" ] || iso_die "poller: $c"
		fi
	done
	printf '\\q\n' >&"$out"
	wait "$ppid" 2>/dev/null || true
	untrack "$ppid"
}
# Effect rows of keys PREFIX..., by the notifications_key index (C collation:
# a range of the prefix).
effects_sql() { echo "SELECT count(*) FROM inbox.notifications WHERE idempotency_key >= '$1' AND idempotency_key < '$1~'"; }

# ---- statistics -----------------------------------------------------------------------
# stat_sample DB: "events batches streams retries dead waiters other" row
# writes (n_tup_ins + n_tup_upd + n_tup_del) of the outbox schema's tables.
# waiters: outbox.relay_waiters, where an idle worker announces itself
# before each wait (an upsert per --poll-ms per worker, whatever the topics).
stat_sample() {
	q "$1" "SELECT coalesce(sum(w) FILTER (WHERE relname LIKE 'events%'), 0) || ' ' ||
	               coalesce(sum(w) FILTER (WHERE relname = 'batches'), 0) || ' ' ||
	               coalesce(sum(w) FILTER (WHERE relname = 'streams'), 0) || ' ' ||
	               coalesce(sum(w) FILTER (WHERE relname = 'retries'), 0) || ' ' ||
	               coalesce(sum(w) FILTER (WHERE relname = 'dead'), 0) || ' ' ||
	               coalesce(sum(w) FILTER (WHERE relname = 'relay_waiters'), 0) || ' ' ||
	               coalesce(sum(w) FILTER (WHERE relname NOT LIKE 'events%'
	                        AND relname NOT IN ('batches', 'streams', 'retries', 'dead', 'relay_waiters')), 0)
	          FROM (SELECT relname, n_tup_ins + n_tup_upd + n_tup_del AS w
	                  FROM pg_stat_user_tables WHERE schemaname = 'outbox') s"
}
# settled_sample DB: samples until two ISO_SETTLE_GAP apart agree (or
# ISO_SETTLE_TRIES were taken), but for the waiters' count, which an idle
# relay moves every poll. STAT: the sample; STAT_T: its time; STAT_NOTE: how
# it settled.
but_waiters() { awk '{ $6 = ""; print }' <<<"$1"; }
settled_sample() {
	local a b i
	a=$(stat_sample "$1")
	for ((i = 2; i <= SETTLE_TRIES; i++)); do
		nap "$SETTLE_GAP"
		b=$(stat_sample "$1")
		if [ "$(but_waiters "$a")" = "$(but_waiters "$b")" ]; then
			STAT=$b; STAT_T=$EPOCHREALTIME; STAT_NOTE="settled after $i samples"
			return 0
		fi
		a=$b
	done
	STAT=$a; STAT_T=$EPOCHREALTIME; STAT_NOTE="NOT settled after $SETTLE_TRIES samples ${SETTLE_GAP}s apart (still moving: last sample used)"
}
sum_words() { local t=0 x; for x in $1; do t=$((t + x)); done; echo "$t"; }
# diff_words "A..." "B...": B - A word by word.
diff_words() { paste -d' ' <(tr ' ' '\n' <<<"$1") <(tr ' ' '\n' <<<"$2") | awk '{ printf "%s%d", (NR > 1 ? " " : ""), $2 - $1 } END { print "" }'; }

# rows_mark DB: watermarks and A's/B's claim counters, for the direct counts.
# "batch_max event_max a_claims a_retries a_retry_claims a_dead b_claims"
rows_mark() {
	q "$1" "SELECT (SELECT coalesce(max(id), 0) FROM outbox.batches) || ' ' ||
	               (SELECT coalesce(max(id), 0) FROM outbox.events) || ' ' ||
	               (SELECT coalesce(sum(claims), 0) FROM outbox.batches WHERE topic = 'a.down') || ' ' ||
	               (SELECT count(*) FROM outbox.retries WHERE topic = 'a.down') || ' ' ||
	               (SELECT coalesce(sum(claims), 0) FROM outbox.retries WHERE topic = 'a.down') || ' ' ||
	               (SELECT count(*) FROM outbox.dead WHERE topic = 'a.down') || ' ' ||
	               (SELECT coalesce(sum(claims), 0) FROM outbox.batches WHERE topic = 'b')"
}
# rows_since DB MARK: what was written since MARK, from the rows themselves.
# Sets A_CLAIMS (claims of a.down batches: new rows and takeovers/re-takes),
# A_NEW (a.down batch rows created), A_RETRIES, A_RETRY_CLAIMS, A_DEAD
# (changes), B_EVENTS (b messages inserted), B_NEW, B_CLAIMS.
rows_since() {
	local bmax emax ac ar arc ad bc r
	read -r bmax emax ac ar arc ad bc <<<"$2"
	r=$(q "$1" "SELECT (SELECT coalesce(sum(claims), 0) FROM outbox.batches WHERE topic = 'a.down') - $ac || ' ' ||
	                   (SELECT count(*) FROM outbox.batches WHERE topic = 'a.down' AND id > $bmax) || ' ' ||
	                   (SELECT count(*) FROM outbox.retries WHERE topic = 'a.down') - $ar || ' ' ||
	                   (SELECT coalesce(sum(claims), 0) FROM outbox.retries WHERE topic = 'a.down') - $arc || ' ' ||
	                   (SELECT count(*) FROM outbox.dead WHERE topic = 'a.down') - $ad || ' ' ||
	                   (SELECT count(*) FROM outbox.events WHERE topic = 'b' AND id > $emax) || ' ' ||
	                   (SELECT count(*) FROM outbox.batches WHERE topic = 'b' AND id > $bmax) || ' ' ||
	                   (SELECT coalesce(sum(claims), 0) FROM outbox.batches WHERE topic = 'b') - $bc")
	read -r A_CLAIMS A_NEW A_RETRIES A_RETRY_CLAIMS A_DEAD B_EVENTS B_NEW B_CLAIMS <<<"$r"
}

# ---- numbers ----------------------------------------------------------------------------
fmt_int() {
	awk -v x="$1" 'BEGIN { x = sprintf("%.0f", x); s = ""; neg = (x < 0); if (neg) x = -x;
		while (length(x) > 3) { s = "," substr(x, length(x) - 2) s; x = substr(x, 1, length(x) - 3) }
		print (neg ? "-" : "") x s }'
}
div() { awk -v a="$1" -v b="$2" -v f="${3:-%.2f}" 'BEGIN { if (b == 0) print "-"; else printf f "\n", a / b }'; }
secs_between() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# ---- one scenario ------------------------------------------------------------------------
CSV=$WORK/isolation.csv
echo "scenario,a_pending,open_wait_s,delivery_ms,delivery_poll_ms,lat_n,lat_rate,p50_ms,p99_ms,p999_ms,max_ms,window_s,writes_total,writes_events,writes_batches,writes_streams,writes_retries,writes_dead,writes_waiters,writes_other,b_cost,rest,a_claims,a_new_batches,a_est,a_probes,idle_s,idle_writes,idle_waiters,idle_not_waiters,idle_a_claims,idle_probes,trickle_p50_ms,trickle_p90_ms,trickle_max_ms,trickle_over_100ms" >"$CSV"
declare -A R=()
URL_B="ipc://$WORK/b.ipc"
URL_DOWN="ipc://$WORK/nobody.ipc"

run_scenario() {
	local sc=$1 db="iso$1" pending=0 rlog clog tag t_open=0 open_wait=0 i
	case $sc in 1) pending=1 ;; 2) pending=$PENDING ;; esac
	case $sc in 0) tag="baseline (nothing on a.down)" ;; *) tag="$(fmt_int "$pending") pending on a.down" ;; esac
	rlog=$WORK/$db.relay.log; clog=$WORK/$db.consumer.log
	echo
	echo "iso: scenario $sc: $tag"
	qa "DROP DATABASE IF EXISTS $db WITH (FORCE)"
	qa "CREATE DATABASE $db"
	fg "$BIN/outboxctl" migrate --db "$(conninfo "$db")" --schema all >/dev/null
	if ((pending > 0)); then
		echo "iso:   enqueueing $(fmt_int "$pending") messages on a.down before the relay starts"
		enqueue "$db" a.down d- 1 "$pending"
	fi
	# Statistics fresh and the backlog written out, in every scenario alike.
	fg q "$db" "VACUUM (ANALYZE)" >/dev/null
	fg q "$db" "CHECKPOINT" >/dev/null

	rm -f "$WORK/b.ipc" "$WORK/nobody.ipc"
	"$BIN/outbox-consumer" --db "$(conninfo "$db")" --listen "$URL_B" --threads "$CONSUMER_THREADS" \
		--log-level warn >>"$clog" 2>&1 &
	CPID=$!; track "$CPID"
	for ((i = 0; i < START_TIMEOUT * 20; i++)); do
		[ -S "$WORK/b.ipc" ] && break
		kill -0 "$CPID" 2>/dev/null || iso_die "outbox-consumer exited at start: see $clog"
		nap 0.05
	done
	[ -S "$WORK/b.ipc" ] || iso_die "outbox-consumer did not listen on $WORK/b.ipc within ${START_TIMEOUT}s"
	: >"$rlog"
	local t_start=$EPOCHREALTIME
	# shellcheck disable=SC2086
	"$BIN/outbox-relay" --db "$(conninfo "$db")" --route "b=$URL_B" --route "a.down=$URL_DOWN" \
		--workers "$WORKERS" --batch "$BATCH" --max-inflight "$INFLIGHT" \
		--breaker-probe-interval "$PROBE_MS" --breaker-threshold "$THRESHOLD" \
		--delivery-timeout-ms "$TIMEOUT_MS" --log-level info ${ISO_RELAY_ARGS:-} >>"$rlog" 2>&1 &
	RPID=$!; track "$RPID"
	wait_workers "$rlog" 'relay\.db\.connected' "$START_TIMEOUT" "the relay's workers to connect"
	if ((pending > 0)); then
		echo "iso:   waiting for every worker's breaker to open for $URL_DOWN (threshold $THRESHOLD, delivery timeout ${TIMEOUT_MS} ms)"
		wait_workers "$rlog" "relay\\.breaker\\.open dest=$URL_DOWN " "$OPEN_TIMEOUT" "relay.breaker.open for $URL_DOWN"
		t_open=$EPOCHREALTIME
		open_wait=$(secs_between "$t_start" "$t_open")
		echo "iso:   every breaker open ${open_wait}s after the relay started; one delivery timeout + 1 s more (the frames sent before)"
		nap "$(awk -v t="$TIMEOUT_MS" 'BEGIN { printf "%.3f", t / 1000 + 1 }')"
	fi
	if grep -E "event=relay\.breaker\.(open|closed) dest=$URL_B " "$rlog" >/dev/null; then
		echo "iso:   NOTE: a breaker for b's destination changed state: $(grep -cE "event=relay\.breaker\.open dest=$URL_B " "$rlog") open lines" >&2
	fi

	# Warm-up: the whole path to b hot (connections, plans) in every scenario.
	enqueue "$db" b w- 1 "$WARMUP"
	wait_probe "$db" "$(effects_sql w-)" "$WARMUP" "$DRAIN_TIMEOUT" 0.05
	fg q "$db" "CHECKPOINT" >/dev/null

	# ---- window start
	settled_sample "$db"
	local st0=$STAT w0=$STAT_T note0=$STAT_NOTE mark0 log0
	mark0=$(rows_mark "$db")
	log0=$(stat -c %s "$rlog")

	# (a) delivery of BURST messages committed in one transaction
	local out xid t_ret
	cat >"$WORK/burst.sql" <<SQL
BEGIN;
SELECT count(outbox.enqueue('b', 'bd-' || g, $PAYLOAD)) FROM generate_series(1, $BURST) g;
SELECT txid_current() % 4294967296;
COMMIT;
SQL
	out=$(psql -d "$db" -AtqX -v ON_ERROR_STOP=1 -f "$WORK/burst.sql")
	t_ret=$EPOCHREALTIME
	xid=$(tail -1 <<<"$out")
	[[ $xid =~ ^[0-9]+$ ]] || iso_die "burst enqueue: $out"
	wait_probe "$db" "SELECT CASE WHEN EXISTS (SELECT 1 FROM inbox.notifications WHERE idempotency_key = 'bd-$BURST')
	                  THEN ($(effects_sql bd-)) ELSE 0 END" "$BURST" "$DRAIN_TIMEOUT" "$POLL_S"
	local t_seen=$WAIT_T1 deliv deliv_poll
	deliv=$(q "$db" "SELECT round((extract(epoch FROM max(pg_xact_commit_timestamp(n.xmin))
	                                  - pg_xact_commit_timestamp('$xid'::xid)) * 1000)::numeric, 1)
	                   FROM inbox.notifications n
	                  WHERE n.idempotency_key >= 'bd-' AND n.idempotency_key < 'bd-~'")
	deliv_poll=$(awk -v a="$t_ret" -v b="$t_seen" 'BEGIN { printf "%.0f", (b - a) * 1000 }')
	echo "iso:   (a) $(fmt_int "$BURST") messages in one transaction: delivered ${deliv} ms after its COMMIT (poller saw it ${deliv_poll} ms after COMMIT returned)"

	# (b) latency at RATE/s offered
	cat >"$WORK/enqueue1.sql" <<'SQL'
SELECT outbox.enqueue('b', 'l-' || txid_current(),
    jsonb_build_object('title', 'latency probe', 'module', 'editor', 'severity', 'high',
        'steps', repeat('s', 120)));
SQL
	fg "$PGBENCH" -n -c "$CLIENTS" -j "$(((CLIENTS + 1) / 2))" -R "$RATE" -T "$LAT_SECONDS" -f "$WORK/enqueue1.sql" "$db" \
		>"$WORK/$db.pgbench.txt" 2>&1 || iso_die "pgbench failed: see $WORK/$db.pgbench.txt"
	local lat_n
	lat_n=$(q "$db" "SELECT count(*) FROM outbox.events WHERE topic = 'b' AND idempotency_key >= 'l-' AND idempotency_key < 'l-~'")
	((lat_n > 0)) || iso_die "pgbench enqueued nothing: see $WORK/$db.pgbench.txt"
	wait_probe "$db" "$(effects_sql l-)" "$lat_n" "$DRAIN_TIMEOUT" 0.1
	local lat p50 p99 p999 pmax lat_rate
	lat=$(q "$db" "SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 2) || ' ' ||
	                      round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 2) || ' ' ||
	                      round(percentile_cont(0.999) WITHIN GROUP (ORDER BY ms)::numeric, 2) || ' ' ||
	                      round(max(ms)::numeric, 2)
	         FROM (SELECT extract(epoch FROM pg_xact_commit_timestamp(n.xmin)
	                                       - pg_xact_commit_timestamp(m.producer_xid)) * 1000 AS ms
	                 FROM (SELECT idempotency_key,
	                              (substr(idempotency_key, 3)::bigint % 4294967296)::text::xid AS producer_xid
	                         FROM outbox.events
	                        WHERE topic = 'b' AND idempotency_key >= 'l-' AND idempotency_key < 'l-~') m
	                 JOIN inbox.notifications n ON n.idempotency_key = m.idempotency_key) s")
	read -r p50 p99 p999 pmax <<<"$lat"
	# Every message's latency, for a look at when the slow ones came.
	q "$db" "COPY (SELECT to_char(pc AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') AS producer_commit,
	                    round((extract(epoch FROM cc - pc) * 1000)::numeric, 3) AS ms, idempotency_key
	               FROM (SELECT m.idempotency_key, pg_xact_commit_timestamp(m.producer_xid) AS pc,
	                            pg_xact_commit_timestamp(n.xmin) AS cc
	                       FROM (SELECT idempotency_key,
	                                    (substr(idempotency_key, 3)::bigint % 4294967296)::text::xid AS producer_xid
	                               FROM outbox.events
	                              WHERE topic = 'b' AND idempotency_key >= 'l-' AND idempotency_key < 'l-~') m
	                       JOIN inbox.notifications n ON n.idempotency_key = m.idempotency_key) x
	              ORDER BY pc) TO STDOUT WITH (FORMAT csv, HEADER)" >"$WORK/$db.latency.csv"
	lat_rate=$(div "$lat_n" "$LAT_SECONDS" "%.0f")
	echo "iso:   (b) latency producer-commit -> consumer-commit over $(fmt_int "$lat_n") messages (${lat_rate}/s):" \
		"p50 ${p50} ms, p99 ${p99} ms, p99.9 ${p999} ms, max ${pmax} ms"
	local pgb_lat pgb_lag
	pgb_lat=$(awk '/^latency average/ { print $4; exit }' "$WORK/$db.pgbench.txt")
	pgb_lag=$(awk '/^rate limit schedule lag/ { print $6; exit }' "$WORK/$db.pgbench.txt")
	echo "iso:       pgbench: enqueue transaction ${pgb_lat:-?} ms average (its own COMMIT), schedule lag ${pgb_lag:-?} ms average"
	if awk -v n="$lat_n" -v r="$RATE" -v s="$LAT_SECONDS" 'BEGIN { exit !(n < 0.9 * r * s) }'; then
		echo "iso:       NOTE: the producers reached ${lat_rate}/s of ${RATE}/s offered (ISO_PGBENCH_CLIENTS=$CLIENTS): the latencies are at that rate" >&2
	fi

	# (e) a trickle: TRICKLE single-message transactions TRICKLE_GAP_MS
	# apart, each into a relay that has gone quiet (the case the wakeup
	# notification is for; at 1,000/s the workers seldom wait).
	local t50=- t90=- tmax=- tslow=0
	if ((TRICKLE > 0)); then
		local i
		for ((i = 1; i <= TRICKLE; i++)); do
			echo "SELECT outbox.enqueue('b', 't-' || txid_current(), jsonb_build_object('title', 'trickle', 'steps', repeat('s', 160)));"
			echo "SELECT pg_sleep($(awk -v m="$TRICKLE_GAP_MS" 'BEGIN { printf "%.3f", m / 1000 }'));"
		done >"$WORK/trickle.sql"
		fg psql -d "$db" -qX -v ON_ERROR_STOP=1 -f "$WORK/trickle.sql" >/dev/null
		wait_probe "$db" "$(effects_sql t-)" "$TRICKLE" "$DRAIN_TIMEOUT" 0.05
		lat=$(q "$db" "SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 1) || ' ' ||
		                      round(percentile_cont(0.9) WITHIN GROUP (ORDER BY ms)::numeric, 1) || ' ' ||
		                      round(max(ms)::numeric, 1) || ' ' || count(*) FILTER (WHERE ms > 100)
		         FROM (SELECT extract(epoch FROM pg_xact_commit_timestamp(n.xmin)
		                                       - pg_xact_commit_timestamp((substr(m.idempotency_key, 3)::bigint
		                                                                   % 4294967296)::text::xid)) * 1000 AS ms
		                 FROM outbox.events m JOIN inbox.notifications n ON n.idempotency_key = m.idempotency_key
		                WHERE m.topic = 'b' AND m.idempotency_key >= 't-' AND m.idempotency_key < 't-~') s")
		read -r t50 t90 tmax tslow <<<"$lat"
		echo "iso:   (e) trickle: $TRICKLE single-message transactions ${TRICKLE_GAP_MS} ms apart: latency p50 ${t50} ms, p90 ${t90} ms, max ${tmax} ms; $tslow over 100 ms"
	fi

	# ---- window end: (c)
	settled_sample "$db"
	local st1=$STAT w1=$STAT_T note1=$STAT_NOTE d total win_s log1 probes
	log1=$(stat -c %s "$rlog")
	rows_since "$db" "$mark0"
	local A_CLAIMS_W=$A_CLAIMS A_NEW_W=$A_NEW
	d=$(diff_words "$st0" "$st1")
	total=$(sum_words "$d")
	win_s=$(secs_between "$w0" "$w1")
	probes=$(count_in_log_between "$rlog" "$log0" "$log1" "event=relay\.breaker\.probe dest=$URL_DOWN\$")
	local de db_ ds dr dd dw do_ b_cost rest a_est
	read -r de db_ ds dr dd dw do_ <<<"$d"
	# B's traffic: its events; its batches, two writes per claim (the claim:
	# the INSERT or a re-take's UPDATE; the outcome's UPDATE); the streams'
	# cuts but A's (one per new a.down batch); the wakeup announcements (a
	# worker that runs out of b's work announces itself before it waits,
	# and the next enqueue clears it). The rest is everything else.
	b_cost=$((B_EVENTS + 2 * B_CLAIMS + ds - A_NEW + dw))
	rest=$((total - b_cost))
	# A from its own rows: two writes per claim, one stream cut per new
	# batch, retry and dead-letter rows made.
	a_est=$((2 * A_CLAIMS + A_NEW + A_RETRIES + 2 * A_RETRY_CLAIMS + A_DEAD))
	echo "iso:   (c) outbox row writes over (a)+(b)+(e), ${win_s} s (start $note0, end $note1):"
	echo "iso:       total $(fmt_int "$total") = events $(fmt_int "$de") + batches $(fmt_int "$db_") + streams $(fmt_int "$ds") + retries $dr + dead $dd + waiters $dw + other $do_"
	echo "iso:       B's traffic $(fmt_int "$b_cost") ($(fmt_int "$B_EVENTS") messages, $(fmt_int "$B_CLAIMS") batch claims, $(fmt_int "$B_NEW") new batches), the rest $(fmt_int "$rest")"
	echo "iso:       A's own rows: $A_CLAIMS claims of a.down batches ($A_NEW new batch rows), retries $A_RETRIES (claims $A_RETRY_CLAIMS), dead $A_DEAD -> ~$a_est writes = $(div "$a_est" "$win_s")/s; probes logged $probes"

	# ---- (d) idle: no traffic on b; every write is A's
	local idle_s=0 idle_total=0 idle_a=0 idle_w=0 idle_claims=0 idle_probes=0 idle_d="0 0 0 0 0 0 0"
	if ((IDLE_SECONDS > 0)); then
		local mark1 log2
		mark1=$(rows_mark "$db")
		log2=$(stat -c %s "$rlog")
		nap "$IDLE_SECONDS"
		settled_sample "$db"
		idle_d=$(diff_words "$st1" "$STAT")
		idle_total=$(sum_words "$idle_d")
		idle_s=$(secs_between "$w1" "$STAT_T")
		rows_since "$db" "$mark1"
		idle_claims=$A_CLAIMS
		idle_probes=$(count_in_log_since "$rlog" "$log2" "event=relay\.breaker\.probe dest=$URL_DOWN\$")
		read -r de db_ ds dr dd dw do_ <<<"$idle_d"
		idle_w=$dw
		idle_a=$((idle_total - dw))
		echo "iso:   (d) idle ${idle_s} s, nothing on b ($STAT_NOTE): $idle_total outbox row writes:" \
			"$idle_w wakeup announcements (outbox.relay_waiters, $(div "$idle_w" "$idle_s")/s: the idle relay's, in every scenario)" \
			"+ $idle_a others = $(div "$idle_a" "$idle_s")/s (batches $db_, streams $ds, retries $dr, dead $dd, events $de, other $do_);" \
			"a.down claims $idle_claims, probes logged $idle_probes"
	fi

	# ---- counts: every b message applied exactly once; a.down untouched
	local c n_b eff keys dedup b_st a_st a_eff
	c=$(q "$db" "SELECT (SELECT count(*) FROM outbox.events WHERE topic = 'b') || ' ' ||
	                    (SELECT count(*) FROM inbox.notifications WHERE topic = 'b') || ' ' ||
	                    (SELECT count(DISTINCT idempotency_key) FROM inbox.notifications WHERE topic = 'b') || ' ' ||
	                    (SELECT count(*) FROM inbox.processed p
	                      WHERE p.topic = 'b' AND EXISTS (SELECT 1 FROM outbox.events e
	                                                       WHERE e.topic = 'b' AND e.idempotency_key = p.idempotency_key)) || ' ' ||
	                    (SELECT count(*) FROM inbox.notifications WHERE topic = 'a.down')")
	read -r n_b eff keys dedup a_eff <<<"$c"
	b_st=$(q "$db" "SELECT pending || ' ' || dead || ' ' || delivered FROM outbox.topic_stats('b')")
	a_st=$(q "$db" "SELECT coalesce((SELECT pending || ' ' || dead FROM outbox.topic_stats('a.down')), '0 0')")
	local want_b=$((WARMUP + BURST + lat_n + TRICKLE)) bp bd bdel ap ad
	read -r bp bd bdel <<<"$b_st"
	read -r ap ad <<<"$a_st"
	echo "iso:   counts: b $n_b messages, $eff effect rows, $keys distinct keys, $dedup dedup records, pending $bp, dead $bd, delivered $bdel;" \
		"a.down pending $ap, dead $ad, applied $a_eff"
	[ "$n_b" = "$want_b" ] || iso_die "scenario $sc: $n_b b messages in outbox.events, enqueued $want_b"
	if [ "$eff" != "$n_b" ] || [ "$keys" != "$n_b" ] || [ "$dedup" != "$n_b" ]; then
		iso_die "scenario $sc: $eff effect rows, $keys distinct keys, $dedup dedup records for $n_b b messages"
	fi
	if [ "$bp" != 0 ] || [ "$bd" != 0 ]; then iso_die "scenario $sc: b has $bp pending and $bd dead after the drain"; fi
	[ "$bdel" = "$n_b" ] || iso_die "scenario $sc: topic_stats says $bdel of b's $n_b messages delivered"
	if [ "$ap" != "$pending" ] || [ "$ad" != 0 ] || [ "$a_eff" != 0 ]; then
		iso_die "scenario $sc: a.down has $ap pending (enqueued $pending), $ad dead, $a_eff applied"
	fi

	stop_tracked "$RPID" 30
	stop_tracked "$CPID"
	local totals
	totals=$(grep -E 'event=relay\.totals ' "$rlog" | tail -1 | sed 's/.*event=relay\.totals //')
	echo "iso:   relay.totals $totals"
	qa "DROP DATABASE IF EXISTS $db WITH (FORCE)"

	read -r de db_ ds dr dd dw do_ <<<"$d"
	echo "$sc,$pending,$open_wait,$deliv,$deliv_poll,$lat_n,$lat_rate,$p50,$p99,$p999,$pmax,$win_s,$total,$de,$db_,$ds,$dr,$dd,$dw,$do_,$b_cost,$rest,$A_CLAIMS_W,$A_NEW_W,$a_est,$probes,$idle_s,$idle_total,$idle_w,$idle_a,$idle_claims,$idle_probes,$t50,$t90,$tmax,$tslow" >>"$CSV"
	R[$sc.tag]=$tag R[$sc.deliv]=$deliv R[$sc.p50]=$p50 R[$sc.p99]=$p99 R[$sc.rate]=$lat_rate
	R[$sc.win_s]=$win_s R[$sc.total]=$total R[$sc.rest]=$rest R[$sc.a_est]=$a_est
	R[$sc.a_claims]=$A_CLAIMS_W R[$sc.probes]=$probes R[$sc.idle_s]=$idle_s R[$sc.idle]=$idle_a
	R[$sc.idle_w]=$idle_w R[$sc.t50]=$t50 R[$sc.tmax]=$tmax
	R[$sc.open]=$open_wait
}

echo "iso: relay --workers $WORKERS --batch $BATCH --max-inflight $INFLIGHT --breaker-probe-interval ${PROBE_MS}ms" \
	"--breaker-threshold $THRESHOLD --delivery-timeout-ms $TIMEOUT_MS; consumer --threads $CONSUMER_THREADS"
echo "iso: per scenario: warm-up $WARMUP, burst $(fmt_int "$BURST") in one transaction, ${RATE}/s for ${LAT_SECONDS}s, idle ${IDLE_SECONDS}s; scenarios ${SCEN[*]}"
for sc in "${SCEN[@]}"; do run_scenario "$sc"; done

# ---- summary ---------------------------------------------------------------------------------
has() { [[ " ${SCEN[*]} " == *" $1 "* ]]; }
ratio() { if has 0 && [ "$1" != 0 ]; then div "$2" "${R[0.$3]}"; else echo "-"; fi; }
verdict() { awk -v r="$1" 'BEGIN { if (r == "-") print "-"; else print (r <= 1.5) ? "met" : "MISSED" }'; }
expected=$(awk -v w="$WORKERS" -v p="$PROBE_MS" -v t="$TIMEOUT_MS" 'BEGIN { printf "%.2f", w * 2 / ((p + t) / 1000) }')
echo
echo "summary: outage isolation, relay --workers $WORKERS --batch $BATCH --max-inflight $INFLIGHT," \
	"probe interval ${PROBE_MS} ms, threshold $THRESHOLD, delivery timeout ${TIMEOUT_MS} ms;" \
	"burst $(fmt_int "$BURST"), ${RATE}/s for ${LAT_SECONDS}s; every b message checked applied exactly once"
printf '  %-30s %9s %5s %7s %7s %5s %15s   %s\n' scenario "deliv ms" "x(0)" "p50 ms" "p99 ms" "x(0)" \
	"trickle p50/max" "A's row writes/s: window rest / A's rows / idle"
for sc in "${SCEN[@]}"; do
	rd=$(ratio "$sc" "${R[$sc.deliv]}" deliv)
	rp=$(ratio "$sc" "${R[$sc.p99]}" p99)
	printf '  %-30s %9s %5s %7s %7s %5s %15s   %s / %s / %s\n' "$sc ${R[$sc.tag]}" "${R[$sc.deliv]}" "$rd" \
		"${R[$sc.p50]}" "${R[$sc.p99]}" "$rp" "${R[$sc.t50]}/${R[$sc.tmax]}" \
		"$(div "${R[$sc.rest]}" "${R[$sc.win_s]}")" \
		"$(div "${R[$sc.a_est]}" "${R[$sc.win_s]}")" "$(div "${R[$sc.idle]}" "${R[$sc.idle_s]}")"
done
for sc in 1 2; do
	has "$sc" || continue
	if has 0; then
		rd=$(ratio "$sc" "${R[$sc.deliv]}" deliv)
		rp=$(ratio "$sc" "${R[$sc.p99]}" p99)
		echo "target ($sc)/(0) <= 1.5x: delivery ${rd}x $(verdict "$rd"), p99 ${rp}x $(verdict "$rp");" \
			"A down: ${R[$sc.a_claims]} claims of a.down batches and ${R[$sc.probes]} probes in ${R[$sc.win_s]} s," \
			"$(fmt_int "${R[$sc.idle]}") row writes in ${R[$sc.idle_s]} s idle, wakeup announcements apart (breakers open after ${R[$sc.open]} s)"
	fi
done
echo "wakeup announcements (outbox.relay_waiters) while idle:$(for sc in "${SCEN[@]}"; do printf ' (%s) %s/s' "$sc" "$(div "${R[$sc.idle_w]}" "${R[$sc.idle_s]}")"; done): the idle relay's own, with or without A"
echo "A's writes near zero: the probe rule predicts ~${expected}/s (two writes per probe, one probe per worker per" \
	"probe interval + delivery timeout, the time a probe to a dead ipc:// socket waits)"
echo "(idle: pg_stat_user_tables with no traffic on b, wakeup announcements apart; trickle: ${TRICKLE} single messages ${TRICKLE_GAP_MS} ms apart, ms)"
echo "iso: per-scenario numbers: $CSV; every message's latency: $WORK/iso*.latency.csv"
