#!/usr/bin/env bash
# program_includes_negative.sh - scripts/check-program-includes.sh must go
# red on a program including another's header before its green on the
# real tree means anything: copy the sources into a scratch tree, break
# one rule at a time, expect the check to fail saying so.
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
check=$src/scripts/check-program-includes.sh
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0

fresh() {
	rm -rf "$scratch/t"
	mkdir -p "$scratch/t"
	for p in common producer relay consumer ctl tools; do
		cp -r "$src/$p" "$scratch/t/"
	done
	rm -rf "$scratch/t/ctl/web/node_modules"
}

expect() { # expect NAME NEEDLE: the check fails and says NEEDLE
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

fresh
out=$(OUTBOX_LINT_ROOT="$scratch/t" "$check" 2>&1) || { echo "FAIL: the unbroken copy does not pass: $out"; exit 1; }
echo "ok   unbroken copy passes"

# the relay reaching into the consumer
fresh; sed -i '0,/#include "outbox\/sqlstate.h"/s//#include "outbox\/sqlstate.h"\n#include "inbox.h"/' "$scratch/t/relay/claim.c"
expect "relay includes a consumer header" 'relay/claim.c includes "inbox.h", a header of another program'

# outboxctl's include path into the relay again
fresh; sed -i 's#target_include_directories(outboxctl PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})#target_include_directories(outboxctl PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}\n  ${CMAKE_SOURCE_DIR}/relay)#' "$scratch/t/ctl/CMakeLists.txt"
expect "ctl adds relay/ to its include path" "ctl/CMakeLists.txt adds relay/ to its include path"

# the web demo reaching into the producer again
fresh; sed -i 's/#include "outbox\/proc.h"/#include "outbox\/proc.h"\n#include "api.h"/' "$scratch/t/ctl/web_demo_steps.c"
expect "ctl includes a producer header" 'ctl/web_demo_steps.c includes "api.h", a header of another program'

# a known crossing removed: the list must shrink with it
fresh; sed -i 's/#include "client.h"//' "$scratch/t/ctl/web_demo_steps.c"
expect "a known crossing gone" 'KNOWN lists "ctl/web_demo_steps.c client.h", which no longer crosses'

[ "$failures" = 0 ] || exit 1
echo "program_includes_negative: every broken copy was caught"
