#!/usr/bin/env bash
# demo.sh - the main job, end to end, on a throwaway local PostgreSQL:
# installs what is missing, builds, starts PostgreSQL (two databases: the
# producer's and the consumer's), a consumer and a relay, enqueues N bug
# reports (each report + its outbox record in one transaction), waits until
# the outbox is drained and prints enqueued / delivered / applied.
#
#   scripts/demo.sh [N]        N reports (default 1000)
#   scripts/demo.sh --web [N]  the same stack plus the web view and the guided
#                              demonstration, until Ctrl-C (scripts/demo-web.sh)
# Everything it starts is stopped and removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--web" ]; then shift; exec scripts/demo-web.sh "$@"; fi
count=${1:-${OUTBOX_DEMO_COUNT:-1000}}
case "$count" in ''|*[!0-9]*) echo "demo: N must be a positive integer" >&2; exit 2 ;; esac

scripts/setup-deps.sh
echo "demo: building..."
OUTBOX_TARGETS="outbox-producer outbox-relay outbox-consumer outboxctl" scripts/build.sh
bin=${OUTBOX_BUILD_DIR:-build}/bin

. scripts/demo-lib.sh
demo_start_work outbox-demo

demo_start_databases

url="ipc://$work/consumer.ipc"
"$bin/outbox-consumer" --db "$consumer_db" --listen "$url" 2>"$work/consumer.log" &
pids+=($!)
"$bin/outbox-relay" --db "$producer_db" --route "report.created=$url" --poll-ms 200 \
	2>"$work/relay.log" &
pids+=($!)

echo "demo: enqueueing $count bug reports (report + outbox record, one transaction each)"
start=$(date +%s.%N)
"$bin/outbox-producer" enqueue --db "$producer_db" --count "$count" --quiet \
	--title "Crash on save" --module editor --severity high

q() { psql "$1" -Atqc "$2"; }
deadline=$(( $(date +%s) + 300 ))
while :; do
	delivered=$(q "$producer_db" "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'")
	[ "$delivered" -ge "$count" ] && break
	if [ "$(date +%s)" -ge "$deadline" ]; then echo "demo: timed out" >&2; break; fi
	sleep 0.2
done
elapsed=$(echo "$(date +%s.%N) - $start" | bc 2>/dev/null || echo "?")

reports=$(q "$producer_db" "SELECT count(*) FROM app.bug_reports")
enqueued=$(q "$producer_db" "SELECT count(*) FROM outbox.messages")
delivered=$(q "$producer_db" "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'")
dead=$(q "$producer_db" "SELECT count(*) FROM outbox.messages WHERE status = 'dead'")
applied=$(q "$consumer_db" "SELECT count(*) FROM inbox.notifications")
distinct=$(q "$consumer_db" "SELECT count(DISTINCT idempotency_key) FROM inbox.notifications")

echo
echo "reports   = $reports   (business rows, producer database)"
echo "enqueued  = $enqueued   (outbox.messages)"
echo "delivered = $delivered   (status delivered; dead: $dead)"
echo "applied   = $applied   (inbox.notifications rows, consumer database; distinct keys: $distinct)"
echo "elapsed   = ${elapsed}s"
if [ "$enqueued" = "$count" ] && [ "$delivered" = "$count" ] && [ "$applied" = "$count" ] &&
	[ "$distinct" = "$count" ]; then
	echo "OK: enqueued = delivered = applied = $count, each key applied exactly once"
else
	echo "MISMATCH: see $work/relay.log and $work/consumer.log" >&2
	trap - EXIT
	exit 1
fi
