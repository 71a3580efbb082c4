#!/usr/bin/env bash
# expect_broken.sh - the negative control of deploy/scenario.sh: with the
# consumers' dedup off (--no-dedup) and the producer's keys ignored
# (--idempotency none), the scenario's assertions MUST fail, with
# duplicates counted, in local mode or against the compose stack
# (deploy/scenario/broken.yml). Passes only when the scenario exits 1 (an assertion
# failed: not 3, could not run) and its summary says duplicates > 0.
set -uo pipefail
script=${1:?usage: expect_broken.sh path/to/scenario.sh [local|compose]}
mode=${2:-local}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$script" "$mode" --broken >"$out" 2>&1
rc=$?
cat "$out"
line=$(grep -E '^result: ' "$out" | tail -1)
dups=$(sed -nE 's/.* duplicates=([0-9]+).*/\1/p' <<<"$line")
if [ "$rc" != 1 ]; then
	echo "expect_broken: the broken scenario exited $rc, expected 1 (assertions failed)" >&2
	exit 1
fi
if [ -z "$dups" ] || [ "$dups" -eq 0 ]; then
	echo "expect_broken: the broken scenario failed but counted no duplicates ('$line')" >&2
	exit 1
fi
grep -q 'FAIL  one report per logical call' "$out" ||
	{ echo "expect_broken: the duplicate reports (producer --idempotency none) were not caught" >&2; exit 1; }
grep -q 'FAIL  no key applied twice' "$out" ||
	{ echo "expect_broken: the duplicate effects (consumer --no-dedup) were not caught" >&2; exit 1; }
echo "expect_broken: ok: the broken modes were caught ($dups duplicates)"
