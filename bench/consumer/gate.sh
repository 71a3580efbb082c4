#!/usr/bin/env bash
# gate.sh - what the consumer's source gate costs a transaction
# (sql/inbox/009_source_gate.sql): pgbench on a private PostgreSQL runs a
# transaction without it, with a named source's lock (ROW EXCLUSIVE, every
# frame of a relay since wire version 3) and with the empty source's
# (SHARE, old relays only), interleaved ROUNDS times; and, as the baseline
# of one more statement, with a SELECT 1 where the LOCK is. pgbench waits
# for each statement's answer; the consumer sends BEGIN, LOCK and its
# statement in one pipeline, so what the gate costs it is named - extra
# (the lock, not the round trip).
#
#   bash bench/consumer/gate.sh [BUILD_DIR] [ROUNDS] [SECONDS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
rounds=${2:-3}
seconds=${3:-8}
work=$(mktemp -d /tmp/obgate.XXXXXX)
cleanup() {
	"$root/scripts/pg-tmp.sh" stop "$work/pg" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
"$root/scripts/pg-tmp.sh" start "$work/pg" >/dev/null
. "$work/pg/env"
db=$OUTBOX_PG_CONNINFO
"$build/bin/outboxctl" migrate --db "$db" --schema inbox >/dev/null
printf 'BEGIN;\nSELECT 1;\nCOMMIT;\n' >"$work/none.sql"
printf 'BEGIN;\nSELECT 1;\nSELECT 1;\nCOMMIT;\n' >"$work/extra.sql"
printf 'BEGIN;\nLOCK TABLE inbox.source_gate IN ROW EXCLUSIVE MODE;\nSELECT 1;\nCOMMIT;\n' \
	>"$work/named.sql"
printf 'BEGIN;\nLOCK TABLE inbox.source_gate IN SHARE MODE;\nSELECT 1;\nCOMMIT;\n' >"$work/empty.sql"
for r in $(seq 1 "$rounds"); do
	for s in none extra named empty; do
		out=$(pgbench -n -M prepared -c 4 -j 2 -T "$seconds" -f "$work/$s.sql" "$db" 2>&1)
		lat=$(sed -n 's/^latency average = \([0-9.]*\) ms$/\1/p' <<<"$out")
		tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out")
		echo "round=$r gate=$s latency_ms=$lat tps=${tps%.*}"
	done
done
