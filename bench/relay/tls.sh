#!/usr/bin/env bash
# bench/relay/tls.sh - what mutual TLS costs the relay -> consumer hop: the
# same drain over tcp:// and over tls+tcp:// in one run, on one private
# PostgreSQL 15 (fsync on, as bench/relay/run.sh), and their ratio.
#
#   bench/relay/tls.sh [N]     N pre-enqueued messages per transport (default 20000)
#
# Per transport: a fresh database, N messages (~200-byte payloads) enqueued
# before anything runs, a consumer on 127.0.0.1 port 0 (read back from its
# --ready-file), a relay routed to it; time from relay start until nothing
# is left to deliver (outbox.backlog_empty(), polled every 0.1 s) -> msgs/s,
# and the relay's and the consumer's CPU per message (utime+stime from
# /proc). The certificates (P-256, one CA) are made with the openssl CLI
# in the work dir. tcp runs first, then tls; BENCH_ROUNDS=2 repeats the
# pair (tcp, tls, tcp, tls) to see the noise.
#
# Knobs (env): BENCH_WORKERS (2) BENCH_BATCH (100) BENCH_INFLIGHT (4)
# BENCH_CONSUMER_THREADS (4) BENCH_ROUNDS (1) OUTBOX_BIN_DIR (build/bin)
# BENCH_KEEP=1 keeps the work dir.
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${1:-${BENCH_N:-20000}}
case "$N" in ''|*[!0-9]*) echo "bench: N must be a positive integer" >&2; exit 2 ;; esac
WORKERS=${BENCH_WORKERS:-2}
BATCH=${BENCH_BATCH:-100}
INFLIGHT=${BENCH_INFLIGHT:-4}
CTHREADS=${BENCH_CONSUMER_THREADS:-4}
ROUNDS=${BENCH_ROUNDS:-1}
bin=${OUTBOX_BIN_DIR:-build/bin}
for p in outbox-relay outbox-consumer outboxctl; do
	[ -x "$bin/$p" ] || { echo "bench: $bin/$p missing (build first, or set OUTBOX_BIN_DIR)" >&2; exit 2; }
done
command -v openssl >/dev/null || { echo "bench: openssl missing" >&2; exit 2; }

. bench/relay/lib.sh
bench_workdir outbox-bench-tls

# ---- certificates ---------------------------------------------------------
(
	cd "$work"
	key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
	key ca.key
	openssl req -x509 -new -key ca.key -out ca.pem -days 30 -subj "/CN=bench hop CA" \
		-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
	printf 'subjectAltName=DNS:consumer.bench\nextendedKeyUsage=serverAuth\n' >server.ext
	printf 'extendedKeyUsage=clientAuth\n' >client.ext
	for leaf in server client; do
		key $leaf.key
		openssl req -new -key $leaf.key -out $leaf.csr -subj "/CN=$leaf.bench"
		openssl x509 -req -in $leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
			-out $leaf.pem -days 30 -extfile $leaf.ext 2>/dev/null
	done
) >/dev/null

echo "bench: PostgreSQL with fsync=on, synchronous_commit=on in $work/pg"
OUTBOX_PG_FSYNC=on scripts/pg-tmp.sh start "$work/pg" >/dev/null
set -a; . "$work/pg/env"; set +a
ticks=$(getconf CLK_TCK)

tree_pids() { echo "$1"; pgrep -P "$1" || true; }
cpu_ticks() {
	local t=0 p f
	for p in $(tree_pids "$1"); do
		[ -r "/proc/$p/stat" ] || continue
		f=$(sed 's/.*) //' "/proc/$p/stat")
		t=$(( t + $(echo "$f" | awk '{print $12 + $13 + $14 + $15}') ))
	done
	echo "$t"
}

