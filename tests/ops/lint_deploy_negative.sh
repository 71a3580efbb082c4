#!/usr/bin/env bash
# lint_deploy_negative.sh - scripts/lint-deploy.sh must go red on broken
# deploy files before its green on the real ones means anything: copy
# deploy/ into a scratch tree, break one thing at a time, expect the lint to
# fail naming it.
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
lint=$src/scripts/lint-deploy.sh
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0

fresh() {
	rm -rf "$scratch/t"
	mkdir -p "$scratch/t"
	cp -r "$src/deploy" "$scratch/t/"
	# the paths the Dockerfile copies
	for p in CMakeLists.txt .dockerignore cmake common sql producer relay consumer ctl tools tests; do
		cp -r "$src/$p" "$scratch/t/" 2>/dev/null
	done
}

expect() { # expect NAME NEEDLE: the lint fails and says NEEDLE
	out=$(OUTBOX_LINT_ROOT="$scratch/t" "$lint" 2>&1)
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
out=$(OUTBOX_LINT_ROOT="$scratch/t" "$lint" 2>&1) || { echo "FAIL: the unbroken copy does not pass: $out"; exit 1; }
echo "ok   unbroken copy passes"

fresh; sed -i 's/^services:/servicez:/' "$scratch/t/deploy/docker-compose.yml"
expect "broken compose" "docker-compose config failed"
fresh; sed -i 's/condition: service_healthy/condition: when_it_feels_like_it/' "$scratch/t/deploy/docker-compose.yml"
expect "invalid depends_on condition" "docker-compose config failed"
fresh; sed -i '/^RELAY_WORKERS=/d' "$scratch/t/deploy/.env.example"
expect "undocumented variable" 'uses ${RELAY_WORKERS}'
fresh; sed -i 's|^COPY \. \.$|COPY . .\nCOPY vendor/ vendor/|' "$scratch/t/deploy/Dockerfile"
expect "COPY of a missing path" "COPY vendor/: no such path"
fresh; echo "tools" >>"$scratch/t/.dockerignore"
expect "build directory left out of the image" "the build needs tools/ but .dockerignore leaves it out"
fresh; sed -i '/^USER /d' "$scratch/t/deploy/Dockerfile"
expect "root image" "no non-root USER"
fresh; sed -i '/^HEALTHCHECK/,+1d' "$scratch/t/deploy/Dockerfile"
expect "no HEALTHCHECK" "no HEALTHCHECK"
fresh; sed -i 's/^TimeoutStopSec=.*/TimeoutStopSec=5s/' "$scratch/t/deploy/systemd/outbox-relay.service"
expect "stop timeout shorter than grace" "is not longer than the relay's shutdown grace"
fresh; sed -i '/^NoNewPrivileges=/d' "$scratch/t/deploy/systemd/outbox-consumer.service"
expect "missing hardening" "missing NoNewPrivileges=yes"
fresh; sed -i '/^KillSignal=/d' "$scratch/t/deploy/systemd/outbox-producer.service"
expect "missing KillSignal" "missing KillSignal=SIGTERM"
if [ -n "${OUTBOX_PROMTOOL:-}" ] && [ -x "$OUTBOX_PROMTOOL" ]; then
	fresh; sed -i 's/scrape_interval: 15s/scrape_interval: soon/' "$scratch/t/deploy/prometheus.yml"
	expect "bad prometheus.yml" "deploy/prometheus.yml"
fi

[ $failures = 0 ] && echo "lint_deploy_negative: every breakage caught"
exit $((failures > 0))
