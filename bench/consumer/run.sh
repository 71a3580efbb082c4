#!/usr/bin/env bash
# run.sh - the consumer benchmark: a private PostgreSQL with fsync ON, one
# outbox-consumer (record handler), and consumer-loadgen at batches of 1,
# 10 and 100 messages per request. Prints one line per run.
#
#   bash bench/consumer/run.sh [BUILD_DIR] [SECONDS] [INFLIGHT]
#
# BUILD_DIR defaults to ./build (bin/outbox-consumer, bin/outboxctl,
# bin/consumer-loadgen). CONSUMER_FLAGS: more consumer flags (e.g.
# --no-source-gate); LOADGEN_FLAGS: more load generator flags (e.g.
# --source= for the empty source of relays before wire version 3; the
# default is a named source, "loadgen", as every relay since sends). The
# throwaway server lives in a temp dir and is removed at the end.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
seconds=${2:-10}
inflight=${3:-4}
threads=${CONSUMER_THREADS:-4}
pgdir=$(mktemp -d /tmp/obbench.XXXXXX)
url="ipc://$pgdir/consumer.ipc"
cleanup() {
	[ -n "${cpid:-}" ] && kill "$cpid" 2>/dev/null && wait "$cpid" 2>/dev/null || true
	"$root/scripts/pg-tmp.sh" stop "$pgdir" >/dev/null 2>&1 || true
}
trap cleanup EXIT

OUTBOX_PG_FSYNC=on "$root/scripts/pg-tmp.sh" start "$pgdir" >/dev/null
. "$pgdir/env"
db=$OUTBOX_PG_CONNINFO
psql "$db" -qc "SHOW fsync" -tA | sed 's/^/fsync=/'
"$build/bin/outboxctl" migrate --db "$db" --schema inbox >/dev/null
for batch in 1 10 100; do
	psql "$db" -qc "TRUNCATE inbox.processed, inbox.notifications"
	"$build/bin/outbox-consumer" --db "$db" --listen "$url" --threads "$threads" \
		--log-level warn ${CONSUMER_FLAGS:-} &
	cpid=$!
	sleep 1
	"$build/bin/consumer-loadgen" ${LOADGEN_FLAGS:-} --url "$url" --batch "$batch" --inflight "$inflight" \
		--seconds "$seconds" --consumer-pid "$cpid"
	rows=$(psql "$db" -tAc "SELECT count(*) FROM inbox.notifications")
	dups=$(psql "$db" -tAc "SELECT count(*) - count(DISTINCT idempotency_key) FROM inbox.notifications")
	echo "  rows_in_db=$rows duplicate_rows=$dups"
	kill "$cpid"; wait "$cpid" || true; cpid=
done
# Redelivery: the same keys twice. The first run applies them (set path);
# the second gets every one back as duplicate (per-message path).
psql "$db" -qc "TRUNCATE inbox.processed, inbox.notifications"
"$build/bin/outbox-consumer" --db "$db" --listen "$url" --threads "$threads" --log-level warn ${CONSUMER_FLAGS:-} &
cpid=$!
sleep 1
echo "redelivery, first pass (new keys):"
"$build/bin/consumer-loadgen" ${LOADGEN_FLAGS:-} --url "$url" --batch 100 --inflight "$inflight" \
	--seconds "$seconds" --consumer-pid "$cpid" --prefix redeliver
echo "redelivery, second pass (same keys: duplicates):"
"$build/bin/consumer-loadgen" ${LOADGEN_FLAGS:-} --url "$url" --batch 100 --inflight "$inflight" \
	--seconds "$seconds" --consumer-pid "$cpid" --prefix redeliver
dups=$(psql "$db" -tAc "SELECT count(*) - count(DISTINCT idempotency_key) FROM inbox.notifications")
echo "  duplicate_rows=$dups"
