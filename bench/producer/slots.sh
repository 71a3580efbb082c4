#!/usr/bin/env bash
# slots.sh - what the number of slots of outbox.events costs an enqueue
# (sql/outbox/017_finer_slots.sql): outbox.enqueue looks for its key in
# every slot, one unique-index probe per partition. Two databases on one
# private PostgreSQL, both at today's schema: "10" as migrated, "4" with
# slots 4..9 dropped (the layout before 017). Each is filled as at steady
# state: FILL messages across its closed slots (slots - 2 of them) and the
# current one, by enqueue and forced switches. Then pgbench runs enqueue
# (fresh keys, autocommit, 4 clients, prepared) on each, interleaved ROUNDS
# times, SECONDS each; fsync off (SLOTS_FSYNC=on: on), so that the
# commit's disk wait does not hide the function's CPU.
#
#   bash bench/producer/slots.sh [BUILD_DIR] [ROUNDS] [SECONDS] [FILL]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
rounds=${2:-5}
seconds=${3:-10}
fill=${4:-80000}
clients=4
for v in rounds seconds fill; do
	case ${!v} in '' | *[!0-9]* | 0) echo "slots: $v='${!v}' must be a positive integer" >&2; exit 2 ;; esac
done
work=$(mktemp -d /tmp/obslots.XXXXXX)
cleanup() {
	"$root/scripts/pg-tmp.sh" stop "$work/pg" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
OUTBOX_PG_FSYNC=${SLOTS_FSYNC:-off} "$root/scripts/pg-tmp.sh" start "$work/pg" >/dev/null
. "$work/pg/env"
base=$OUTBOX_PG_CONNINFO
q() { psql -d "$1" -AtqX -v ON_ERROR_STOP=1 -c "$2"; }
for n in 10 4; do
	q "$base" "CREATE DATABASE slots_$n" >/dev/null
	db="$base dbname=slots_$n"
	"$build/bin/outboxctl" migrate --db "$db" --schema outbox >/dev/null
	if [ "$n" = 4 ]; then
		psql -d "$db" -qX -v ON_ERROR_STOP=1 -f "$root/bench/sql/four_slots.sql" >/dev/null
	fi
	[ "$(q "$db" "SELECT count(*) FROM pg_inherits WHERE inhparent = 'outbox.events'::regclass")" = "$n" ] ||
		{ echo "slots: database slots_$n does not have $n partitions" >&2; exit 1; }
	# steady state: the closed slots and the current one hold fill messages
	per=$((fill / (n - 1)))
	for s in $(seq 1 $((n - 1))); do
		q "$db" "SELECT count(outbox.enqueue('fill', 'f-$s-' || g, '{\"g\": 1}'))
		           FROM generate_series(1, $per) g" >/dev/null
		[ "$s" -lt $((n - 1)) ] &&
			q "$db" "SELECT switched_to FROM outbox.housekeep(3600000, 0, 60000, 200, true)" >/dev/null
	done
	q "$db" "VACUUM ANALYZE" >/dev/null
	echo "slots: database slots_$n: $n partitions," \
		"$(q "$db" "SELECT string_agg(state || ' ' || n, ', ') FROM (SELECT state, count(*) n FROM outbox.slots GROUP BY state ORDER BY state) x")," \
		"$(q "$db" "SELECT count(*) FROM outbox.events") messages"
done
cat >"$work/enqueue.sql" <<'SQL'
SELECT outbox.enqueue('bench', 'k-' || :client_id || '-' || random()::text, '{"title": "x"}'::jsonb);
SQL
for r in $(seq 1 "$rounds"); do
	for n in 10 4; do
		out=$(pgbench -n -M prepared -c "$clients" -j 2 -T "$seconds" -f "$work/enqueue.sql" \
			"$base dbname=slots_$n" 2>&1)
		lat=$(sed -n 's/^latency average = \([0-9.]*\) ms$/\1/p' <<<"$out")
		tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out")
		echo "round=$r slots=$n latency_ms=$lat tps=${tps%.*}"
	done
done
