#!/usr/bin/env bash
# check_dryrun.sh - deploy/scenario.sh compose --dry-run (CI has no Docker
# engine): it must exit 0, run nothing, and print every step of the compose
# scenario: up, the load with an Idempotency-Key, each fault (docker kill,
# pause/unpause past the lease, network disconnect/connect, restart of
# postgres) and the psql assertions. Bad arguments must exit 2.
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
	'exec -T postgres psql' 'FROM inbox.notifications' 'dry run: nothing was run'; do
	grep -qE -- "$want" <<<"$out" || { echo "check_dryrun: the dry run does not print '$want'" >&2; fail=1; }
done
# nothing may have been run for real: every command line is printed with '+ '
if grep -qE '^(Creating|Starting|Stopping|Error response)' <<<"$out"; then
	echo "check_dryrun: the dry run ran something" >&2; fail=1
fi
for bad in "compose --broken" "local --dry-run" "sideways" "compose --frobnicate"; do
	# shellcheck disable=SC2086
	"$script" $bad >/dev/null 2>&1
	r=$?
	[ "$r" = 2 ] || { echo "check_dryrun: 'scenario.sh $bad' exited $r, expected 2 (usage)" >&2; fail=1; }
done
[ $fail = 0 ] && echo "check_dryrun: ok"
exit $fail
