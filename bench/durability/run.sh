#!/usr/bin/env bash
# bench/durability/run.sh - what issue 30's durability fixes cost, as
# ratios to the build before them, measured side by side on one private
# PostgreSQL with fsync ON (scripts/pg-tmp.sh, OUTBOX_PG_FSYNC=on).
#
#   bench/durability/run.sh [ROUNDS]      (default 3)
#
# Two builds, both made here with CMAKE_BUILD_TYPE=Release (BENCH_BUILD_TYPE)
# so that they differ only in their code: "new" from this checkout (or
# taken from OUTBOX_BIN_DIR) and "base" from BENCH_BASE_REF (default
# 11e0a6d, the last commit before the fixes; or taken from BENCH_BASE_BIN). Each round runs both builds, base first in odd rounds and
# new first in even ones, each on a fresh database of the same server:
#
#   steady   producers commit with synchronous_commit = off (PGOPTIONS, as
#            a role or database default would), a fixed offered rate
#            (pgbench --rate, BENCH_RATE, default 1000/s) for
#            BENCH_SECONDS (10) of single-message enqueue transactions;
#            latency producer-commit -> consumer-commit (commit timestamps,
#            as bench/relay/run.sh), and WAL flushes (pg_stat_wal.wal_sync)
#            per delivered message. The fix: a claim that returns messages
#            commits synchronously (relay/claim.c).
#   drain    BENCH_N (20000) messages enqueued first, then relay and
#            consumer started: msgs/s. Same fix, at full speed.
#   inbox-off the same drain with the consumer's sessions defaulting to
#            synchronous_commit = off (PGOPTIONS: a server, database or role
#            default): the fix raises it to on (consumer/inbox.c), the base
#            commits every batch without waiting for the disk, and may lose
#            an answered batch in a crash (test_crash).
#
# The webhook's durable claim (one WAL flush before each at-most-once or
# at-least-once call) is not measured here: it adds one flush per webhook
# message, next to an HTTP round trip.
#
# Knobs (env): BENCH_N BENCH_RATE BENCH_SECONDS BENCH_WORKERS (1, the
# default relay) BENCH_BATCH (100) BENCH_BASE_REF BENCH_BASE_BIN
# OUTBOX_BIN_DIR BENCH_BUILD_TYPE BENCH_KEEP=1 keeps the work dir.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-3}
case "$ROUNDS" in ''|*[!0-9]*|0) echo "bench: ROUNDS must be a positive integer" >&2; exit 2 ;; esac
N=${BENCH_N:-20000}
RATE=${BENCH_RATE:-1000}
SECONDS_LAT=${BENCH_SECONDS:-10}
WORKERS=${BENCH_WORKERS:-1}
BATCH=${BENCH_BATCH:-100}
BASE_REF=${BENCH_BASE_REF:-11e0a6d}
BUILD_TYPE=${BENCH_BUILD_TYPE:-Release}
pgbin=$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)
pgbench=$pgbin/pgbench; [ -x "$pgbench" ] || pgbench=$(command -v pgbench)

. bench/relay/lib.sh
bench_workdir outbox-durability
repo=$(pwd)

# ---- the two builds --------------------------------------------------------
build() { # SRC DIR -> bin dir
	cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" >"$2.cmake.log" 2>&1 ||
		{ echo "bench: cmake failed: $2.cmake.log" >&2; return 1; }
	cmake --build "$2" -j"$(nproc)" --target outbox-relay outbox-consumer outboxctl \
		>"$2.build.log" 2>&1 || { echo "bench: build failed: $2.build.log" >&2; return 1; }
	echo "$2/bin"
}
if [ -n "${BENCH_BASE_BIN:-}" ]; then
	base_bin=$BENCH_BASE_BIN
else
	echo "bench: building the base ($BASE_REF, $BUILD_TYPE)"
	git worktree add -q --detach "$work/base-src" "$BASE_REF"
	trap 'git -C "$repo" worktree remove --force "$work/base-src" 2>/dev/null || true; bench_cleanup' EXIT
	base_bin=$(build "$work/base-src" "$work/base")
fi
if [ -n "${OUTBOX_BIN_DIR:-}" ]; then
	new_bin=$OUTBOX_BIN_DIR
else
	echo "bench: building this checkout ($BUILD_TYPE)"
	new_bin=$(build "$repo" "$work/new")
fi
for b in "$base_bin" "$new_bin"; do
	for p in outbox-relay outbox-consumer outboxctl; do
		[ -x "$b/$p" ] || { echo "bench: $b/$p missing" >&2; exit 2; }
	done
done

echo "bench: PostgreSQL with fsync=on, synchronous_commit=on in $work/pg"
OUTBOX_PG_FSYNC=on scripts/pg-tmp.sh start "$work/pg" >/dev/null
echo "track_commit_timestamp = on" >>"$work/pg/data/postgresql.conf"
scripts/pg-tmp.sh restart "$work/pg"
set -a; . "$work/pg/env"; set +a

