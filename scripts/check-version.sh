#!/usr/bin/env bash
# check-version.sh - one release string everywhere: project(VERSION) in
# CMakeLists.txt, the image's org.opencontainers.image.version label
# (deploy/Dockerfile), and, given BIN_DIR, every program's --version and a
# dispatching program's subcommand --version.
#
#   scripts/check-version.sh [BIN_DIR]
#
# Exit 0 when they agree; 1 with one line per disagreement.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in -h | --help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
bin=${1:-}
fail=0
want=$(sed -n 's/^project(outbox_relay VERSION \([0-9.]*\) .*/\1/p' CMakeLists.txt)
[ -n "$want" ] || { echo "check-version: no project(outbox_relay VERSION ...) in CMakeLists.txt"; exit 1; }
label=$(sed -n 's/.*org\.opencontainers\.image\.version="\([^"]*\)".*/\1/p' deploy/Dockerfile)
[ "$label" = "$want" ] ||
	{ echo "check-version: deploy/Dockerfile labels version '$label', CMakeLists.txt says '$want'"; fail=1; }
if [ -n "$bin" ]; then
	for p in outbox-relay outbox-consumer outbox-producer outboxctl outbox-notify-sink \
		outbox-fault-matrix outbox-herd "outboxctl migrate" "outbox-producer serve"; do
		read -r -a argv <<<"$p"
		got=$("$bin/${argv[0]}" "${argv[@]:1}" --version 2>&1) ||
			{ echo "check-version: '$p --version' exited $?: $got"; fail=1; continue; }
		[ "$got" = "$p $want" ] ||
			{ echo "check-version: '$p --version' printed '$got', want '$p $want'"; fail=1; }
	done
fi
[ $fail = 0 ] && echo "check-version: $want everywhere"
exit $fail
