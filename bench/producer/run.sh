#!/usr/bin/env bash
# run.sh - producer HTTP API benchmark: POSTs/s and p99 with wrk, 16
# connections, fsync ON, against a private throwaway PostgreSQL.
#
#   bash bench/producer/run.sh [BUILD_DIR] [SECONDS]
#
# Three runs: unique keys (every request creates a report: claim commit +
# report/outbox/key commit) and 50 % replays (half the requests reuse a key
# already sent with the same body), and replays only (REPLAY=1: after the
# first create every request replays). Prints wrk's summary, the script's
# counters, and the reports created per second counted in the database.
# Then two pgbench baselines on the same server, 16 clients: the bare SQL
# writes of a create (create_shape.sql) and single-row commits
# (one_insert.sql), so the create rate can be read as a ratio.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
secs=${2:-15}
bin=$build/bin
pgdir=$(mktemp -d /tmp/outbox-bench-producer-XXXXXX)
cleanup() {
	[ -n "${spid:-}" ] && kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null || true
	"$root/scripts/pg-tmp.sh" stop "$pgdir/pg" || true
	rm -rf "$pgdir"
}
trap cleanup EXIT

conninfo=$(OUTBOX_PG_FSYNC=on "$root/scripts/pg-tmp.sh" start "$pgdir/pg")
psql_count() { "$(pg_config --bindir)/psql" -XAtq "$conninfo" -c "SELECT count(*) FROM app.bug_reports"; }
"$bin/outboxctl" migrate --db "$conninfo" --schema outbox --demo >/dev/null
# Port 0: the server binds a free port itself and writes its URL to the
# ready file (atomically) once it serves; a guessed port could be taken.
"$bin/outbox-producer" serve --db "$conninfo" --http http://127.0.0.1:0 \
	--ready-file "$pgdir/serve.url" --log-level warn >"$pgdir/serve.log" 2>&1 &
spid=$!
for _ in $(seq 300); do
	[ -s "$pgdir/serve.url" ] && break
	kill -0 "$spid" 2>/dev/null || { cat "$pgdir/serve.log" >&2; echo "serve exited" >&2; exit 1; }
	sleep 0.1
done
[ -s "$pgdir/serve.url" ] || { cat "$pgdir/serve.log" >&2; echo "serve not ready in 30 s" >&2; exit 1; }
url=$(head -n1 "$pgdir/serve.url")
curl -sf "$url/healthz" >/dev/null

echo "fsync=$("$(pg_config --bindir)/psql" -XAtq "$conninfo" -c 'SHOW fsync') synchronous_commit=$("$(pg_config --bindir)/psql" -XAtq "$conninfo" -c 'SHOW synchronous_commit')"
for replay in 0 0.5 1; do
	before=$(psql_count)
	echo "== wrk -t2 -c16 -d${secs}s --latency, replay share $replay"
	REPLAY=$replay wrk -t2 -c16 -d"${secs}s" --latency -s "$here/post.lua" "$url"
	after=$(psql_count)
	echo "created_in_db=$((after - before)) created_per_s=$(( (after - before) / secs ))"
done

# Baselines (same server, same 16 clients, prepared statements).
pgbench=$(pg_config --bindir)/pgbench
"$(pg_config --bindir)/psql" -XAtq "$conninfo" -c "CREATE TABLE bench_commits (id bigserial PRIMARY KEY, v int)"
for script in create_shape one_insert; do
	tps=$("$pgbench" -n -M prepared -c 16 -j 2 -T "$secs" -f "$here/$script.sql" "$conninfo" 2>&1 |
		sed -n 's/^tps = \([0-9]*\).*/\1/p')
	echo "pgbench $script.sql -c16: ${tps:-?} transactions/s"
done
