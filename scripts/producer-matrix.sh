#!/usr/bin/env bash
# producer-matrix.sh - print the first article's fault matrix, reproduced
# with a real outbox-producer server, the real client and a throwaway
# PostgreSQL, and compare it cell for cell with the article's table.
#
#   bash scripts/producer-matrix.sh [BUILD_DIR]
#
# Exit 0 when all 25 cells equal the article's table.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${OUTBOX_BUILD_DIR:-$root/build}}
if [ ! -x "$build/bin/outbox-producer" ]; then
	bash "$root/scripts/setup-deps.sh"
	cmake -S "$root" -B "$build" >/dev/null
	cmake --build "$build" -j"$(nproc)" --target outbox-producer outboxctl >/dev/null
fi
pgdir=$(mktemp -d /tmp/outbox-matrix-pg-XXXXXX)
trap '"$root/scripts/pg-tmp.sh" stop "$pgdir/pg" || true; rm -rf "$pgdir"' EXIT
conninfo=$("$root/scripts/pg-tmp.sh" start "$pgdir/pg")
"$build/bin/outboxctl" migrate --db "$conninfo" --schema outbox --demo >/dev/null
"$build/bin/outbox-producer" matrix --db "$conninfo" --quiet
