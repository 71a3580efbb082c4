#!/usr/bin/env bash
# workers.sh - how many relay workers one PostgreSQL sustains (issue 18,
# part 1): for each count in BENCH_COUNTS (default 1 2 4 8), a fresh
# database with BENCH_BACKLOG (default 50000) messages enqueued before the
# relay starts, drained to a consumer over ipc; drain time -> msgs/s, and
# where the CPU went: the relay tree, the consumer, PostgreSQL's backends
# (from /proc/<pid>/stat), the machine's idle share (/proc/stat), and the
# top statements of pg_stat_statements by total time.
#
#   bench/relay/workers.sh                  # one relay process, --workers N
#   BENCH_SHAPE=procs bench/relay/workers.sh  # N relay processes, 1 worker each
#   BENCH_SHAPE="workers procs" ...         # both
#
# PostgreSQL: fsync=on, synchronous_commit=on (OUTBOX_PG_FSYNC=on), with
# pg_stat_statements preloaded. Prints one table row per run, markdown, and
# /proc/loadavg before and after (the machine is shared: say how loaded it
# was). Results and advice: bench/relay/README.md, docs/operations.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
COUNTS=${BENCH_COUNTS:-"1 2 4 8"}
SHAPES=${BENCH_SHAPE:-workers}
BACKLOG=${BENCH_BACKLOG:-50000}
BATCH=${BENCH_BATCH:-100}
INFLIGHT=${BENCH_INFLIGHT:-4}
CTHREADS=${BENCH_CONSUMER_THREADS:-4}
MAX_COUNT=64                 # relay's RELAY_MAX_WORKERS bounds --workers
for v in BACKLOG BATCH INFLIGHT CTHREADS; do
	case ${!v} in '' | *[!0-9]* | 0) echo "bench: $v='${!v}' must be a positive integer" >&2; exit 2 ;; esac
done
for c in $COUNTS; do
	case $c in '' | *[!0-9]* | 0) echo "bench: BENCH_COUNTS: '$c' is not a positive integer" >&2; exit 2 ;; esac
	[ "$c" -le $MAX_COUNT ] || { echo "bench: BENCH_COUNTS: $c > $MAX_COUNT" >&2; exit 2; }
done
for s in $SHAPES; do
	case $s in workers | procs) ;; *) echo "bench: BENCH_SHAPE: '$s' is not workers or procs" >&2; exit 2 ;; esac
done
bin=${OUTBOX_BIN_DIR:-build/bin}
for p in outbox-relay outbox-consumer outboxctl; do
	[ -x "$bin/$p" ] || { echo "bench: $bin/$p missing (build first, or set OUTBOX_BIN_DIR)" >&2; exit 2; }
done

. bench/relay/lib.sh
bench_workdir outbox-bench-workers

echo "bench: loadavg before: $(cat /proc/loadavg); cores: $(nproc)"
OUTBOX_PG_FSYNC=on scripts/pg-tmp.sh start "$work/pg" >/dev/null
cat >>"$work/pg/data/postgresql.conf" <<CONF
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.track = all
CONF
scripts/pg-tmp.sh restart "$work/pg"
set -a; . "$work/pg/env"; set +a
postmaster=$(head -1 "$work/pg/data/postmaster.pid")
ticks=$(getconf CLK_TCK)

