#!/usr/bin/env bash
# chain.sh - one agent notification followed all the way to a downstream
# service, under a fault at every hop; the script to copy when you wire an
# agent tool to a notification API. On a throwaway local PostgreSQL:
#
#   agent calls (curl, `outbox-producer send`, an MCP host's tools/call)
#   -> outbox-producer serve (POST /v1/messages; loses its first answers)
#   -> outbox -> outbox-relay (each worker killed once after sending)
#   -> outbox-consumer --handler webhook (killed once right after a call)
#   -> outbox-notify-sink (the downstream: 503s first, then acts and
#      loses its answer; acts once per Idempotency-Key)
#
# then checks: one outbox message per logical call, every message
# delivered, the downstream acted once per call, and it was sent the SAME
# key on every attempt (more requests than keys: the retries happened).
#
#   deploy/chain.sh            the real chain: must pass
#   deploy/chain.sh --broken   the downstream ignores the key
#                              (outbox-notify-sink --ignore-key): the check
#                              must FAIL, counting the duplicate effects
#   deploy/chain.sh --keep     leave the work dir (logs) behind
#
# Exit: 0 every check held; 1 a check failed; 2 usage; 3 the chain could
# not run (a program did not start, a deadline passed).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)

# ---- limits (each also read from the environment) --------------------------
CHAIN_SEND_CALLS=${CHAIN_SEND_CALLS:-8}       # calls through `outbox-producer send`
CHAIN_LOST_RESPONSES=${CHAIN_LOST_RESPONSES:-2} # serve --fault-lose-response
CHAIN_SINK_FAILS=${CHAIN_SINK_FAILS:-3}       # downstream 503s first
CHAIN_SINK_LOSES=${CHAIN_SINK_LOSES:-2}       # then acts and loses its answer
CHAIN_DEADLINE_S=${CHAIN_DEADLINE_S:-120}     # every wait
CHAIN_TOPIC=notify.chat

broken=0 keep=0
for a in "$@"; do
	case "$a" in
	--broken) broken=1 ;;
	--keep) keep=1 ;;
	-h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "chain: unknown argument '$a' (try --help)" >&2; exit 2 ;;
	esac
done

say() { echo "chain: $*"; }
fail_run() { echo "chain: CANNOT RUN: $*" >&2; exit 3; }

if [ -z "${OUTBOX_BIN_DIR:-}" ]; then
	"$ROOT/scripts/setup-deps.sh" || fail_run "setup-deps failed"
	OUTBOX_TARGETS="outbox-producer outbox-relay outbox-consumer outboxctl outbox-notify-sink" \
		"$ROOT/scripts/build.sh" >/dev/null || fail_run "the build failed"
fi
bin=${OUTBOX_BIN_DIR:-$ROOT/${OUTBOX_BUILD_DIR:-build}/bin}

