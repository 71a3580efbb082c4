#!/usr/bin/env bash
# check_dryrun.sh - deploy/scenario.sh compose --dry-run (CI has no Docker
# engine): it must exit 0, run nothing, and print every step of the compose
# scenario: up, the load with an Idempotency-Key, each fault (docker kill,
# pause/unpause past the lease, network disconnect/connect, restart of
# postgres), the rolling restart (backlog, migrate, one service at a time),
# the psql assertions and the teardown. Bad arguments must exit 2.
set -uo pipefail
script=${1:?usage: check_dryrun.sh path/to/scenario.sh}
fail=0
out=$("$script" compose --dry-run 2>&1)
rc=$?
echo "$out"
[ "$rc" = 0 ] || { echo "check_dryrun: exit $rc, expected 0" >&2; fail=1; }
for want in ' up -d --build' 'Idempotency-Key: ' 'docker kill --signal KILL .*relay-1' \
	' start relay-1' 'docker kill --signal KILL .*consumer-1' ' start consumer-1' \
	'docker pause .*relay-2' 'docker unpause .*relay-2' 'docker network disconnect .*consumer-2' \
	'docker network connect --alias consumer-2 ' 'docker restart .*postgres' \
	'exec -T postgres psql' 'FROM inbox.notifications' 'outbox-producer enqueue --key roll-' \
	'run --rm --no-deps migrate' 'up -d --no-deps --no-build consumer-1' 'up -d --no-deps --no-build relay-2' \
	'/readyz' 'down -v --remove-orphans' '-f .*/deploy/scenario/faults.yml' 'dry run: nothing was run'; do
	grep -qE -- "$want" <<<"$out" || { echo "check_dryrun: the dry run does not print '$want'" >&2; fail=1; }
done
# nothing may have been run for real: every command line is printed with '+ '
if grep -qE '^(Creating|Starting|Stopping|Error response)' <<<"$out"; then
	echo "check_dryrun: the dry run ran something" >&2; fail=1
fi
for bad in "local --dry-run" "sideways" "compose --frobnicate"; do
	# shellcheck disable=SC2086
	"$script" $bad >/dev/null 2>&1
	r=$?
	[ "$r" = 2 ] || { echo "check_dryrun: 'scenario.sh $bad' exited $r, expected 2 (usage)" >&2; fail=1; }
done
# and bad values of the rolling restart's limits
for bad in SCEN_ROLL_BACKLOG=0 SCEN_ROLL_WRITERS=99 SCEN_ROLL_RELAY_WORKERS=x; do
	env "$bad" "$script" compose --dry-run >/dev/null 2>&1
	r=$?
	[ "$r" = 2 ] || { echo "check_dryrun: '$bad scenario.sh compose --dry-run' exited $r, expected 2" >&2; fail=1; }
done
# --broken lays deploy/scenario/broken.yml over the stack
broken=$("$script" compose --broken --dry-run 2>&1)
grep -qE -- '-f .*/deploy/scenario/broken.yml' <<<"$broken" ||
	{ echo "check_dryrun: compose --broken does not use deploy/scenario/broken.yml" >&2; fail=1; }
[ $fail = 0 ] && echo "check_dryrun: ok"
exit $fail
