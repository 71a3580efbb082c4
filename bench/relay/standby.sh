#!/usr/bin/env bash
# standby.sh - what --standby-gate costs: bench/relay/run.sh with no gate,
# --standby-gate flush and --standby-gate replay (a streaming standby on
# the same machine), ROUNDS interleaved rounds each, one table of drain
# rate and producer-commit -> consumer-commit latency at BENCH_RATE (1000/s)
# with medians and the ratios to no gate measured in the same run.
#
#   bench/relay/standby.sh [N] [ROUNDS]    (default 20000 messages, 3 rounds)
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${1:-20000}
ROUNDS=${2:-3}
case "$N$ROUNDS" in *[!0-9]*|'') echo "standby: N and ROUNDS must be positive integers" >&2; exit 2 ;; esac
out=$(mktemp -d /tmp/outbox-standby-bench.XXXXXX)
trap 'rm -rf "$out"' EXIT
echo "standby: load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$ROUNDS"); do
	for g in none flush replay; do
		echo "standby: round $r, gate $g"
		BENCH_STANDBY_GATE=$g BENCH_PGBENCH_SECONDS=${BENCH_PGBENCH_SECONDS:-3} \
			bench/relay/run.sh "$N" >"$out/$g.$r.txt" 2>&1 ||
			{ echo "standby: run failed:" >&2; tail -20 "$out/$g.$r.txt" >&2; exit 1; }
	done
done
echo "standby: load after: $(cut -d' ' -f1-3 /proc/loadavg)"
# one line per run: gate drain_rate p50 p99 p99.9
for f in "$out"/*.txt; do
	g=$(basename "$f" | cut -d. -f1)
	rate=$(sed -nE 's/^bench: drained [0-9]+ in [0-9.]+s = ([0-9]+) msgs\/s.*/\1/p' "$f")
	read -r p50 p99 p999 < <(sed -nE 's/^bench: latency producer-commit -> consumer-commit .*: p50 ([0-9.]+) ms, p99 ([0-9.]+) ms, p99.9 ([0-9.]+) ms.*/\1 \2 \3/p' "$f")
	echo "$g $rate $p50 $p99 $p999"
done >"$out/all"
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
printf '\n%-8s %12s %10s %10s %10s   (medians of %s rounds, N=%s, latency at %s/s offered)\n' \
	gate "drain msg/s" "p50 ms" "p99 ms" "p99.9 ms" "$ROUNDS" "$N" "${BENCH_RATE:-1000}"
for g in none flush replay; do
	m() { awk -v g="$g" -v c="$1" '$1 == g {print $c}' "$out/all" | median; }
	printf '%-8s %12s %10s %10s %10s\n' "$g" "$(m 2)" "$(m 3)" "$(m 4)" "$(m 5)"
	eval "r_$g=$(m 2) p99_$g=$(m 4) p50_$g=$(m 3)"
done
awk -v a="$r_flush" -v b="$r_replay" -v n="$r_none" -v f99="$p99_flush" -v r99="$p99_replay" \
	-v n99="$p99_none" -v f50="$p50_flush" -v r50="$p50_replay" -v n50="$p50_none" 'BEGIN {
	printf "\nratios to no gate: drain flush %.2f, replay %.2f; p50 +%.2f / +%.2f ms, p99 +%.2f / +%.2f ms\n",
		a / n, b / n, f50 - n50, r50 - n50, f99 - n99, r99 - n99 }'
echo "per run:"; sort "$out/all"
