#!/usr/bin/env bash
# test.sh - install what is missing, build, and run the whole suite with
# ctest. The output ends with ctest's summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${OUTBOX_BUILD_DIR:-build}
scripts/setup-deps.sh --tests
scripts/build.sh "$@"
# promtool (from Debian's prometheus package, binary only) lets the metrics
# tests check the exposition format; without it that one check is skipped.
scripts/get-promtool.sh "$build/tools" >/dev/null 2>&1 ||
	echo "test: promtool unavailable, the promtool checks will say SKIPPED" >&2
cd "$build"
exec ctest --output-on-failure --no-label-summary -j2 --timeout 900
