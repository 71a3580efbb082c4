#!/usr/bin/env bash
# scenario.sh - the end-to-end integration test to copy: bug reports go in
# over HTTP while processes are killed, paused past their lease, cut off the
# network and the database restarts; then psql proves that every report
# produced exactly one effect.
#
#   deploy/scenario.sh [local]          local processes (the default; the
#                                       test suite runs this one)
#   deploy/scenario.sh local --broken   consumers --no-dedup, producer
#                                       --idempotency none: the assertions
#                                       must FAIL (duplicates counted)
#   deploy/scenario.sh compose          against deploy/docker-compose.yml
#                                       (+ deploy/scenario/faults.yml), and
#                                       a rolling restart under load
#   deploy/scenario.sh compose --broken the same with
#                                       deploy/scenario/broken.yml: must FAIL
#   deploy/scenario.sh compose --dry-run   print the compose-mode commands
#
# Exit: 0 every assertion held; 1 an assertion failed; 2 usage; 3 the
# scenario could not run (a program did not start, a deadline passed).
# docs/scenario.md explains each fault and how to read the summary.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)

# ---- limits (each also read from the environment) --------------------------
SCEN_CLIENTS=${SCEN_CLIENTS:-4}              # concurrent agent tools submitting
SCEN_PACE_MS=${SCEN_PACE_MS:-40}             # pause between one tool's calls
SCEN_LEASE_MS=${SCEN_LEASE_MS:-3000}         # relay --lease-ms
SCEN_DELIVERY_TIMEOUT_MS=${SCEN_DELIVERY_TIMEOUT_MS:-1500} # < lease - 1 s
SCEN_CALL_DEADLINE_S=${SCEN_CALL_DEADLINE_S:-60}  # one logical call, all re-runs
SCEN_STEP_DEADLINE_S=${SCEN_STEP_DEADLINE_S:-30}  # any single wait
SCEN_DRAIN_DEADLINE_S=${SCEN_DRAIN_DEADLINE_S:-90} # everything delivered
SCEN_MAX_S=${SCEN_MAX_S:-}                   # the whole run (watchdog): default 240 local, 600 compose
SCEN_LOST_RESPONSES=${SCEN_LOST_RESPONSES:-3} # producer --fault-lose-response
SCEN_NETCUT=${SCEN_NETCUT:-auto}             # auto|nft|link: how the network cut is made
SCEN_COMPOSE_LEASE=${SCEN_COMPOSE_LEASE:-5s}  # RELAY_LEASE for the compose stack
SCEN_COMPOSE_DELIVERY_TIMEOUT=${SCEN_COMPOSE_DELIVERY_TIMEOUT:-2s}
SCEN_COMPOSE_PROJECT=${SCEN_COMPOSE_PROJECT:-outboxscenario} # [a-z0-9] only: same name in compose v1 and v2
SCEN_ROLL_BACKLOG=${SCEN_ROLL_BACKLOG:-12000}  # reports enqueued before the rolling restart
SCEN_ROLL_WRITERS=${SCEN_ROLL_WRITERS:-4}      # by this many enqueue processes
SCEN_ROLL_RELAY_WORKERS=${SCEN_ROLL_RELAY_WORKERS:-3}     # the config change the
SCEN_ROLL_CONSUMER_THREADS=${SCEN_ROLL_CONSUMER_THREADS:-3} # rolling restart rolls out

usage() {
	cat <<'EOF'
usage: deploy/scenario.sh [local|compose] [--broken] [--dry-run] [--keep]

  local      run everything as local processes (default): a throwaway
             PostgreSQL (scripts/pg-tmp.sh), the producer's HTTP API, two
             relays (--workers 2 each), two consumers (one in a network
             namespace); binaries from $OUTBOX_BIN_DIR (default build/bin)
  compose    run against deploy/docker-compose.yml with the faults of
             deploy/scenario/faults.yml, then a rolling restart under load
             (needs a Docker engine: DOCKER_HOST is honoured)
  --broken   consumers --no-dedup and producer --idempotency none (compose:
             deploy/scenario/broken.yml); local mode makes it a shorter
             run: the assertions must then fail
  --dry-run  (compose) print the commands instead of running them
  --keep     keep the work directory (logs) / leave the compose stack up

Environment: SCEN_CLIENTS, SCEN_PACE_MS, SCEN_LEASE_MS,
SCEN_DELIVERY_TIMEOUT_MS, SCEN_CALL_DEADLINE_S, SCEN_STEP_DEADLINE_S,
SCEN_DRAIN_DEADLINE_S, SCEN_MAX_S, SCEN_LOST_RESPONSES, SCEN_NETCUT, SCEN_COMPOSE_LEASE,
SCEN_COMPOSE_DELIVERY_TIMEOUT, SCEN_COMPOSE_PROJECT, SCEN_ROLL_BACKLOG, SCEN_ROLL_WRITERS,
SCEN_ROLL_RELAY_WORKERS, SCEN_ROLL_CONSUMER_THREADS (docs/scenario.md).
Exit 0 all assertions held, 1 an assertion failed, 2 usage, 3 could not run.
EOF
}

MODE=local BROKEN=0 DRY=0 KEEP=0
for a in "$@"; do
	case $a in
	local | compose) MODE=$a ;;
	--broken) BROKEN=1 ;;
	--dry-run) DRY=1 ;;
	--keep) KEEP=1 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "scenario: unknown argument '$a'" >&2; usage >&2; exit 2 ;;
	esac
done
[ "$MODE" = local ] && [ $DRY = 1 ] && { echo "scenario: --dry-run is a compose-mode switch (local mode needs no engine: just run it)" >&2; exit 2; }
case $SCEN_NETCUT in auto | nft | link) ;; *) echo "scenario: SCEN_NETCUT must be auto, nft or link" >&2; exit 2 ;; esac
[ -n "$SCEN_MAX_S" ] || { SCEN_MAX_S=240; [ "$MODE" = compose ] && SCEN_MAX_S=600; }
for v in SCEN_CLIENTS SCEN_PACE_MS SCEN_LEASE_MS SCEN_DELIVERY_TIMEOUT_MS SCEN_CALL_DEADLINE_S \
	SCEN_STEP_DEADLINE_S SCEN_DRAIN_DEADLINE_S SCEN_MAX_S SCEN_LOST_RESPONSES SCEN_ROLL_BACKLOG SCEN_ROLL_WRITERS \
	SCEN_ROLL_RELAY_WORKERS SCEN_ROLL_CONSUMER_THREADS; do
	case ${!v} in '' | *[!0-9]*) echo "scenario: $v='${!v}' is not a whole number" >&2; exit 2 ;; esac
