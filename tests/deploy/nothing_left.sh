#!/usr/bin/env bash
# nothing_left.sh - after the compose runs, the suite's engine must hold no
# container, no network of ours and no volume: every run took down what it
# brought up (docker-compose down -v in the scenario's exit trap).
set -uo pipefail
left=$( {
	docker ps -aq | sed 's/^/container /'
	docker network ls -q --filter type=custom | sed 's/^/network /'
	docker volume ls -q | sed 's/^/volume /'
} 2>&1)
docker version >/dev/null 2>&1 || { echo "nothing_left: the engine does not answer" >&2; exit 1; }
if [ -n "$left" ]; then
	echo "nothing_left: left behind in the engine:" >&2
	echo "$left" >&2
	exit 1
fi
echo "nothing_left: ok: no container, network or volume is left"
