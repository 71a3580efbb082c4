# negative_lib.sh - what the negative tests of the repository's checks
# share (lint_deploy_negative.sh, table_writers_negative.sh,
# program_includes_negative.sh): a check must go red on a broken copy of
# the tree before its green on the real one means anything. Source it
# after setting
#   check  the check to run (it reads OUTBOX_LINT_ROOT: the tree to check)
#   copy   the top-level paths of the tree the check reads
# then: negative_start (a scratch dir, removed on exit; the unbroken copy
# must pass), fresh before each breakage, expect NAME NEEDLE after it, and
# negative_end last (exit 1 if any breakage went unnoticed).
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
failures=0

negative_start() {
	scratch=$(mktemp -d)
	trap 'rm -rf "$scratch"' EXIT
	fresh
	local out
	out=$(OUTBOX_LINT_ROOT="$scratch/t" "$check" 2>&1) ||
		{ echo "FAIL: the unbroken copy does not pass: $out"; exit 1; }
	echo "ok   unbroken copy passes"
}

# A fresh copy of the tree in $scratch/t.
fresh() {
	rm -rf "$scratch/t"
	mkdir -p "$scratch/t"
	local p
	for p in $copy; do
		cp -r "$src/$p" "$scratch/t/" 2>/dev/null
	done
}

# expect NAME NEEDLE: the check fails on the copy and says NEEDLE.
expect() {
	local out rc
	out=$(OUTBOX_LINT_ROOT="$scratch/t" "$check" 2>&1)
	rc=$?
	if [ $rc = 0 ] || ! grep -qF -- "$2" <<<"$out"; then
		echo "FAIL $1: exit $rc, wanted a failure saying '$2':"
		echo "$out"
		failures=$((failures + 1))
	else
		echo "ok   $1"
	fi
}

negative_end() {
	[ "$failures" = 0 ] || exit 1
	echo "$1: every broken copy was caught"
}
