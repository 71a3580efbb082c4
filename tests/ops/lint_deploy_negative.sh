#!/usr/bin/env bash
# lint_deploy_negative.sh - scripts/lint-deploy.sh must go red on broken
# deploy files before its green on the real ones means anything: copy
# deploy/ into a scratch tree, break one thing at a time, expect the lint to
# fail naming it.
set -uo pipefail
check=$(cd "$(dirname "$0")/../.." && pwd)/scripts/lint-deploy.sh
# deploy/, and the paths the Dockerfile copies
copy="deploy CMakeLists.txt .dockerignore cmake common sql producer relay consumer ctl tools tests"
. "$(dirname "$0")/negative_lib.sh"
negative_start

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

negative_end lint_deploy_negative