done
[ "$SCEN_CLIENTS" -ge 1 ] && [ "$SCEN_CLIENTS" -le 64 ] || { echo "scenario: SCEN_CLIENTS must be 1..64" >&2; exit 2; }
[ "$SCEN_ROLL_BACKLOG" -ge 1 ] && [ "$SCEN_ROLL_BACKLOG" -le 1000000 ] || { echo "scenario: SCEN_ROLL_BACKLOG must be 1..1000000" >&2; exit 2; }
[ "$SCEN_ROLL_WRITERS" -ge 1 ] && [ "$SCEN_ROLL_WRITERS" -le 16 ] || { echo "scenario: SCEN_ROLL_WRITERS must be 1..16" >&2; exit 2; }
[ "$SCEN_ROLL_RELAY_WORKERS" -ge 1 ] && [ "$SCEN_ROLL_RELAY_WORKERS" -le 64 ] || { echo "scenario: SCEN_ROLL_RELAY_WORKERS must be 1..64" >&2; exit 2; }
[ "$SCEN_ROLL_CONSUMER_THREADS" -ge 1 ] && [ "$SCEN_ROLL_CONSUMER_THREADS" -le 256 ] || { echo "scenario: SCEN_ROLL_CONSUMER_THREADS must be 1..256" >&2; exit 2; }
[ "$SCEN_LEASE_MS" -gt $((SCEN_DELIVERY_TIMEOUT_MS + 1000)) ] ||
	{ echo "scenario: SCEN_LEASE_MS must exceed SCEN_DELIVERY_TIMEOUT_MS + 1000 (the relay refuses otherwise)" >&2; exit 2; }

T0=$(date +%s)
say() { printf 'scenario [%3ss] %s\n' $(($(date +%s) - T0)) "$*"; }
die() { say "CANNOT RUN: $*" >&2; exit 3; }

FAULTS=()        # "name|what happened" for the summary
fault() { FAULTS+=("$1|$2"); say "fault: $1: $2"; }
SKIPS=()         # "name|why" of faults that could not be injected
skipped() { SKIPS+=("$1|$2"); say "SKIPPED $1: $2"; }

# wait_for DEADLINE_S WHAT CMD...: poll CMD every 0.2 s until it succeeds.
wait_for() {
	local deadline=$(($(date +%s) + $1)) what=$2
	shift 2
	until "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -lt "$deadline" ] || { say "deadline: $what (${deadline}s)"; return 1; }
		sleep 0.2
	done
}

# ---- the summary and the assertions (both modes) ---------------------------
# SQL runs through q_prod / q_cons (set per mode): producer and consumer
# databases may be different servers.
FAILED=0 EXTRA_ROWS=()
both_zero() { [ "$1" -eq 0 ] && [ "$2" -eq 0 ]; }
at_least() { # at_least N CMD...: CMD prints a number >= N
	local n=$1 v
	shift
	v=$("$@" 2>/dev/null)
	case $v in '' | *[!0-9]*) return 1 ;; esac
	[ "$v" -ge "$n" ]
}
# Drained: nothing left to deliver (a few index probes per stream; the
# assertions below read the outbox.messages view once, at the end).
nothing_pending() { [ "$(q_prod "SELECT outbox.backlog_empty()")" = t ]; }
sleep_ms() { sleep "$(($1 / 1000)).$(printf %03d $(($1 % 1000)))"; }
check() { # check NAME CONDITION-TEXT: the shell test in "$@" after --
	local name=$1
	shift
	if "$@"; then say "PASS  $name"; else say "FAIL  $name"; FAILED=1; fi
}

# The queries behind the assertions (also printed by the compose dry run).
SQL_PROD_COUNTS="SELECT (SELECT count(*) FROM app.bug_reports), count(*),
  count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'dead'),
  count(*) FILTER (WHERE status = 'delivered') FROM outbox.messages"
SQL_CONS_COUNTS="SELECT count(*), count(DISTINCT idempotency_key),
  (SELECT count(*) FROM inbox.processed) FROM inbox.notifications"
ASSERT_SQL=("$SQL_PROD_COUNTS" "$SQL_CONS_COUNTS"
	"SELECT idempotency_key FROM app.bug_reports"
	"SELECT idempotency_key FROM outbox.messages"
	"SELECT idempotency_key FROM inbox.notifications")