tree_ticks() { # utime+stime (+ reaped children) of PID and its children
	local t=0 p
	for p in "$1" $(pgrep -P "$1" || true); do
		[ -r "/proc/$p/stat" ] || continue
		t=$((t + $(sed 's/.*) //' "/proc/$p/stat" | awk '{print $12 + $13 + $14 + $15}')))
	done
	echo "$t"
}
idle_total() { awk '/^cpu / {print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat; }
secs() { awk -v t="$1" -v k="$ticks" 'BEGIN {printf "%.2f", t / k}'; }

printf '\n| shape | count | drain s | msgs/s | relay CPU s | postgres CPU s | consumer CPU s | cores busy | idle %% | top statement (share of DB time) |\n'
printf '|---|---|---|---|---|---|---|---|---|---|\n'
run() { # run SHAPE COUNT
	local shape=$1 n=$2 db name="b_${1}_$2"
	psql -qXc "DROP DATABASE IF EXISTS $name" -c "CREATE DATABASE $name" >/dev/null 2>&1
	db="$OUTBOX_PG_CONNINFO dbname=$name"
	"$bin/outboxctl" migrate --db "$db" --schema all >/dev/null
	psql -d "$name" -qXc "CREATE EXTENSION pg_stat_statements" >/dev/null
	local s e
	for ((s = 0; s < BACKLOG; s += 10000)); do
		e=$((s + 9999 < BACKLOG - 1 ? s + 9999 : BACKLOG - 1))
		psql -d "$name" -AtqXc "SELECT count(outbox.enqueue('report.created', 'b-' || g,
		    jsonb_build_object('title', 'benchmark report ' || g, 'steps', repeat('s', 120))))
		    FROM generate_series($s, $e) g" >/dev/null
	done
	psql -d "$name" -qXc "VACUUM ANALYZE outbox.events" -c "CHECKPOINT" -c "SELECT pg_stat_statements_reset()" >/dev/null
	rm -f "$work/consumer.ipc"
	"$bin/outbox-consumer" --db "$db" --listen "ipc://$work/consumer.ipc" --threads "$CTHREADS" \
		--log-level warn 2>"$work/consumer.log" &
	local cpid=$!
	pids+=("$cpid")
	for _ in $(seq 200); do [ -S "$work/consumer.ipc" ] && break; sleep 0.05; done
	local relays=() r k pg0 pg1 it0 it1 t0 t1
	pg0=$(tree_ticks "$postmaster")
	read -r it0 tt0 < <(idle_total)
	t0=$(date +%s.%N)
	if [ "$shape" = workers ]; then
		"$bin/outbox-relay" --db "$db" --route "*=ipc://$work/consumer.ipc" --workers "$n" \
			--batch "$BATCH" --max-inflight "$INFLIGHT" --poll-ms 100 --log-level warn \
			2>"$work/relay.log" &
		relays+=($!)
	else
		for ((k = 0; k < n; k++)); do
			"$bin/outbox-relay" --db "$db" --route "*=ipc://$work/consumer.ipc" --workers 1 \
				--batch "$BATCH" --max-inflight "$INFLIGHT" --poll-ms 100 --log-level warn \
				2>"$work/relay.$k.log" &
			relays+=($!)
		done
	fi
	pids+=("${relays[@]}")
	until [ "$(psql -d "$name" -AtqXc "SELECT outbox.backlog_empty()")" = t ]; do sleep 0.1; done
	t1=$(date +%s.%N)
	local rt=0 ct
	for r in "${relays[@]}"; do rt=$((rt + $(tree_ticks "$r"))); done
	ct=$(tree_ticks "$cpid")
	pg1=$(tree_ticks "$postmaster")
	read -r it1 tt1 < <(idle_total)
	local eff
	eff=$(psql -d "$name" -AtqXc "SELECT count(*) FROM inbox.notifications")
	[ "$eff" = "$BACKLOG" ] || { echo "bench: $eff effects for $BACKLOG messages" >&2; exit 1; }
	local top
	top=$(psql -d "$name" -AtqXc "SELECT left(regexp_replace(query, '\s+', ' ', 'g'), 48) || ' (' ||
	        round(100 * total_exec_time / sum(total_exec_time) OVER ())::text || '%)'
	      FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
	      ORDER BY total_exec_time DESC LIMIT 1")
	psql -d "$name" -AtqXc "SELECT round(total_exec_time)::text || ' ms ' || calls || ' calls: ' ||
	        left(regexp_replace(query, '\s+', ' ', 'g'), 100)
	      FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 5" >"$work/top.$shape.$n.txt"
	for r in "${relays[@]}" "$cpid"; do kill "$r" 2>/dev/null || true; done
	for r in "${relays[@]}" "$cpid"; do wait "$r" 2>/dev/null || true; done
	local el rate idle
	el=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')
	rate=$(awk -v n="$BACKLOG" -v e="$el" 'BEGIN {printf "%.0f", n / e}')
	idle=$(awk -v a="$it0" -v b="$it1" -v c="$tt0" -v d="$tt1" 'BEGIN {printf "%.0f", 100 * (b - a) / (d - c)}')
	local busy
	busy=$(awk -v t=$((rt + pg1 - pg0 + ct)) -v k="$ticks" -v e="$el" 'BEGIN {printf "%.2f", t / k / e}')
	printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$shape" "$n" "$el" "$rate" \
		"$(secs "$rt")" "$(secs $((pg1 - pg0)))" "$(secs "$ct")" "$busy" "$idle" "${top//|/\\|}"
	psql -qXc "DROP DATABASE $name" >/dev/null
}
for shape in $SHAPES; do
	for n in $COUNTS; do run "$shape" "$n"; done
done
echo
echo "bench: loadavg after: $(cat /proc/loadavg)"
echo "bench: top statements of each run:"
for f in "$work"/top.*.txt; do echo "--- ${f##*/top.}"; cat "$f"; done
