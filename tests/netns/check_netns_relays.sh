#!/usr/bin/env bash
# check_netns_relays.sh - relays on two "hosts" across a real network hop,
# one cut off from PostgreSQL in the middle of a batch (issue 18, part 1).
#
# Two network namespaces (scripts/netns.sh: a bridge and veth pairs in
# 198.18.X.0/24, inside 198.18.0.0/15) run relay A (2 workers) and relay B.
# PostgreSQL (scripts/pg-tmp.sh, OUTBOX_PG_LISTEN) and the consumer listen
# on the bridge's address in the root namespace; every relay connection is
# TCP over a veth. The interleaving, made explicit:
#   1. N messages are enqueued; only A runs; A's first claim stalls
#      (--fault-stall-after-claim 1: it holds batch X and its lease);
#   2. A is cut off from PostgreSQL (nftables drop, both ways, in A's
#      namespace; the consumer stays reachable) and B starts;
#   3. X's lease runs out: B takes it over (X's fence > A's, takeovers = 1)
#      and delivers all N;
#   4. A's stall ends inside the cut: A sends X (the consumer answers
#      duplicate) and writes its outcome, which waits on the dead link;
#      A's other worker, polling, notices the dead link by the libpq
#      tcp_user_timeout default (relay.db.lost) in bounded time;
#   5. the link returns (only after that relay.db.lost): A's late write
#      reaches PostgreSQL and is refused by the fence
#      (relay.record.fenced_out), the lost worker reconnects by itself
#      (relay.db.connected reconnect=1);
#   6. B is stopped, M more messages are enqueued: A alone delivers them.
# Checked: the consumer's effects = N + M, no key applied twice, nothing
# pending. The broken mode first (relays --no-fencing, consumer
# --no-dedup): A's late send is applied a second time and its late write
# lands unrefused (no fenced_out): the check must see those duplicates.
#
# Also (mode notimeout, first): with the libpq TCP defaults switched off in
# the conninfo, a relay cut off while polling does not notice the dead link
# at all in 25 s - the bug the defaults (common/pg.c) fix.
#
# usage: check_netns_relays.sh BIN_DIR [notimeout|broken|full ...]  (default: all)
# Exit 0 every check held, 1 a check failed or a wait passed its deadline,
# 2 usage, 3 could not run (not root, no ip/nft, the network or PostgreSQL
# could not be made). Under OUTBOX_TEST_STRICT=1, "could not run" is a failure too.
# Environment: NETNS_N (300, 1..100000), NETNS_M (50, 1..100000),
# NETNS_DEADLINE_S (90, any single wait, 10..3600).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:?usage: check_netns_relays.sh BIN_DIR [notimeout|broken|full ...]}
shift
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(notimeout broken full)
for m in "${modes[@]}"; do
	case $m in notimeout | broken | full) ;; *) echo "check_netns_relays: unknown mode '$m' (notimeout|broken|full)" >&2; exit 2 ;; esac
done

N=${NETNS_N:-300}             # the backlog of step 1
M=${NETNS_M:-50}              # delivered by A alone after the cut
BATCH=50                      # --batch: X holds this many
LEASE_MS=3000                 # --lease-ms; the cut lasts longer than this
STALL_MS=6000                 # A's stall: past the lease, ends inside the cut
DEADLINE_S=${NETNS_DEADLINE_S:-90}  # any single wait
PREFIX=obnr                   # names: obnr<pid>{a,b,br,ha,hb,na,nb}
TAG=$PREFIX$$
for v in N:1:100000 M:1:100000 DEADLINE_S:10:3600; do
	IFS=: read -r name lo hi <<<"$v"
	val=${!name}
	case $val in '' | *[!0-9]*) echo "check_netns_relays: NETNS_$name='$val' is not a whole number" >&2; exit 2 ;; esac
	[ "$val" -ge "$lo" ] && [ "$val" -le "$hi" ] ||
		{ echo "check_netns_relays: NETNS_$name=$val is outside $lo..$hi" >&2; exit 2; }
done

cant() { echo "check_netns_relays: CANNOT RUN: $*" >&2; [ "${OUTBOX_TEST_STRICT:-}" = 1 ] && exit 1; exit 3; }
[ "$(id -u)" = 0 ] || cant "not root (network namespaces need CAP_NET_ADMIN)"
command -v ip >/dev/null || cant "iproute2 (ip) is not installed"
command -v nft >/dev/null || cant "nftables (nft) is not installed"
for b in outbox-relay outbox-consumer outboxctl; do
	[ -x "$bin/$b" ] || cant "$bin/$b not built"
