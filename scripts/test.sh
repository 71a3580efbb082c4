#!/usr/bin/env bash
# test.sh - install what is missing, build, and run the whole suite with
# ctest. The output ends with ctest's summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
scripts/build.sh "$@"
cd "${OUTBOX_BUILD_DIR:-build}"
exec ctest --output-on-failure --no-label-summary -j2 --timeout 900