work=$(mktemp -d /tmp/outbox-chain.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	"$ROOT/scripts/pg-tmp.sh" stop "$work/pg" >/dev/null 2>&1 || true
	if [ "$keep" = 1 ]; then echo "chain: logs kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

# wait_for CMD...: until CMD succeeds, at most CHAIN_DEADLINE_S
wait_for() {
	local end=$(( $(date +%s) + CHAIN_DEADLINE_S ))
	until "$@" 2>/dev/null; do
		[ "$(date +%s)" -lt "$end" ] || return 1
		sleep 0.1
	done
}
ready() { [ -s "$1" ]; }
# started PID LOG EVENT: the program logged EVENT; gives up at once if it died
started() {
	kill -0 "$1" || { echo "chain: it exited: $(tail -3 "$2")" >&2; return 2; }
	grep -q "event=$3" "$2"
}
wait_started() {
	local end=$(( $(date +%s) + CHAIN_DEADLINE_S )) rc
	while :; do
		started "$@" 2>/dev/null; rc=$?
		[ $rc = 0 ] && return 0
		[ $rc = 2 ] && { started "$@"; return 1; }
		[ "$(date +%s)" -lt "$end" ] || return 1
		sleep 0.1
	done
}

say "a throwaway PostgreSQL in $work/pg"
server=$("$ROOT/scripts/pg-tmp.sh" start "$work/pg") || fail_run "PostgreSQL did not start"
psql "$server" -qc "CREATE DATABASE producer" -c "CREATE DATABASE consumer" >/dev/null ||
	fail_run "cannot create the databases"
producer_db="$server dbname=producer"
consumer_db="$server dbname=consumer"
"$bin/outboxctl" migrate --db "$producer_db" --schema outbox >/dev/null &&
	"$bin/outboxctl" migrate --db "$consumer_db" --schema inbox >/dev/null ||
	fail_run "migrate failed"
q() { psql "$1" -Atqc "$2"; }

# ---- the downstream ----------------------------------------------------------
sink_flags=(--fail-first "$CHAIN_SINK_FAILS" --lose-first "$CHAIN_SINK_LOSES")
[ "$broken" = 1 ] && sink_flags+=(--ignore-key)
"$bin/outbox-notify-sink" --http http://127.0.0.1:0 --ready-file "$work/sink.url" \
	"${sink_flags[@]}" 2>"$work/sink.log" &
pids+=($!)
wait_for ready "$work/sink.url" || fail_run "the sink did not start ($work/sink.log)"
sink_url=$(cat "$work/sink.url")
stats_url=${sink_url%/notify}/stats
stat() { curl -sf "$stats_url" | jq -r ".$1"; }
say "downstream $sink_url (${sink_flags[*]})"

# ---- consumer (killed once right after a downstream call), relay, producer ---
consumer_url="ipc://$work/consumer.ipc"
start_consumer() {
	"$bin/outbox-consumer" --db "$consumer_db" --listen "$consumer_url" \
		--handler webhook --webhook-url "$sink_url" --webhook-timeout 2s --webhook-lease 5s "$@" \
		2>>"$work/consumer.log" &
	consumer_pid=$!
	pids+=($consumer_pid)
	disown "$consumer_pid" # its death by the fault is expected: no "Killed" notice
}
start_consumer --fault-die-after-call 1
"$bin/outbox-relay" --db "$producer_db" --route "$CHAIN_TOPIC=$consumer_url" --workers 2 \
	--poll-ms 100 --lease-ms 4s --delivery-timeout-ms 2s --backoff-cap-ms 2s \
	--fault-die-after-send 1 2>"$work/relay.log" &
relay_pid=$!
pids+=($relay_pid)
"$bin/outbox-producer" serve --db "$producer_db" --http http://127.0.0.1:0 \
	--ready-file "$work/api.url" --fault-lose-response "$CHAIN_LOST_RESPONSES" \
	2>"$work/producer.log" &
pids+=($!)
wait_for ready "$work/api.url" || fail_run "the producer API did not start ($work/producer.log)"
wait_started "$consumer_pid" "$work/consumer.log" consumer.started ||
	fail_run "the consumer did not start ($work/consumer.log)"
wait_started "$relay_pid" "$work/relay.log" relay.worker.started ||
	fail_run "the relay did not start ($work/relay.log)"
api=$(cat "$work/api.url")
say "producer API $api; relay 2 workers; consumer --handler webhook"

# ---- the agent calls ---------------------------------------------------------
calls=0
# 1. curl, retried with the same key until answered (an answer may be lost)
curl_call() {
	local key=$1 body=$2 code tries=0
	while [ $tries -lt 10 ]; do
		tries=$((tries + 1))
		code=$(curl -s -o "$work/curl.out" -D "$work/curl.hdr" -w '%{http_code}' -m 10 \
			-X POST "$api/v1/messages" -H "Idempotency-Key: $key" \
			-H 'Content-Type: application/json' -d "$body") || code=000
		case "$code" in
		200|201) grep -qi '^Idempotent-Replayed: true' "$work/curl.hdr" &&
				say "curl $key: answered on retry $tries from the stored response" ||
				say "curl $key: $code"
			return 0 ;;
		000|409|5*) sleep 0.2 ;; # lost answer / in progress / server error: same key again
		*) echo "chain: curl $key: $code $(cat "$work/curl.out")" >&2; return 1 ;;
		esac
	done
	return 1
}
curl_call curl-1 "{\"topic\":\"$CHAIN_TOPIC\",\"payload\":{\"text\":\"deploy done\",\"via\":\"curl\"}}" ||
	fail_run "the curl call was never answered"
calls=$((calls + 1))

# 2. `outbox-producer send`: one key per tool call, retried inside; exit 3 =
# SIDE_EFFECT_UNCERTAIN, resolved by looking the key up (never by resending)
for i in $(seq 1 "$CHAIN_SEND_CALLS"); do
	key="chain-run:toolu_$i"
	out=$("$bin/outbox-producer" send --url "$api" --topic "$CHAIN_TOPIC" \
		--payload "{\"n\":$i,\"via\":\"send\"}" --key-from tool-call "$key" 2>>"$work/send.log")
	rc=$?
	if [ $rc = 3 ]; then
		out=$("$bin/outbox-producer" lookup --url "$api" --kind message --key "$key" \
			2>>"$work/send.log") || fail_run "send $key: uncertain and the lookup failed"
	elif [ $rc != 0 ]; then
		fail_run "send $key: exit $rc: $out"
	fi
	calls=$((calls + 1))