# drain MODE ROUND: one drain over tcp or tls; prints "rate relay_us consumer_us".
drain() {
	local mode=$1 round=$2 dbname="bench_${1}_$2" scheme listen_flags=() relay_flags=()
	psql -qXc "CREATE DATABASE $dbname"
	local db="$OUTBOX_PG_CONNINFO dbname=$dbname"
	"$bin/outboxctl" migrate --db "$db" --schema all >/dev/null
	local q=(psql -d "$dbname" -AtqX -c)
	local chunk=10000 s e
	for (( s = 0; s < N; s += chunk )); do
		e=$(( s + chunk - 1 < N - 1 ? s + chunk - 1 : N - 1 ))
		"${q[@]}" "SELECT count(outbox.enqueue('report.created', 'b-' || g,
		    jsonb_build_object('title', 'benchmark report ' || g, 'module', 'editor',
		        'severity', 'high', 'steps', repeat('s', 120))))
		   FROM generate_series($s, $e) g" >/dev/null
	done
	psql -d "$dbname" -qXc "VACUUM ANALYZE outbox.events"
	if [ "$mode" = tls ]; then
		scheme=tls+tcp
		listen_flags=(--tls-cert "$work/server.pem" --tls-key "$work/server.key" --tls-ca "$work/ca.pem")
		relay_flags=(--tls-cert "$work/client.pem" --tls-key "$work/client.key" --tls-ca "$work/ca.pem"
			--tls-server-name consumer.bench)
	else
		scheme=tcp
	fi
	local ready="$work/$dbname.ready"
	"$bin/outbox-consumer" --db "$db" --listen "$scheme://127.0.0.1:0" --ready-file "$ready" \
		--threads "$CTHREADS" --log-level warn "${listen_flags[@]}" 2>"$work/consumer-$dbname.log" &
	local cpid=$!; pids+=("$cpid")
	for _ in $(seq 600); do [ -s "$ready" ] && break; sleep 0.05; done
	[ -s "$ready" ] || { echo "bench: consumer did not start ($work/consumer-$dbname.log)" >&2; exit 1; }
	local url; url=$(head -1 "$ready")
	local t0 t1; t0=$(date +%s.%N)
	"$bin/outbox-relay" --db "$db" --route "*=$url" --workers "$WORKERS" --batch "$BATCH" \
		--max-inflight "$INFLIGHT" --poll-ms 100 --log-level warn "${relay_flags[@]}" \
		2>"$work/relay-$dbname.log" &
	local rpid=$!; pids+=("$rpid")
	until [ "$("${q[@]}" "SELECT outbox.backlog_empty()")" = t ]; do
		kill -0 "$rpid" 2>/dev/null || { echo "bench: relay died ($work/relay-$dbname.log)" >&2; exit 1; }
		sleep 0.1
	done
	t1=$(date +%s.%N)
	local rcpu ccpu; rcpu=$(cpu_ticks "$rpid"); ccpu=$(cpu_ticks "$cpid")
	kill "$rpid" "$cpid"; wait "$rpid" "$cpid" 2>/dev/null || true
	local effects; effects=$("${q[@]}" "SELECT count(*) FROM inbox.notifications")
	[ "$effects" -eq "$N" ] || { echo "bench: $mode: $effects effects for $N messages!" >&2; exit 1; }
	if grep -q 'handshake.refused' "$work/relay-$dbname.log"; then
		echo "bench: $mode: handshakes refused ($work/relay-$dbname.log)" >&2; exit 1
	fi
	awk -v n="$N" -v a="$t0" -v b="$t1" -v r="$rcpu" -v c="$ccpu" -v t="$ticks" \
		'BEGIN {printf "%.0f %.1f %.1f\n", n / (b - a), r / t * 1e6 / n, c / t * 1e6 / n}'
}

declare -A rate relay_us cons_us
for (( round = 1; round <= ROUNDS; round++ )); do
	for mode in tcp tls; do
		echo "bench: round $round, drain of $N over $mode"
		drain "$mode" "$round" >"$work/result"
		read -r r ru cu <"$work/result"
		rate[$mode]="${rate[$mode]:-} $r"; relay_us[$mode]="${relay_us[$mode]:-} $ru"
		cons_us[$mode]="${cons_us[$mode]:-} $cu"
		echo "bench:   $mode: $r msgs/s, relay CPU $ru us/msg, consumer CPU $cu us/msg"
	done
done
mean() { awk '{s = 0; for (i = 1; i <= NF; i++) s += $i; printf "%.1f", s / NF}' <<<"$1"; }
tcp_rate=$(mean "${rate[tcp]}"); tls_rate=$(mean "${rate[tls]}")
ratio=$(awk -v a="$tls_rate" -v b="$tcp_rate" 'BEGIN {printf "%.2f", a / b}')
cat <<EOF

summary (N=$N per drain, rounds=$ROUNDS, workers=$WORKERS, batch=$BATCH, max-inflight=$INFLIGHT, consumer threads=$CTHREADS)
  tcp://      ${tcp_rate} msgs/s   relay $(mean "${relay_us[tcp]}") us/msg   consumer $(mean "${cons_us[tcp]}") us/msg
  tls+tcp://  ${tls_rate} msgs/s   relay $(mean "${relay_us[tls]}") us/msg   consumer $(mean "${cons_us[tls]}") us/msg
  tls/tcp throughput ratio  ${ratio}
EOF