assert_and_summarize() {
	local calls ok reports msgs pend dead deliv applied akeys processed
	calls=$(cat "$WORK"/calls.* 2>/dev/null | wc -l)
	ok=$(cat "$WORK"/ok.* 2>/dev/null | wc -l)
	IFS='|' read -r reports msgs pend dead deliv < <(q_prod "$SQL_PROD_COUNTS")
	IFS='|' read -r applied akeys processed < <(q_cons "$SQL_CONS_COUNTS")
	for v in reports msgs pend dead deliv applied akeys processed; do
		case ${!v} in '' | *[!0-9]*) say "could not read $v from the database: '${!v}'"; FAILED=1; printf -v "$v" 0 ;; esac
	done
	# The sets, not only the counts: the submitted keys are the reports'
	# keys; the outbox's keys are the notifications' keys.
	sort -u "$WORK"/calls.* >"$WORK/keys.calls" 2>/dev/null
	q_prod "SELECT idempotency_key FROM app.bug_reports" | sort -u >"$WORK/keys.reports"
	q_prod "SELECT idempotency_key FROM outbox.messages" | sort -u >"$WORK/keys.outbox"
	q_cons "SELECT idempotency_key FROM inbox.notifications" | sort -u >"$WORK/keys.applied"
	local report_dups=$((reports > calls ? reports - calls : 0))
	local effect_dups=$((applied - akeys))
	local lost
	lost=$(comm -23 "$WORK/keys.outbox" "$WORK/keys.applied" | wc -l)
	DUPLICATES=$((report_dups + effect_dups))

	echo
	say "assertions"
	check "every logical call answered OK ($ok of $calls)" [ "$ok" -eq "$calls" ]
	check "one report per logical call (reports $reports = calls $calls)" [ "$reports" -eq "$calls" ]
	check "the reports' keys are the submitted keys" cmp -s "$WORK/keys.calls" "$WORK/keys.reports"
	check "one outbox message per report (messages $msgs = reports $reports)" [ "$msgs" -eq "$reports" ]
	check "nothing pending ($pend) or dead ($dead)" both_zero "$pend" "$dead"
	check "every message delivered ($deliv of $msgs)" [ "$deliv" -eq "$msgs" ]
	check "one effect per message (notifications $applied = messages $msgs)" [ "$applied" -eq "$msgs" ]
	check "no key applied twice (distinct keys $akeys = notifications $applied)" [ "$akeys" -eq "$applied" ]
	check "no message lost (keys delivered but never applied: $lost)" [ "$lost" -eq 0 ]
	if [ "$MODE" = local ]; then # an ASan/UBSan build reports into the logs
		local san
		san=$(grep -lE 'ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:' "$WORK"/*.log 2>/dev/null | xargs -r -n1 basename | tr '\n' ' ')
		check "no sanitizer report in the programs' logs${san:+ ($san)}" [ -z "$san" ]
	elif [ $BROKEN = 0 ]; then # every restart of the rolling restart found messages pending
		check "the rolling restart ran under load (pending as each went: ${ROLL_PENDING[*]})" rolled_under_load
	fi

	local faults_n=${#FAULTS[@]}
	echo
	echo "summary ($MODE$([ $BROKEN = 1 ] && echo ', BROKEN modes'))"
	printf '  %-28s %8s\n' "submitted (logical calls)" "$calls" "answered OK" "$ok" \
		"reports (app.bug_reports)" "$reports" "outbox messages" "$msgs" \
		"delivered" "$deliv" "pending" "$pend" "dead" "$dead" \
		"applied (notifications)" "$applied" "dedup records" "$processed" \
		"duplicate reports" "$report_dups" "duplicate effects" "$effect_dups" \
		"duplicates" "$DUPLICATES" "lost" "$lost" "${EXTRA_ROWS[@]}" "faults injected" "$faults_n"
	echo "faults"
	local f
	for f in "${FAULTS[@]}"; do printf '  %-24s %s\n' "${f%%|*}" "${f#*|}"; done
	for f in "${SKIPS[@]}"; do printf '  %-24s SKIPPED: %s\n' "${f%%|*}" "${f#*|}"; done
	echo "result: $([ $FAILED = 0 ] && echo PASS || echo FAIL) duplicates=$DUPLICATES lost=$lost"
}

# ============================================================================
# local mode
# ============================================================================
PIDS_RELAY=() PID_PRODUCER='' PID_C1='' PID_C2='' SUBMITTERS=() WATCHDOG='' WORK=''
NETNS='' VETH_H='' NFT_TABLE='' PGDIR='' NETCUT_HOW='' NETCUT_SKIP=''

stop_pid() { # stop_pid PID DEADLINE_S: TERM, then KILL (and its children)
	local pid=$1 deadline=$(($(date +%s) + $2))
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null
	while kill -0 "$pid" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.1; done
	if kill -0 "$pid" 2>/dev/null; then
		pkill -KILL -P "$pid" 2>/dev/null
		kill -KILL "$pid" 2>/dev/null
	fi
	wait "$pid" 2>/dev/null
	return 0
}

local_cleanup() {
	local rc=$?
	trap - EXIT INT TERM USR1
	[ -n "$WORK" ] && [ -d "$WORK" ] && touch "$WORK/stop"
	local p
	for p in "${SUBMITTERS[@]}"; do pkill -TERM -P "$p" 2>/dev/null; kill -TERM "$p" 2>/dev/null; done
	for p in "${SUBMITTERS[@]}"; do wait "$p" 2>/dev/null; done
	# relays get SIGCONT first: a stopped worker cannot act on SIGTERM
	for p in "${PIDS_RELAY[@]}"; do pkill -CONT -P "$p" 2>/dev/null; done
	for p in "${PIDS_RELAY[@]}"; do stop_pid "$p" 10; done
	stop_pid "$PID_PRODUCER" 10
	stop_pid "$PID_C1" 10
	stop_pid "$PID_C2" 10
	[ -n "$NFT_TABLE" ] && nft delete table inet "$NFT_TABLE" 2>/dev/null
	[ -n "$VETH_H" ] && ip link del "$VETH_H" 2>/dev/null
	[ -n "$NETNS" ] && ip netns del "$NETNS" 2>/dev/null
	[ -n "$PGDIR" ] && "$ROOT/scripts/pg-tmp.sh" stop "$PGDIR" >/dev/null 2>&1
	if [ -n "$WATCHDOG" ]; then kill -TERM "$WATCHDOG" 2>/dev/null; wait "$WATCHDOG" 2>/dev/null; fi
	if [ -n "$WORK" ] && [ -d "$WORK" ]; then
		# kept when the run failed, unless the failure was the point (--broken)
		if [ $KEEP = 0 ] && { [ "$rc" = 0 ] || { [ $BROKEN = 1 ] && [ "$rc" = 1 ]; }; }; then
			rm -rf "$WORK"
		else
			say "logs kept in $WORK"
		fi
	fi
	exit "$rc"
}

q_prod() { psql "$PDB" -XAtq -c "$1" 2>>"$WORK/psql.err"; }
q_cons() { psql "$CDB" -XAtq -c "$1" 2>>"$WORK/psql.err"; }

start_consumer() { # start_consumer N LOGFILE: sets PID_C<N>
	local n=$1 log=$2 url ns=()
	if [ "$n" = 1 ]; then url=$C1_URL; else url=$C2_LISTEN; [ -n "$NETNS" ] && ns=(ip netns exec "$NETNS"); fi
	"${ns[@]}" "$BIN/outbox-consumer" --db "$CDB" --listen "$url" --threads 4 "${CONSUMER_EXTRA[@]}" \
		>"$log" 2>&1 &
	printf -v "PID_C$n" %s $!
	wait_for "$SCEN_STEP_DEADLINE_S" "consumer $n started" grep -q consumer.started "$log" ||
		{ tail -5 "$log" >&2; die "consumer $n did not start (log $log)"; }
}

# The worker processes of our relays (children of our supervisors).
relay_workers() {
	local sup
	for sup in "${PIDS_RELAY[@]}"; do pgrep -P "$sup"; done
}

# SIGSTOP a relay worker that holds claims and leave it stopped: prints
# "PID OWNER HELD". No race with the worker finishing first: every worker
# is frozen, the database says who holds what, and all but the chosen one
# are let go again at once (they were stopped for one query).
freeze_leased_worker() {
	local deadline=$(($(date +%s) + SCEN_STEP_DEADLINE_S)) workers owner held pid w tries=0
	while [ "$(date +%s)" -lt "$deadline" ]; do
		tries=$((tries + 1))
		workers=$(relay_workers)
		# shellcheck disable=SC2086
		kill -STOP $workers 2>/dev/null
		pid=
		while IFS='|' read -r owner held; do
			w=$(awk -F: '{print $(NF-1)}' <<<"$owner")
			grep -qx "$w" <<<"$workers" && { pid=$w; break; }
		done < <(q_prod "SELECT owner, sum(size) FROM outbox.batches WHERE state = 'leased'
		                 AND owner IS NOT NULL AND lease_until > now() GROUP BY 1 ORDER BY 2 DESC")
		for w in $workers; do [ "$w" = "$pid" ] || kill -CONT "$w" 2>/dev/null; done
		[ -n "$pid" ] && { echo "$pid $owner $held"; echo "freeze: $tries tries" >>"$WORK/freeze.log"; return 0; }
		sleep 0.1
	done
	return 1
}

held_by() { q_prod "SELECT COALESCE(sum(size), 0) FROM outbox.batches WHERE state = 'leased' AND owner = '$1'"; }

submitter() { # one agent tool: logical calls, each re-run with its key until OK
	local c=$1 i=0 key rc deadline url
	url=$(cat "$WORK/producer.url")
	while [ ! -f "$WORK/stop" ]; do
		key="scen-$RUN_ID-$c-$i"
		echo "$key" >>"$WORK/calls.$c"
		deadline=$(($(date +%s) + SCEN_CALL_DEADLINE_S))
		while :; do
			"$BIN/outbox-producer" submit --url "$url" --key "$key" \
				--title "scenario report $c-$i" --module "scenario" --severity low \
				--steps "submitted by deploy/scenario.sh" --ledger "$WORK/ledger.$c" \
				--attempts 6 --timeout-ms 2000 >>"$WORK/submit.$c.log" 2>&1
			rc=$?
			[ $rc = 0 ] && { echo "$key" >>"$WORK/ok.$c"; break; }
			[ $rc = 2 ] && { echo "usage error for $key" >>"$WORK/submit.$c.log"; return 2; }
			# 1 = not applied (retryable), 3 = SIDE_EFFECT_UNCERTAIN: the
			# ledger makes the next run look the key up before posting.
			[ "$(date +%s)" -lt "$deadline" ] || { echo "gave up on $key" >>"$WORK/submit.$c.log"; break; }
			sleep 0.3
		done
		i=$((i + 1))
		sleep_ms "$SCEN_PACE_MS"
	done
}

setup_netns() { # consumer 2's own network namespace; sets C2_LISTEN/C2_URL
	NETCUT_SKIP=
	if [ "$(id -u)" != 0 ]; then NETCUT_SKIP="not root (ip netns needs CAP_NET_ADMIN)"
	elif ! command -v ip >/dev/null; then NETCUT_SKIP="iproute2 (ip) is not installed"
	fi
	if [ -z "$NETCUT_SKIP" ]; then
		# leftovers of an earlier run that was SIGKILLed (no trap ran):
		# named after its pid, removed only when that pid is gone
		# shellcheck source=../scripts/netns.sh
		. "$ROOT/scripts/netns.sh"
		netns_sweep obscen obh
		local tag=$$ a b veth_n="obn$$"
		NETNS="obscen$tag" VETH_H="obh$tag"
		# 198.18.0.0/15 is reserved for network tests (RFC 2544): never a
		# real host; a free /30 of it lives only on this veth pair.
		for _ in 1 2 3 4 5 6 7 8; do
			a=$((RANDOM % 256)) b=$(((RANDOM % 64) * 4))
			ip -4 addr show | grep -q "inet 198\.1[89]\.$a\.$((b + 1))/" || break
		done
		C2_HOST_IP=198.18.$a.$((b + 1)) C2_IP=198.18.$a.$((b + 2))
		if netns_pair "$NETNS" "$VETH_H" "$veth_n" "$C2_HOST_IP" "$C2_IP" 30 2>"$WORK/netns.err"; then
			C2_LISTEN="tcp://$C2_IP:7450" C2_URL=$C2_LISTEN
			NETCUT_HOW="link"
			command -v nft >/dev/null && [ "$SCEN_NETCUT" != link ] && NETCUT_HOW="nft"
			[ "$SCEN_NETCUT" = nft ] && [ "$NETCUT_HOW" != nft ] && die "SCEN_NETCUT=nft but nft is not installed"
			say "consumer 2 runs in network namespace $NETNS ($C2_IP, veth $VETH_H; cut with $([ $NETCUT_HOW = nft ] && echo 'an nftables drop rule' || echo 'ip link set down'))"
			return 0
		fi
		NETCUT_SKIP="ip netns/veth failed: $(tr '\n' ' ' <"$WORK/netns.err")"
		NETNS='' VETH_H=''
	fi
	C2_LISTEN="ipc://$WORK/consumer2.ipc" C2_URL=$C2_LISTEN
	say "NOTE: the network-cut fault will be SKIPPED: $NETCUT_SKIP"
}

net_cut() {
	if [ "$NETCUT_HOW" = nft ]; then
		NFT_TABLE="obscen$$"
		netns_cut_link "$NFT_TABLE" "$VETH_H"
	else
		ip link set "$VETH_H" down
	fi
}

net_restore() {
	if [ "$NETCUT_HOW" = nft ]; then
		netns_restore_link "$NFT_TABLE" && NFT_TABLE=
	else
		ip link set "$VETH_H" up && ip addr replace "$C2_HOST_IP/30" dev "$VETH_H"
	fi
}

count_in() { cat "$@" 2>/dev/null | grep -c "${PATTERN:?}"; }

local_main() {
	BIN=${OUTBOX_BIN_DIR:-$ROOT/build/bin}
	local b
	for b in outbox-producer outbox-relay outbox-consumer outboxctl; do
		[ -x "$BIN/$b" ] || die "$BIN/$b not found: build first (cmake --build build) or set OUTBOX_BIN_DIR"
	done
	for b in psql awk; do command -v $b >/dev/null || die "$b is not installed"; done
	WORK=$(mktemp -d /tmp/outbox-scenario.XXXXXX) || die "mktemp failed"
	chmod 755 "$WORK"
	trap local_cleanup EXIT
	trap 'say "interrupted"; exit 3' INT
	trap 'say "terminated"; exit 3' TERM
	trap 'say "deadline: the whole run took longer than SCEN_MAX_S=${SCEN_MAX_S}s"; exit 3' USR1
	(
		trap 'kill "$s" 2>/dev/null; exit 0' TERM
		sleep "$SCEN_MAX_S" & s=$!
		wait "$s" && kill -USR1 $$
	) >/dev/null 2>&1 &
	WATCHDOG=$!
	RUN_ID=$(date +%s)-$$
	say "local mode$([ $BROKEN = 1 ] && echo ' (BROKEN: consumers --no-dedup, producer --idempotency none)'), work dir $WORK, binaries $BIN"

	# ---- PostgreSQL: one server, producer and consumer as two databases
	PGDIR=$WORK/pg
	"$ROOT/scripts/pg-tmp.sh" start "$PGDIR" >/dev/null || die "scripts/pg-tmp.sh start failed"
	set -a
	# shellcheck disable=SC1091
	. "$PGDIR/env"
	set +a
	psql -XAtq -d postgres -c "CREATE DATABASE scenario_producer" -c "CREATE DATABASE scenario_consumer" ||
		die "could not create the databases"
	PDB="host=$PGHOST port=$PGPORT user=$PGUSER dbname=scenario_producer"
	CDB="host=$PGHOST port=$PGPORT user=$PGUSER dbname=scenario_consumer"
	"$BIN/outboxctl" migrate --db "$PDB" --schema outbox --demo >"$WORK/migrate.log" 2>&1 &&
		"$BIN/outboxctl" migrate --db "$CDB" --schema inbox >>"$WORK/migrate.log" 2>&1 ||
		die "migrate failed: $(tail -3 "$WORK/migrate.log")"
	say "PostgreSQL up ($PGHOST), databases scenario_producer and scenario_consumer migrated"

	# ---- consumers
	setup_netns
	# an ipc path in the work dir: no port to collide with, and the restart
	# after kill -9 listens on the same URL again (nng replaces a stale socket)
	C1_URL="ipc://$WORK/consumer1.ipc"
	CONSUMER_EXTRA=()
	[ $BROKEN = 1 ] && CONSUMER_EXTRA+=(--no-dedup)
	# A slow apply (100 ms before COMMIT) keeps claims visibly in flight,
	# so the relay faults below hit a worker that holds some.
	"$BIN/outbox-consumer" --help 2>&1 | grep -q -- --fault-slow-ms &&
		CONSUMER_EXTRA+=(--fault-slow 1000000000 --fault-slow-ms 100ms)
	start_consumer 1 "$WORK/consumer1.log"
	start_consumer 2 "$WORK/consumer2.log"
	say "consumers up: $C1_URL (pid $PID_C1), $C2_URL (pid $PID_C2)"

	# ---- producer HTTP API
	local mode=atomic
	[ $BROKEN = 1 ] && mode=none
	"$BIN/outbox-producer" serve --db "$PDB" --http http://127.0.0.1:0 --ready-file "$WORK/producer.url" \
		--idempotency $mode --fault-lose-response "$SCEN_LOST_RESPONSES" >"$WORK/producer.log" 2>&1 &
	PID_PRODUCER=$!
	wait_for "$SCEN_STEP_DEADLINE_S" "producer ready" test -s "$WORK/producer.url" ||
		{ tail -5 "$WORK/producer.log" >&2; die "the producer did not start"; }
	say "producer up: $(cat "$WORK/producer.url") (pid $PID_PRODUCER, --idempotency $mode)"

	# ---- two relays, each with two workers, each routing to both consumers
	local r extra
	for r in 1 2; do
		extra=()
		[ $r = 1 ] && extra=(--fault-die-after-send 1)
		"$BIN/outbox-relay" --db "$PDB" --route "*=$C1_URL" --route "*=$C2_URL" --workers 2 \
			--lease-ms "${SCEN_LEASE_MS}ms" --delivery-timeout-ms "${SCEN_DELIVERY_TIMEOUT_MS}ms" \
			--poll-ms 200ms --backoff-base-ms 50ms --backoff-cap-ms 1s --breaker-threshold 3 \
			--breaker-probe-interval 500ms --shutdown-grace 3s "${extra[@]}" \
			>"$WORK/relay$r.log" 2>&1 &
		PIDS_RELAY+=($!)
	done
	for r in 1 2; do
		wait_for "$SCEN_STEP_DEADLINE_S" "relay $r workers started" \
			at_least 2 grep -c relay.worker.started "$WORK/relay$r.log" ||
			{ tail -5 "$WORK/relay$r.log" >&2; die "relay $r did not start"; }
	done
	say "relays up: pids ${PIDS_RELAY[*]} (2 workers each, lease ${SCEN_LEASE_MS} ms)"

	# ---- load: SCEN_CLIENTS agent tools submitting until the faults are over
	local c
	for c in $(seq 1 "$SCEN_CLIENTS"); do
		submitter "$c" </dev/null >/dev/null 2>&1 &
		SUBMITTERS+=($!)
	done
	say "submitting with $SCEN_CLIENTS concurrent agent tools"
	wait_for "$SCEN_STEP_DEADLINE_S" "first reports delivered" \
		at_least 10 q_cons "SELECT count(*) FROM inbox.notifications" ||
		die "nothing was delivered within ${SCEN_STEP_DEADLINE_S}s"

	# ---- faults, one after the other, each with a bounded wait
	inject_local_faults

	# the armed relay fault must have fired before the load stops (relay 1
	# gets work within seconds; this only bounds the wait)
	wait_for "$SCEN_STEP_DEADLINE_S" "relay 1's --fault-die-after-send" grep -q fault.die "$WORK/relay1.log" ||
		say "relay 1's --fault-die-after-send has not fired (relay 1 got no work?)"
	sleep 2 # some load after the last fault
	touch "$WORK/stop"
	say "faults done; waiting for the agent tools' last calls"
	local deadline=$(($(date +%s) + SCEN_CALL_DEADLINE_S + 10)) p
	for p in "${SUBMITTERS[@]}"; do
		while kill -0 "$p" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.2; done
	done

	say "waiting for the relays to drain the outbox (deadline ${SCEN_DRAIN_DEADLINE_S}s)"
	wait_for "$SCEN_DRAIN_DEADLINE_S" "outbox drained" nothing_pending
	sleep 1 # replies of the last frames

	# stop everything gracefully (SIGTERM) so that totals are logged
	for p in "${PIDS_RELAY[@]}"; do pkill -CONT -P "$p" 2>/dev/null; stop_pid "$p" 15; done
	stop_pid "$PID_C1" 10; stop_pid "$PID_C2" 10; stop_pid "$PID_PRODUCER" 10
	say "programs stopped"
	configured_faults
	EXTRA_ROWS=(
		"HTTP retries (same key)" "$(cat "$WORK"/submit.*.log | grep -o '"attempts":[0-9]*' | cut -d: -f2 | awk '{s += $1 - 1} END {print s + 0}')"
		"answered by replay" "$(cat "$WORK"/submit.*.log | grep -c '"replayed":true')"
		"tool re-runs (not OK)" "$(cat "$WORK"/submit.*.log | grep '^{' | grep -vc '"ok":true')"
		"relay retries" "$(sum_field relay.totals retried "$WORK"/relay*.log)"
		"relay fenced-out writes" "$(sum_field relay.totals fenced_out "$WORK"/relay*.log)"
		"relay worker restarts" "$(cat "$WORK"/relay*.log | grep relay.worker.exited | grep -c restart_in_ms)"
		"answered duplicate" "$(sum_field consumer.stopped duplicate "$WORK"/consumer*.log)"
	)
	assert_and_summarize
	[ $FAILED = 0 ] && return 0 || return 1
}

# The faults armed by flags at start, counted from the logs: they go first
# in the summary.
configured_faults() {
	local lost died
	lost=$(grep -c 'fault.fired.*lose_response' "$WORK/producer.log")
	died=$(grep -c 'fault.die' "$WORK/relay1.log")
	FAULTS=("producer-lost-response|$lost response(s) dropped after COMMIT (--fault-lose-response $SCEN_LOST_RESPONSES); the tool re-sent the same key"
		"relay-die-after-send|$died relay-1 worker(s) SIGKILLed themselves after the consumer answered, before recording (--fault-die-after-send 1)"
		"${FAULTS[@]}")
}

# Sum KEY=N over the lines of FILES matching EVENT: sum_field EVENT KEY FILES...
sum_field() {
	local ev=$1 key=$2
	shift 2
	cat "$@" 2>/dev/null | grep -F "$ev" | grep -o " $key=[0-9]*" | cut -d= -f2 | awk '{s += $1} END {print s + 0}'
}

inject_local_faults() {
	local got pid owner n held deadline

	# 1. and 2. are armed at start and counted at the end (configured_faults).
	# 3. kill -9 a relay worker that holds claims (frozen first, so that
	# "holds claims" is checked on the worker as it dies)
	got=$(freeze_leased_worker) && read -r pid owner held <<<"$got"
	if [ -n "$got" ]; then
		kill -KILL "$pid"
		kill -CONT "$pid" 2>/dev/null
		fault "kill-9-relay-worker" "worker $owner killed holding $held claim(s); its supervisor restarts it, the claims come back after the lease"
	else
		skipped kill-9-relay-worker "no relay worker held a claim within ${SCEN_STEP_DEADLINE_S}s"
	fi

	# 4. kill -9 consumer 1 and restart it on the same URL
	kill -KILL "$PID_C1" 2>/dev/null
	wait "$PID_C1" 2>/dev/null
	sleep 1
	start_consumer 1 "$WORK/consumer1.restart.log"
	fault "kill-9-consumer" "consumer 1 killed mid-traffic, restarted after 1 s (pid $PID_C1)"

	if [ $BROKEN = 1 ]; then
		local f
		for f in sigstop-relay-worker network-cut postgres-restart; do
			skipped "$f" "--broken is a shorter run (the faults above already duplicate)"
		done
		return 0
	fi

	# 5. SIGSTOP a relay worker holding claims for longer than the lease
	got=$(freeze_leased_worker) && read -r pid owner held <<<"$got"
	if [ -n "$got" ]; then
		sleep_ms $((SCEN_LEASE_MS + 1500))
		local after
		after=$(held_by "$owner")
		kill -CONT "$pid"
		fault "sigstop-relay-worker" "worker $owner stopped holding $held claim(s) for $((SCEN_LEASE_MS + 1500)) ms (lease $SCEN_LEASE_MS); still its own at SIGCONT: ${after:-?} (the rest were taken over and fenced)"
	else
		skipped sigstop-relay-worker "no relay worker held a claim within ${SCEN_STEP_DEADLINE_S}s"
	fi

	# 6. network cut between the relays and consumer 2
	if [ -n "$NETNS" ]; then
		net_cut || die "could not cut the network"
		local cut_ms=$((SCEN_LEASE_MS + 1500))
		sleep_ms "$cut_ms"
		net_restore || die "could not restore the network"
		fault "network-cut" "consumer 2 unreachable for $cut_ms ms ($NETCUT_HOW: $([ "$NETCUT_HOW" = nft ] && echo "drop on $VETH_H" || echo "$VETH_H down")), then restored"
	else
		skipped network-cut "$NETCUT_SKIP"
	fi

	# 7. restart PostgreSQL (fast shutdown: every connection is cut)
	"$ROOT/scripts/pg-tmp.sh" restart "$PGDIR" >"$WORK/pg-restart.log" 2>&1 || die "PostgreSQL did not restart: $(tail -3 "$WORK/pg-restart.log")"
	fault "postgres-restart" "scripts/pg-tmp.sh restart: every connection of every program dropped"
	wait_for "$SCEN_STEP_DEADLINE_S" "relays reconnected" grep -q 'relay.db.connected.*reconnect=1' "$WORK/relay2.log" ||
		say "relay 2 has not logged a reconnect yet"
}

# ============================================================================
# compose mode
# ============================================================================
exec 3>&2 # the commands run() prints go to the script's stderr, whatever a call redirects
run() { # print (on stderr) and run, or only print with --dry-run
	echo "+ $*" >&3
	[ $DRY = 1 ] && return 0
	"$@"
}

# Global, not local to compose_main: the EXIT trap runs after it returns.
DC=() COMPOSE_PIDS=()

# What of the project is still there: containers, networks, volumes.
compose_leftovers() {
	local label=com.docker.compose.project=$SCEN_COMPOSE_PROJECT
	docker version >/dev/null 2>&1 || { echo "(unknown: the Docker engine does not answer)"; return; }
	{
		docker ps -aq --filter "label=$label" | sed 's/^/container /'
		docker network ls -q --filter "label=$label" | sed 's/^/network /'
		docker volume ls -q --filter "label=$label" | sed 's/^/volume /'
	} 2>/dev/null | tr '\n' ' '
}

compose_cleanup() {
	local rc=$?
	trap - EXIT INT TERM USR1
	[ -n "$WORK" ] && [ -d "$WORK" ] && touch "$WORK/stop"
	local p
	for p in "${COMPOSE_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${COMPOSE_PIDS[@]}"; do wait "$p" 2>/dev/null; done
	if [ -n "$WATCHDOG" ]; then kill -TERM "$WATCHDOG" 2>/dev/null; wait "$WATCHDOG" 2>/dev/null; fi
	if [ $DRY = 0 ] && [ ${#DC[@]} -gt 0 ]; then
		local failed=0
		[ "$rc" = 0 ] || { [ $BROKEN = 1 ] && [ "$rc" = 1 ]; } || failed=1
		# the programs' logs, for a run that went wrong
		[ $failed = 1 ] && "${DC[@]}" logs --no-color >"$WORK/compose.log" 2>&1
		if [ $KEEP = 1 ]; then
			say "--keep: the stack is left up (${DC[*]} down -v removes it)"
		else
			"${DC[@]}" down -v --remove-orphans --timeout 20 >"$WORK/down.log" 2>&1 ||
				say "compose down failed: $(tail -3 "$WORK/down.log")"
			local left
			left=$(compose_leftovers)
			if [ -n "$left" ]; then
				say "LEFT BEHIND after compose down: $left"
				failed=1 rc=3
			else
				say "nothing of project $SCEN_COMPOSE_PROJECT is left (containers, networks, volumes)"
			fi
		fi
		if [ $failed = 1 ] && [ -n "$WORK" ]; then say "logs kept in $WORK"; WORK=''; fi
	fi
	[ -n "$WORK" ] && rm -rf "$WORK"
	exit "$rc"
}

compose_main() {
	local file=$ROOT/deploy/docker-compose.yml envfile=$ROOT/deploy/.env
	local faults=$ROOT/deploy/scenario/faults.yml broken=$ROOT/deploy/scenario/broken.yml
	[ -f "$envfile" ] || envfile=$ROOT/deploy/.env.example
	[ -f "$file" ] || die "$file not found"
	if docker compose version >/dev/null 2>&1; then DC=(docker compose)
	elif command -v docker-compose >/dev/null; then DC=(docker-compose)
	elif [ $DRY = 1 ]; then DC=(docker compose)
	else die "neither 'docker compose' nor docker-compose is installed"
	fi
	DC+=(-p "$SCEN_COMPOSE_PROJECT" -f "$file" -f "$faults")
	[ $BROKEN = 1 ] && DC+=(-f "$broken")
	DC+=(--env-file "$envfile")
	local PGUSER_C PGDB_C
	# as compose resolves them: the shell's environment, then the env file
	env_get() { # env_get NAME DEFAULT
		local v=${!1:-}
		[ -n "$v" ] || v=$(sed -nE "s/^$1=[\"']?([^\"']*)[\"']?\$/\1/p" "$envfile" | tail -1)
		echo "${v:-$2}"
	}
	PGUSER_C=$(env_get POSTGRES_USER outbox)
	PGDB_C=$(env_get POSTGRES_DB outbox)
	local NET URL
	WORK=$(mktemp -d /tmp/outbox-scenario.XXXXXX) || die "mktemp failed"
	RUN_ID=$(date +%s)-$$
	say "compose mode$([ $DRY = 1 ] && echo ' (DRY RUN: printing the commands)')$([ $BROKEN = 1 ] && echo ' (BROKEN: consumers --no-dedup, producer --idempotency none)'), project $SCEN_COMPOSE_PROJECT, env file $envfile"

	# The services and variables this scenario relies on must exist.
	local s services
	if command -v docker-compose >/dev/null &&
		services=$(docker-compose -f "$file" --env-file "$envfile" config --services 2>"$WORK/config.err"); then
		:
	else
		services=$(grep -oE '^  [a-z0-9-]+:' "$file" | tr -d ' :')
	fi
	for s in postgres migrate producer relay-1 relay-2 consumer-1 consumer-2; do
		grep -qx "$s" <<<"$services" || die "service '$s' is not in $file (services: $(echo $services))"
	done
	for s in RELAY_LEASE RELAY_DELIVERY_TIMEOUT RELAY_WORKERS CONSUMER_THREADS POSTGRES_USER POSTGRES_DB PRODUCER_HTTP_PORT; do
		grep -qE "^$s=" "$ROOT/deploy/.env.example" || die "$s is not documented in deploy/.env.example"
	done

	cid() { # container id of a service
		if [ $DRY = 1 ]; then echo "\$(${DC[*]} ps -q $1)"; else "${DC[@]}" ps -q "$1"; fi
	}
	q_prod() {
		"${DC[@]}" exec -T postgres psql -U "$PGUSER_C" -d "$PGDB_C" -XAtq -c "$1" 2>>"$WORK/psql.err"
	}
	q_cons() { q_prod "$@"; } # one database holds both schemas in this stack
	healthy() { [ "$(docker inspect -f '{{.State.Health.Status}}' "$1" 2>/dev/null)" = healthy ]; }
	trap compose_cleanup EXIT
	trap 'say "interrupted"; exit 3' INT
	trap 'say "terminated"; exit 3' TERM
	if [ $DRY = 0 ]; then
		trap 'say "deadline: the whole run took longer than SCEN_MAX_S=${SCEN_MAX_S}s"; exit 3' USR1
		(
			trap 'kill "$w" 2>/dev/null; exit 0' TERM
			sleep "$SCEN_MAX_S" & w=$!
			wait "$w" && kill -USR1 $$
		) >/dev/null 2>&1 &
		WATCHDOG=$!
		# a stack of an earlier run that was killed before its trap ran
		"${DC[@]}" down -v --remove-orphans --timeout 5 >/dev/null 2>&1
	fi

	# ---- up, with a short lease so that pause and cut outlast it quickly;
	# the producer published on any free port of the host's loopback
	echo "+ export RELAY_LEASE=$SCEN_COMPOSE_LEASE RELAY_DELIVERY_TIMEOUT=$SCEN_COMPOSE_DELIVERY_TIMEOUT PRODUCER_HTTP_BIND=127.0.0.1 PRODUCER_HTTP_PORT=0"
	export RELAY_LEASE=$SCEN_COMPOSE_LEASE RELAY_DELIVERY_TIMEOUT=$SCEN_COMPOSE_DELIVERY_TIMEOUT
	export PRODUCER_HTTP_BIND=127.0.0.1 PRODUCER_HTTP_PORT=0 SCEN_LOST_RESPONSES
	run "${DC[@]}" up -d --build || die "compose up failed"
	if [ $DRY = 0 ]; then
		local hostport
		hostport=$("${DC[@]}" port producer 8080 2>/dev/null | tail -1)
		case $hostport in *:[1-9]*) ;; *) die "compose did not publish the producer's port 8080 ('$hostport')" ;; esac
		URL=http://$hostport
	else
		echo "+ URL=http://\$(${DC[*]} port producer 8080)"
		URL='$URL'
	fi
	echo "+ wait until curl -fsS $URL/healthz answers (deadline ${SCEN_STEP_DEADLINE_S}s x 4)"
	if [ $DRY = 0 ]; then
		wait_for $((SCEN_STEP_DEADLINE_S * 4)) "producer healthy" curl -fsS "$URL/healthz" || die "the producer is not healthy"
	fi
	say "stack up: producer at $URL"

	# ---- load: curl with an Idempotency-Key per logical call, re-sent
	# unchanged until it is answered 200/201 (exactly what an agent tool does)
	compose_submitter() {
		local c=$1 i=0 key code deadline
		while [ ! -f "$WORK/stop" ]; do
			key="scen-$RUN_ID-$c-$i"
			echo "$key" >>"$WORK/calls.$c"
			deadline=$(($(date +%s) + SCEN_CALL_DEADLINE_S))
			while :; do
				code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 -X POST "$URL/v1/reports" \
					-H 'Content-Type: application/json' -H "Idempotency-Key: $key" \
					-d "{\"title\":\"scenario report $c-$i\",\"module\":\"scenario\",\"severity\":\"low\"}")
				echo "$code" >>"$WORK/codes.$c"
				case $code in 200 | 201) echo "$key" >>"$WORK/ok.$c"; break ;; 400 | 413 | 422) break ;; esac
				[ "$(date +%s)" -lt "$deadline" ] || break
				sleep 0.3
			done
			i=$((i + 1))
			sleep_ms "$SCEN_PACE_MS"
		done
	}
	echo "+ $SCEN_CLIENTS x until the faults are over: curl -X POST $URL/v1/reports -H 'Idempotency-Key: scen-RUN-C-I' -d '{\"title\":...,\"module\":\"scenario\",\"severity\":\"low\"}'  (same key re-sent until 200/201)"
	local c
	if [ $DRY = 0 ]; then
		for c in $(seq 1 "$SCEN_CLIENTS"); do compose_submitter "$c" </dev/null >/dev/null 2>&1 & COMPOSE_PIDS+=($!); done
		wait_for "$SCEN_STEP_DEADLINE_S" "first reports delivered" at_least 20 q_cons "SELECT count(*) FROM inbox.notifications" ||
			die "nothing was delivered within ${SCEN_STEP_DEADLINE_S}s"
	fi
	echo "+ wait until inbox.notifications has 20 rows (deadline ${SCEN_STEP_DEADLINE_S}s)"

	local lease_s=${SCEN_COMPOSE_LEASE%s} hold
	case $lease_s in *[!0-9]* | '') lease_s=30 ;; esac
	hold=$((lease_s + 3))
	# 1. kill a relay replica (supervisor and workers) and start it again
	run docker kill --signal KILL "$(cid relay-1)" >/dev/null
	run sleep 1
	run "${DC[@]}" start relay-1
	fault "kill-relay" "docker kill relay-1 (all its workers), started again; its claims come back after the lease"
	# 2. kill a consumer and start it again
	run docker kill --signal KILL "$(cid consumer-1)" >/dev/null
	run sleep 1
	run "${DC[@]}" start consumer-1
	fault "kill-consumer" "docker kill consumer-1, started again"
	if [ $BROKEN = 1 ]; then # the armed faults and the kills already duplicate
		for s in pause-relay network-cut postgres-restart rolling-restart; do
			skipped "$s" "--broken is a shorter run (the faults above already duplicate)"
		done
		ROLL_PENDING=(skipped)
		[ $DRY = 0 ] && sleep 5 && compose_count_armed_faults # some load after the kills
	else
	# 3. pause a relay replica past its lease
	run docker pause "$(cid relay-2)" >/dev/null
	run sleep "$hold"
	run docker unpause "$(cid relay-2)" >/dev/null
	fault "pause-relay" "docker pause relay-2 for ${hold}s (lease ${lease_s}s): its claims were taken over, its late writes fenced"
	# 4. cut consumer-2 off the network past the lease (the network compose
	# made for the project, as the container sees it)
	if [ $DRY = 1 ]; then
		echo "+ NET=\$(docker inspect -f '{{range \$k, \$v := .NetworkSettings.Networks}}{{\$k}}{{end}}' $(cid consumer-2))"
		NET='$NET'
	else
		NET=$(docker inspect -f '{{range $k, $v := .NetworkSettings.Networks}}{{$k}}{{end}}' "$(cid consumer-2)") ||
			die "could not find consumer-2's network"
	fi
	run docker network disconnect "$NET" "$(cid consumer-2)"
	run sleep "$hold"
	run docker network connect --alias consumer-2 "$NET" "$(cid consumer-2)"
	fault "network-cut" "docker network disconnect consumer-2 for ${hold}s, reconnected"
	# 5. restart PostgreSQL
	run docker restart "$(cid postgres)" >/dev/null
	echo "+ wait until ${DC[*]} exec -T postgres pg_isready answers"
	[ $DRY = 0 ] && { wait_for $((SCEN_STEP_DEADLINE_S * 2)) "postgres back" "${DC[@]}" exec -T postgres pg_isready -U "$PGUSER_C" || die "postgres did not come back"; }
	fault "postgres-restart" "docker restart postgres"
	# 6. a rolling restart under load: a backlog in flight, a config change,
	# migrate re-run, then each relay and consumer recreated one at a time,
	# the next only once the last is healthy (the armed faults are counted
	# first: a recreated container's log starts empty)
	[ $DRY = 0 ] && compose_count_armed_faults
	compose_rolling_restart
	fi

	if [ $DRY = 0 ]; then
		sleep 3
		touch "$WORK/stop"
		local p deadline=$(($(date +%s) + SCEN_CALL_DEADLINE_S + 10))
		for p in "${COMPOSE_PIDS[@]}"; do
			while kill -0 "$p" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.2; done
		done
		say "waiting for the relays to drain the outbox (deadline ${SCEN_DRAIN_DEADLINE_S}s)"
		wait_for "$SCEN_DRAIN_DEADLINE_S" "outbox drained" nothing_pending
		sleep 1 # replies of the last frames
	else
		echo "+ wait until outbox.backlog_empty() (deadline ${SCEN_DRAIN_DEADLINE_S}s)"
	fi
	if [ $DRY = 1 ]; then
		echo "+ assertions: psql in the postgres container (${DC[*]} exec -T postgres psql -U $PGUSER_C -d $PGDB_C -XAtqc SQL):"
		local qq
		for qq in "${ASSERT_SQL[@]}"; do echo "    $qq"; done
		echo "  then: calls answered = calls; reports = calls (same keys); messages = reports;"
		echo "        pending = dead = 0; delivered = messages; notifications = messages = distinct keys"
		echo "+ ${DC[*]} down -v --remove-orphans, then: no container, network or volume of project $SCEN_COMPOSE_PROJECT is left"
		for qq in "${FAULTS[@]}"; do printf '  %-24s %s\n' "${qq%%|*}" "${qq#*|}"; done
		say "dry run: nothing was run"
		return 0
	fi
	compose_configured_faults
	EXTRA_ROWS=(
		"HTTP retries (same key)" "$(cat "$WORK"/codes.* 2>/dev/null | grep -vcE '^20[01]$')"
		"backlog (rolling restart)" "$(wc -l <"$WORK/calls.backlog" 2>/dev/null || echo 0)"
	)
	assert_and_summarize
	[ $FAILED = 0 ] && return 0 || return 1
}

# 6. The rolling restart: what a user does to roll out a new version or
# configuration. Reports enqueued in bulk (their keys join the calls, as
# calls answered OK) keep frames in flight while every program goes down
# and up; the slow apply of deploy/scenario/faults.yml makes sure of it.
# A program is back when its /readyz answers (what its healthcheck asks,
# without waiting for the healthcheck's interval).
ROLL_PENDING=() # "service:pending" as each one went down
compose_rolling_restart() {
	local s old new deadline
	# SCEN_ROLL_WRITERS enqueue processes side by side: a backlog that
	# builds faster than the slowed consumers drain it
	local per=$(((SCEN_ROLL_BACKLOG + SCEN_ROLL_WRITERS - 1) / SCEN_ROLL_WRITERS)) w
	local writers="for w in \$(seq 1 $SCEN_ROLL_WRITERS); do outbox-producer enqueue --key roll-$RUN_ID-\$w --count $per --quiet & done; wait"
	echo "+ ${DC[*]} exec -T producer sh -c '$writers'" >&3
	if [ $DRY = 0 ]; then
		"${DC[@]}" exec -T producer sh -c "$writers" >"$WORK/backlog.log" 2>&1 ||
			die "the backlog could not be enqueued: $(tail -3 "$WORK/backlog.log")"
		[ "$(grep -c "enqueued=$per" "$WORK/backlog.log")" = "$SCEN_ROLL_WRITERS" ] ||
			die "the backlog writers did not all finish: $(tail -3 "$WORK/backlog.log")"
		for w in $(seq 1 "$SCEN_ROLL_WRITERS"); do seq 1 "$per" | sed "s/^/roll-$RUN_ID-$w-/"; done |
			tee "$WORK/calls.backlog" >"$WORK/ok.backlog"
		say "backlog of $((per * SCEN_ROLL_WRITERS)) reports enqueued by $SCEN_ROLL_WRITERS writers"
	fi
	# the change: more relay workers, fewer consumer threads
	echo "+ export RELAY_WORKERS=$SCEN_ROLL_RELAY_WORKERS CONSUMER_THREADS=$SCEN_ROLL_CONSUMER_THREADS" >&3
	export RELAY_WORKERS=$SCEN_ROLL_RELAY_WORKERS CONSUMER_THREADS=$SCEN_ROLL_CONSUMER_THREADS
	run "${DC[@]}" run --rm --no-deps migrate >"$WORK/migrate-again.log" 2>&1 ||
		die "migrate failed on the running stack: $(tail -3 "$WORK/migrate-again.log")"
	for s in consumer-1 relay-1 consumer-2 relay-2; do
		if [ $DRY = 1 ]; then
			run "${DC[@]}" up -d --no-deps --no-build "$s"
			echo "+ wait until docker exec \$(${DC[*]} ps -q $s) curl -fsS http://127.0.0.1:9464/readyz answers" >&3
			continue
		fi
		old=$(cid "$s")
		ROLL_PENDING+=("$s:$(q_prod "SELECT COALESCE(sum(pending), 0) FROM outbox.topic_stats()")")
		run "${DC[@]}" up -d --no-deps --no-build "$s" >>"$WORK/rolling.log" 2>&1 || die "could not recreate $s: $(tail -3 "$WORK/rolling.log")"
		new=$(cid "$s")
		[ -n "$new" ] && [ "$new" != "$old" ] || die "$s was not recreated by the config change (container $old)"
		wait_for $((SCEN_STEP_DEADLINE_S * 2)) "$s ready again" docker exec "$new" curl -fsS http://127.0.0.1:9464/readyz ||
			die "$s did not become ready after its restart"
		say "$s recreated ($old -> $new) and ready"
	done
	fault "rolling-restart" "backlog of ${per}x$SCEN_ROLL_WRITERS, RELAY_WORKERS=$SCEN_ROLL_RELAY_WORKERS CONSUMER_THREADS=$SCEN_ROLL_CONSUMER_THREADS, migrate re-run; recreated one at a time, each ready before the next (pending as each went: ${ROLL_PENDING[*]:-dry run})"
}

# Every restart of the rolling restart hit a stack with messages pending.
rolled_under_load() {
	local p
	[ ${#ROLL_PENDING[@]} = 4 ] || return 1
	for p in "${ROLL_PENDING[@]}"; do [ "${p#*:}" -gt 0 ] 2>/dev/null || return 1; done
}

# The faults armed by deploy/scenario/faults.yml, counted from the logs
# (before the rolling restart recreates the containers) and listed first.
LOST_N=0 DIED_N=0
compose_count_armed_faults() {
	LOST_N=$("${DC[@]}" logs --no-color producer 2>/dev/null | grep -c 'fault.fired.*lose_response')
	DIED_N=$("${DC[@]}" logs --no-color relay-1 2>/dev/null | grep -c 'fault.die')
}
compose_configured_faults() {
	FAULTS=("producer-lost-response|$LOST_N response(s) dropped after COMMIT (OUTBOX_FAULT_LOSE_RESPONSE=$SCEN_LOST_RESPONSES); curl re-sent the same key"
		"relay-die-after-send|$DIED_N relay-1 worker(s) SIGKILLed themselves after the consumer answered, before recording (OUTBOX_FAULT_DIE_AFTER_SEND=1)"
		"${FAULTS[@]}")
}

if [ "$MODE" = local ]; then local_main; else compose_main; fi