done
# shellcheck source=scripts/netns.sh
. "$ROOT/scripts/netns.sh"

work=$(mktemp -d /tmp/outbox-netns.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null; kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	"$ROOT/scripts/pg-tmp.sh" stop "$work/pg" >/dev/null 2>&1
	netns_teardown "$TAG"
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 3' INT TERM
failed=0
fail() {
	echo "check_netns_relays: FAILED: $*" >&2
	local f
	for f in "$work"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -8 "$f" >&2; }; done
	# what a rerun cannot show: the state the wait gave up on, and the
	# whole logs, kept past the cleanup
	if [ -n "${pdb:-}" ]; then
		echo "--- outbox state" >&2
		q "$pdb" "SELECT id, state, owner, fence, takeovers, lease_until < now() AS expired
		          FROM outbox.batches WHERE state <> 'done' ORDER BY id LIMIT 20" >&2
		q "$pdb" "SELECT status, count(*) FROM outbox.messages GROUP BY 1" >&2
	fi
	local keep
	keep=$(mktemp -d /tmp/outbox-netns-failed.XXXXXX) && cp "$work"/*.log "$keep"/ 2>/dev/null &&
		echo "check_netns_relays: the logs are kept in $keep" >&2
	exit 1
}
check() { # check WHAT CMD...: CMD's status decides
	local what=$1
	shift
	if "$@"; then echo "check_netns_relays: $mode: PASS  $what"
	else echo "check_netns_relays: $mode: FAIL  $what"; failed=1; fi
}
all() { local c; for c in "$@"; do eval "$c" || return 1; done; } # all 'TEST' 'TEST'...
say() { echo "check_netns_relays: $mode: $*"; }
wait_for() { # wait_for WHAT CMD...
	local what=$1 end=$(($(date +%s) + DEADLINE_S))
	shift
	until "$@" 2>/dev/null; do
		[ "$(date +%s)" -lt "$end" ] || fail "$mode: timed out (${DEADLINE_S}s) waiting for $what"
		sleep 0.1
	done
}
q() { psql "$1" -XAtqc "$2" 2>>"$work/psql.err"; }
logged() { grep -q -- "$2" "$work/$1.log"; }
field() { # field LOG EVENT KEY: KEY=value of the last EVENT line
	grep -- "$2" "$work/$1.log" | tail -1 | grep -oE "(^| )$3=[^ ]*" | head -1 | cut -d= -f2
}
effects() { q "$cdb" "SELECT count(*) FROM inbox.notifications"; }
at_least() { local v; v=$("${@:2}"); [ "${v:-0}" -ge "$1" ]; }
enqueue() { # enqueue FROM TO
	q "$pdb" "SELECT count(outbox.enqueue('order.placed', 'k-' || i, jsonb_build_object('order', i)))
	          FROM generate_series($1, $2) i" >/dev/null || fail "enqueue $1..$2"
}

# ---- the network and the database (once) ----------------------------------
netns_sweep "$PREFIX"
netns_net "$TAG" || cant "no bridge (see above)"
ipa=$(netns_host "$TAG" a 2) || cant "no host a"
ipb=$(netns_host "$TAG" b 3) || cant "no host b"
gw=$NETNS_GW
OUTBOX_PG_LISTEN=$gw OUTBOX_PG_HBA_NET="$NETNS_SUBNET.0/24" \
	"$ROOT/scripts/pg-tmp.sh" start "$work/pg" >/dev/null || cant "PostgreSQL did not start"
# shellcheck disable=SC1091
pgport=$(. "$work/pg/env" && echo "$PGPORT")
admin="host=$work/pg/sock port=$pgport user=postgres dbname=postgres"
echo "check_netns_relays: hosts a=$ipa b=$ipb, PostgreSQL and the consumer on $gw (port $pgport)"

run_mode() {
	mode=$1
	local relay_x=() cons_x=()
	[ "$mode" = broken ] && { relay_x=(--no-fencing); cons_x=(--no-dedup); }
	rm -f "$work"/*.log "$work/ready"
	q "$admin" "DROP DATABASE IF EXISTS p_$mode" >/dev/null 2>&1
	q "$admin" "DROP DATABASE IF EXISTS c_$mode" >/dev/null
	q "$admin" "CREATE DATABASE p_$mode" >/dev/null && q "$admin" "CREATE DATABASE c_$mode" >/dev/null ||
		fail "create databases"
	pdb="host=$work/pg/sock port=$pgport user=postgres dbname=p_$mode"
	cdb="host=$work/pg/sock port=$pgport user=postgres dbname=c_$mode"
	"$bin/outboxctl" migrate --db "$pdb" --schema outbox >/dev/null || fail "migrate outbox"
	"$bin/outboxctl" migrate --db "$cdb" --schema inbox >/dev/null || fail "migrate inbox"
	local tcp_db="host=$gw port=$pgport user=postgres dbname=p_$mode"

	"$bin/outbox-consumer" --db "$cdb" --listen "tcp://$gw:0" --ready-file "$work/ready" \
		"${cons_x[@]}" >"$work/consumer.log" 2>&1 &
	local cons=$!
	pids+=("$cons")
	wait_for "the consumer to listen" test -s "$work/ready"
	local url
	url=$(cat "$work/ready")
	local common=(--db "$tcp_db" --route "order.placed=$url" --poll-ms 200 --lease-ms "$LEASE_MS"
		--delivery-timeout-ms 1s --batch "$BATCH" --max-inflight 1 "${relay_x[@]}")

	# 1. the backlog; A alone; its first claim stalls holding batch X
	enqueue 1 "$N"
	ip netns exec "$TAG"a "$bin/outbox-relay" "${common[@]}" --workers 2 \
		--fault-stall-after-claim 1 --fault-stall-ms "$STALL_MS" >"$work/relay-a.log" 2>&1 &
	local ra=$!
	pids+=("$ra")
	wait_for "A to stall holding a claim" logged relay-a "relay.fault.stall "
	local x xfence xowner xn
	x=$(field relay-a "relay.fault.stall " batch) xfence=$(field relay-a "relay.fault.stall " fence)
	xowner=$(field relay-a "relay.fault.stall " owner) xn=$(field relay-a "relay.fault.stall " messages)
	say "A ($xowner) stalls holding batch $x (fence $xfence, $xn messages)"

	# 2. the cut, while A holds X; then B starts
	netns_cut "$TAG"a "$gw" "$pgport" || cant "nft cut failed"
	local t_cut=$SECONDS
	ip netns exec "$TAG"b "$bin/outbox-relay" "${common[@]}" --workers 1 >"$work/relay-b.log" 2>&1 &
	local rb=$!
	pids+=("$rb")

	# 3. B takes X over after its lease and delivers the whole backlog
	taken_over() {
		[ "$(q "$pdb" "SELECT owner <> '$xowner' AND fence > $xfence AND takeovers >= 1
		               FROM outbox.batches WHERE id = $x")" = t ]
	}
	wait_for "B to take batch $x over" taken_over
	wait_for "the backlog applied" at_least "$N" effects
	say "B took batch $x over: $(q "$pdb" "SELECT 'owner ' || owner || ', fence ' || fence || ', takeovers ' || takeovers || ', state ' || state FROM outbox.batches WHERE id = $x")"

	# 4. A's stall ends inside the cut: it sends X, its outcome write waits;
	# the other worker finds the link dead in bounded time
	wait_for "A's stall to end" logged relay-a relay.fault.stall_over
	wait_for "A's other worker to find the link dead" logged relay-a relay.db.lost
	local t_lost=$((SECONDS - t_cut))
	logged relay-a relay.db.connected.*reconnect=1 && fail "A reconnected while cut off"
	# 5. the link returns
	netns_restore "$TAG"a || fail "restore failed"
	say "cut for $((SECONDS - t_cut)) s (lease $LEASE_MS ms); A's idle-polling worker found the link dead after ${t_lost} s"
	wait_for "A to reconnect by itself" logged relay-a 'relay.db.connected.*reconnect=1'
	if [ "$mode" = full ]; then
		wait_for "A's late write to be refused" logged relay-a relay.record.fenced_out
	else
		# the late send is applied again (no dedup): N + X's size effects
		wait_for "A's late send applied" at_least $((N + xn)) effects
	fi

	# 6. B stops; A alone delivers M more
	kill "$rb"; wait "$rb" 2>/dev/null
	enqueue $((N + 1)) $((N + M))
	wait_for "A to deliver the new messages" \
		test "$(q "$pdb" "SELECT outbox.backlog_empty()")" = t
	wait_for "the new messages applied" at_least $((N + M)) \
		q "$cdb" "SELECT count(DISTINCT idempotency_key) FROM inbox.notifications"

	local eff keys fenced dups
	eff=$(effects)
	keys=$(q "$cdb" "SELECT count(DISTINCT idempotency_key) FROM inbox.notifications")
	fenced=$(grep -c relay.record.fenced_out "$work/relay-a.log")
	dups=$((eff - keys))
	say "effects $eff for $keys keys ($((N + M)) messages): duplicates $dups; A's fenced_out lines $fenced"
	if [ "$mode" = broken ]; then
		check "the broken mode shows duplicate effects ($dups)" [ "$dups" -ge 1 ]
		check "the broken mode's late write was not refused (fenced_out lines $fenced)" [ "$fenced" = 0 ]
	else
		local n_fenced
		n_fenced=$(field relay-a relay.record.fenced_out fenced_out)
		check "every message applied exactly once (effects $eff = keys $keys = $((N + M)))" \
			all "[ $eff = $((N + M)) ]" "[ $keys = $((N + M)) ]"
		check "A's late write of batch $x refused ($n_fenced messages fenced out)" \
			all "[ '$(field relay-a relay.record.fenced_out batch)' = $x ]" "[ ${n_fenced:-0} -ge 1 ]"
		check "dedup records = messages ($(q "$cdb" "SELECT count(*) FROM inbox.processed"))" \
			[ "$(q "$cdb" "SELECT count(*) FROM inbox.processed")" = $((N + M)) ]
	fi
	check "nothing pending or leased" [ "$(q "$pdb" "SELECT count(*) FROM outbox.batches WHERE state = 'leased'")" = 0 ]
	check "A found the dead link within 30 s (${t_lost} s)" [ "$t_lost" -le 30 ]
	kill "$ra" "$cons" 2>/dev/null; wait "$ra" "$cons" 2>/dev/null
	pids=()
	no_sanitizer_report
}
# an ASan/UBSan build (build-asan) reports into the programs' logs
no_sanitizer_report() {
	local san
	san=$(grep -lE 'ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:' "$work"/*.log 2>/dev/null |
		xargs -r -n1 basename | tr '\n' ' ')
	check "no sanitizer report in the programs' logs${san:+ ($san)}" [ -z "$san" ]
}

# Without the libpq TCP defaults (common/pg.c; the conninfo turns them
# off): a relay cut off while it polls does not notice in NOTIMEOUT_S: its
# query waits on the kernel's retransmissions (~15 min). The same cut with
# the defaults (the modes above) is noticed in ~10 s.
NOTIMEOUT_S=25
run_notimeout() {
	mode=notimeout
	rm -f "$work"/*.log
	q "$admin" "DROP DATABASE IF EXISTS p_$mode" >/dev/null 2>&1
	q "$admin" "CREATE DATABASE p_$mode" >/dev/null || fail "create database"
	pdb="host=$work/pg/sock port=$pgport user=postgres dbname=p_$mode"
	"$bin/outboxctl" migrate --db "$pdb" --schema outbox >/dev/null || fail "migrate outbox"
	ip netns exec "$TAG"a "$bin/outbox-relay" --route "order.placed=tcp://$gw:1" --poll-ms 200 \
		--db "host=$gw port=$pgport user=postgres dbname=p_$mode keepalives=0 tcp_user_timeout=0" \
		>"$work/relay-a.log" 2>&1 &
	local ra=$!
	pids+=("$ra")
	wait_for "A to connect" logged relay-a relay.db.connected
	netns_cut "$TAG"a "$gw" "$pgport" || cant "nft cut failed"
	local end=$((SECONDS + NOTIMEOUT_S)) lost=0
	while [ $SECONDS -lt $end ]; do
		logged relay-a relay.db.lost && { lost=1; break; }
		sleep 0.2
	done
	netns_restore "$TAG"a || fail "restore failed"
	check "without keepalives/tcp_user_timeout the dead link goes unnoticed for ${NOTIMEOUT_S} s (the bug the defaults fix)" \
		[ $lost = 0 ]
	kill "$ra" 2>/dev/null; wait "$ra" 2>/dev/null
	pids=()
	no_sanitizer_report
}

for m in "${modes[@]}"; do
	case $m in
	broken | full) run_mode "$m" ;;
	notimeout) run_notimeout ;;
	esac
done
[ $failed = 0 ] || { echo "check_netns_relays: FAILED"; exit 1; }
echo "check_netns_relays: every check held (${modes[*]})"
