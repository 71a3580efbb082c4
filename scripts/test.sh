#!/usr/bin/env bash
# test.sh - install what is missing, build, and run the suite with ctest.
# The output ends with ctest's summary line.
#
#   scripts/test.sh [--quick] [CMAKE_ARG...]
#
#   --quick    only the unit and integration tests not labelled `slow`
#              (tests/CMakeLists.txt: the multi-process fault runs, browsers,
#              Docker, namespaces, the previous build, the protocol checker):
#              a few minutes on 2 cores, for a change's first check
#   CMAKE_ARG  passed to cmake's configure step (e.g. -DOUTBOX_SANITIZE=ON)
#
# A test that cannot run here (no Docker engine, no network namespaces, no
# browser) reports Skipped. With OUTBOX_TEST_STRICT=1 (this project's
# .ci/run sets it; a generic CI=true does not) such a test FAILS instead:
# on the machine that is meant to run everything, a skip hides a gap.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
if [ "${1:-}" = --quick ]; then
	quick=1
	shift
fi
case "${1:-}" in -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
build=${OUTBOX_BUILD_DIR:-build}
scripts/setup-deps.sh --tests
scripts/build.sh "$@"
# promtool (from Debian's prometheus package, binary only) lets the metrics
# tests check the exposition format; without it that one check is skipped.
scripts/get-promtool.sh "$build/tools" >/dev/null 2>&1 ||
	echo "test: promtool unavailable, the promtool checks will say SKIPPED" >&2
cd "$build"
select=()
[ $quick = 0 ] || select=(-L 'unit|integration' -LE slow)
exec ctest --output-on-failure --no-label-summary -j2 --timeout 900 "${select[@]}"