# One database per build and round: migrated by that build.
fresh_db() { # NAME BIN
	psql -qXc "CREATE DATABASE $1"
	"$2/outboxctl" migrate --db "$OUTBOX_PG_CONNINFO dbname=$1" --schema all >/dev/null
}
q() { psql -d "$1" -AtqXc "$2"; }
wait_drained() { # DB
	for _ in $(seq 1200); do
		[ "$(q "$1" "SELECT outbox.backlog_empty()")" = t ] && return 0
		sleep 0.05
	done
	echo "bench: $1 not drained in 60 s" >&2; exit 1
}
# Start consumer and relay of BIN on DB; extra PGOPTIONS for the consumer.
start_pair() { # BIN DB CONSUMER_PGOPTIONS
	local url="ipc://$work/$2.ipc"
	PGOPTIONS="$3" "$1/outbox-consumer" --db "$OUTBOX_PG_CONNINFO dbname=$2" --listen "$url" \
		--log-level warn 2>"$work/$2.consumer.log" &
	cpid=$!; pids+=("$cpid")
	for _ in $(seq 200); do [ -S "$work/$2.ipc" ] && break; sleep 0.05; done
	"$1/outbox-relay" --db "$OUTBOX_PG_CONNINFO dbname=$2" --route "*=$url" --workers "$WORKERS" \
		--batch "$BATCH" --log-level warn 2>"$work/$2.relay.log" &
	rpid=$!; pids+=("$rpid")
}
stop_pair() { kill "$rpid" "$cpid" 2>/dev/null || true; wait "$rpid" "$cpid" 2>/dev/null || true; }
enqueue_n() { # DB N
	q "$1" "SELECT count(outbox.enqueue('report.created', 'b-' || g,
	    jsonb_build_object('title', 'benchmark report ' || g, 'steps', repeat('s', 120))))
	   FROM generate_series(1, $2) g" >/dev/null
	psql -d "$1" -qXc "VACUUM ANALYZE outbox.events"
}
drain_rate() { # BIN DB CONSUMER_PGOPTIONS -> msgs/s
	enqueue_n "$2" "$N"
	local t0 t1
	t0=$(date +%s.%N)
	start_pair "$1" "$2" "$3"
	wait_drained "$2"
	t1=$(date +%s.%N)
	stop_pair
	local got
	got=$(q "$2" "SELECT count(*) FROM inbox.notifications WHERE idempotency_key LIKE 'b-%'")
	[ "$got" -eq "$N" ] || { echo "bench: $got effects for $N messages in $2" >&2; exit 1; }
	awk -v n="$N" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", n / (b - a)}'
}
steady() { # BIN DB -> "p50 p99 flushes_per_msg"
	start_pair "$1" "$2" ""
	sleep 1
	cat >"$work/enqueue1.sql" <<'SQL'
SELECT outbox.enqueue('report.created', 'l-' || txid_current(),
    jsonb_build_object('title', 'latency probe', 'steps', repeat('s', 120)));
SQL
	q "$2" "SELECT pg_stat_reset_shared('wal')" >/dev/null
	PGOPTIONS="-c synchronous_commit=off" "$pgbench" -n -c 4 -j 2 -R "$RATE" -T "$SECONDS_LAT" \
		-f "$work/enqueue1.sql" "$2" >"$work/$2.pgbench.txt" 2>&1
	wait_drained "$2"
	local syncs n
	syncs=$(q "$2" "SELECT wal_sync FROM pg_stat_wal")
	stop_pair
	n=$(q "$2" "SELECT count(*) FROM inbox.notifications WHERE idempotency_key LIKE 'l-%'")
	q "$2" "SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 2) || ' ' ||
	               round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 2) || ' ' ||
	               round($syncs::numeric / greatest($n, 1), 2)
	        FROM (SELECT extract(epoch FROM pg_xact_commit_timestamp(n.xmin)
	                     - pg_xact_commit_timestamp((substr(n.idempotency_key, 3)::bigint
	                                                 % 4294967296)::text::xid)) * 1000 AS ms
	                FROM inbox.notifications n WHERE n.idempotency_key LIKE 'l-%') s"
}

# ---- rounds ----------------------------------------------------------------
declare -A res
for (( r = 1; r <= ROUNDS; r++ )); do
	order=(base new); (( r % 2 == 0 )) && order=(new base)
	for b in "${order[@]}"; do
		bin=$base_bin; [ "$b" = new ] && bin=$new_bin
		echo "bench: round $r, $b"
		fresh_db "s_${b}_$r" "$bin"
		res[steady,$b,$r]=$(steady "$bin" "s_${b}_$r")
		fresh_db "d_${b}_$r" "$bin"
		res[drain,$b,$r]=$(drain_rate "$bin" "d_${b}_$r" "")
		fresh_db "i_${b}_$r" "$bin"
		res[inbox,$b,$r]=$(drain_rate "$bin" "i_${b}_$r" "-c synchronous_commit=off")
		echo "bench:   steady p50/p99 ms, flushes/msg: ${res[steady,$b,$r]};" \
			"drain ${res[drain,$b,$r]} msgs/s; inbox-off drain ${res[inbox,$b,$r]} msgs/s"
	done
done

# ---- summary: medians, ratio new/base --------------------------------------
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
col() { # KIND BUILD FIELD
	for (( r = 1; r <= ROUNDS; r++ )); do echo "${res[$1,$2,$r]}" | awk -v f="$3" '{print $f}'; done | median
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", (b > 0) ? a / b : 0}'; }
echo
echo "summary (medians of $ROUNDS rounds; base $BASE_REF; rate ${RATE}/s for ${SECONDS_LAT}s; drain N=$N; workers $WORKERS, batch $BATCH)"
printf '  %-34s %10s %10s %12s\n' "" base new "new/base"
for row in "steady p50 ms:steady:1" "steady p99 ms:steady:2" "steady WAL flushes per message:steady:3" \
	"drain msgs/s:drain:1" "inbox-off drain msgs/s:inbox:1"; do
	IFS=: read -r label kind field <<<"$row"
	b=$(col "$kind" base "$field"); n=$(col "$kind" new "$field")
	printf '  %-34s %10s %10s %12s\n' "$label" "$b" "$n" "$(ratio "$n" "$b")"
done
