#!/usr/bin/env bash
# check_failover.sh - no phantom effect after a failover (issue 18, part 3).
#
# A primary with an asynchronous streaming standby (scripts/pg-tmp.sh
# standby), the consumer's database on a third server. Orders go in as a
# business row and an outbox record in one transaction; the relay delivers
# them to a real consumer. Then replication is cut (the standby's
# primary_conninfo emptied: it receives nothing more), 20 more orders
# commit on the primary, the primary dies (immediate stop) and the standby
# is promoted. A phantom is an effect (a dedup record on the consumer)
# whose business row does not exist on the promoted standby.
#
#   none   (the default relay) the 20 orders the standby never got are
#          delivered anyway: 20 phantoms - the broken case, shown first;
#   flush  (--standby-gate flush --standby-names standby1) they wait at the
#          gate (relay.standby_gate.waiting): 0 phantoms, and every order
#          that exists on the promoted standby was applied exactly once
#          after a relay runs against it;
#   replay (--standby-gate replay) with the standby's replay paused
#          (pg_wal_replay_pause) while replication is still up: the gate
#          holds even though the WAL is on the standby's disk.
#
#   grant  a relay role without pg_monitor cannot see the standby's
#          position: the gate logs the GRANT it needs and delivers nothing;
#          granted, it delivers.
#
# usage: check_failover.sh BIN_DIR [none|flush|replay|grant ...]   (default: all four)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:?usage: check_failover.sh BIN_DIR [none|flush|replay|grant ...]}
shift
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(none flush replay grant)
N=20                     # orders per phase
DEADLINE_S=${FAILOVER_DEADLINE_S:-60}
work=$(mktemp -d /tmp/outbox-failover.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	for d in p s c; do "$ROOT/scripts/pg-tmp.sh" stop "$work/$d" >/dev/null 2>&1 || true; done
	rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "check_failover: FAILED: $*" >&2; for f in "$work"/*.log; do echo "--- $f" >&2; tail -5 "$f" >&2; done; exit 1; }
q() { psql "$1" -Atqc "$2"; }
wait_for() { # wait_for WHAT CMD...
	local what=$1 end=$(( $(date +%s) + DEADLINE_S )); shift
	[ -n "${FAILOVER_TRACE:-}" ] && echo "check_failover: ${SECONDS}s waiting for $what" >&2
	until "$@" 2>/dev/null; do
		[ "$(date +%s)" -lt "$end" ] || fail "timed out waiting for $what"
		sleep 0.1
	done
}
orders() { # orders DB PREFIX: N business rows + their outbox records, one transaction each
	for i in $(seq 1 "$N"); do
		echo "BEGIN; INSERT INTO orders VALUES ('$2-$i');"
		echo "SELECT outbox.enqueue('order.placed', '$2-$i', '{\"order\":\"$2-$i\"}'); COMMIT;"
	done | psql "$1" -qAt >/dev/null || fail "enqueue $2 failed"
}
applied() { [ "$(q "$consumer_db" "SELECT count(*) FROM inbox.processed")" -ge "$1" ]; }
no_standby() { [ "$(q "$primary" "SELECT count(*) FROM pg_stat_replication")" = 0 ]; }
caught_up() { [ "$(q "$primary" "SELECT replay_lsn >= '$1'::pg_lsn FROM pg_stat_replication")" = t ]; }
streaming() { [ "$(q "$primary" "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")" = 1 ]; }

# A primary (database producer, table orders) with its standby "standby1"
# streaming, and the consumer's server (database consumer), all fresh.
setup_servers() {
	for d in p s c; do "$ROOT/scripts/pg-tmp.sh" stop "$work/$d" >/dev/null 2>&1 || true; done
	rm -f "$work"/*.log
	primary=$("$ROOT/scripts/pg-tmp.sh" start "$work/p" | sed 's/dbname=postgres/dbname=producer/') ||
		fail "the primary did not start"
	psql "${primary/dbname=producer/dbname=postgres}" -qc "CREATE DATABASE producer" >/dev/null
	"$bin/outboxctl" migrate --db "$primary" --schema outbox >/dev/null || fail "migrate outbox"
	q "$primary" "CREATE TABLE orders (key text PRIMARY KEY)" >/dev/null
	"$ROOT/scripts/pg-tmp.sh" standby "$work/p" "$work/s" standby1 >/dev/null || fail "the standby did not start"
	standby=$(. "$work/s/env" && echo "host=$PGHOST port=$PGPORT user=postgres dbname=producer")
	server=$("$ROOT/scripts/pg-tmp.sh" start "$work/c") || fail "the consumer's server did not start"
	psql "$server" -qc "CREATE DATABASE consumer" >/dev/null
	consumer_db="${server/dbname=postgres/dbname=consumer}"
	"$bin/outboxctl" migrate --db "$consumer_db" --schema inbox >/dev/null || fail "migrate inbox"
	wait_for "the standby to stream" streaming
}

# The gate needs the positions pg_stat_replication shows only to superusers
# and pg_monitor: a relay role without it is told so and delivers nothing;
# once granted, the same relay delivers (no restart).
run_grant() {
	setup_servers
	q "$primary" "CREATE ROLE gate_relay LOGIN; GRANT outbox_relay TO gate_relay" >/dev/null
	local url="ipc://$work/consumer.ipc"
	"$bin/outbox-consumer" --db "$consumer_db" --listen "$url" 2>"$work/consumer.log" &
	pids+=($!)
	"$bin/outbox-relay" --db "${primary/user=postgres/user=gate_relay}" --route "order.placed=$url" \
		--poll-ms 50 --lease-ms 5s --delivery-timeout-ms 1s --standby-gate-timeout 1s \
		--standby-gate flush --standby-names standby1 2>"$work/relay.log" &
	pids+=($!)
	N=1 orders "$primary" g
	wait_for "the relay to name the missing grant" grep -q 'GRANT pg_monitor' "$work/relay.log"
	[ "$(q "$consumer_db" "SELECT count(*) FROM inbox.processed")" = 0 ] ||
		fail "grant: delivered without seeing the standby's position"
	q "$primary" "GRANT pg_monitor TO gate_relay" >/dev/null
	wait_for "delivery once pg_monitor is granted" applied 1
	echo "check_failover: grant: without pg_monitor the gate says so and holds; granted, it delivers"
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null
	pids=()
}

run_case() {
	local mode=$1 gate=()
	[ "$mode" != none ] && gate=(--standby-gate "$mode" --standby-names standby1)
	setup_servers

	local url="ipc://$work/consumer.ipc"
	"$bin/outbox-consumer" --db "$consumer_db" --listen "$url" 2>"$work/consumer.log" &
	pids+=($!)
	"$bin/outbox-relay" --db "$primary" --route "order.placed=$url" --poll-ms 50 --lease-ms 5s \
		--delivery-timeout-ms 1s --standby-gate-timeout 1s "${gate[@]}" 2>"$work/relay.log" &
	local relay=$!
	pids+=($relay)

	# phase A: replication up, every order reaches the standby and the consumer
	orders "$primary" a
	wait_for "phase A applied" applied "$N"
	# and on the standby (asynchronous: it may lag): the window is phase B's
	wait_for "the standby to replay phase A" caught_up "$(q "$primary" "SELECT pg_current_wal_insert_lsn()")"

	if [ "$mode" = replay ]; then
		# the WAL still streams to the standby's disk; it is not replayed
		q "$standby" "SELECT pg_wal_replay_pause()" >/dev/null
		orders "$primary" b
		flushed() { [ "$(q "$primary" "SELECT flush_lsn >= '$1'::pg_lsn FROM pg_stat_replication")" = t ]; }
		wait_for "phase B flushed on the standby" flushed "$(q "$primary" "SELECT pg_current_wal_insert_lsn()")"
	else
		# cut: the standby receives nothing more
		q "$standby" "ALTER SYSTEM SET primary_conninfo = ''" >/dev/null
		q "$standby" "SELECT pg_reload_conf()" >/dev/null
		wait_for "replication to stop" no_standby
		orders "$primary" b
	fi
	if [ "$mode" = none ]; then
		wait_for "phase B applied" applied $((2 * N))
	else
		wait_for "the gate to hold phase B" grep -q 'event=relay.standby_gate.waiting' "$work/relay.log"
		[ "$(q "$consumer_db" "SELECT count(*) FROM inbox.processed")" = "$N" ] ||
			fail "$mode: the gate let phase B through before the standby had it"
	fi

	# the primary dies; the standby is promoted (a paused replay ends and
	# replays what it received: phase B survives in the replay case)
	kill "$relay"; wait "$relay" 2>/dev/null
	"$ROOT/scripts/pg-tmp.sh" kill "$work/p" || fail "cannot kill the primary"
	"$ROOT/scripts/pg-tmp.sh" promote "$work/s" || fail "cannot promote the standby"
	local exists phantoms applied_n
	exists=$(q "$standby" "SELECT count(*) FROM orders")
	applied_n=$(q "$consumer_db" "SELECT count(*) FROM inbox.processed")
	keys=$(q "$standby" "SELECT string_agg(quote_literal(key), ',') FROM orders")
	phantoms=$(q "$consumer_db" "SELECT count(*) FROM inbox.processed WHERE idempotency_key NOT IN ($keys)")
	echo "check_failover: $mode: orders on the promoted standby $exists, effects $applied_n, phantoms $phantoms"
	case "$mode" in
	none)
		[ "$phantoms" = "$N" ] || fail "none: expected the $N phantoms of the broken case, saw $phantoms" ;;
	*)
		[ "$phantoms" = 0 ] || fail "$mode: $phantoms phantom effects"
		# a relay on the new primary delivers what survived, each once
		"$bin/outbox-relay" --db "$standby" --route "order.placed=$url" --poll-ms 50 \
			--lease-ms 5s --delivery-timeout-ms 1s 2>"$work/relay2.log" &
		relay=$!
		pids+=($relay)
		wait_for "what survived applied" applied "$exists"
		kill "$relay"; wait "$relay" 2>/dev/null
		applied_n=$(q "$consumer_db" "SELECT count(*) FROM inbox.processed")
		phantoms=$(q "$consumer_db" "SELECT count(*) FROM inbox.processed WHERE idempotency_key NOT IN ($keys)")
		[ "$applied_n" = "$exists" ] && [ "$phantoms" = 0 ] ||
			fail "$mode: after the failover $applied_n effects for $exists orders, $phantoms phantoms"
		echo "check_failover: $mode: after the failover every surviving order applied once ($applied_n), no phantom" ;;
	esac
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null
	pids=()
}

# bad gate options: refused at start (exit 2, one line), nothing connects
badflags() { # badflags WANT-TEXT FLAGS...
	local want=$1 out rc; shift
	out=$("$bin/outbox-relay" --db "host=/nonexistent dbname=x" --route "t=ipc://$work/x" "$@" 2>&1)
	rc=$?
	[ "$rc" = 2 ] && grep -q -- "$want" <<<"$out" || fail "outbox-relay $*: exit $rc, '$out' (want 2, '$want')"
}
badflags "needs --standby-names" --standby-gate flush
badflags "needs --standby-gate" --standby-names s1
badflags "is not a standby name" --standby-gate replay --standby-names "a'b"
badflags "must exceed --standby-gate-timeout" --standby-gate flush --standby-names s1 \
	--lease-ms 5s --delivery-timeout-ms 2s --standby-gate-timeout 2s
badflags "standby-gate" --standby-gate sometimes --standby-names s1

for c in "${cases[@]}"; do
	case "$c" in none|flush|replay) run_case "$c" ;; grant) run_grant ;; *) echo "check_failover: unknown case '$c'" >&2; exit 2 ;; esac
done
echo "check_failover: ok (${cases[*]})"
