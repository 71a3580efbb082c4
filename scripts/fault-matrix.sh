#!/usr/bin/env bash
# fault-matrix.sh - the fault matrix demo: installs what is missing, builds,
# and runs outbox-fault-matrix, which starts its own throwaway PostgreSQL,
# runs every (mode, fault) cell with the real relay and consumer (one fresh
# database and ONE message per cell), and prints the table of effect rows
# plus each cell's bookkeeping. Exit 0 only if the full row is all 1s.
#
#   scripts/fault-matrix.sh [outbox-fault-matrix options]   (--help lists them)
# See docs/faults.md for what each cell shows.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
echo "fault-matrix: building..."
OUTBOX_TARGETS="outbox-relay outbox-consumer outbox-fault-matrix" scripts/build.sh
exec "${OUTBOX_BUILD_DIR:-build}/bin/outbox-fault-matrix" "$@"
