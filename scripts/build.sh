#!/usr/bin/env bash
# build.sh - configure and build into ./build (or $OUTBOX_BUILD_DIR).
# Extra arguments go to cmake's configure step (e.g. -DOUTBOX_SANITIZE=ON).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${OUTBOX_BUILD_DIR:-build}
cmake -S . -B "$build" -DOUTBOX_WERROR=ON "$@" >/dev/null
# shellcheck disable=SC2086
cmake --build "$build" -j"$(nproc)" --target ${OUTBOX_TARGETS:-all} >/dev/null