done
say "$CHAIN_SEND_CALLS calls through outbox-producer send answered"

# 3. an MCP host: initialize, then send_notification twice with the same
# arguments (a host's retry: the same key, answered as replayed) and once
# with others
mcp_in() {
	local n='"jsonrpc":"2.0"'
	echo "{$n,\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"chain.sh\",\"version\":\"1\"}}}"
	echo "{$n,\"method\":\"notifications/initialized\"}"
	for id in 2 3; do
		echo "{$n,\"id\":$id,\"method\":\"tools/call\",\"params\":{\"name\":\"send_notification\",\"arguments\":{\"topic\":\"$CHAIN_TOPIC\",\"payload\":{\"text\":\"build green\",\"via\":\"mcp\"}}}}"
	done
	echo "{$n,\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"send_notification\",\"arguments\":{\"topic\":\"$CHAIN_TOPIC\",\"payload\":{\"text\":\"tests red\",\"via\":\"mcp\"}}}}"
}
mcp_in | "$bin/outbox-producer" mcp --url "$api" --run-id "chain-$$" --log-level warn \
	>"$work/mcp.out" 2>>"$work/mcp.log" || fail_run "the MCP server failed ($work/mcp.log)"
[ "$(jq -s '[.[] | select(.id == 2 or .id == 3 or .id == 4) | select(.result.isError == false)] | length' "$work/mcp.out")" = 3 ] ||
	fail_run "an MCP call failed: $(cat "$work/mcp.out")"
[ "$(jq -s -r '.[] | select(.id == 3) | .result.structuredContent.metadata.replayed' "$work/mcp.out")" = true ] ||
	fail_run "the MCP host's retry was not answered as replayed"
calls=$((calls + 2))
say "3 MCP tools/call answered (the retry replayed): $calls logical calls in all"

# ---- the consumer died after a call (the fault); start it again ----------------
gone() { ! kill -0 "$consumer_pid"; }
wait_for gone || fail_run "the consumer's --fault-die-after-call never fired"
say "the consumer was killed right after a downstream call; restarting it"
start_consumer

# ---- wait for the chain to settle --------------------------------------------
delivered() {
	[ "$(q "$producer_db" "SELECT count(*) FROM outbox.messages WHERE status = 'delivered'")" -ge "$calls" ]
}
wait_for delivered || {
	echo "chain: TIMED OUT: $(q "$producer_db" "SELECT status, count(*) FROM outbox.messages GROUP BY 1" | tr '\n' ' ')" >&2
	exit 3
}

messages=$(q "$producer_db" "SELECT count(*) FROM outbox.messages WHERE topic = '$CHAIN_TOPIC'")
dead=$(q "$producer_db" "SELECT count(*) FROM outbox.messages WHERE status = 'dead'")
requests=$(stat requests) effects=$(stat effects) keys=$(stat keys)
maxper=$(stat max_requests_per_key) lost=$(stat lost) failed=$(stat failed)
applied=$(q "$consumer_db" "SELECT count(*) FROM inbox.processed")

echo
echo "agent calls      = $calls   (curl 1, send $CHAIN_SEND_CALLS, MCP 2 + a replayed retry)"
echo "outbox messages  = $messages   (dead: $dead)"
echo "consumer applied = $applied   (dedup records, consumer database)"
echo "downstream       = $requests requests for $keys keys ($failed answered 503, $lost answers lost;"
echo "                   the most requests one key got: $maxper)"
echo "effects          = $effects   (what the downstream did)"
ok=1
check() { if [ "$1" != "$2" ]; then echo "FAILED: $3: $1, want $2" >&2; ok=0; fi; }
check "$messages" "$calls" "one outbox message per logical call"
check "$dead" 0 "no dead letters"
check "$applied" "$calls" "one dedup record per message"
check "$keys" "$calls" "the downstream saw each call's key and no other"
check "$effects" "$calls" "the downstream acted once per call"
[ "$requests" -gt "$keys" ] || { echo "FAILED: no key was sent twice: the faults did not bite" >&2; ok=0; }
if [ "$ok" = 1 ]; then
	echo "OK: every call answered, one message each, one effect each; retries carried the same key"
	exit 0
fi
[ "$broken" = 1 ] && echo "(as expected with --broken: a downstream that ignores the key acted $((effects - calls)) times too often)"
exit 1
