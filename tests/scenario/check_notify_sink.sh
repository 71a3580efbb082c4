#!/usr/bin/env bash
# check_notify_sink.sh - outbox-notify-sink's contract, by curl: one effect
# per key and replays after it, --ignore-key acting on every request, the
# faults (--fail-first with Retry-After, --lose-first), bad input (no key,
# a key over 255 bytes, wrong method, unknown path, --max-keys) refused
# with nothing counted as an effect, and bad flags refused at start (--db
# with --ignore-key, --ignore-fence without --db, a --db it cannot reach).
# Its --db mode is test_webhook_fence's.
set -uo pipefail
bin=${1:?usage: check_notify_sink.sh BIN_DIR}/outbox-notify-sink
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "check_notify_sink: FAILED: $*" >&2; exit 1; }

start() {
	rm -f "$work/url"
	"$bin" --http http://127.0.0.1:0 --ready-file "$work/url" "$@" 2>>"$work/log" &
	pid=$!
	for _ in $(seq 1 200); do [ -s "$work/url" ] && break; sleep 0.05; done
	[ -s "$work/url" ] || fail "it did not start: $(cat "$work/log")"
	url=$(cat "$work/url")
	stats=${url%/notify}/stats
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null; pid=; }
post() { curl -s -o "$work/body" -w '%{http_code}' -m 5 -X POST "$url" "$@" -d '{"x":1}'; }
want() { [ "$1" = "$2" ] || fail "$3: got $1, want $2 ($(cat "$work/body" 2>/dev/null))"; }
stat() { curl -s "$stats${2:-}" | jq -r ".$1"; }

start --max-keys 2 --fail-first 1 --lose-first 1
want "$(post -H 'Idempotency-Key: a')" 503 "the first request fails on purpose"
want "$(post -H 'Idempotency-Key: a')" 000 "the next acts and loses its answer"
want "$(post -H 'Idempotency-Key: a')" 200 "a retry with the key"
grep -q '"replayed":true' "$work/body" || fail "the retry was not answered as a replay"
want "$(post -H 'Idempotency-Key: b')" 200 "a second key"
want "$(post -H 'Idempotency-Key: c')" 507 "a third key past --max-keys 2"
want "$(post)" 400 "no Idempotency-Key"
want "$(post -H "Idempotency-Key: $(printf 'k%.0s' $(seq 1 256))")" 400 "a 256-byte key"
want "$(curl -s -o "$work/body" -w '%{http_code}' "$url")" 405 "GET on the notify path"
want "$(curl -s -o "$work/body" -w '%{http_code}' -X POST "$stats")" 405 "POST on /stats"
want "$(curl -s -o "$work/body" -w '%{http_code}' "${url%/notify}/nope")" 404 "an unknown path"
want "$(stat effects)" 2 "effects: one per key"
want "$(stat requests)" 4 "requests that reached a key"
want "$(stat key_effects '?key=a')" 1 "key a acted on once"
want "$(stat key_requests '?key=a')" 3 "key a was sent three times"
want "$(stat refused)" 1 "refused past --max-keys"
stop

start --ignore-key
post -H 'Idempotency-Key: a' >/dev/null; post -H 'Idempotency-Key: a' >/dev/null
want "$(stat effects)" 2 "--ignore-key acts on every request"
stop

"$bin" --path nope >/dev/null 2>&1; want $? 2 "--path without a leading /"
"$bin" --fail-status 200 >/dev/null 2>&1; want $? 2 "--fail-status 200"
"$bin" --db "dbname=x" --ignore-key >/dev/null 2>&1; want $? 2 "--db with --ignore-key"
"$bin" --ignore-fence >/dev/null 2>&1; want $? 2 "--ignore-fence without --db"
"$bin" --db "host=/nonexistent dbname=x" >"$work/dberr" 2>&1; want $? 1 "--db it cannot reach"
grep -q -- "--db:" "$work/dberr" || fail "the unreachable --db is not named: $(cat "$work/dberr")"
echo "check_notify_sink: ok"
