#!/usr/bin/env bash
# demo-web.sh - `scripts/demo.sh --web`: the demo's stack (a throwaway
# PostgreSQL with the producer's and the consumer's databases, the producer
# API, a relay, a consumer) plus the web view with the demonstration
# (outboxctl web --demo: the picture of the pipeline, the guided steps, the
# herd simulator, the idempotency stepper, the exercises), then waits for
# Ctrl-C and stops everything it started. It prints the page's address
# with the token in its fragment (#token=...): the page takes it from there.
#
#   scripts/demo.sh --web [N]   N bug reports enqueued first (default 20)
#
# The producer and the consumer run with --demo-admin: their metrics
# listeners (127.0.0.1, port 0, read back from their log lines) serve
# /admin/faults, where the steps arm faults and switch broken modes. The
# relay serves report.created only, and a relay leaves the topics it has no
# route for alone (--unrouted wait, the default): the steps' topics (demo.*)
# are left to the short-lived relays the steps start themselves. The demonstration's config file (ctl/web_demo.h lists its
# keys) and every log are in the work directory, removed on exit.
# OUTBOX_WEB_PORT picks the web view's port (default: any free one).
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-20}
case "$count" in ''|*[!0-9]*) echo "demo --web: N must be a number" >&2; exit 2 ;; esac
web_port=${OUTBOX_WEB_PORT:-0}
case "$web_port" in ''|*[!0-9]*) echo "demo --web: OUTBOX_WEB_PORT must be a number" >&2; exit 2 ;; esac

scripts/setup-deps.sh
echo "demo: building..."
OUTBOX_TARGETS="outbox-producer outbox-relay outbox-consumer outboxctl outbox-fault-matrix outbox-herd" \
	scripts/build.sh
bin=$(cd "${OUTBOX_BUILD_DIR:-build}/bin" && pwd)

. scripts/demo-lib.sh
demo_start_work outbox-demo-web
trap 'echo; echo "demo: stopping"; exit 0' INT TERM

# Wait (up to 60 s) for a file to appear while its writer runs.
wait_file() {
	local file=$1 pid=$2 log=$3 end=$(( $(date +%s) + 60 ))
	until [ -s "$file" ]; do
		if ! kill -0 "$pid" 2>/dev/null || [ "$(date +%s)" -ge "$end" ]; then
			echo "demo: $file never appeared; $log says:" >&2
			tail -n 20 "$log" >&2
			exit 1
		fi
		sleep 0.1
	done
}

# The port=N of a program's EVENT line (its metrics listener bound port 0).
logged_port() {
	local log=$1 event=$2 pid=$3 end=$(( $(date +%s) + 60 )) port=""
	while :; do
		port=$(sed -n "s/.*event=$event .*port=\([0-9][0-9]*\).*/\1/p" "$log" | tail -n 1)
		[ -n "$port" ] && { echo "$port"; return; }
		if ! kill -0 "$pid" 2>/dev/null || [ "$(date +%s)" -ge "$end" ]; then
			echo "demo: no $event line in $log:" >&2
			tail -n 20 "$log" >&2
			exit 1
		fi
		sleep 0.1
	done
}

demo_start_databases

consumer_url="ipc://$work/consumer.ipc"
"$bin/outbox-consumer" --db "$consumer_db" --listen "$consumer_url" \
	--metrics 127.0.0.1:0 --demo-admin --ready-file "$work/consumer.ready" \
	2>"$work/consumer.log" &
pids+=($!)
consumer_pid=$!
"$bin/outbox-producer" serve --db "$producer_db" --http http://127.0.0.1:0 \
	--metrics 127.0.0.1:0 --demo-admin --ready-file "$work/producer.ready" \
	2>"$work/producer.log" &
pids+=($!)
producer_pid=$!
wait_file "$work/consumer.ready" "$consumer_pid" "$work/consumer.log"
wait_file "$work/producer.ready" "$producer_pid" "$work/producer.log"
"$bin/outbox-relay" --db "$producer_db" --route "report.created=$consumer_url" \
	--poll-ms 200 2>"$work/relay.log" &
pids+=($!)
producer_url=$(head -n 1 "$work/producer.ready")
producer_admin="http://127.0.0.1:$(logged_port "$work/producer.log" producer.metrics.listening "$producer_pid")"
consumer_admin="http://127.0.0.1:$(logged_port "$work/consumer.log" consumer.metrics.listening "$consumer_pid")"

cat >"$work/demo.conf" <<CONF
# written by scripts/demo.sh --web (keys: ctl/web_demo.h)
producer_url=$producer_url
producer_admin=$producer_admin
consumer_admin=$consumer_admin
consumer_listen=$consumer_url
relay_db=$producer_db
bin_dir=$bin
work_dir=$work
CONF
token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
umask 077
printf '%s\n' "$token" >"$work/token"
umask 022

if [ "$count" -gt 0 ]; then
	echo "demo: enqueueing $count bug reports"
	"$bin/outbox-producer" enqueue --db "$producer_db" --count "$count" --quiet \
		--title "Crash on save" --module editor --severity high
fi

"$bin/outboxctl" web --db "$producer_db" --inbox-db "$consumer_db" \
	--http "http://127.0.0.1:$web_port" --token-file "$work/token" --demo "$work/demo.conf" \
	--consumer-metrics "$consumer_admin/metrics" \
	--ready-file "$work/web.ready" \
	2>"$work/web.log" &
pids+=($!)
wait_file "$work/web.ready" "$!" "$work/web.log"

echo
echo "demo: open $(head -n 1 "$work/web.ready")/#token=$token"
echo "demo: (the token after # runs the demonstration and requeues; it never leaves the browser's address bar for the server)"
echo "demo: logs in $work; Ctrl-C stops everything"
# Until Ctrl-C, or until one of the programs exits on its own.
set +e
wait -n "${pids[@]}"
echo "demo: a program exited; see the logs in $work:" >&2
for f in "$work"/*.log; do echo "== $f" >&2; tail -n 5 "$f" >&2; done
exit 1
